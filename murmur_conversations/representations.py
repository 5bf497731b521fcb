"""The JSON shapes of rows (docs/api.md, "Rows"), built in one place.

REST serializers, websocket events, the session wire and exports all use these functions, so a
row looks the same everywhere. Values are JSON-ready (ids as strings, times as ISO 8601 in UTC).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from typing import Any, Final, Literal

from murmur_conversations.conf import app_settings
from murmur_conversations.models import (
    ContentType,
    Conversation,
    DisplayMessage,
    Message,
    ShareRow,
    ToolCall,
)
from murmur_conversations.search import Hit
from murmur_conversations.usage import COUNTERS, Usage, price_counters, usage_body


class _Owner(Enum):
    OWNER = "owner"


#: ``display_row``'s default ``feedback``: the conversation owner's (``DisplayMessage.owner_feedback``).
OWNER_FEEDBACK: Final = _Owner.OWNER
#: Row ``metadata`` keys a share link shows; every other key stays with the owner.
SHARED_METADATA_KEYS: Final = ("display_text", "result", "error", "orphan", "late")
#: ``structured_data`` formats whose data a share link never shows (provider internals).
HIDDEN_DATA_FORMATS: Final = frozenset({"redacted_thinking"})


def iso(value: datetime | None) -> str | None:
    """ISO 8601 with ``Z`` for UTC, as DRF renders datetimes; None stays None."""
    if value is None:
        return None
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def unix_ms(value: datetime) -> int:
    """Milliseconds since the Unix epoch (agentfootprint's ``savedAt``)."""
    return int(value.timestamp() * 1000)


def display_row(
    row: DisplayMessage, feedback: dict[str, Any] | Literal[_Owner.OWNER] | None = OWNER_FEEDBACK
) -> dict[str, Any]:
    """``{id (string), seq, message_type, content_type, content, status, tool_call_id (the call id
    or null), metadata, created_event_seq, event_seq, created_at, updated_at, feedback}``.

    ``feedback`` is ``{"rating", "comment"}`` or null: REST passes the caller's own; by default
    (websocket frames, which every reader of the conversation shares) it is the owner's."""
    return {
        "id": str(row.pk),
        "seq": row.seq,
        "message_type": row.message_type,
        "content_type": row.content_type,
        "content": row.content,
        "status": row.status,
        "tool_call_id": row.tool_call_id_value,
        "metadata": row.metadata,
        "created_event_seq": row.created_event_seq,
        "event_seq": row.event_seq,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
        "feedback": row.owner_feedback if feedback is OWNER_FEEDBACK else feedback,
    }


#: The DisplayMessage columns :func:`display_row_of_values` reads, in order (``values_list``).
DISPLAY_COLUMNS: Final = (
    "id",
    "seq",
    "message_type",
    "content_type",
    "content",
    "status",
    "metadata",
    "created_event_seq",
    "event_seq",
    "created_at",
    "updated_at",
    "owner_feedback",
)


def display_row_of_values(
    values: tuple[Any, ...] | list[Any],
    feedback: dict[str, Any] | Literal[_Owner.OWNER] | None = OWNER_FEEDBACK,
    *,
    when: Callable[[Any], str | None] = iso,
    loads: Callable[[Any], Any] | None = None,
) -> dict[str, Any]:
    """:func:`display_row` of a row read as ``values_list(*DISPLAY_COLUMNS)``: the same dict
    (the same JSON bytes), without building a model instance (the page reads of ``reading``).
    ``when`` turns ``created_at`` and ``updated_at`` into their ISO text: :func:`iso` of a
    datetime by default; ``reading`` passes one that reads the stored text of SQLite directly.
    ``loads``, when given, decodes the JSON columns (``content``, ``metadata``,
    ``owner_feedback``) as stored (text; NULL stays None)."""
    (pk, seq, message_type, content_type, content, status, metadata, created_event_seq) = values[:8]
    event_seq, created_at, updated_at, owner_feedback = values[8:]
    if loads is not None:
        content = loads(content)
        metadata = loads(metadata)
        if owner_feedback is not None:
            owner_feedback = loads(owner_feedback)
    if content_type == ContentType.TOOL_RESULT:
        call_id: str | None = str(content.get("tool_call_id") or "") or None
    elif content_type == ContentType.TOOL_CALL:
        call_id = str(content.get("call_id") or "") or None
    else:
        call_id = None
    created = when(created_at)
    return {
        "id": str(pk),
        "seq": seq,
        "message_type": message_type,
        "content_type": content_type,
        "content": content,
        "status": status,
        "tool_call_id": call_id,
        "metadata": metadata,
        "created_event_seq": created_event_seq,
        "event_seq": event_seq,
        "created_at": created,
        # a row never changed since it was written has one time: spelled once
        "updated_at": created if updated_at == created_at else when(updated_at),
        "feedback": owner_feedback if feedback is OWNER_FEEDBACK else feedback,
    }


def record_message(message: Message) -> dict[str, Any]:
    """The message as the model saw it (docs/write-path.md "The message as the model saw it"): the
    one definition every read of the record uses (the record API's ``message``, the plug-in read,
    the exports).

    Keys, in order: ``role``, ``content`` (as given: a string, a list of blocks, or null), ``id``
    (the message id), ``tool_call_id`` and ``is_error`` for a tool result (``is_error`` also
    whenever it is true), ``source_id`` when set, then every other key the message arrived with
    (``tool_calls`` with their argument text as given, ``name``, ``refusal``, ``usage``...) in
    stored order. ``services.save_messages`` given this dict stores the same record message."""
    line: dict[str, Any] = {
        "role": message.role,
        "content": message.content,
        "id": message.message_id,
    }
    if message.tool_call_id:
        line["tool_call_id"] = message.tool_call_id
    if message.tool_call_id or message.is_error:
        line["is_error"] = message.is_error
    if message.source_id:
        line["source_id"] = message.source_id
    for key, value in (message.extra or {}).items():
        line.setdefault(key, value)
    return line


def record_row(message: Message) -> dict[str, Any]:
    """``{id (the message_id), position, role, content, tool_call_id, is_error, source_id,
    created_at, message}``: ``content`` as given (null included) and ``message`` the whole
    message as the model saw it (:func:`record_message`)."""
    return {
        "id": message.message_id,
        "position": message.position,
        "role": message.role,
        "content": message.content,
        "tool_call_id": message.tool_call_id or None,
        "is_error": message.is_error,
        "source_id": message.source_id or None,
        "created_at": iso(message.created_at),
        "message": record_message(message),
    }


def tool_call_row(call: ToolCall, children: list[str] | None = None) -> dict[str, Any]:
    """``{id, call_id, name, arguments, status, interrupt_reason, display_text, result, error,
    started_at, finished_at, event_seq, created_at, children}``; ``id`` (a string) is the call's
    own, unique even when an agent reused the ``call_id`` in a later round (docs/api.md
    "Rows"); ``children`` are the ids of the child conversations the call launched
    (``selectors.children_by_call``), oldest first."""
    return {
        "id": str(call.pk),
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call.arguments,
        "status": call.status,
        "interrupt_reason": call.interrupt_reason or None,
        "display_text": call.display_text,
        "result": call.result,
        "error": call.error,
        "started_at": iso(call.started_at),
        "finished_at": iso(call.finished_at),
        "event_seq": call.event_seq,
        "created_at": iso(call.created_at),
        "children": list(children or ()),
    }


def summary_row(conversation: Conversation) -> dict[str, Any]:
    """The summary row: ``id, title, saved_at, created_at, status, format, message_count,
    parent_id, parent_call_id, child_count, steps, pinned, archived, tags, forked_from_id,
    forked_at_seq, usage``, and nothing from inside the conversation (``message_count`` is
    ``transcript_count``; ``steps`` is ``tool_call_count``; ``parent_id`` and ``parent_call_id``
    are null for a top-level conversation, and the call id null when the log does not say;
    ``forked_from_id`` is the original's id or null; ``usage`` is :func:`conversation_usage`,
    from the counters)."""
    parent_id = conversation.parent_id
    forked_from = conversation.forked_from_id
    return {
        "id": str(conversation.pk),
        "title": conversation.title,
        "saved_at": iso(conversation.saved_at),
        "created_at": iso(conversation.created_at),
        "status": conversation.status,
        "format": conversation.format,
        "message_count": conversation.transcript_count,
        "parent_id": None if parent_id is None else str(parent_id),
        "parent_call_id": conversation.parent_call_id or None,
        "child_count": conversation.child_count,
        "steps": conversation.tool_call_count,
        "pinned": conversation.pinned,
        "archived": conversation.archived,
        "tags": list(conversation.tags or []),
        "forked_from_id": None if forked_from is None else str(forked_from),
        "forked_at_seq": conversation.forked_at_seq,
        "usage": conversation_usage(conversation),
    }


def conversation_usage(conversation: Conversation) -> dict[str, Any]:
    """``{input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
    cache_write_1h_tokens, reasoning_tokens, models, cost, unpriced}`` of the conversation's own
    assistant messages (docs/usage.md), from the counters the write path keeps (nothing is summed
    here); ``cost`` prices them at today's prices (``PRICES`` over ``genai-prices``), null only
    when no counted token has a price; ``unpriced`` lists the models whose tokens have none."""
    totals = Usage(*(getattr(conversation, name) for name in COUNTERS))
    return priced_usage(totals, conversation.usage_by_model or {})


def priced_usage(totals: Usage, by_model: Mapping[str, Any]) -> dict[str, Any]:
    """The ``usage`` object of ``totals`` and ``by_model`` (``{model: {counter: int}}``), priced
    at today's prices (:func:`conversation_usage`)."""
    return usage_body(by_model, price_counters(by_model, app_settings.prices), totals=totals)


def detail_row(
    conversation: Conversation, family: tuple[Usage, Mapping[str, Any]]
) -> dict[str, Any]:
    """The summary row plus ``metadata`` and ``usage_with_children`` (``GET
    conversations/{id}/``): the ``usage`` object over the conversation and its descendants,
    ``family`` being their ``(totals, by model)`` (``selectors.family_usage``)."""
    return {
        **summary_row(conversation),
        "metadata": conversation.metadata,
        "usage_with_children": priced_usage(*family),
    }


def search_hit_row(hit: Hit) -> dict[str, Any]:
    """A search hit (docs/search.md): ``{conversation_id, conversation_title, seq,
    display_message_id (a string, as display row ids are), role (the row's message_type),
    content_type, snippet, highlights ([start, end) code point offsets into snippet),
    created_at}``."""
    return {
        "conversation_id": str(hit.conversation_id),
        "conversation_title": hit.conversation_title,
        "seq": hit.seq,
        "display_message_id": str(hit.display_message_id),
        "role": hit.role,
        "content_type": hit.content_type,
        "snippet": hit.snippet,
        "highlights": [[start, end] for start, end in hit.highlights],
        "created_at": iso(hit.created_at),
    }


def shared_summary(conversation: Conversation) -> dict[str, Any]:
    """The summary a share link shows: ``title, created_at, saved_at, status, format,
    message_count``; no id, owner, organising fields or fork origin (docs/api.md "Share links")."""
    return {
        "title": conversation.title,
        "created_at": iso(conversation.created_at),
        "saved_at": iso(conversation.saved_at),
        "status": conversation.status,
        "format": conversation.format,
        "message_count": conversation.transcript_count,
    }


def shared_row_shown(row: DisplayMessage | ShareRow) -> bool:
    """Whether a share link shows ``row`` at all: not context the agent injected (system
    reminders, instructions, environment: the record's internals, not the conversation)."""
    return not (isinstance(row.metadata, dict) and row.metadata.get("injected") is True)


def shared_row(row: DisplayMessage | ShareRow, *, private_tools: frozenset[str]) -> dict[str, Any]:
    """A display row as a share link shows it: ``{seq, message_type, content_type, content,
    status, tool_call_id, metadata, event_seq, created_at, updated_at}``; no row id, record link
    or feedback. ``metadata`` keeps only :data:`SHARED_METADATA_KEYS`; a thinking signature and
    the data of :data:`HIDDEN_DATA_FORMATS` are left out; the arguments (and display text) of a
    call to a tool in ``private_tools`` (``"*"``: every tool) are null, with ``"private": true``
    in its content."""
    content: Any = row.content
    metadata = row.metadata if isinstance(row.metadata, dict) else {}
    shown = {key: metadata[key] for key in SHARED_METADATA_KEYS if key in metadata}
    if isinstance(content, dict):
        if row.content_type == ContentType.THINKING:
            content = {k: v for k, v in content.items() if k != "signature"}
        elif row.content_type == ContentType.STRUCTURED_DATA:
            if content.get("format") in HIDDEN_DATA_FORMATS:
                content = {"format": content.get("format"), "data": None}
        elif row.content_type == ContentType.TOOL_CALL and (
            "*" in private_tools or content.get("name") in private_tools
        ):
            content = {**content, "arguments": None, "private": True}
            content.pop("display_text", None)
            shown.pop("display_text", None)
    return {
        "seq": row.seq,
        "message_type": row.message_type,
        "content_type": row.content_type,
        "content": content,
        "status": row.status,
        "tool_call_id": row.tool_call_id_value,
        "metadata": shown,
        "event_seq": row.event_seq,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
    }
