"""Times given by a writer (docs/write-path.md "Times"): each message stamped with its own time,
``saved_at`` the latest and never backwards, numbers still from the locked counters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from murmur_conversations import services
from murmur_conversations.exceptions import InvalidContent
from murmur_conversations.models import Conversation, DisplayMessage, Message, ToolCall
from tests.helpers import assert_counters_match_rows

pytestmark = pytest.mark.django_db

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_start_conversation_dates_a_new_conversation_only(user: User) -> None:
    conversation = services.start_conversation(
        owner=user, source="x", external_id="k", created_at=at(0)
    )
    assert (conversation.created_at, conversation.saved_at) == (at(0), at(0))
    again = services.start_conversation(owner=user, source="x", external_id="k", created_at=at(-60))
    assert again.pk == conversation.pk
    again.refresh_from_db()
    assert (again.created_at, again.saved_at) == (at(0), at(0))


def test_each_message_is_stamped_and_saved_at_is_the_latest(user: User) -> None:
    conversation = services.start_conversation(owner=user, created_at=at(0))
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "first", "id": "u1"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "calling"},
                {"type": "tool_call", "id": "c1", "name": "bash", "input": {}},
            ],
            "id": "a1",
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok", "id": "r1"},
        # an earlier time after a later one: positions still follow the given order
        {"role": "assistant", "content": "done", "id": "a2"},
    ]
    services.save_messages(
        conversation=conversation, messages=messages, times=[at(1), at(2), at(5), at(3)]
    )
    conversation.refresh_from_db()
    assert conversation.saved_at == at(5)
    assert conversation.created_at == at(0)
    record = {m.message_id: (m.position, m.created_at) for m in Message.objects.all()}
    assert record == {"u1": (1, at(1)), "a1": (2, at(2)), "r1": (3, at(5)), "a2": (4, at(3))}
    rows = list(DisplayMessage.objects.filter(conversation=conversation).order_by("seq"))
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    for row in rows:
        assert row.message is not None
        assert row.created_at == record[row.message.message_id][1]
    call = ToolCall.objects.get(call_id="c1")
    assert (call.status, call.created_at, call.finished_at) == ("completed", at(2), at(5))
    card = DisplayMessage.objects.get(tool_call=call, content_type="tool_call")
    assert card.created_at == at(2)  # created and completed in one batch: one event
    assert_counters_match_rows(conversation)


def test_a_later_result_stamps_the_existing_card(user: User) -> None:
    conversation = services.start_conversation(owner=user, created_at=at(0))
    call = {"type": "tool_call", "id": "c1", "name": "bash", "input": {}}
    services.save_messages(
        conversation=conversation,
        messages=[{"role": "assistant", "content": [call]}],
        times=[at(1)],
    )
    services.save_messages(
        conversation=conversation,
        messages=[{"role": "tool", "tool_call_id": "c1", "content": "ok"}],
        times=[at(4)],
    )
    card = DisplayMessage.objects.get(content_type="tool_call")
    assert (card.created_at, card.updated_at) == (at(1), at(4))
    assert ToolCall.objects.get().finished_at == at(4)


def test_saved_at_never_moves_backwards(user: User) -> None:
    conversation = services.start_conversation(owner=user, created_at=at(0))
    services.save_messages(
        conversation=conversation, messages=[{"role": "user", "content": "late"}], times=[at(30)]
    )
    services.save_messages(
        conversation=conversation, messages=[{"role": "user", "content": "early"}], times=[at(10)]
    )
    conversation.refresh_from_db()
    assert conversation.saved_at == at(30)
    # a conversation whose log lies in the future (a skewed clock) keeps that time too
    future = timezone.now() + timedelta(days=1)
    services.save_messages(
        conversation=conversation, messages=[{"role": "user", "content": "x"}], times=[future]
    )
    services.save_message(conversation=conversation, message={"role": "user", "content": "now"})
    conversation.refresh_from_db()
    assert conversation.saved_at == future
    assert Message.objects.get(content="now").created_at <= future


def test_untimed_messages_in_a_timed_batch_take_now(user: User) -> None:
    conversation = services.start_conversation(owner=user, created_at=at(0))
    before = timezone.now()
    services.save_messages(
        conversation=conversation,
        messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        times=[at(1), None],
    )
    conversation.refresh_from_db()
    assert Message.objects.get(content="a").created_at == at(1)
    assert Message.objects.get(content="b").created_at >= before
    assert conversation.saved_at >= before


def test_a_known_message_again_changes_no_time(user: User) -> None:
    conversation = services.start_conversation(owner=user, created_at=at(0))
    message = {"role": "user", "content": "a", "id": "same"}
    services.save_messages(conversation=conversation, messages=[message], times=[at(1)])
    services.save_messages(conversation=conversation, messages=[message], times=[at(9)])
    conversation.refresh_from_db()
    assert conversation.saved_at == at(1)
    assert Message.objects.get().created_at == at(1)


@pytest.mark.parametrize(
    ("times", "reason"),
    [
        ([datetime(2024, 1, 1)], "timezone-aware"),
        (["2024-01-01T00:00:00Z"], "must be a datetime"),
        ([at(0), at(1)], "2 entries for 1 messages"),
    ],
)
def test_bad_times_are_refused_and_nothing_is_written(
    user: User, times: list[Any], reason: str
) -> None:
    conversation = services.start_conversation(owner=user, created_at=at(0))
    with pytest.raises(InvalidContent, match=reason):
        services.save_messages(
            conversation=conversation, messages=[{"role": "user", "content": "a"}], times=times
        )
    with pytest.raises(InvalidContent, match="timezone-aware"):
        services.start_conversation(owner=user, created_at=datetime(2024, 1, 1))
    assert not Message.objects.exists()
    assert Conversation.objects.count() == 1


def test_other_services_take_the_time_they_are_given(user: User) -> None:
    conversation = services.start_conversation(owner=user, created_at=at(0))
    services.save_messages(
        conversation=conversation,
        messages=[
            {
                "role": "assistant",
                "content": [{"type": "tool_call", "id": "c1", "name": "bash", "input": {}}],
            }
        ],
        times=[at(1)],
    )
    services.update_tool_status(
        conversation=conversation, status="executing", tool_info={"call_id": "c1"}, at=at(2)
    )
    services.update_tool_status(
        conversation=conversation,
        status="interrupted",
        tool_info={"call_id": "c1", "interrupt_reason": "log_ended"},
        at=at(3),
    )
    call = ToolCall.objects.get()
    assert (call.started_at, call.status) == (at(2), "interrupted")
    notice = services.save_synthetic_message(
        conversation=conversation,
        message_type="system",
        content_type="notification",
        content={"text": "compacted"},
        at=at(4),
    )
    assert notice.created_at == at(4)
    services.set_status(conversation=conversation, status="error", at=at(6))
    services.update_conversation(conversation=conversation, title="t", at=at(5))
    conversation.refresh_from_db()
    assert conversation.saved_at == at(6)
    assert_counters_match_rows(conversation)
