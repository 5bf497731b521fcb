"""The write path's backends (``services/backends/``): how a plan reaches the database."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings

from murmur_conversations import services, signals
from murmur_conversations.exceptions import ConversationNotFound
from murmur_conversations.models import Conversation, Message
from murmur_conversations.services.backends import postgres

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _uses() -> dict[str, int]:
    """Executions of each statement prepared on this server session that appends display rows
    (the session may come from the pool, with statements earlier tests prepared)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, generic_plans + custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE %s AND NOT from_sql",
            ['%INSERT INTO "murmur_conversations_displaymessage"%'],
        )
        return dict(cursor.fetchall())


def _plain_append_name() -> str | None:
    head = postgres.append_sql(False, False, False).split("%(")[0]
    with connection.cursor() as cursor:  # the server holds it with psycopg's $n placeholders
        cursor.execute(
            "SELECT name FROM pg_prepared_statements WHERE split_part(statement, '$', 1) = %s",
            [head],
        )
        found = cursor.fetchone()
    return None if found is None else str(found[0])


def test_the_append_statement_is_prepared_and_reused(conversation: Conversation) -> None:
    """Django connects with ``prepare_threshold=None``; the write path prepares its statement at
    its first use on the connection anyway, and every later write executes that one."""
    services.save_message(conversation=conversation, message={"role": "user", "content": "a"})
    name = _plain_append_name()
    assert name is not None
    before = _uses()
    for text in "bc":
        services.save_message(conversation=conversation, message={"role": "user", "content": text})
    after = _uses()
    assert sum(after.values()) == sum(before.values()) + 2
    assert set(after) == set(before)  # nothing else was prepared
    assert conversation.record_length == 3


@override_settings(MURMUR_CONVERSATIONS={"PREPARE_STATEMENTS": False})
def test_preparing_can_be_turned_off_for_pgbouncer(conversation: Conversation) -> None:
    before = _uses()
    for text in "abc":
        services.save_message(conversation=conversation, message={"role": "user", "content": text})
    assert conversation.record_length == 3
    assert _uses() == before  # no prepared statement was executed, none was made


def test_a_planned_append_signals_and_refreshes_the_instance(conversation: Conversation) -> None:
    received: list[dict[str, Any]] = []

    def receiver(sender: object, **kwargs: Any) -> None:
        received.append(kwargs)

    signals.display_messages_saved.connect(receiver)
    try:
        rows = services.save_messages(
            conversation=conversation,
            messages=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
        )
    finally:
        signals.display_messages_saved.disconnect(receiver)
    assert conversation.record_length == 2  # the caller's instance is refreshed
    assert [r.pk for r in received[0]["rows"]] == [r.pk for r in rows]
    assert received[0]["event_seq"] == 1
    assert all(r.pk is not None and r.message_id is not None for r in rows)


def test_a_known_id_adds_nothing_and_a_missing_conversation_raises(
    conversation: Conversation,
) -> None:
    first = services.save_message(
        conversation=conversation, message={"role": "user", "content": "x", "id": "same"}
    )
    again = services.save_message(
        conversation=conversation, message={"role": "user", "content": "y", "id": "same"}
    )
    assert [r.pk for r in again] == [r.pk for r in first]
    Conversation.objects.filter(pk=conversation.pk).delete()
    with pytest.raises(ConversationNotFound):
        services.save_message(
            conversation=conversation.pk, message={"role": "user", "content": "z"}
        )


def test_inside_a_callers_transaction_it_rolls_back_with_it(
    conversation: Conversation,
) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        services.save_message(conversation=conversation, message={"role": "user", "content": "x"})
        raise RuntimeError
    assert not Message.objects.filter(conversation=conversation).exists()
    conversation.refresh_from_db()
    assert conversation.last_event_seq == 0
