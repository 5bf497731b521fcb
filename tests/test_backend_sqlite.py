"""The SQLite backend (``services/backends/sqlite.py``): a planned append is a short fixed
sequence in one transaction, declines without writing, and cuts large batches below SQLite's
variable limit. What it writes is the golden record's (``tests/test_golden.py``). SQLite only."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from murmur_conversations import services
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    FrameLogEntry,
    Message,
    MessageUsage,
)
from tests.helpers import MakeConversation, assert_counters_match_rows

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite backend; PostgreSQL's is tests/test_backends.py")


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
