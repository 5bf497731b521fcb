"""Large batches on PostgreSQL reach their tables through ``COPY`` (``services.bulkcopy``) and
write exactly what ``INSERT`` writes: hypothesis-generated batches of ``save_messages`` (user and
assistant text, null content, tool calls with ids reused after their call ended, results before
their call, errors and interrupts, token usage, secrets, ids known already or repeated in the
batch, source records new and known), run once with every batch copied and once inserted, leave the
same record rows, display rows, calls, usage rows, source records, redaction counts, counters and
frame log, and return and announce the same (docs/write-path.md "Large batches: COPY")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_conversations import services
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    FrameLogEntry,
    Message,
    MessageUsage,
    RedactionCount,
    SourceRecord,
    ToolCall,
)
from murmur_conversations.services import bulkcopy, plan
from tests.helpers import MakeConversation, assert_counters_match_rows
from tests.kinds_helpers import announced, placeholders

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

START = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
SECRET = "ghp_" + "a1B2c3D4e5" * 4

texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=10)
call_index = st.integers(min_value=0, max_value=3)
message_ids = st.none() | st.sampled_from(["m1", "m2", "m3"])

message = st.one_of(
    st.tuples(st.just("user"), texts, message_ids),
    st.tuples(st.just("assistant"), texts, message_ids),
    st.tuples(st.just("null"), message_ids),
    st.tuples(st.just("secret"), message_ids),
    st.tuples(st.just("call"), call_index, texts, st.booleans()),
    st.tuples(st.just("result"), call_index, texts, st.sampled_from(["ok", "error", "interrupt"])),
)
batch = st.tuples(
    st.lists(message, min_size=1, max_size=8),
    st.lists(st.sampled_from(["k1", "k2", "k3", "k4"]), max_size=3),
)


def _message(op: tuple[Any, ...]) -> dict[str, Any]:
    kind = op[0]
    if kind in ("user", "assistant"):
        given: dict[str, Any] = {"role": kind, "content": op[1]}
        return given if op[2] is None else {**given, "id": op[2]}
    if kind in ("null", "secret"):
        given = {"role": "user", "content": None if kind == "null" else f"key {SECRET}"}
        return given if op[1] is None else {**given, "id": op[1]}
    if kind == "call":
        call: dict[str, Any] = {
            "role": "assistant",
            "content": [
                {"type": "text", "text": op[2]},
                {"type": "tool_call", "id": f"call_{op[1]}", "name": "bash", "input": {"x": op[2]}},
            ],
        }
        if op[3]:
            call |= {"model": "m", "usage": {"input_tokens": 3, "output_tokens": len(op[2])}}
        return call
    return {
        "role": "tool",
        "tool_call_id": f"call_{op[1]}",
        "content": op[2],
        "is_error": op[3] == "error",
        "is_interrupt": op[3] == "interrupt",
    }


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
        None if row.tool_call is None else row.tool_call.call_id,
        None if row.message is None else row.message.position,
        row.created_at,
        row.updated_at,
    )


def _save(conversation: Conversation, ops: list[Any], keys: list[str], step: int) -> object:
    records = [
        {"source_key": key, "line_number": step, "raw": f'{{"k":"{key}"}}', "record_type": "line"}
        for key in keys
    ]
    times = [START + timedelta(minutes=step, seconds=i) for i in range(len(ops))]
    rows = services.save_messages(
        conversation=conversation,
        messages=[_message(op) for op in ops],
        source="test",
        source_records=records,
        times=times,
    )
    return [_row(row) for row in rows]


def _state(conversation: Conversation) -> dict[str, Any]:
    conversation.refresh_from_db()
    fields = [
        f.attname
        for f in Conversation._meta.concrete_fields
        if f.attname not in ("id", "created_at", "owner_id", "external_id")
    ]
    owned = {"conversation": conversation}
    return {
        "conversation": {name: getattr(conversation, name) for name in fields},
        "records": [
            # made-up ids (``msg_`` + a UUIDv7) differ between the two conversations
            (row[0], "<made up>" if row[1].startswith("msg_") else row[1], *row[2:])
            for row in Message.objects.filter(**owned)
            .order_by("position")
            .values_list(
                "position",
                "message_id",
                "role",
                "content",
                "tool_call_id",
                "is_error",
                "source_id",
                "extra",
                "created_at",
            )
        ],
        "rows": [
            _row(row)
            for row in DisplayMessage.objects.filter(**owned)
            .select_related("tool_call", "message")
            .order_by("seq")
        ],
        "calls": list(
            ToolCall.objects.filter(**owned)
            .order_by("pk")
            .values_list(
                "call_id",
                "name",
                "arguments",
                "status",
                "interrupt_reason",
                "result",
                "error",
                "started_at",
                "finished_at",
                "event_seq",
                "created_at",
            )
        ),
        "usage": list(
            MessageUsage.objects.filter(**owned)
            .order_by("message__position")
            .values_list("message__position", "model", "input_tokens", "output_tokens")
        ),
        "sources": list(
            SourceRecord.objects.filter(**owned)
            .order_by("pk")
            .values_list("source", "source_key", "line_number", "raw", "record_type")
        ),
        "redactions": sorted(
            RedactionCount.objects.filter(**owned).values_list("detector", "count")
        ),
        "frame_log": [
            (event_seq, kind, placeholders(frames), placeholders(sidebar))
            for event_seq, kind, frames, sidebar in FrameLogEntry.objects.filter(
                conversation_id=conversation.pk
            )
            .order_by("event_seq", "kind")
            .values_list("event_seq", "kind", "frames", "sidebar")
        ],
    }


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batches=st.lists(batch, min_size=1, max_size=5))
def test_copy_writes_what_insert_writes(
    make_conversation: MakeConversation,
    monkeypatch: pytest.MonkeyPatch,
    batches: list[tuple[list[Any], list[str]]],
) -> None:
    clock = {"now": START}
    monkeypatch.setattr("django.utils.timezone.now", lambda: clock["now"])
    # Every batch on the general path, whose inserts are the ones compared.
    monkeypatch.setattr(plan, "plannable", lambda *args: False)
    copied = make_conversation(created_at=START, external_id="copied")
    inserted = make_conversation(created_at=START, external_id="inserted")
    for step, (ops, keys) in enumerate(batches):
        clock["now"] = START + timedelta(hours=step + 1)
        monkeypatch.setattr(bulkcopy, "MIN_ROWS", 1)
        by_copy = announced(partial(_save, copied, ops, keys, step), _row)
        monkeypatch.setattr(bulkcopy, "MIN_ROWS", 10**9)
        by_insert = announced(partial(_save, inserted, ops, keys, step), _row)
        assert by_copy == by_insert, (ops, keys)
    assert _state(copied) == _state(inserted)
    assert_counters_match_rows(copied)


def test_a_large_batch_is_copied_not_inserted(make_conversation: MakeConversation) -> None:
    """At ``MIN_ROWS`` rows a table's rows go through COPY: no INSERT into the record, display,
    call or source tables, their keys taken from the sequences; below it, one INSERT."""
    conversation = make_conversation()
    n = bulkcopy.MIN_ROWS
    calls: list[dict[str, Any]] = [
        {
            "id": f"a{i}",
            "role": "assistant",
            "content": [{"type": "tool_call", "id": f"c{i}", "name": "bash", "input": {}}],
        }
        for i in range(n)
    ]
    results: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": f"c{i}", "content": "ok"} for i in range(n)
    ]
    records = [
        {"source_key": f"k{i}", "line_number": i, "raw": "{}", "record_type": "line"}
        for i in range(n)
    ]
    tables = [m._meta.db_table for m in (Message, DisplayMessage, ToolCall, SourceRecord)]
    with CaptureQueriesContext(connection) as queries:
        rows = services.save_messages(
            conversation=conversation,
            messages=calls + results,
            source="test",
            source_records=records,
        )
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert not [sql for sql in inserts if any(f'"{table}"' in sql for table in tables)], inserts
    assert sum("nextval" in q["sql"] for q in queries.captured_queries) == 4
    assert [row.seq for row in rows] == list(range(1, 2 * n + 1))
    assert all(row.pk is not None and not row._state.adding for row in rows)
    assert ToolCall.objects.filter(conversation=conversation, status="completed").count() == n
    assert SourceRecord.objects.filter(conversation=conversation).count() == n
    assert_counters_match_rows(conversation)
    # The same records again: known ids and keys add nothing, whichever way they came in.
    again = services.save_messages(
        conversation=conversation, messages=calls, source="test", source_records=records
    )
    assert [row.pk for row in again] == [row.pk for row in rows if row.content_type == "tool_call"]
    assert SourceRecord.objects.filter(conversation=conversation).count() == n
    with CaptureQueriesContext(connection) as queries:
        services.save_messages(
            conversation=conversation, messages=[{"role": "user", "content": "x"}]
        )
    assert not any("nextval" in q["sql"] for q in queries.captured_queries)
