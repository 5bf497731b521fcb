"""Every single-statement write on PostgreSQL (``services.fastpath``, ``services.singles``) writes
exactly what the general path writes: hypothesis-generated sequences of messages (user text,
assistant text, tool calls, results, orphan and late results, errors, interrupts), tool status
moves (allowed, refused, repeated, unknown calls), status changes with and without a pending ask,
and synthetic rows, run once with the single statements and once on the general path, leave the
same rows, counters, frame log and signals, and return or raise the same. The sequences include
what the truthful record made subtle: call ids reused after their call ended (a new round),
results before their call (held, then adopted), null content, failed calls with results; the
kinds that step aside (docs/write-path.md "One statement per write") are compared too."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from django.dispatch import Signal
from hypothesis import HealthCheck, given, settings
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
from murmur_conversations.services import fastpath, singles
from tests.helpers import MakeConversation, assert_counters_match_rows

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

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
    st.tuples(st.just("result"), call_index, texts, st.sampled_from(["ok", "error", "interrupt"])),
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
)


def _message(op: tuple[Any, ...]) -> dict[str, Any]:
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
    return {
        "role": "tool",
        "tool_call_id": f"call_{op[1]}",
        "content": op[2],
        "is_error": op[3] == "error",
        "is_interrupt": op[3] == "interrupt",
    }


def _apply(conversation: Conversation, op: tuple[Any, ...]) -> object:
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
            return _row(card)
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
            return _row(row)
        return [
            _row(row)
            for row in services.save_message(conversation=conversation, message=_message(op))
        ]
    except ConversationsError as error:
        return type(error).__name__


def _row(row: DisplayMessage) -> tuple[Any, ...]:
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


def _state(conversation: Conversation) -> dict[str, Any]:
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
            _row(row)
            for row in DisplayMessage.objects.filter(conversation=conversation).order_by("seq")
        ]
        + list(
            DisplayMessage.objects.filter(conversation=conversation)
            .order_by("seq")
            .values_list("message__position", "tool_call__call_id", "owner_feedback")
        ),
        "frame_log": [
            (event_seq, kind, _placeholders(frames), _placeholders(sidebar))
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


_UUID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")


def _placeholders(text: str) -> Any:
    """A frame-log text, parsed (key order does not count), with the ids that differ between two
    conversations (uuids, display row ids) replaced by placeholders in order of appearance."""
    names: dict[str, str] = {}

    def walk(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        if isinstance(value, str) and (key == "id" or _UUID.fullmatch(value)):
            return names.setdefault(value, f"<id {len(names)}>")
        return value

    return walk(json.loads(text)) if text else text


def _announced(write: Callable[[], object]) -> tuple[object, list[tuple[Any, ...]]]:
    """Run ``write``: what it returned and the signals it sent, in order, with what they carry."""
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
                [_row(r) for r in rows],
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


#: The real functions, read once: the test swaps them for every example, and the monkeypatch of a
#: hypothesis test is undone only after the last example (read inside the test, the second
#: example's "real" function would be the first example's swap, switched off for good).
_REAL = (fastpath.eligible, singles.available)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=st.lists(operation, min_size=1, max_size=12))
def test_single_statements_write_what_the_general_path_writes(
    make_conversation: MakeConversation,
    monkeypatch: pytest.MonkeyPatch,
    operations: list[tuple[Any, ...]],
) -> None:
    clock = {"now": START}
    monkeypatch.setattr("django.utils.timezone.now", lambda: clock["now"])
    fast, general = make_conversation(created_at=START), make_conversation(created_at=START)
    use_single = {"on": True}
    real_eligible, real_available = _REAL
    monkeypatch.setattr(
        fastpath, "eligible", lambda *args: use_single["on"] and real_eligible(*args)
    )
    monkeypatch.setattr(
        singles, "available", lambda using: use_single["on"] and real_available(using)
    )
    for step, op in enumerate(operations):
        clock["now"] = START + timedelta(seconds=step + 1)
        use_single["on"] = True
        fast_result = _announced(partial(_apply, fast, op))
        use_single["on"] = False
        general_result = _announced(partial(_apply, general, op))
        assert fast_result == general_result, op
    assert _state(fast) == _state(general)
    assert_counters_match_rows(fast)


@pytest.mark.parametrize(
    ("kind", "single"),
    [
        ("user", True),
        ("null", True),
        ("status", True),
        ("synthetic", True),
        ("tool", False),
        ("call", False),
        ("result", False),
        ("late", False),
    ],
)
def test_each_kind_takes_one_statement_or_steps_aside(
    make_conversation: MakeConversation, kind: str, single: bool
) -> None:
    """The fast kinds: one statement, plus the frame log's INSERT in the same transaction. The
    kinds that step aside take the general path (more statements)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    conversation = make_conversation()
    services.save_message(conversation=conversation, message=_message(("call", 0, "x", False)))
    services.save_message(conversation=conversation, message=_message(("call", 2, "x", False)))
    services.save_message(conversation=conversation, message=_message(("result", 2, "x", "ok")))
    op: tuple[Any, ...] = {
        "user": ("user", "hi"),
        "null": ("null", "assistant"),
        "tool": ("tool", 0, "executing", "ls", None, None),
        "status": ("status", "running", None),
        "synthetic": ("synthetic", "note"),
        "call": ("call", 1, "x", True),
        "result": ("result", 0, "done", "error"),
        "late": ("result", 2, "again", "ok"),
    }[kind]
    with CaptureQueriesContext(connection) as queries:
        assert not isinstance(_apply(conversation, op), str)
    sql = [q["sql"] for q in queries.captured_queries]
    if single:
        assert len(sql) == 4, sql
        assert sql[0] == "BEGIN" and sql[-1] == "COMMIT", sql
        assert FrameLogEntry._meta.db_table in sql[2], sql
    else:
        assert len(sql) > 4, sql


def _wait_until_blocked(probe: Any, table_hint: str) -> None:
    """Poll (bounded, no sleeps) until another backend of this database waits for a lock."""
    for _ in range(100_000):
        waiting = probe.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND query LIKE %s",
            [f"%{table_hint}%"],
        ).fetchone()[0]
        if waiting:
            return
    raise AssertionError("the writer never waited for the lock")


@pytest.mark.parametrize("kind", ["result", "tool"])
def test_a_write_that_commits_first_is_not_overwritten(
    make_conversation: MakeConversation, kind: str
) -> None:
    """The single statement reads the call before it holds the lock; another writer that moves
    the call (under the lock) in between makes it step aside for the general path, which sees the
    move: the result is stored as late, the status move refused."""
    import threading

    import psycopg
    from django.db import connection

    conversation = make_conversation()
    services.save_message(conversation=conversation, message=_message(("call", 0, "x", False)))
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params) as other, psycopg.connect(**params, autocommit=True) as probe:
        other.execute(  # another writer holds the lock and ends the call
            "UPDATE murmur_conversations_conversation SET last_event_seq = last_event_seq + 1 "
            "WHERE id = %s",
            [conversation.pk],
        )
        other.execute(
            "UPDATE murmur_conversations_toolcall SET status = 'failed' WHERE call_id = 'call_0'"
        )
        outcome: list[object] = []

        def write() -> None:
            try:
                outcome.append(_apply(conversation, ("result", 0, "late", "ok")))
                if kind == "tool":
                    outcome.append(_apply(conversation, ("tool", 0, "completed", None, 1, None)))
            finally:
                connection.close()

        thread = threading.Thread(target=write)
        thread.start()
        _wait_until_blocked(probe, "murmur_conversations_conversation")
        other.commit()
        thread.join()
    result_rows = outcome[0]
    assert isinstance(result_rows, list)
    assert result_rows[0][5] == {"late": True}  # metadata: the call had failed first
    call = ToolCall.objects.get(conversation=conversation, call_id="call_0")
    assert call.status == "failed"
    if kind == "tool":
        assert outcome[1] == "InvalidToolTransition"
