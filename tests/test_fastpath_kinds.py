"""Every single-statement write on PostgreSQL (the planned append, ``services.fasttools``,
``services.singles``) writes exactly what the general path writes: hypothesis-generated sequences
of messages and batches of them (user text, assistant text, tool calls, results, orphan and late
results, errors with and without exit codes, interrupts), tool status moves (allowed, refused,
repeated, unknown calls) and answers to interrupted results, run once with the single
statements and once on the general path, leave the same rows, counters, frame log and signals,
and return or raise the same. Status changes and synthetic rows are planned on both runs (the
plan is their only path; what they write is the golden record's, ``tests/test_golden.py``): they
stay in the sequences as steps between the others. The
sequences include what the truthful record made subtle: call ids reused after their call ended (a
new round), results before their call (held, then adopted), null content, failed calls with
results and reasons; the kinds that step aside (docs/write-path.md "One plan per write") are
compared too."""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from murmur_conversations import services
from murmur_conversations.models import FrameLogEntry, ToolCall
from murmur_conversations.services import plan, singles
from tests.helpers import MakeConversation, assert_counters_match_rows
from tests.kinds_helpers import START, announced, apply_op, kind_message, operations, state_of

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

#: The real functions, read once: the test swaps them for every example, and the monkeypatch of a
#: hypothesis test is undone only after the last example (read inside the test, the second
#: example's "real" function would be the first example's swap, switched off for good).
_REAL = (plan.plannable, singles.available)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(operations, min_size=1, max_size=12))
# Sequences random ones rarely reach: answering interrupted results (the call open, and ended),
# adopting a held result, a tool status move on a reused id's new round.
@example(
    steps=[("call", 0, "x", False), ("result", 0, "?", "interrupt", None), ("resolve", 0, "yes")]
)
@example(
    steps=[
        ("call", 1, "x", True),
        ("tool", 1, "executing", "ls", None, None),
        ("result", 1, "?", "interrupt", None),
        ("tool", 1, "failed", None, "e", None),
        ("resolve", 1, None),
    ]
)
@example(
    steps=[
        ("result", 2, "early", "error", 1),
        ("call", 2, "x", False),
        ("call", 3, "y", False),
        ("result", 3, "out", "error", 2),
        ("call", 3, "again", False),
        ("tool", 3, "completed", "done", 5, "edit"),
        ("batch", [("call", 0, "z", False), ("result", 3, "late", "ok", None)]),
    ]
)
def test_single_statements_write_what_the_general_path_writes(
    make_conversation: MakeConversation,
    monkeypatch: pytest.MonkeyPatch,
    steps: list[tuple[Any, ...]],
) -> None:
    clock = {"now": START}
    monkeypatch.setattr("django.utils.timezone.now", lambda: clock["now"])
    fast, general = make_conversation(created_at=START), make_conversation(created_at=START)
    use_single = {"on": True}
    real_eligible, real_available = _REAL
    monkeypatch.setattr(plan, "plannable", lambda *args: use_single["on"] and real_eligible(*args))
    monkeypatch.setattr(
        singles, "available", lambda using: use_single["on"] and real_available(using)
    )
    for step, op in enumerate(steps):
        clock["now"] = START + timedelta(seconds=step + 1)
        use_single["on"] = True
        fast_result = announced(partial(apply_op, fast, op))
        use_single["on"] = False
        general_result = announced(partial(apply_op, general, op))
        assert fast_result == general_result, op
    assert state_of(fast) == state_of(general)
    assert_counters_match_rows(fast)


@pytest.mark.parametrize(
    ("kind", "single"),
    [
        ("user", True),
        ("null", True),
        ("status", True),
        ("synthetic", True),
        ("tool", True),
        ("call", True),
        ("result", True),
        ("failed", True),
        ("late", True),
        ("held", True),
        ("reused", True),
        ("batch", True),
        ("resolve", True),
        ("adopt", False),
        ("open", False),
    ],
)
def test_each_kind_takes_one_statement_or_steps_aside(
    make_conversation: MakeConversation, kind: str, single: bool
) -> None:
    """The fast kinds: one statement, plus the frame log's INSERT in the same transaction. The
    kinds that step aside (adopting held results; a call id of an open call) take the general
    path (more statements)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    conversation = make_conversation()
    services.save_message(conversation=conversation, message=kind_message(("call", 0, "x", False)))
    services.save_message(conversation=conversation, message=kind_message(("call", 2, "x", False)))
    services.save_message(conversation=conversation, message=kind_message(("result", 2, "x", "ok")))
    op: tuple[Any, ...] = {
        "user": ("user", "hi"),
        "null": ("null", "assistant"),
        "tool": ("tool", 0, "executing", "ls", None, None),
        "status": ("status", "running", None),
        "synthetic": ("synthetic", "note"),
        "call": ("call", 1, "x", True),
        "result": ("result", 0, "done", "ok"),
        "failed": ("result", 0, "done", "error", 2),
        "late": ("result", 2, "again", "ok"),
        "held": ("result", 3, "early", "ok"),
        "reused": ("call", 2, "again", False),  # call_2 ended: a new round
        "batch": ("batch", [("user", "go"), ("call", 1, "x", False)]),
        "resolve": ("resolve", 4, "yes"),
        "adopt": ("call", 1, "x", False),  # a result for call_1 is held: adopted
        "open": ("call", 0, "x", False),  # call_0 is open: nothing new
    }[kind]
    if kind == "resolve":  # an interrupted call, answered later
        for step in (("call", 4, "x", False), ("result", 4, "?", "interrupt")):
            services.save_message(conversation=conversation, message=kind_message(step))
    if kind == "adopt":
        services.save_message(
            conversation=conversation, message=kind_message(("result", 1, "e", "ok"))
        )
    with CaptureQueriesContext(connection) as queries:
        assert not isinstance(apply_op(conversation, op), str)
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
    services.save_message(conversation=conversation, message=kind_message(("call", 0, "x", False)))
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
                outcome.append(apply_op(conversation, ("result", 0, "late", "ok")))
                if kind == "tool":
                    outcome.append(apply_op(conversation, ("tool", 0, "completed", None, 1, None)))
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
