"""The planned append on PostgreSQL (``services/backends/postgres.py``) writes exactly what the general path
writes: the same record rows, display rows, counters, event_seq and signals."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.dispatch import Signal

from murmur_conversations import services, signals
from murmur_conversations.models import Conversation, DisplayMessage, Message
from murmur_conversations.services import plan
from tests.helpers import MakeConversation, assert_counters_match_rows

# Real transactions: inside a caller's transaction the single statement runs in a savepoint; these
# tests are about the path a service call takes on its own (and one about a caller's transaction).
pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BATCH: list[dict[str, Any]] = [
    {"role": "user", "content": "plain text", "id": "u1"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "text", "text": "answer", "citations": []},
            {"type": "image", "url": "https://example.invalid/a.png"},
            {"type": "mystery", "x": 1},
            {"type": "text", "text": ""},
        ],
    },
    {"role": "developer", "content": "be brief"},
    {"role": "user", "content": "<ctx>", "injected": True, "source_id": "src"},
    {"role": "assistant", "content": None, "zeta": {"k": [1, 2]}},
    {"role": "assistant", "refusal": "I can't help with that.", "name": "ops-bot"},
    {"role": "user", "content": "nul\x00 and \ud800 text", "is_error": True},
]


def snapshot(
    conversation: Conversation,
) -> tuple[Sequence[Mapping[str, object]], Sequence[Mapping[str, object]], tuple[object, ...]]:
    conversation.refresh_from_db()
    records = list(
        Message.objects.filter(conversation=conversation)
        .annotate(  # null content is SQL NULL on both paths, never JSON null or ""
            content_null=ExpressionWrapper(Q(content__isnull=True), output_field=BooleanField())
        )
        .order_by("position")
        .values(
            "position",
            "role",
            "content",
            "content_null",
            "tool_call_id",
            "is_error",
            "source_id",
            "extra",
            "created_at",
        )
    )
    rows = list(
        DisplayMessage.objects.filter(conversation=conversation)
        .order_by("seq")
        .values(
            "seq",
            "message__position",
            "message_type",
            "content_type",
            "content",
            "status",
            "metadata",
            "created_event_seq",
            "event_seq",
            "tool_call_id",
            "created_at",
            "updated_at",
        )
    )
    counters = (
        conversation.record_length,
        conversation.transcript_count,
        conversation.last_seq,
        conversation.last_event_seq,
        conversation.saved_at,
    )
    return records, rows, counters


def test_fast_and_general_paths_write_the_same_times(
    make_conversation: MakeConversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/write-path.md "Times": the given times land the same on both paths."""
    start = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    fast = make_conversation(created_at=start)
    general = make_conversation(created_at=start)
    times: list[datetime | None] = [start + timedelta(seconds=s) for s in (5, 9, 7, 1, 3, 4, 2)]
    times[2] = None  # an untimed message takes the call's own time
    frozen = datetime(2024, 3, 1, 9, 0, 8, tzinfo=UTC)
    monkeypatch.setattr("django.utils.timezone.now", lambda: frozen)
    services.save_messages(conversation=fast, messages=BATCH, times=times)
    monkeypatch.setattr(plan, "plannable", lambda *args: False)
    services.save_messages(conversation=general, messages=BATCH, times=times)
    assert snapshot(fast) == snapshot(general)
    assert snapshot(fast)[2][-1] == start + timedelta(seconds=9)
    # an earlier batch never moves saved_at backwards, on either path
    monkeypatch.undo()
    for conversation in (fast, general):
        services.save_messages(
            conversation=conversation, messages=[{"role": "user", "content": "x"}], times=[start]
        )
        conversation.refresh_from_db()
        assert conversation.saved_at == start + timedelta(seconds=9)


def announced(write: Callable[[], object]) -> list[tuple[str, int, list[int]]]:
    """Run ``write`` and return the signals it sent, in order: (name, event_seq, row seqs)."""
    sent: list[tuple[str, int, list[int]]] = []
    names = [name for name in signals.__all__ if name not in ("conversation_deleted", "delta")]
    names_of = {getattr(signals, name): name for name in names}

    def receiver(sender: object, signal: Signal, **kwargs: Any) -> None:
        rows = kwargs.get("rows") or ([kwargs["row"]] if "row" in kwargs else [])
        sent.append((names_of[signal], kwargs["event_seq"], [r.seq for r in rows]))

    for signal in names_of:
        signal.connect(receiver)
    try:
        write()
    finally:
        for signal in names_of:
            signal.disconnect(receiver)
    return sent


def test_fast_and_general_paths_write_the_same(
    make_conversation: MakeConversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    monkeypatch.setattr("django.utils.timezone.now", lambda: frozen)
    fast, general = make_conversation(created_at=frozen), make_conversation(created_at=frozen)
    assert plan.plannable([], False) is False
    returned: dict[uuid.UUID, list[DisplayMessage]] = {}

    def save(conversation: Conversation) -> None:
        returned[conversation.pk] = services.save_messages(
            conversation=conversation, messages=BATCH
        )
        services.save_message(conversation=conversation, message={"role": "user", "content": "x"})

    fast_signals = announced(lambda: save(fast))
    monkeypatch.setattr(plan, "plannable", lambda *args: False)
    general_signals = announced(lambda: save(general))
    assert snapshot(fast) == snapshot(general)
    nulls = [record["content_null"] for record in snapshot(fast)[0]]
    assert nulls == [m.get("content") is None for m in BATCH] + [False]
    assert [(r.seq, r.content) for r in returned[fast.pk]] == [
        (r.seq, r.content) for r in returned[general.pk]
    ]
    assert fast_signals == general_signals  # the same signals, in the same order
    assert [name for name, _, _ in fast_signals] == [
        "display_messages_saved",
        "conversation_saved",
    ] * 2
    assert_counters_match_rows(fast)


def test_fast_path_signals_and_instance_refresh(conversation: Conversation) -> None:
    received: list[dict[str, Any]] = []

    def receiver(sender: object, **kwargs: Any) -> None:
        received.append(kwargs)

    signals.display_messages_saved.connect(receiver)
    try:
        rows = services.save_messages(conversation=conversation, messages=BATCH[:2])
    finally:
        signals.display_messages_saved.disconnect(receiver)
    assert conversation.record_length == 2  # the caller's instance is refreshed
    assert [r.pk for r in received[0]["rows"]] == [r.pk for r in rows]
    assert received[0]["event_seq"] == 1
    assert all(r.pk is not None and r.message_id is not None for r in rows)


def test_known_id_and_missing_conversation_fall_back(conversation: Conversation) -> None:
    first = services.save_message(
        conversation=conversation, message={"role": "user", "content": "x", "id": "same"}
    )
    again = services.save_message(
        conversation=conversation, message={"role": "user", "content": "y", "id": "same"}
    )
    assert [r.pk for r in again] == [r.pk for r in first]
    Conversation.objects.filter(pk=conversation.pk).delete()
    from murmur_conversations.exceptions import ConversationNotFound

    with pytest.raises(ConversationNotFound):
        services.save_message(
            conversation=conversation.pk, message={"role": "user", "content": "z"}
        )


def test_fast_path_inside_a_callers_transaction_rolls_back_with_it(
    conversation: Conversation,
) -> None:
    from django.db import transaction

    with pytest.raises(RuntimeError), transaction.atomic():
        services.save_message(conversation=conversation, message={"role": "user", "content": "x"})
        raise RuntimeError
    assert not Message.objects.filter(conversation=conversation).exists()
    conversation.refresh_from_db()
    assert conversation.last_event_seq == 0
