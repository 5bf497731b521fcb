"""Serializers that describe the API's bodies for the OpenAPI schema (docs/api.md).

Responses are built by ``murmur_conversations.representations`` (one shape for REST, websockets and
exports); these classes only document those shapes and must list the same keys.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from murmur_conversations.models import ConversationStatus, ShareMode, ToolStatus
from murmur_conversations.services import (
    MAX_ANSWER_CHARS,
    MAX_COMMENT_CHARS,
    MAX_SHARE_SECONDS,
    MAX_TAG_CHARS,
    MAX_TAGS,
)
from murmur_conversations.validation import TAG_PATTERN

Any_ = serializers.JSONField


class ClosedSerializer(serializers.Serializer[Any]):
    """A request body that takes these keys and no other: its schema says
    ``additionalProperties: false`` (``api.schema``), as the server answers 400 for another key."""


class OneOfSerializer(serializers.Serializer[Any]):
    """A request body that is exactly one of ``variants`` (serializer classes): its schema is a
    ``oneOf`` of theirs (``api.schema``)."""

    variants: tuple[type[serializers.Serializer[Any]], ...] = ()


class ErrorSerializer(serializers.Serializer[Any]):
    """``{"detail", "code"}``: every failure of the REST routes."""

    detail = serializers.CharField()
    code = serializers.CharField()


class WireErrorSerializer(serializers.Serializer[Any]):
    """``{"error", "code"}``: every failure of ``POST session/``."""

    error = serializers.CharField()
    code = serializers.CharField()


class CountersSerializer(serializers.Serializer[Any]):
    """The six token counters in our names (``input_tokens`` is uncached input; docs/usage.md)."""

    input_tokens = serializers.IntegerField(min_value=0)
    output_tokens = serializers.IntegerField(min_value=0)
    cache_read_tokens = serializers.IntegerField(min_value=0)
    cache_write_tokens = serializers.IntegerField(min_value=0)
    cache_write_1h_tokens = serializers.IntegerField(min_value=0)
    reasoning_tokens = serializers.IntegerField(min_value=0)


class UnpricedSerializer(CountersSerializer):
    """One model whose counted tokens have no price, with those tokens."""

    model = serializers.CharField(allow_blank=True)


class UsageSerializer(CountersSerializer):
    """Token usage and cost (``representations.conversation_usage``, ``usage.usage_body``): the
    counters, the models, ``cost`` (USD as a decimal string: the priced tokens' cost; null only
    when no counted token has a price) and ``unpriced`` (the models whose counted tokens have no
    price, with their tokens) (docs/usage.md)."""

    models = serializers.ListField(child=serializers.CharField(allow_blank=True))
    cost = serializers.CharField(allow_null=True)
    unpriced = UnpricedSerializer(many=True)


class SummarySerializer(serializers.Serializer[Any]):
    """The summary row (``representations.summary_row``)."""

    id = serializers.UUIDField()
    title = serializers.CharField()
    saved_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()
    status = serializers.ChoiceField(choices=ConversationStatus.choices)
    format = serializers.ChoiceField(choices=["conversation-v1", "flowchart-v1"])
    message_count = serializers.IntegerField(min_value=0)
    pinned = serializers.BooleanField()
    archived = serializers.BooleanField()
    tags = serializers.ListField(child=serializers.CharField(max_length=MAX_TAG_CHARS))
    forked_from_id = serializers.UUIDField(allow_null=True)
    forked_at_seq = serializers.IntegerField(min_value=1, allow_null=True)
    parent_id = serializers.UUIDField(allow_null=True)
    parent_call_id = serializers.CharField(allow_null=True)
    child_count = serializers.IntegerField(min_value=0)
    steps = serializers.IntegerField(min_value=0)
    usage = UsageSerializer()


class DetailSerializer(SummarySerializer):
    """The summary row plus ``metadata`` and ``usage_with_children`` (``usage`` over the
    conversation and its descendants, each once) (``representations.detail_row``)."""

    metadata = serializers.DictField()
    usage_with_children = UsageSerializer()


class PatchSerializer(ClosedSerializer):
    """``PATCH conversations/{id}/``: any of these keys (none: nothing changes), nothing else
    (else 400 ``invalid_field``)."""

    title = serializers.CharField(max_length=255, required=False, allow_blank=True)
    metadata = serializers.DictField(required=False)
    pinned = serializers.BooleanField(required=False)
    archived = serializers.BooleanField(required=False)
    tags = serializers.ListField(
        child=serializers.RegexField(TAG_PATTERN, max_length=MAX_TAG_CHARS),
        required=False,
        max_length=MAX_TAGS,
    )


class FeedbackSerializer(serializers.Serializer[Any]):
    """A display row's ``feedback``: the caller's own rating (1 or -1) and comment."""

    rating = serializers.ChoiceField(choices=[1, -1])
    comment = serializers.CharField(allow_blank=True, max_length=MAX_COMMENT_CHARS)


class DisplayRowSerializer(serializers.Serializer[Any]):
    """A display row (``representations.display_row``)."""

    id = serializers.CharField()
    seq = serializers.IntegerField(min_value=1)
    message_type = serializers.CharField()
    content_type = serializers.CharField()
    content = serializers.DictField()
    status = serializers.ChoiceField(choices=ToolStatus.choices)
    tool_call_id = serializers.CharField(allow_null=True)
    metadata = serializers.DictField()
    created_event_seq = serializers.IntegerField(min_value=0)
    event_seq = serializers.IntegerField(min_value=0)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    feedback = FeedbackSerializer(allow_null=True)


class RecordRowSerializer(serializers.Serializer[Any]):
    """A record row (``representations.record_row``); ``content`` is a string, a block list or
    null."""

    id = serializers.CharField()
    position = serializers.IntegerField(min_value=1)
    role = serializers.CharField()
    content = Any_(allow_null=True)
    tool_call_id = serializers.CharField(allow_null=True)
    is_error = serializers.BooleanField()
    source_id = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    message = serializers.DictField(
        help_text="The message as the model saw it: role, content as given (null included), "
        "id, tool_call_id, is_error, source_id, then every other key it arrived with."
    )


class ToolCallRowSerializer(serializers.Serializer[Any]):
    """A tool-call row (``representations.tool_call_row``)."""

    id = serializers.CharField(
        help_text="The call's own id: unique, also when an agent reused the call_id."
    )
    call_id = serializers.CharField()
    name = serializers.CharField()
    arguments = Any_()
    status = serializers.ChoiceField(choices=ToolStatus.choices)
    interrupt_reason = serializers.CharField(allow_null=True)
    display_text = serializers.CharField()
    result = Any_(allow_null=True)
    error = Any_(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    event_seq = serializers.IntegerField(min_value=0)
    created_at = serializers.DateTimeField()
    children = serializers.ListField(child=serializers.UUIDField())


def page_serializer(name: str, row: type[serializers.Serializer[Any]]) -> type[Any]:
    """A page serializer ``{"results": [row], "next_cursor", "total"}`` named ``name``."""
    fields = {
        "results": row(many=True),
        "next_cursor": serializers.CharField(allow_null=True),
        "total": serializers.IntegerField(min_value=0),
        "__doc__": f"A page of {row.__name__.removesuffix('Serializer')} rows.",
    }
    return type(name, (serializers.Serializer,), fields)


ConversationPageSerializer = page_serializer("ConversationPageSerializer", SummarySerializer)
DisplayPageSerializer = page_serializer("DisplayPageSerializer", DisplayRowSerializer)
RecordPageSerializer = page_serializer("RecordPageSerializer", RecordRowSerializer)
ToolCallPageSerializer = page_serializer("ToolCallPageSerializer", ToolCallRowSerializer)


class AccessLogRowSerializer(serializers.Serializer[Any]):
    """One access log entry: who (full name, else username; never the e-mail), when, where."""

    actor = serializers.CharField()
    at = serializers.DateTimeField()
    surface = serializers.CharField()


AccessLogPageSerializer = page_serializer("AccessLogPageSerializer", AccessLogRowSerializer)


class SearchHitSerializer(serializers.Serializer[Any]):
    """A search hit (``representations.search_hit_row``)."""

    conversation_id = serializers.UUIDField()
    conversation_title = serializers.CharField(allow_blank=True)
    seq = serializers.IntegerField(min_value=1)
    display_message_id = serializers.CharField()
    role = serializers.CharField()
    content_type = serializers.CharField()
    snippet = serializers.CharField(allow_blank=True)
    highlights = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField(min_value=0))
    )
    created_at = serializers.DateTimeField()


class SearchPageSerializer(serializers.Serializer[Any]):
    """``GET search/``: a page of hits, best first; no ``total``."""

    results = SearchHitSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class UsageGroupSerializer(serializers.Serializer[Any]):
    """One group of ``GET usage/``: ``day``, ``model`` or ``conversation_id`` and ``title``
    (by ``group_by``), and its ``usage``."""

    day = serializers.DateField(required=False)
    model = serializers.CharField(required=False, allow_blank=True)
    conversation_id = serializers.UUIDField(required=False)
    title = serializers.CharField(required=False, allow_blank=True)
    usage = UsageSerializer()


class UsagePageSerializer(serializers.Serializer[Any]):
    """``GET usage/``."""

    group_by = serializers.ChoiceField(choices=["day", "model", "conversation"])
    results = UsageGroupSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)
    total = serializers.IntegerField(min_value=0)
    usage = UsageSerializer()

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()
        fields["from"] = serializers.DateField(allow_null=True)
        fields["to"] = serializers.DateField(allow_null=True)
        return fields


class TranscriptMessageSerializer(serializers.Serializer[Any]):
    """``{"role", "content"}`` (agentfootprint ``TranscriptMessage``)."""

    role = serializers.ChoiceField(choices=["user", "assistant"])
    content = serializers.CharField()


class TranscriptSerializer(serializers.Serializer[Any]):
    """``GET conversations/{id}/transcript/``."""

    conversation_id = serializers.UUIDField()
    messages = TranscriptMessageSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class PendingSerializer(serializers.Serializer[Any]):
    """``{"pending": <PendingAsk> or null}``."""

    pending = serializers.DictField(allow_null=True)


class AnswerRequestSerializer(ClosedSerializer):
    """``POST conversations/{id}/pending/answer/``: the answer, and optionally the event_seq at
    which the client saw the ask (an ask set or changed after it makes the answer stale: 409)."""

    answer = serializers.RegexField(r"\S", max_length=MAX_ANSWER_CHARS)  # not blank
    event_seq = serializers.IntegerField(min_value=0, required=False, allow_null=True)


class AnswerResponseSerializer(serializers.Serializer[Any]):
    """``{"conversation": <detail>, "messages": [<display rows of the saved user message>]}``."""

    conversation = DetailSerializer()
    messages = DisplayRowSerializer(many=True)


class WsTicketSerializer(serializers.Serializer[Any]):
    """``POST ws-ticket/``: a signed ticket for ``?ticket=``, valid for ``expires_in`` seconds."""

    ticket = serializers.CharField()
    expires_in = serializers.IntegerField()


class WireListRequestSerializer(serializers.Serializer[Any]):
    """``POST session/`` listing the sessions: ``{"op": "session-list", "archived"?}``."""

    op = serializers.ChoiceField(choices=["session-list"])
    archived = serializers.ChoiceField(
        choices=["0", "1", "all"],
        required=False,
        help_text="0 (default) hides archived conversations; 1 only them; all",
    )


class WireSessionRequestSerializer(serializers.Serializer[Any]):
    """``POST session/`` reading one session: ``{"op", "sessionId"}`` (a non-blank string)."""

    op = serializers.ChoiceField(choices=["session-transcript", "session-pending"])
    sessionId = serializers.RegexField(r"\S")  # agentfootprint spelling


class WireRequestSerializer(OneOfSerializer):
    """``POST session/``: a list request or a session request."""

    variants = (WireListRequestSerializer, WireSessionRequestSerializer)


class WireSessionSerializer(serializers.Serializer[Any]):
    """agentfootprint ``SessionSummary``."""

    sessionId = serializers.UUIDField()
    savedAt = serializers.IntegerField()
    format = serializers.CharField()
    messageCount = serializers.IntegerField()


class WireTranscriptSerializer(serializers.Serializer[Any]):
    """``{"sessionId", "messages"}``."""

    sessionId = serializers.UUIDField()
    messages = TranscriptMessageSerializer(many=True)


class WireResponseSerializer(serializers.Serializer[Any]):
    """One of ``{"sessions"}``, ``{"transcript"}``, ``{"pending"}``, by op."""

    sessions = WireSessionSerializer(many=True, required=False)
    transcript = WireTranscriptSerializer(required=False)
    pending = serializers.DictField(allow_null=True, required=False)


class FeedbackRequestSerializer(ClosedSerializer):
    """``PUT .../display-messages/{display_id}/feedback/``: the rating, maybe a comment."""

    rating = serializers.ChoiceField(choices=[1, -1])
    comment = serializers.CharField(
        allow_blank=True, allow_null=True, required=False, max_length=MAX_COMMENT_CHARS
    )


class ForkRequestSerializer(ClosedSerializer):
    """``POST conversations/{id}/fork/``: the seq of the display row to fork at."""

    at_seq = serializers.IntegerField(min_value=1)


class ShareRequestSerializer(ClosedSerializer):
    """``POST conversations/{id}/shares/``: every key optional (an empty body too)."""

    mode = serializers.ChoiceField(choices=ShareMode.choices, required=False, allow_null=True)
    expires_in = serializers.IntegerField(
        min_value=1, max_value=MAX_SHARE_SECONDS, required=False, allow_null=True
    )
    require_login = serializers.BooleanField(required=False, allow_null=True)


class ShareSerializer(serializers.Serializer[Any]):
    """A share link as listed (``representations``-free: ``api.shares.share_row``)."""

    id = serializers.UUIDField()
    mode = serializers.ChoiceField(choices=ShareMode.choices)
    require_login = serializers.BooleanField()
    snapshot_event_seq = serializers.IntegerField(min_value=0, allow_null=True)
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    active = serializers.BooleanField()


class ShareCreatedSerializer(ShareSerializer):
    """A new share link: the listed keys plus the ``token`` (shown this once) and its ``url``."""

    token = serializers.CharField()
    url = serializers.CharField()


SharePageSerializer = page_serializer("SharePageSerializer", ShareSerializer)


class SharedSummarySerializer(serializers.Serializer[Any]):
    """The conversation as a share link shows it (``representations.shared_summary``)."""

    title = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    saved_at = serializers.DateTimeField()
    status = serializers.ChoiceField(choices=ConversationStatus.choices)
    format = serializers.ChoiceField(choices=["conversation-v1", "flowchart-v1"])
    message_count = serializers.IntegerField(min_value=0)


class SharedInfoSerializer(serializers.Serializer[Any]):
    """What the link is: its mode, the event_seq it shows, its expiry."""

    mode = serializers.ChoiceField(choices=ShareMode.choices)
    event_seq = serializers.IntegerField(min_value=0)
    expires_at = serializers.DateTimeField(allow_null=True)
    require_login = serializers.BooleanField()


class SharedRowSerializer(serializers.Serializer[Any]):
    """A display row as a share link shows it (``representations.shared_row``)."""

    seq = serializers.IntegerField(min_value=1)
    message_type = serializers.CharField()
    content_type = serializers.CharField()
    content = serializers.DictField()
    status = serializers.ChoiceField(choices=ToolStatus.choices)
    tool_call_id = serializers.CharField(allow_null=True)
    metadata = serializers.DictField()
    event_seq = serializers.IntegerField(min_value=0)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class SharedPageSerializer(serializers.Serializer[Any]):
    """``GET shared/{token}/``: the conversation, the link, one page of rows (oldest first)."""

    conversation = SharedSummarySerializer()
    share = SharedInfoSerializer()
    messages = SharedRowSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)
