"""The planned append on SQLite (``services/backends/sqlite.py``) writes exactly what the general path writes.

Hypothesis-generated sequences of every kind of write (the operations of
``tests/kinds_helpers.py``: plain and null-content messages, which take the short path,
mixed with tool calls, results, status moves, statuses and synthetic rows, which do not), plus
batches with given ids (new, known, repeated), injected messages and token usage, run once with
the short path and once on the general path, leave the same rows, counters, usage rows, frame log
and signals, and return or raise the same. SQLite only: on PostgreSQL the planned append is proven by
``tests/test_fastpath_kinds.py``.
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_conversations import services
from murmur_conversations.exceptions import ConversationsError
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    FrameLogEntry,
    Message,
    MessageUsage,
)
from murmur_conversations.services import applying, plan
from tests.helpers import MakeConversation, assert_counters_match_rows
from tests.kinds_helpers import START, announced, apply_op, operation, row_values, state_of, texts

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite short append; PostgreSQL's is tests/test_fastpath_kinds.py")


#: The real functions, read once: the test swaps them for every example, and the monkeypatch of a
#: hypothesis test is undone only after the last example.
_REAL = (plan.plannable, applying.append)

ids = st.sampled_from(["a", "b", "c"])
batch_message = st.one_of(
    st.tuples(st.just("text"), st.sampled_from(["user", "assistant", "developer"]), texts),
    st.tuples(st.just("id"), ids, texts),
    st.tuples(st.just("null"), st.sampled_from(["user", "assistant"])),
    st.tuples(st.just("injected"), texts),
    st.tuples(
        st.just("usage"),
        st.sampled_from(["m", "", 'gpt "x" é', "m.n"]),
        st.integers(0, 5),
        st.integers(0, 5),
    ),
    st.tuples(st.just("blocks"), texts),
)
batch = st.tuples(
    st.just("batch"),
    st.lists(batch_message, min_size=1, max_size=4),
    st.lists(st.none() | st.integers(0, 3), max_size=4),
)


def _batch_message(op: tuple[Any, ...]) -> dict[str, Any]:
    kind = op[0]
    if kind == "text":
        return {"role": op[1], "content": op[2]}
    if kind == "id":
        return {"role": "user", "content": op[2], "id": f"id_{op[1]}"}
    if kind == "null":
        return {"role": op[1], "content": None}
    if kind == "injected":
        return {"role": "user", "content": op[1], "injected": True, "source_id": "src"}
    if kind == "usage":
        return {
            "role": "assistant",
            "content": "counted",
            "model": op[1],
            "usage": {"input_tokens": op[2], "output_tokens": op[3], "cache_read_tokens": 1},
        }
    return {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": op[1], "signature": "s"},
            {"type": "text", "text": op[1]},
            {"type": "image", "url": "https://example.invalid/a.png"},
        ],
        "zeta": {"k": [1, op[1]]},
    }


def _apply_any(conversation: Conversation, op: tuple[Any, ...]) -> object:
    """One operation of ``test_fastpath_kinds``, or a batch (messages and times) through
    ``save_messages``; what it returned (comparable across conversations) or the error."""
    if op[0] != "batch":
        return apply_op(conversation, op)
    messages = [_batch_message(m) for m in op[1]]
    times = None
    if len(op[2]) == len(messages):
        times = [None if t is None else START + timedelta(seconds=t) for t in op[2]]
    try:
        rows = services.save_messages(conversation=conversation, messages=messages, times=times)
    except ConversationsError as error:
        return type(error).__name__
    return [row_values(row) for row in rows]


def _full_state(conversation: Conversation) -> dict[str, Any]:
    state = state_of(conversation)
    state["usage"] = list(
        MessageUsage.objects.filter(conversation=conversation)
        .order_by("message__position")
        .values_list(
            "message__position",
            "model",
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "created_at",
        )
    )
    state["message_ids"] = list(
        Message.objects.filter(conversation=conversation)
        .order_by("position")
        .values_list("message_id", flat=True)
    )
    return state


def _without_generated_ids(state: dict[str, Any]) -> dict[str, Any]:
    """Generated message ids differ between two runs; given ones (``id_...``) must match."""
    state["message_ids"] = [m if m.startswith("id_") else "<new>" for m in state["message_ids"]]
    return state


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=st.lists(operation | batch, min_size=1, max_size=10))
def test_the_short_append_writes_what_the_general_path_writes(
    make_conversation: MakeConversation,
    monkeypatch: pytest.MonkeyPatch,
    operations: list[tuple[Any, ...]],
) -> None:
    clock = {"now": START}
    monkeypatch.setattr("django.utils.timezone.now", lambda: clock["now"])
    fast, general = make_conversation(created_at=START), make_conversation(created_at=START)
    use = {"on": True}
    taken = {"fast": 0}
    real_eligible, real_try = _REAL

    def counted(**kwargs: Any) -> Any:
        done = real_try(**kwargs)
        taken["fast"] += done is not None
        return done

    monkeypatch.setattr(plan, "plannable", lambda *args: use["on"] and real_eligible(*args))
    monkeypatch.setattr(applying, "append", counted)
    for step, op in enumerate(operations):
        clock["now"] = START + timedelta(seconds=step + 1)
        use["on"] = True
        fast_result = announced(partial(_apply_any, fast, op))
        use["on"] = False
        general_result = announced(partial(_apply_any, general, op))
        assert fast_result == general_result, op
    assert _without_generated_ids(_full_state(fast)) == _without_generated_ids(_full_state(general))
    assert_counters_match_rows(fast)
    if any(op[0] in ("user", "assistant", "null") for op in operations):
        assert taken["fast"], "a plain message took the short path"


def _stored(conversation: Conversation) -> list[tuple[Any, ...]]:
    """The stored text of every row (as SQLite holds it; times as text, not parsed), ids and the
    conversation's id left out."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT position, role, content, tool_call_id, is_error, source_id, extra, "
            "CAST(created_at AS TEXT) "
            f"FROM {Message._meta.db_table} WHERE conversation_id = %s ORDER BY position",
            [conversation.pk.hex],
        )
        records = cursor.fetchall()
        cursor.execute(
            "SELECT seq, message_type, content_type, content, status, tool_call_id, metadata, "
            "created_event_seq, event_seq, CAST(created_at AS TEXT), CAST(updated_at AS TEXT), "
            "owner_feedback "
            f"FROM {DisplayMessage._meta.db_table} WHERE conversation_id = %s ORDER BY seq",
            [conversation.pk.hex],
        )
        return [*records, *cursor.fetchall()]


def test_the_rows_are_stored_byte_for_byte_as_the_general_path_stores_them(
    make_conversation: MakeConversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": 'héllo "quoted"', "id": "u1"},
        {"role": "assistant", "content": None, "zeta": {"k": [1, 2]}},
        _batch_message(("blocks", "ünïcode")),
        {"role": "user", "content": "<ctx>", "injected": True, "source_id": "src"},
    ]
    monkeypatch.setattr("django.utils.timezone.now", lambda: START)
    fast, general = make_conversation(), make_conversation()
    services.save_messages(conversation=fast, messages=messages)
    monkeypatch.setattr(plan, "plannable", lambda *args: False)
    services.save_messages(conversation=general, messages=messages)
    assert _stored(fast) == _stored(general)


@pytest.mark.parametrize("usage", [False, True])
def test_a_plain_append_is_a_short_fixed_sequence(
    make_conversation: MakeConversation, usage: bool
) -> None:
    """The conversation's UPDATE, the two INSERTs (and the usage rows'), the frame log's INSERT:
    the same statements for the first message and after many."""
    conversation = make_conversation()
    message: dict[str, Any] = {"role": "assistant", "content": "hi"}
    if usage:
        message |= {"model": "m", "usage": {"input_tokens": 3}}
    counts = []
    for _ in range(3):
        with CaptureQueriesContext(connection) as queries:
            services.save_message(conversation=conversation, message=message)
        sql = [q["sql"] for q in queries.captured_queries]
        # What runs after COMMIT (the frame log's pruning, every 256 logged writes) is not the
        # append's.
        sql = sql[: sql.index("COMMIT") + 1]
        assert sql[0] == "BEGIN IMMEDIATE", sql
        counts.append(len(sql))
        writes = [s for s in sql if s.startswith(("UPDATE", "INSERT"))]
        tables = [Conversation, Message, DisplayMessage]
        if usage:
            tables.append(MessageUsage)
        tables.append(FrameLogEntry)
        assert len(writes) == len(tables), sql
        for statement, model in zip(writes, tables, strict=True):
            assert f'"{model._meta.db_table}"' in statement, sql
        assert not [s for s in sql if s.startswith("SELECT")], sql
    assert len(set(counts)) == 1
    assert_counters_match_rows(conversation)


def test_a_known_id_declines_and_nothing_is_written_twice(
    make_conversation: MakeConversation,
) -> None:
    conversation = make_conversation()
    first = services.save_message(
        conversation=conversation, message={"role": "user", "content": "x", "id": "same"}
    )
    again = services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "user", "content": "y", "id": "new"},
            {"role": "user", "content": "x", "id": "same"},
        ],
    )
    conversation.refresh_from_db()
    assert conversation.record_length == 2
    assert conversation.last_event_seq == 2
    assert [row.pk for row in again] == [first[0].pk, again[1].pk]
    assert again[1].content == {"text": "y"}
    assert_counters_match_rows(conversation)


def test_inside_a_caller_transaction_a_rollback_undoes_it(
    make_conversation: MakeConversation,
) -> None:
    conversation = make_conversation()
    with pytest.raises(RuntimeError), transaction.atomic():
        services.save_message(conversation=conversation, message={"role": "user", "content": "x"})
        raise RuntimeError
    conversation.refresh_from_db()
    assert conversation.record_length == 0
    assert not DisplayMessage.objects.filter(conversation=conversation).exists()
    assert not FrameLogEntry.objects.filter(conversation_id=conversation.pk, event_seq__gt=0)
    rows = services.save_message(
        conversation=conversation, message={"role": "user", "content": "y"}
    )
    assert rows[0].seq == 1


def test_a_missing_conversation_raises_as_the_general_path_does() -> None:
    import uuid

    from murmur_conversations.exceptions import ConversationNotFound

    with pytest.raises(ConversationNotFound):
        services.save_message(conversation=uuid.uuid4(), message={"role": "user", "content": "x"})


def test_a_large_batch_is_cut_below_the_variable_limit(
    make_conversation: MakeConversation,
) -> None:
    conversation = make_conversation()
    messages = [{"role": "user", "content": f"m{i}"} for i in range(3000)]
    rows = services.save_messages(conversation=conversation, messages=messages)
    assert [row.seq for row in rows] == list(range(1, 3001))
    assert [row.content["text"] for row in rows[:2]] == ["m0", "m1"]
    assert_counters_match_rows(conversation)
    stored = DisplayMessage.objects.filter(conversation=conversation).order_by("seq")
    assert [(row.pk, row.message_id) for row in stored] == [
        (row.pk, row.message_id) for row in rows
    ]
