"""The operations of the write-path equality test (``tests/test_fastpath_kinds.py``, on
PostgreSQL): a hypothesis strategy of every kind of write,
how to apply one to a conversation, and what to compare afterwards (the returned values, the
signals, the rows, counters and frame log)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.dispatch import Signal
from hypothesis import strategies as st

from murmur_conversations import services, signals
from murmur_conversations.exceptions import ConversationsError
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    FrameLogEntry,
    Message,
    ToolCall,
)

START = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
TOOL_STATUSES = ["pending", "executing", "completed", "failed", "cancelled", "interrupted", "bogus"]
CONVERSATION_STATUSES = ["idle", "running", "paused", "interrupted", "error"]

texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=0, max_size=12)
call_index = st.integers(min_value=0, max_value=3)
json_values = st.none() | st.integers(-5, 5) | texts | st.lists(texts, max_size=2)

operation = st.one_of(
    st.tuples(st.just("user"), texts),
    st.tuples(st.just("assistant"), texts),
    st.tuples(st.just("null"), st.sampled_from(["assistant", "user"])),
    st.tuples(st.just("call"), call_index, texts, st.booleans()),
    st.tuples(
        st.just("result"),
        call_index,
        texts,
        st.sampled_from(["ok", "error", "interrupt"]),
        st.none() | st.integers(0, 3),  # an exit code, for a failed call's reason
    ),
    st.tuples(
        st.just("tool"),
        call_index,
        st.sampled_from(TOOL_STATUSES),
        st.none() | texts,
        json_values,
        st.none() | st.sampled_from(["bash", "", "edit"]),
    ),
    st.tuples(
        st.just("status"),
        st.sampled_from(CONVERSATION_STATUSES),
        st.none() | st.fixed_dictionaries({"question": texts}),
    ),
    st.tuples(st.just("synthetic"), texts),
    st.tuples(st.just("resolve"), call_index, json_values),
)
#: ``operation`` or a batch: two or three messages saved in one ``save_messages`` call (calls and
#: results beside plain messages).
operations = operation | st.tuples(
    st.just("batch"),
    st.lists(
        operation.filter(lambda op: op[0] in ("user", "assistant", "null", "call", "result")),
        min_size=2,
        max_size=3,
    ),
)


def kind_message(op: tuple[Any, ...]) -> dict[str, Any]:
    kind = op[0]
    if kind in ("user", "assistant"):
        return {"role": kind, "content": op[1]}
    if kind == "null":  # content null, kept as null (docs/write-path.md)
        return {"role": op[1], "content": None}
    if kind == "call":
        message: dict[str, Any] = {
            "role": "assistant",
            "content": [
                {"type": "text", "text": op[2]},
                {"type": "tool_call", "id": f"call_{op[1]}", "name": "bash", "input": {"x": op[2]}},
            ],
        }
        if op[3]:  # with token usage
            message |= {"model": "m", "usage": {"input_tokens": 3, "output_tokens": len(op[2])}}
        return message
    result = {
        "role": "tool",
        "tool_call_id": f"call_{op[1]}",
        "content": op[2],
        "is_error": op[3] == "error",
        "is_interrupt": op[3] == "interrupt",
    }
    if len(op) > 4 and op[4] is not None:
        result["exit_code"] = op[4]
    return result


def apply_op(conversation: Conversation, op: tuple[Any, ...]) -> object:
    """Run one operation; what it returned (comparable across conversations) or the error."""
    try:
        if op[0] == "tool":
            info: dict[str, Any] = {"call_id": f"call_{op[1]}"}
            if op[3] is not None:
                info["display_text"] = op[3]
            if op[4] is not None:
                info["result"] = info["error"] = op[4]
            if op[5] is not None:
                info["name"] = op[5]
            card = services.update_tool_status(
                conversation=conversation, status=op[2], tool_info=info
            )
            return row_values(card)
        if op[0] == "resolve":
            answered = services.resolve_tool_result(
                conversation=conversation, tool_call_id=f"call_{op[1]}", result_content=op[2]
            )
            return row_values(answered)
        if op[0] == "status":
            saved = services.set_status(conversation=conversation, status=op[1], pending_ask=op[2])
            return (saved.status, saved.pending_ask, saved.last_event_seq, saved.saved_at)
        if op[0] == "synthetic":
            row = services.save_synthetic_message(
                conversation=conversation,
                message_type="system",
                content_type="notification",
                content={"text": op[1]},
            )
            return row_values(row)
        if op[0] == "batch":
            rows = services.save_messages(
                conversation=conversation, messages=[kind_message(item) for item in op[1]]
            )
        else:
            rows = services.save_message(conversation=conversation, message=kind_message(op))
        return [row_values(row) for row in rows]
    except ConversationsError as error:
        return type(error).__name__


def row_values(row: DisplayMessage) -> tuple[Any, ...]:
    return (
        row.seq,
        row.message_type,
        row.content_type,
        row.content,
        row.status,
        row.metadata,
        row.created_event_seq,
        row.event_seq,
        row.tool_call_id_value,
        row.created_at,
        row.updated_at,
    )


def state_of(conversation: Conversation) -> dict[str, Any]:
    conversation.refresh_from_db()
    fields = [
        f.attname
        for f in Conversation._meta.concrete_fields
        if f.attname not in ("id", "created_at", "owner_id")
    ]
    return {
        "conversation": {name: getattr(conversation, name) for name in fields},
        "records": list(
            Message.objects.filter(conversation=conversation)
            .order_by("position")
            .values_list(
                "position",
                "role",
                "content",
                "tool_call_id",
                "is_error",
                "source_id",
                "extra",
                "created_at",
            )
        ),
        "rows": [
            row_values(row)
            for row in DisplayMessage.objects.filter(conversation=conversation).order_by("seq")
        ]
        + list(
            DisplayMessage.objects.filter(conversation=conversation)
            .order_by("seq")
            .values_list("message__position", "tool_call__call_id", "owner_feedback")
        ),
        "frame_log": [
            (event_seq, kind, placeholders(frames), placeholders(sidebar))
            for event_seq, kind, frames, sidebar in FrameLogEntry.objects.filter(
                conversation_id=conversation.pk
            )
            .order_by("event_seq", "kind")
            .values_list("event_seq", "kind", "frames", "sidebar")
        ],
        "calls": list(
            ToolCall.objects.filter(conversation=conversation)
            .order_by("call_id", "created_at", "event_seq")
            .values_list(
                "call_id",
                "name",
                "arguments",
                "status",
                "interrupt_reason",
                "display_text",
                "result",
                "error",
                "started_at",
                "finished_at",
                "event_seq",
                "created_at",
            )
        ),
    }


UUID_PATTERN = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")


def placeholders(text: str) -> Any:
    """A frame-log text, parsed (key order does not count), with the ids that differ between two
    conversations (uuids, display row ids) replaced by placeholders in order of appearance."""
    names: dict[str, str] = {}

    def walk(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        if isinstance(value, str | int) and (key == "id" or UUID_PATTERN.fullmatch(str(value))):
            return names.setdefault(str(value), f"<id {len(names)}>")
        return value

    return walk(json.loads(text)) if text else text


def announced(
    write: Callable[[], object],
    row: Callable[[DisplayMessage], tuple[Any, ...]] | None = None,
) -> tuple[object, list[tuple[Any, ...]]]:
    """Run ``write``: what it returned and the signals it sent, in order, with what they carry
    (each display row as ``row`` gives it; ``row_values`` by default)."""
    row = row or row_values
    sent: list[tuple[Any, ...]] = []
    names = [name for name in signals.__all__ if name not in ("conversation_deleted", "delta")]
    names_of = {getattr(signals, name): name for name in names}

    def receiver(sender: object, signal: Signal, **kwargs: Any) -> None:
        rows = kwargs.get("rows") or ([kwargs["row"]] if "row" in kwargs else [])
        call = kwargs.get("tool_call")
        conversation = kwargs["conversation"]
        sent.append(
            (
                names_of[signal],
                kwargs["event_seq"],
                [row(r) for r in rows],
                None if call is None else (call.call_id, call.status, call.result, call.error),
                (conversation.status, conversation.pending_ask, conversation.last_event_seq),
            )
        )

    for signal in names_of:
        signal.connect(receiver)
    try:
        value = write()
    finally:
        for signal in names_of:
            signal.disconnect(receiver)
    return value, sent
