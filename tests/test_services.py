"""The write path (docs/architecture.md and docs/write-path.md): splitting, de-duplication, tool lifecycle,
counters, event_seq, signals after commit, and the errors of every bad input."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from murmur_conversations import services, signals
from murmur_conversations.exceptions import (
    ConversationNotFound,
    InvalidContent,
    InvalidPendingAsk,
    InvalidStatus,
    InvalidToolTransition,
    OwnershipConflict,
    ToolCallNotFound,
)
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    SourceRecord,
    ToolCall,
)
from tests.helpers import MakeConversation, MakeUser, assert_counters_match_rows

# Tests run in a transaction that is rolled back; ``with committed():`` runs the on_commit callbacks
# (the signals) of what it wraps, as a commit would. The few tests about commit and rollback
# themselves commit for real (``transaction=True``).
pytestmark = pytest.mark.django_db


#: ``with committed():`` (the fixture), and the signals ``captured`` (name, arguments).
Committed = Callable[[], AbstractContextManager[list[Callable[[], object]]]]
Captured = list[tuple[str, dict[str, Any]]]
NOT_TEXT: Any = 5  # where a service is given the wrong type on purpose


def rows_of(conversation: Conversation) -> list[DisplayMessage]:
    return list(DisplayMessage.objects.filter(conversation=conversation).order_by("seq"))


@pytest.fixture
def committed(
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> Committed:
    """``with committed():`` runs, at its end, the on_commit callbacks registered inside it."""
    return functools.partial(django_capture_on_commit_callbacks, execute=True)


@pytest.fixture
def captured() -> Iterator[Captured]:
    """Collect (signal name, kwargs) for every signal the app sends, without the frame log's
    hand-over to the realtime receivers (``frames``, ``sidebar``, ``logged``; tests/test_frame_log.py)."""
    events: Captured = []
    receivers = []
    for name in (
        "display_messages_saved",
        "display_message_updated",
        "tool_call_updated",
        "status_changed",
        "conversation_updated",
        "conversation_saved",
        "conversation_deleted",
        "delta",
    ):

        def receiver(
            sender: object, signal: object = None, _name: str = name, **kwargs: Any
        ) -> None:
            plumbing = ("frames", "sidebar", "frame_texts", "sidebar_text", "logged")
            events.append((_name, {k: v for k, v in kwargs.items() if k not in plumbing}))

        getattr(signals, name).connect(receiver, weak=False)
        receivers.append((name, receiver))
    yield events
    for name, receiver in receivers:
        getattr(signals, name).disconnect(receiver)


# ----------------------------------------------------------------- start_conversation


def test_start_conversation_defaults(user: User) -> None:
    conversation = services.start_conversation(owner=user, title="Hello")
    assert conversation.owner == user
    assert conversation.status == "idle"
    assert conversation.pending_ask is None
    assert (
        conversation.record_length,
        conversation.transcript_count,
        conversation.last_seq,
        conversation.last_event_seq,
    ) == (0, 0, 0, 0)
    assert conversation.metadata == {}


def test_start_conversation_same_id_returns_existing_and_applies_owner_rule(
    make_user: MakeUser,
) -> None:
    alice, bob = make_user(), make_user()
    first = services.start_conversation(owner=None, title="ownerless")
    claimed = services.start_conversation(owner=alice, conversation_id=first.pk)
    assert claimed.pk == first.pk
    assert Conversation.objects.get(pk=first.pk).owner == alice
    again = services.start_conversation(owner=None, conversation_id=first.pk)
    assert again.owner_id == alice.pk
    with pytest.raises(OwnershipConflict):
        services.start_conversation(owner=bob, conversation_id=str(first.pk))
    assert Conversation.objects.get(pk=first.pk).owner == alice


def test_start_conversation_external_key_is_scoped_to_owner(make_user: MakeUser) -> None:
    alice, bob = make_user(), make_user()
    a1 = services.start_conversation(owner=alice, source="muse", external_id="s-1")
    a2 = services.start_conversation(owner=alice, source="muse", external_id="s-1")
    b1 = services.start_conversation(owner=bob, source="muse", external_id="s-1")
    n1 = services.start_conversation(owner=None, source="muse", external_id="s-1")
    n2 = services.start_conversation(owner=None, source="muse", external_id="s-1")
    assert a1.pk == a2.pk
    assert n1.pk == n2.pk
    assert len({a1.pk, b1.pk, n1.pk}) == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"title": "x" * 256}, "title"),
        ({"title": 5}, "title"),
        ({"metadata": []}, "metadata"),
        ({"metadata": {"big": "x" * 70_000}}, "metadata"),
        ({"metadata": {1: "x"}}, "keys"),
    ],
)
def test_start_conversation_rejects_bad_fields(
    user: User, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidContent, match=message):
        services.start_conversation(owner=user, **kwargs)
    assert not Conversation.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_start_conversation_sends_saved_with_event_zero(user: User, captured: Captured) -> None:
    with transaction.atomic():
        conversation = services.start_conversation(owner=user)
        assert captured == []  # only after commit
    assert captured == [("conversation_saved", {"conversation": conversation, "event_seq": 0})]


# ----------------------------------------------------------------- save_message split


def test_text_message_makes_one_row_and_record(conversation: Conversation) -> None:
    rows = services.save_message(
        conversation=conversation, message={"role": "user", "content": "Hi there"}
    )
    assert [(r.message_type, r.content_type, r.content, r.status) for r in rows] == [
        ("user", "text", {"text": "Hi there"}, "completed")
    ]
    record = Message.objects.get(conversation=conversation)
    assert record.position == 1
    assert record.message_id.startswith("msg_") and len(record.message_id) == 36
    assert record.content == "Hi there"
    assert rows[0].message_id == record.pk
    assert rows[0].seq == 1 and rows[0].event_seq == rows[0].created_event_seq == 1
    assert_counters_match_rows(conversation)
    assert conversation.transcript_count == 1


def test_blocks_split_in_order_with_calls_after_text(conversation: Conversation) -> None:
    rows = services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "id": "m1",
            "content": [
                {"type": "thinking", "text": "hmm", "signature": "sig"},
                {"type": "tool_call", "id": "c1", "name": "read", "input": {"path": "a"}},
                {"type": "text", "text": ""},
                {"type": "text", "text": "Reading"},
                {"type": "image", "url": "https://example.invalid/x.png"},
                {"type": "mystery", "value": 1},
            ],
        },
    )
    assert [(r.message_type, r.content_type) for r in rows] == [
        ("assistant", "thinking"),
        ("assistant", "text"),
        ("assistant", "image"),
        ("assistant", "structured_data"),
        ("assistant", "tool_call"),
    ]
    assert rows[0].content == {"text": "hmm", "signature": "sig"}
    assert rows[3].content == {"format": "mystery", "data": {"type": "mystery", "value": 1}}
    card = rows[4]
    assert card.content == {"call_id": "c1", "name": "read", "arguments": {"path": "a"}}
    assert card.status == "pending"
    call = ToolCall.objects.get(conversation=conversation, call_id="c1")
    assert card.tool_call == call and call.status == "pending"
    assert [r.seq for r in rows] == [1, 2, 3, 4, 5]
    assert {r.event_seq for r in rows} == {1}
    assert_counters_match_rows(conversation)


def test_openai_tool_calls_parse_arguments(conversation: Conversation) -> None:
    rows = services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "not json"}},
            ],
        },
    )
    assert [r.content["arguments"] for r in rows] == [{"x": 1}, "not json"]
    record = Message.objects.get(conversation=conversation)
    assert record.extra["tool_calls"][0]["function"]["arguments"] == '{"x": 1}'
    assert record.content is None  # as given


def test_call_without_id_gets_generated_id(conversation: Conversation) -> None:
    rows = services.save_message(
        conversation=conversation,
        message={"role": "assistant", "content": [{"type": "tool_call", "name": "n", "input": {}}]},
    )
    call_id = rows[0].content["call_id"]
    assert call_id.startswith("call_") and len(call_id) == 37


def test_known_call_id_adds_no_row(conversation: Conversation) -> None:
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "c", "name": "n", "input": {}}],
        },
    )
    rows = services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "c", "name": "other", "input": {"z": 1}}],
        },
    )
    assert rows == []
    assert ToolCall.objects.get(call_id="c").name == "n"
    assert_counters_match_rows(conversation)


def test_unknown_role_and_injected_show_as_notices(conversation: Conversation) -> None:
    rows = services.save_message(
        conversation=conversation, message={"role": "developer", "content": "be nice"}
    )
    assert [(r.message_type, r.content_type, r.metadata) for r in rows] == [
        ("system", "notification", {"role": "developer"})
    ]
    rows = services.save_message(
        conversation=conversation,
        message={"role": "user", "content": "<env>ctx</env>", "injected": True},
    )
    assert [(r.message_type, r.content_type, r.content, r.metadata) for r in rows] == [
        ("system", "notification", {"text": "<env>ctx</env>"}, {"injected": True})
    ]
    record = Message.objects.get(conversation=conversation, position=2)
    assert record.extra == {"injected": True}
    conversation.refresh_from_db()
    assert conversation.transcript_count == 0
    assert_counters_match_rows(conversation)


def test_extra_keeps_unknown_keys_in_order(conversation: Conversation) -> None:
    services.save_message(
        conversation=conversation,
        message={
            "role": "user",
            "content": "x",
            "zeta": 1,
            "alpha": {"b": 2},
            "is_interrupt": False,
        },
    )
    record = Message.objects.get(conversation=conversation)
    assert record.extra == {"zeta": 1, "alpha": {"b": 2}, "is_interrupt": False}


# ----------------------------------------------------------------- tool results


def _call(conversation: Conversation, call_id: str = "c1", name: str = "tool") -> None:
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": call_id, "name": name, "input": {}}],
        },
    )


def test_result_completes_call_and_updates_card(
    conversation: Conversation,
    captured: Captured,
    committed: Committed,
) -> None:
    _call(conversation)
    with committed():
        rows = services.save_message(
            conversation=conversation,
            message={"role": "tool", "tool_call_id": "c1", "content": "42", "id": "r1"},
        )
    assert len(rows) == 1
    result = rows[0]
    assert (result.message_type, result.content_type) == ("tool", "tool_result")
    assert result.content == {
        "tool_call_id": "c1",
        "name": "tool",
        "content": "42",
        "is_error": False,
        "is_interrupt": False,
    }
    call = ToolCall.objects.get(call_id="c1")
    assert call.status == "completed" and call.result == "42" and call.finished_at
    card = DisplayMessage.objects.get(tool_call=call, content_type="tool_call")
    assert card.status == "completed" and card.metadata["result"] == "42"
    assert card.event_seq == result.event_seq == call.event_seq == 2
    assert card.created_event_seq == 1
    names = [name for name, _ in captured]
    assert names == [
        "display_messages_saved",
        "display_message_updated",
        "tool_call_updated",
        "conversation_saved",
    ]
    assert_counters_match_rows(conversation)


def test_error_and_interrupt_results(conversation: Conversation) -> None:
    _call(conversation, "e")
    _call(conversation, "i")
    services.save_message(
        conversation=conversation,
        message={"role": "tool", "tool_call_id": "e", "content": "boom", "is_error": True},
    )
    services.save_message(
        conversation=conversation,
        message={
            "role": "tool",
            "tool_call_id": "i",
            "content": "Which file?",
            "is_interrupt": True,
        },
    )
    failed = ToolCall.objects.get(call_id="e")
    assert failed.status == "failed" and failed.error == "boom"
    interrupted = ToolCall.objects.get(call_id="i")
    assert interrupted.status == "interrupted"
    assert interrupted.interrupt_reason == "awaiting_input"
    assert Message.objects.get(tool_call_id="e").is_error is True


def test_orphan_and_late_results_never_raise(conversation: Conversation) -> None:
    rows = services.save_message(
        conversation=conversation,
        message={
            "role": "user",
            "tool_call_id": "nope",
            "content": [{"type": "text", "text": "x"}],
        },
    )
    assert rows[0].metadata == {"orphan": True}
    assert rows[0].content["name"] == ""
    assert rows[0].tool_call is None
    _call(conversation)
    services.save_message(
        conversation=conversation,
        message={"role": "tool", "tool_call_id": "c1", "content": "first"},
    )
    late = services.save_message(
        conversation=conversation,
        message={"role": "tool", "tool_call_id": "c1", "content": "again", "is_error": True},
    )
    assert late[0].metadata == {"late": True}
    call = ToolCall.objects.get(call_id="c1")
    assert call.status == "completed" and call.result == "first"
    assert_counters_match_rows(conversation)


def test_call_and_result_in_one_batch(
    conversation: Conversation,
    captured: Captured,
    committed: Committed,
) -> None:
    with committed():
        rows = services.save_messages(
            conversation=conversation,
            messages=[
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_call", "id": "b", "name": "n", "input": {}}],
                },
                {"role": "tool", "tool_call_id": "b", "content": "ok"},
                {"role": "assistant", "content": "done"},
            ],
        )
    assert [r.content_type for r in rows] == ["text", "tool_call", "tool_result", "text"]
    assert rows[1].status == "completed" and rows[1].metadata == {"result": "ok"}
    assert {r.event_seq for r in rows} == {1}
    assert ToolCall.objects.get(call_id="b").status == "completed"
    assert [name for name, _ in captured] == [
        "display_messages_saved",
        "tool_call_updated",
        "conversation_saved",
    ]
    assert_counters_match_rows(conversation)
    conversation.refresh_from_db()
    assert conversation.transcript_count == 2


# ----------------------------------------------------------------- de-duplication


def test_known_message_id_is_a_noop(
    conversation: Conversation,
    captured: Captured,
    committed: Committed,
) -> None:
    with committed():
        first = services.save_message(
            conversation=conversation, message={"role": "user", "content": "a", "id": "same"}
        )
    assert captured != []  # a positive control: the first one sent its signals
    captured.clear()
    with committed():
        again = services.save_message(
            conversation=conversation,
            message={"role": "user", "content": "different", "id": "same"},
        )
    assert [r.pk for r in again] == [r.pk for r in first]
    assert captured == []
    conversation.refresh_from_db()
    assert conversation.record_length == 1 and conversation.last_event_seq == 1


def test_batch_deduplicates_within_itself_and_against_store(conversation: Conversation) -> None:
    services.save_message(
        conversation=conversation, message={"role": "user", "content": "a", "id": "1"}
    )
    rows = services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "user", "content": "a", "id": "1"},
            {"role": "user", "content": "b", "id": "2"},
            {"role": "user", "content": "b again", "id": "2"},
        ],
    )
    assert [r.content["text"] for r in rows] == ["a", "b"]
    assert Message.objects.filter(conversation=conversation).count() == 2
    assert_counters_match_rows(conversation)


# ----------------------------------------------------------------- tool status lifecycle


def test_tool_status_lifecycle(
    conversation: Conversation,
    captured: Captured,
    committed: Committed,
) -> None:
    _call(conversation)
    captured.clear()
    with committed():
        row = services.update_tool_status(
            conversation=conversation,
            status="executing",
            tool_info={"call_id": "c1", "display_text": "Running"},
        )
        assert row.status == "executing" and row.metadata == {"display_text": "Running"}
        call = ToolCall.objects.get(call_id="c1")
        assert call.started_at is not None and call.event_seq == 2
        again = services.update_tool_status(
            conversation=conversation, status="executing", tool_info={"call_id": "c1"}
        )
        assert again.event_seq == 2
        row = services.update_tool_status(
            conversation=conversation,
            status="completed",
            tool_info={"call_id": "c1", "result": {"n": 1}},
        )
        assert row.metadata == {"display_text": "Running", "result": {"n": 1}}
        call.refresh_from_db()
        assert call.status == "completed" and call.finished_at and call.result == {"n": 1}
        with pytest.raises(InvalidToolTransition):
            services.update_tool_status(
                conversation=conversation, status="executing", tool_info={"call_id": "c1"}
            )
    assert [n for n, _ in captured].count("conversation_saved") == 2


@pytest.mark.parametrize(
    ("path", "bad"),
    [
        (["completed"], "executing"),
        (["failed"], "pending"),
        (["cancelled"], "completed"),
        (["interrupted"], "executing"),
        (["interrupted"], "pending"),
        ([], "bogus"),
    ],
)
def test_disallowed_moves_change_nothing(
    conversation: Conversation, path: list[str], bad: str
) -> None:
    _call(conversation)
    for status in path:
        services.update_tool_status(
            conversation=conversation, status=status, tool_info={"call_id": "c1"}
        )
    before = conversation.__class__.objects.get(pk=conversation.pk).last_event_seq
    with pytest.raises(InvalidToolTransition):
        services.update_tool_status(
            conversation=conversation, status=bad, tool_info={"call_id": "c1"}
        )
    assert conversation.__class__.objects.get(pk=conversation.pk).last_event_seq == before


def test_interrupt_reason_and_unknown_call(conversation: Conversation) -> None:
    _call(conversation)
    services.update_tool_status(
        conversation=conversation,
        status="interrupted",
        tool_info={"call_id": "c1", "interrupt_reason": "log_ended"},
    )
    assert ToolCall.objects.get(call_id="c1").interrupt_reason == "log_ended"
    with pytest.raises(InvalidToolTransition):
        services.update_tool_status(
            conversation=conversation,
            status="failed",
            tool_info={"call_id": "c1", "interrupt_reason": "nap"},
        )
    with pytest.raises(ToolCallNotFound):
        services.update_tool_status(
            conversation=conversation, status="completed", tool_info={"call_id": "missing"}
        )
    services.update_tool_status(
        conversation=conversation, status="failed", tool_info={"call_id": "c1", "error": "E"}
    )
    call = ToolCall.objects.get(call_id="c1")
    assert (call.status, call.error, call.interrupt_reason) == ("failed", "E", "")


def test_resolve_tool_result(conversation: Conversation) -> None:
    _call(conversation)
    services.save_message(
        conversation=conversation,
        message={"role": "tool", "tool_call_id": "c1", "content": "Which?", "is_interrupt": True},
    )
    row = services.resolve_tool_result(
        conversation=conversation, tool_call_id="c1", result_content="The blue one"
    )
    assert row.content["content"] == "The blue one" and row.content["is_interrupt"] is False
    assert ToolCall.objects.get(call_id="c1").status == "completed"
    assert Message.objects.get(tool_call_id="c1").content == "Which?"  # record untouched
    with pytest.raises(ToolCallNotFound):
        services.resolve_tool_result(
            conversation=conversation, tool_call_id="c1", result_content="x"
        )
    with pytest.raises(ToolCallNotFound):
        services.resolve_tool_result(
            conversation=conversation, tool_call_id="zz", result_content="x"
        )


# ----------------------------------------------------------------- synthetic, status, update


def test_synthetic_message(conversation: Conversation) -> None:
    row = services.save_synthetic_message(
        conversation=conversation,
        message_type="system",
        content_type="error",
        content={"text": "Rate limited"},
    )
    assert row.message_id is None and row.seq == 1
    with pytest.raises(InvalidContent, match="invalid structure for content_type image"):
        services.save_synthetic_message(
            conversation=conversation,
            message_type="system",
            content_type="image",
            content={"data": "x"},
        )
    with pytest.raises(InvalidContent):
        services.save_synthetic_message(
            conversation=conversation,
            message_type="robot",
            content_type="text",
            content={"text": "x"},
        )
    assert_counters_match_rows(conversation)


def test_set_status_and_pending_ask(
    conversation: Conversation,
    captured: Captured,
    committed: Committed,
) -> None:
    ask = {"question": "Proceed?", "tool": "approve", "component": {"id": "c"}, "pauseData": [1]}
    with committed():
        conversation = services.set_status(
            conversation=conversation, status="paused", pending_ask=ask
        )
    assert conversation.pending_ask == ask and conversation.format == "flowchart-v1"
    assert [n for n, _ in captured] == ["status_changed", "conversation_saved"]
    captured.clear()
    with committed():
        services.set_status(conversation=conversation, status="paused", pending_ask=ask)
    assert captured == []
    conversation = services.set_status(conversation=conversation, status="running")
    assert conversation.pending_ask is None
    with pytest.raises(InvalidPendingAsk):
        services.set_status(
            conversation=conversation, status="running", pending_ask={"question": "x"}
        )
    bad_asks: tuple[Any, ...] = ({"question": 1}, {"component": {"id": 3}}, ["x"])
    for bad in bad_asks:
        with pytest.raises(InvalidPendingAsk):
            services.set_status(conversation=conversation, status="paused", pending_ask=bad)
    with pytest.raises(InvalidStatus):
        services.set_status(conversation=conversation, status="sleeping")


def test_update_conversation(
    conversation: Conversation,
    captured: Captured,
    committed: Committed,
) -> None:
    with committed():
        updated = services.update_conversation(conversation=conversation, title="New")
    assert updated.title == "New" and updated.last_event_seq == 1
    assert [n for n, _ in captured] == ["conversation_updated", "conversation_saved"]
    captured.clear()
    with committed():
        services.update_conversation(conversation=conversation, title="New")
    assert captured == []
    with pytest.raises(InvalidContent):
        services.update_conversation(conversation=conversation, metadata="nope")


def test_cancel_run(conversation: Conversation) -> None:
    _call(conversation, "a")
    _call(conversation, "b")
    services.update_tool_status(
        conversation=conversation, status="completed", tool_info={"call_id": "b"}
    )
    services.set_status(conversation=conversation, status="paused", pending_ask={"question": "?"})
    result = services.cancel_run(conversation=conversation)
    assert result.status == "cancelled" and result.pending_ask is None
    assert ToolCall.objects.get(call_id="a").status == "cancelled"
    assert ToolCall.objects.get(call_id="b").status == "completed"
    notice = rows_of(conversation)[-1]
    assert notice.content == {"text": "Agent execution cancelled.", "stop_reason": "cancelled"}
    card = DisplayMessage.objects.get(tool_call__call_id="a")
    assert card.status == "cancelled" and card.event_seq == notice.event_seq
    before = Conversation.objects.get(pk=conversation.pk).last_event_seq
    services.cancel_run(conversation=conversation)
    assert Conversation.objects.get(pk=conversation.pk).last_event_seq == before


def test_recover_interrupted(
    conversation: Conversation, make_conversation: MakeConversation
) -> None:
    _call(conversation)
    services.set_status(conversation=conversation, status="running")
    fresh = make_conversation()
    services.set_status(conversation=fresh, status="running")
    Conversation.objects.filter(pk=conversation.pk).update(
        saved_at=timezone.now() - timedelta(hours=1)
    )
    assert services.recover_interrupted(stale_after=timedelta(minutes=10)) == 1
    conversation.refresh_from_db()
    assert conversation.status == "interrupted"
    call = ToolCall.objects.get(call_id="c1")
    assert (call.status, call.interrupt_reason) == ("interrupted", "worker_lost")
    assert Conversation.objects.get(pk=fresh.pk).status == "running"
    assert services.recover_interrupted() == 0


# ----------------------------------------------------------------- delete and purge


def test_delete_conversation(
    conversation: Conversation,
    captured: Captured,
    committed: Committed,
) -> None:
    _call(conversation)
    services.save_source_records(
        conversation=conversation,
        source="muse",
        records=[{"source_key": "1", "line_number": 1, "raw": "{}", "record_type": "x"}],
    )
    owner_id = conversation.owner_id
    captured.clear()
    with committed():
        services.delete_conversation(conversation=conversation)
    for model in (Conversation, Message, DisplayMessage, ToolCall, SourceRecord):
        assert not model.objects.exists()
    assert captured == [
        ("conversation_deleted", {"conversation_id": conversation.pk, "owner_id": owner_id})
    ]
    with pytest.raises(ConversationNotFound):
        services.delete_conversation(conversation=conversation.pk)


def test_purge_conversations(make_user: MakeUser, make_conversation: MakeConversation) -> None:
    alice, bob = make_user(), make_user()
    for _ in range(3):
        make_conversation(owner=alice)
    kept = make_conversation(owner=bob)
    assert services.purge_conversations(owner=alice, limit=2) == (2, True)
    assert services.purge_conversations(owner=alice, limit=2) == (1, False)
    assert list(Conversation.objects.all()) == [kept]
    assert services.purge_conversations(older_than=timedelta(days=1)) == (0, False)
    with pytest.raises(ValueError, match="owner or older_than"):
        services.purge_conversations()


# ----------------------------------------------------------------- source records


def test_save_source_records_skips_existing(conversation: Conversation) -> None:
    records = [
        {"source_key": str(i), "line_number": i, "raw": '{"b":1,"a":2}', "record_type": "t"}
        for i in range(3)
    ]
    assert (
        services.save_source_records(conversation=conversation, source="muse", records=records) == 3
    )
    assert (
        services.save_source_records(conversation=conversation, source="muse", records=records) == 0
    )
    assert SourceRecord.objects.values_list("raw", flat=True)[0] == '{"b":1,"a":2}'
    conversation.refresh_from_db()
    assert conversation.last_event_seq == 0
    with pytest.raises(InvalidContent):
        services.save_source_records(
            conversation=conversation, source="muse", records=[{"source_key": "", "raw": "x"}]
        )


# ----------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("message", "match"),
    [
        ("not a dict", "JSON object"),
        ({"content": "x"}, "role"),
        ({"role": "", "content": "x"}, "role"),
        ({"role": "user", "content": 5}, "content"),
        ({"role": "user", "content": ["plain string block"]}, "block 0"),
        ({"role": "user", "content": [{"text": "no type"}]}, "block 0"),
        ({"role": "user", "content": "x", "id": 7}, "'id'"),
        ({"role": "user", "content": "x", "id": "i" * 256}, "'id'"),
        ({"role": "user", "content": "x", "is_error": "yes"}, "is_error"),
        ({"role": "user", "content": "x", "tool_calls": "nope"}, "tool_calls"),
        ({"role": "user", "content": "x", "weird": {1, 2}}, "set"),
        ({"role": "user", "content": "x", "n": float("nan")}, "NaN"),
    ],
)
def test_bad_messages_raise_and_write_nothing(
    conversation: Conversation, message: Any, match: str
) -> None:
    with pytest.raises(InvalidContent, match=match):
        services.save_messages(
            conversation=conversation, messages=[{"role": "user", "content": "fine"}, message]
        )
    assert not Message.objects.exists()
    conversation.refresh_from_db()
    assert conversation.last_event_seq == 0


def test_oversize_content_and_metadata(conversation: Conversation, settings: Settings) -> None:
    settings.MURMUR_CONVERSATIONS = {"MAX_CONTENT_BYTES": 1000, "MAX_METADATA_BYTES": 100}
    with pytest.raises(InvalidContent, match="limit is 1000"):
        services.save_message(
            conversation=conversation, message={"role": "user", "content": "é" * 600}
        )
    services.save_message(conversation=conversation, message={"role": "user", "content": "é" * 400})
    with pytest.raises(InvalidContent, match="limit is 100"):
        services.update_conversation(conversation=conversation, metadata={"k": "v" * 200})


def test_five_megabyte_tool_result(conversation: Conversation) -> None:
    _call(conversation)
    big = "r" * (5 * 1024 * 1024)
    services.save_message(
        conversation=conversation, message={"role": "tool", "tool_call_id": "c1", "content": big}
    )
    assert ToolCall.objects.get(call_id="c1").result == big


def test_bad_text_is_replaced_identically(conversation: Conversation) -> None:
    text = "a\x00b\ud800c\ud83d\ude00d\udfffe"
    services.save_message(
        conversation=conversation,
        message={"role": "user", "content": text, "id": "t\x00", "k\x00": text},
    )
    record = Message.objects.get(conversation=conversation)
    expected = "a\ufffdb\ufffdc\U0001f600d\ufffde"
    assert record.content == expected
    assert record.message_id == "t\ufffd"
    assert record.extra == {"k\ufffd": expected}
    assert rows_of(conversation)[0].content == {"text": expected}


def test_missing_conversation(db: None) -> None:
    import uuid

    refs: tuple[Any, ...] = (uuid.uuid4(), "not-a-uuid", 42)
    for ref in refs:
        with pytest.raises(ConversationNotFound):
            services.save_message(conversation=ref, message={"role": "user", "content": "x"})


# ----------------------------------------------------------------- signals and rollback


@pytest.mark.django_db(transaction=True)
def test_no_signals_for_rolled_back_write(conversation: Conversation, captured: Captured) -> None:
    captured.clear()
    with pytest.raises(RuntimeError), transaction.atomic():
        services.save_message(conversation=conversation, message={"role": "user", "content": "x"})
        raise RuntimeError
    assert captured == []
    assert not Message.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_failing_receiver_is_logged_not_raised(
    conversation: Conversation, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(**kwargs: object) -> None:
        raise ValueError("receiver bug")

    signals.conversation_saved.connect(broken)
    try:
        services.save_message(conversation=conversation, message={"role": "user", "content": "x"})
    finally:
        signals.conversation_saved.disconnect(broken)
    assert Message.objects.count() == 1
    assert "receiver" in caplog.text


def test_delta_is_sent_at_once_and_stored_nowhere(
    conversation: Conversation, captured: Captured
) -> None:
    captured.clear()
    services.broadcast_delta(conversation=conversation.pk, stream_id="s", text="Hel")
    assert captured == [("delta", {"conversation": conversation, "stream_id": "s", "text": "Hel"})]
    conversation.refresh_from_db()
    assert conversation.last_event_seq == 0
    with pytest.raises(InvalidContent):
        services.broadcast_delta(conversation=conversation, stream_id="s", text=NOT_TEXT)


def test_event_seq_never_decreases_and_counters_hold(conversation: Conversation) -> None:
    seen = []
    for i in range(5):
        services.save_message(
            conversation=conversation,
            message={"role": "user" if i % 2 else "assistant", "content": f"m{i}"},
        )
        conversation.refresh_from_db()
        seen.append(conversation.last_event_seq)
    assert seen == [1, 2, 3, 4, 5]
    assert_counters_match_rows(conversation)


@pytest.mark.parametrize(
    "message",
    [
        {
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "n1", "name": "t", "input": None}],
        },
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "n1", "type": "function", "function": {"name": "t", "arguments": None}}
            ],
        },
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "n1", "type": "function", "function": {"name": "t", "arguments": "null"}}
            ],
        },
        {
            "role": "assistant",
            "tool_calls": [{"id": "n1", "type": "function", "function": {"name": "t"}}],
        },
    ],
    ids=[
        "block-input-null",
        "openai-arguments-null",
        "openai-arguments-null-text",
        "openai-no-arguments",
    ],
)
def test_a_call_with_null_arguments_is_saved_with_none(
    conversation: Conversation, message: dict[str, Any]
) -> None:
    """JSON null as a call's arguments means no arguments: stored as ``{}`` on the ToolCall and its
    card (never a database error), while the record keeps the message as given."""
    [card] = services.save_message(conversation=conversation, message=message)
    call = ToolCall.objects.get(conversation=conversation, call_id="n1")
    assert call.arguments == {}
    assert card.content["arguments"] == {}
    stored = Message.objects.get(conversation=conversation)
    assert (stored.content, stored.extra.get("tool_calls")) == (
        message.get("content"),
        message.get("tool_calls"),
    )
    assert_counters_match_rows(conversation)
