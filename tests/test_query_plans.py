"""The write path's reads find their rows by key on SQLite, whatever the conversation's length.

SQLite plans without statistics: given ``conversation_id = ? AND tool_call_id IN (...)`` it chose
the ``(conversation, seq)`` key and walked every display row of the conversation, so a tool
result cost grew with the conversation (13 ms at 10,000 rows in the benchmark). Every statement
each kind of write sends on a long conversation is planned here with ``EXPLAIN QUERY PLAN``; none
may scan a table or search one of the conversation's tables by the conversation alone.
Checked with no statistics (a database nobody analysed) and with the statistics ``ANALYZE`` gives
of the rows the test wrote (what a host's ``PRAGMA optimize`` would leave). PostgreSQL plans with
statistics of its own and is not checked here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from murmur_conversations import services
from murmur_conversations.models import Conversation
from tests.helpers import MakeConversation

pytestmark = [pytest.mark.django_db(transaction=True)]

#: Tables holding a conversation's many rows: searched by the conversation alone, a plan walks
#: all of them.
_PER_CONVERSATION = ("displaymessage", "message", "toolcall", "framelogentry", "sourcerecord")
_WALK = re.compile(
    r"(?:SCAN (?P<scanned>murmur_conversations_\w+))"  # a whole table, or a whole index
    r"|(?:SEARCH murmur_conversations_(?P<table>\w+) USING (?:COVERING )?INDEX \S+ "
    r"\(conversation_id=\?\)$)"
)


def _call(call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_call", "id": call_id, "name": "bash", "input": {"n": call_id}}],
    }


def _plans(write: Callable[[], object]) -> list[tuple[str, str]]:
    """Run ``write``; each statement it sent that reads rows, with each line of its plan."""
    with CaptureQueriesContext(connection) as captured:
        write()
    plans: list[tuple[str, str]] = []
    for query in captured.captured_queries:
        sql = query["sql"]
        if not sql.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE", "WITH")):
            continue
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
            plans.extend((sql, row[-1]) for row in cursor.fetchall())
    return plans


def _walks(plans: list[tuple[str, str]]) -> list[tuple[str, str]]:
    found = []
    for sql, line in plans:
        match = _WALK.search(line)
        if match is None:
            continue
        table = match.group("table")
        if table is None or table in _PER_CONVERSATION:
            found.append((line, sql))
    return found


def _statistics(kept: bool) -> None:
    """Give the planner statistics of the rows now in the database (``ANALYZE``), or none (the
    state of a database nobody analysed): the rows of ``sqlite_stat1`` deleted, then reloaded."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        if not kept:
            cursor.execute("DELETE FROM sqlite_stat1")
        cursor.execute("ANALYZE sqlite_master")  # the planner reloads the statistics


@pytest.mark.parametrize("statistics", [False, True], ids=["unanalysed", "analysed"])
def test_no_write_walks_a_conversations_rows(
    make_conversation: MakeConversation, statistics: bool
) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's planner only; PostgreSQL plans with its own statistics")
    try:
        _check_every_kind(make_conversation, statistics)
    finally:
        _statistics(kept=False)  # other tests plan as on a database nobody analysed


def _check_every_kind(make_conversation: MakeConversation, statistics: bool) -> None:
    conversation: Conversation = make_conversation()
    services.save_messages(
        conversation=conversation,
        messages=[_call(f"old_{n}") for n in range(200)] + [{"role": "user", "content": "hi"}],
    )
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "tool", "tool_call_id": f"old_{n}", "content": "ok"} for n in range(150)
        ],
    )
    _statistics(kept=statistics)
    kinds: dict[str, Callable[[], object]] = {
        "plain message": lambda: services.save_message(
            conversation=conversation, message={"role": "user", "content": "x"}
        ),
        "assistant with a tool call": lambda: services.save_message(
            conversation=conversation, message=_call("new")
        ),
        "update_tool_status": lambda: services.update_tool_status(
            conversation=conversation, status="executing", tool_info={"call_id": "new"}
        ),
        "tool result": lambda: services.save_message(
            conversation=conversation,
            message={"role": "tool", "tool_call_id": "new", "content": "done"},
        ),
        "interrupted result": lambda: services.save_message(
            conversation=conversation,
            message={
                "role": "tool",
                "tool_call_id": "old_190",
                "content": "",
                "is_interrupt": True,
            },
        ),
        "resolve_tool_result": lambda: services.resolve_tool_result(
            conversation=conversation, tool_call_id="old_190", result_content="answered"
        ),
        "late result": lambda: services.save_message(
            conversation=conversation,
            message={"role": "tool", "tool_call_id": "old_1", "content": "again"},
        ),
        "set_status": lambda: services.set_status(conversation=conversation, status="running"),
        "synthetic message": lambda: services.save_synthetic_message(
            conversation=conversation,
            message_type="system",
            content_type="notification",
            content={"text": "note"},
        ),
    }
    walks = {}
    for kind, write in kinds.items():
        plans = _plans(write)
        assert plans or kind in ("plain message", "synthetic message", "set_status"), kind
        if found := _walks(plans):
            walks[kind] = found
    assert walks == {}
