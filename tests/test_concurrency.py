"""Concurrent writers on separate connections (docs/architecture.md and docs/write-path.md): every append lands or raises
WriteConflict, never a raw database error; positions and seqs stay gapless; duplicates collapse."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from murmur_conversations import services
from murmur_conversations.exceptions import InvalidToolTransition, WriteConflict
from murmur_conversations.models import Conversation, DisplayMessage, Message, ToolCall
from tests.concurrency_helpers import run_threads
from tests.helpers import assert_counters_match_rows

pytestmark = pytest.mark.django_db(transaction=True)
WRITERS = 50


def test_fifty_writers_append_to_one_conversation(conversation: Conversation) -> None:
    def append(index: int) -> list[DisplayMessage]:
        return services.save_message(
            conversation=conversation.pk,
            message={"role": "user", "content": f"writer {index}", "id": f"w{index}"},
        )

    _, errors = run_threads(WRITERS, append)
    landed = WRITERS - sum(isinstance(e, WriteConflict) for e in errors)
    assert Message.objects.filter(conversation=conversation).count() == landed
    assert landed > 0
    assert_counters_match_rows(conversation)
    conversation.refresh_from_db()
    assert conversation.last_event_seq == landed


def test_concurrent_duplicates_store_one_message(conversation: Conversation) -> None:
    def append(index: int) -> list[DisplayMessage]:
        return services.save_message(
            conversation=conversation.pk,
            message={
                "role": "assistant",
                "id": "same",
                "content": [
                    {"type": "text", "text": "once"},
                    {"type": "tool_call", "id": "c", "name": "n", "input": {}},
                ],
            },
        )

    results, _ = run_threads(20, append)
    assert Message.objects.filter(conversation=conversation).count() == 1
    assert ToolCall.objects.filter(conversation=conversation).count() == 1
    row_ids = {tuple(r.pk for r in rows) for rows in results if rows is not None}
    assert len(row_ids) == 1
    assert_counters_match_rows(conversation)


def test_concurrent_start_conversation_returns_one(user: User) -> None:
    def start(index: int) -> uuid.UUID:
        return services.start_conversation(owner=user, source="muse", external_id="same").pk

    results, errors = run_threads(10, start)
    assert len({r for r in results if r is not None}) == 1
    assert all((r is None) == (e is not None) for r, e in zip(results, errors, strict=True))


def test_concurrent_results_end_each_call_once(conversation: Conversation) -> None:
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "tool_call", "id": f"c{i}", "name": "n", "input": {}} for i in range(5)
            ],
        },
    )

    def finish(index: int) -> object:
        call = f"c{index % 5}"
        if index % 2:  # a result never raises but WriteConflict (docs/write-path.md)
            return services.save_message(
                conversation=conversation.pk,
                message={"role": "tool", "tool_call_id": call, "content": str(index)},
            )
        try:
            return services.update_tool_status(
                conversation=conversation.pk,
                status="failed",
                tool_info={"call_id": call, "error": "x"},
            )
        except InvalidToolTransition as error:  # the call had ended already: refused, unchanged
            return error

    results, errors = run_threads(20, finish)
    stored_results = [r for i, r in enumerate(results) if i % 2 and r is not None]
    assert DisplayMessage.objects.filter(
        conversation=conversation, content_type="tool_result"
    ).count() == len(stored_results)
    for call in ToolCall.objects.filter(conversation=conversation):
        assert call.status in ("completed", "failed")
        assert call.finished_at is not None
    assert all((r is None) == (e is not None) for r, e in zip(results, errors, strict=True))
    assert_counters_match_rows(conversation)


@pytest.mark.parametrize("earlier", [10, 5000])
def test_save_message_query_count_does_not_grow(conversation: Conversation, earlier: int) -> None:
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "user" if i % 2 else "assistant", "content": f"m{i}"} for i in range(earlier)
        ],
    )
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "q", "name": "n", "input": {}}],
        },
    )
    with CaptureQueriesContext(connection) as plain:
        services.save_message(
            conversation=conversation, message={"role": "user", "content": "hello", "id": "x1"}
        )
    with CaptureQueriesContext(connection) as result:
        services.save_message(
            conversation=conversation,
            message={"role": "tool", "tool_call_id": "q", "content": "ok"},
        )
    # The same constants after 10 and after 5,000 earlier messages: a plain append and a tool
    # result (which also updates the call and its card) each take a fixed number of queries.
    # On PostgreSQL each is one statement (a planned append, services.fasttools) plus the frame
    # log's INSERT, in one transaction (BEGIN, COMMIT); on SQLite a plain append is a short fixed
    # sequence (services/backends/sqlite.py: the conversation's UPDATE, an INSERT per table, the log's
    # INSERT, between BEGIN IMMEDIATE and COMMIT); every write logs its frames with one INSERT
    # (docs/websocket.md "The frame log").
    expected = {"sqlite": (6, 12), "postgresql": (4, 4)}[connection.vendor]
    assert (len(plain), len(result)) == expected, [q["sql"][:80] for q in result.captured_queries]
