"""Serializers that describe the API's bodies for the OpenAPI schema (docs/api.md).

Responses are built by ``murmur_conversations.representations`` (one shape for REST, websockets and
exports); these classes only document those shapes and must list the same keys.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from murmur_conversations.models import ConversationStatus, ToolStatus
from murmur_conversations.services import MAX_ANSWER_CHARS

Any_ = serializers.JSONField


class ErrorSerializer(serializers.Serializer[Any]):
    """``{"detail", "code"}``: every failure of the REST routes."""

    detail = serializers.CharField()
    code = serializers.CharField()


class WireErrorSerializer(serializers.Serializer[Any]):
    """``{"error", "code"}``: every failure of ``POST session/``."""

    error = serializers.CharField()
    code = serializers.CharField()


class UsageSerializer(serializers.Serializer[Any]):
    """Token usage and cost (``representations.conversation_usage``, ``usage.usage_body``):
    counters in our names (``input_tokens`` is uncached input), the models, and the cost in USD
    as a decimal string, null when a model has no price (docs/usage.md)."""

    input_tokens = serializers.IntegerField(min_value=0)
    output_tokens = serializers.IntegerField(min_value=0)
    cache_read_tokens = serializers.IntegerField(min_value=0)
    cache_write_tokens = serializers.IntegerField(min_value=0)
    cache_write_1h_tokens = serializers.IntegerField(min_value=0)
    reasoning_tokens = serializers.IntegerField(min_value=0)
    models = serializers.ListField(child=serializers.CharField(allow_blank=True))
    cost = serializers.CharField(allow_null=True)


class SummarySerializer(serializers.Serializer[Any]):
    """The summary row (``representations.summary_row``)."""

    id = serializers.UUIDField()
    title = serializers.CharField()
    saved_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()
    status = serializers.ChoiceField(choices=ConversationStatus.choices)
    format = serializers.ChoiceField(choices=["conversation-v1", "flowchart-v1"])
    message_count = serializers.IntegerField(min_value=0)
    parent_id = serializers.UUIDField(allow_null=True)
    parent_call_id = serializers.CharField(allow_null=True)
    child_count = serializers.IntegerField(min_value=0)
    steps = serializers.IntegerField(min_value=0)
    usage = UsageSerializer()


class DetailSerializer(SummarySerializer):
    """The summary row plus ``metadata`` (``representations.detail_row``)."""

    metadata = serializers.DictField()


class PatchSerializer(serializers.Serializer[Any]):
    """``PATCH conversations/{id}/``: either key, nothing else (else 400 ``invalid_field``)."""

    title = serializers.CharField(max_length=255, required=False, allow_blank=True)
    metadata = serializers.DictField(required=False)


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


class RecordRowSerializer(serializers.Serializer[Any]):
    """A record row (``representations.record_row``); ``content`` is a string or a block list."""

    id = serializers.CharField()
    position = serializers.IntegerField(min_value=1)
    role = serializers.CharField()
    content = Any_()
    tool_call_id = serializers.CharField(allow_null=True)
    is_error = serializers.BooleanField()
    source_id = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()


class ToolCallRowSerializer(serializers.Serializer[Any]):
    """A tool-call row (``representations.tool_call_row``)."""

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


class AnswerRequestSerializer(serializers.Serializer[Any]):
    """``POST conversations/{id}/pending/answer/``: the answer, and optionally the event_seq at
    which the client saw the ask (an ask set or changed after it makes the answer stale: 409)."""

    answer = serializers.CharField(max_length=MAX_ANSWER_CHARS, allow_blank=False)
    event_seq = serializers.IntegerField(min_value=0, required=False, allow_null=True)


class AnswerResponseSerializer(serializers.Serializer[Any]):
    """``{"conversation": <detail>, "messages": [<display rows of the saved user message>]}``."""

    conversation = DetailSerializer()
    messages = DisplayRowSerializer(many=True)


class WsTicketSerializer(serializers.Serializer[Any]):
    """``POST ws-ticket/``: a signed ticket for ``?ticket=``, valid for ``expires_in`` seconds."""

    ticket = serializers.CharField()
    expires_in = serializers.IntegerField()


class WireRequestSerializer(serializers.Serializer[Any]):
    """``POST session/``: ``{"op"}`` or ``{"op", "sessionId"}``."""

    op = serializers.ChoiceField(choices=["session-list", "session-transcript", "session-pending"])
    sessionId = serializers.CharField(required=False)  # agentfootprint spelling


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
