"""Forking from a display row (docs/api.md "Forking"): the copy, the states of its tool calls at
the cut, the original left byte for byte as it was, the REST route, and forks of a conversation
that is being written."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import AnonymousUser, User
from django.core.management import call_command
from django.db import connection
from django.db.models import QuerySet
from django.test.utils import CaptureQueriesContext, override_settings

from murmur_conversations import services
from murmur_conversations.exceptions import ConversationNotFound, InvalidContent, OwnershipConflict
from murmur_conversations.models import (
    AccessLogEntry,
    Conversation,
    DisplayMessage,
    Message,
    SourceRecord,
    ToolCall,
)
from tests.api_helpers import NOT_FOUND, token_client, url
from tests.helpers import MakeConversation, MakeUser, assert_counters_match_rows

pytestmark = pytest.mark.django_db


def state(conversation: Conversation) -> tuple[object, ...]:
    """Everything stored about ``conversation`` (its row and every row in it), for equality."""
    conversation = Conversation.objects.get(pk=conversation.pk)
    fields = [f.attname for f in Conversation._meta.concrete_fields]
    return (
        tuple(getattr(conversation, name) for name in fields),
        tuple(Message.objects.filter(conversation=conversation).order_by("position").values_list()),
        tuple(
            DisplayMessage.objects.filter(conversation=conversation).order_by("seq").values_list()
        ),
        tuple(ToolCall.objects.filter(conversation=conversation).order_by("pk").values_list()),
        tuple(SourceRecord.objects.filter(conversation=conversation).order_by("pk").values_list()),
    )


def exported(conversation: Conversation) -> str:
    out = io.StringIO()
    call_command("export_conversation", str(conversation.pk), "--record-only", stdout=out)
    return out.getvalue()


def rows_of(conversation: Conversation) -> list[DisplayMessage]:
    return list(
        DisplayMessage.objects.filter(conversation=conversation)
        .select_related("tool_call", "message")
        .order_by("seq")
    )


def seq_of(conversation: Conversation, content_type: str, nth: int = 0) -> int:
    return [r.seq for r in rows_of(conversation) if r.content_type == content_type][nth]


@pytest.fixture
def worked(conversation: Conversation) -> Conversation:
    """user, assistant text + two calls, one result, a notice, the other result, an answer."""
    services.save_message(conversation=conversation, message={"role": "user", "content": "Go"})
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Running both."},
                {"type": "tool_call", "id": "a", "name": "bash", "input": {"cmd": "ls"}},
                {"type": "tool_call", "id": "b", "name": "grep", "input": {"q": "x"}},
            ],
        },
    )
    services.update_tool_status(
        conversation=conversation,
        status="executing",
        tool_info={"call_id": "a", "display_text": "ls"},
    )
    services.save_message(
        conversation=conversation, message={"role": "tool", "tool_call_id": "a", "content": "ok"}
    )
    services.save_synthetic_message(
        conversation=conversation,
        message_type="system",
        content_type="error",
        content={"text": "grep is slow"},
    )
    services.save_message(
        conversation=conversation,
        message={"role": "tool", "tool_call_id": "b", "content": "nope", "is_error": True},
    )
    services.save_message(
        conversation=conversation, message={"role": "assistant", "content": "Done."}
    )
    conversation.refresh_from_db()
    return conversation


def test_fork_at_the_last_row_copies_everything_and_changes_nothing(
    worked: Conversation, user: User
) -> None:
    before, text = state(worked), exported(worked)
    fork = services.fork_conversation(conversation=worked, at_seq=worked.last_seq, owner=user)
    assert state(worked) == before
    assert exported(worked) == text
    assert exported(fork) == text
    assert (fork.forked_from_id, fork.forked_at_seq, fork.owner_id) == (
        worked.pk,
        worked.last_seq,
        user.pk,
    )
    assert (fork.status, fork.pending_ask, fork.external_id) == ("idle", None, "")
    assert_counters_match_rows(fork)
    original, copied = rows_of(worked), rows_of(fork)
    keep = ("seq", "message_type", "content_type", "content", "status", "metadata")
    assert [[getattr(r, k) for k in keep] for r in copied] == [
        [getattr(r, k) for k in keep] for r in original
    ]
    assert [
        (c.call_id, c.status, c.result, c.error) for c in fork.tool_calls.order_by("call_id")
    ] == [(c.call_id, c.status, c.result, c.error) for c in worked.tool_calls.order_by("call_id")]
    # rows point at the fork's own record messages and calls
    assert all(r.message is None or r.message.conversation_id == fork.pk for r in copied)
    assert all(r.tool_call is None or r.tool_call.conversation_id == fork.pk for r in copied)
    assert fork.last_event_seq >= max(r.event_seq for r in copied)


def test_a_call_whose_result_comes_after_the_cut_is_not_finished_in_the_fork(
    worked: Conversation, user: User
) -> None:
    before = state(worked)
    card_b = seq_of(worked, "tool_call", 1)
    fork = services.fork_conversation(conversation=worked, at_seq=card_b, owner=user)
    assert state(worked) == before
    assert_counters_match_rows(fork)
    # the cut message is the assistant message with both calls: positions 1-2
    assert list(fork.messages.order_by("position").values_list("role", flat=True)) == [
        "user",
        "assistant",
    ]
    calls = {c.call_id: c for c in fork.tool_calls.all()}
    for call_id in ("a", "b"):
        call = calls[call_id]
        assert (call.status, call.interrupt_reason) == ("interrupted", "forked")
        assert (call.result, call.error, call.display_text, call.finished_at) == (
            None,
            None,
            "",
            None,
        )
    cards = [r for r in rows_of(fork) if r.content_type == "tool_call"]
    assert [r.status for r in cards] == ["interrupted", "interrupted"]
    assert all(not {"result", "error", "display_text"} & set(r.metadata) for r in cards)
    assert all(r.event_seq == fork.last_event_seq for r in cards)
    # the export of the fork is the original's first two lines
    assert exported(fork) == "".join(exported(worked).splitlines(keepends=True)[:2])


def test_fork_between_the_results_keeps_the_first_result_only(
    worked: Conversation, user: User
) -> None:
    result_a = seq_of(worked, "tool_result", 0)
    fork = services.fork_conversation(conversation=worked, at_seq=result_a, owner=user)
    assert_counters_match_rows(fork)
    calls = {c.call_id: c for c in fork.tool_calls.all()}
    assert (calls["a"].status, calls["a"].result) == ("completed", "ok")
    assert (calls["b"].status, calls["b"].interrupt_reason) == ("interrupted", "forked")
    card_a = next(r for r in rows_of(fork) if r.content.get("call_id") == "a")
    assert (card_a.status, card_a.metadata["result"]) == ("completed", "ok")


def test_fork_at_a_notice_keeps_it_and_the_message_before_it(
    worked: Conversation, user: User
) -> None:
    notice = seq_of(worked, "error")
    fork = services.fork_conversation(conversation=worked, at_seq=notice, owner=user)
    assert_counters_match_rows(fork)
    assert fork.last_seq == notice
    assert rows_of(fork)[-1].content == {"text": "grep is slow"}
    assert fork.record_length == 3  # user, assistant, the result of a


def test_fork_at_the_first_row_of_a_message_keeps_all_its_rows(
    worked: Conversation, user: User
) -> None:
    text_row = seq_of(worked, "text", 1)  # "Running both." (row 2 of 4 of the assistant message)
    fork = services.fork_conversation(conversation=worked, at_seq=text_row, owner=user)
    assert fork.last_seq == seq_of(worked, "tool_call", 1)
    assert fork.forked_at_seq == text_row


def test_a_resolved_interrupt_is_an_open_question_again_in_the_fork(
    conversation: Conversation, user: User
) -> None:
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "q", "name": "ask", "input": {}}],
        },
    )
    services.save_message(
        conversation=conversation,
        message={"role": "tool", "tool_call_id": "q", "content": "Which?", "is_interrupt": True},
    )
    services.resolve_tool_result(conversation=conversation, tool_call_id="q", result_content="B")
    conversation.refresh_from_db()
    before = state(conversation)
    fork = services.fork_conversation(
        conversation=conversation, at_seq=conversation.last_seq, owner=user
    )
    assert state(conversation) == before
    call = fork.tool_calls.get()
    assert (call.status, call.interrupt_reason, call.result) == (
        "interrupted",
        "awaiting_input",
        None,
    )
    result = rows_of(fork)[-1]
    assert result.content["content"] == "Which?"
    assert result.content["is_interrupt"] is True
    assert_counters_match_rows(fork)


@pytest.mark.parametrize("at_seq", [0, -1, 99, True, "1", 1.0, None])
def test_a_bad_at_seq_writes_nothing(worked: Conversation, user: User, at_seq: Any) -> None:
    count = Conversation.objects.count()
    with pytest.raises(InvalidContent):
        services.fork_conversation(conversation=worked, at_seq=at_seq, owner=user)
    assert Conversation.objects.count() == count


def test_fork_of_a_missing_conversation(user: User) -> None:
    with pytest.raises(ConversationNotFound):
        services.fork_conversation(
            conversation="00000000-0000-0000-0000-000000000000", at_seq=1, owner=user
        )


def test_fork_of_a_murmur_import_exports_the_same_bytes(user: User, tmp_path: Path) -> None:
    lines = [
        '{"role":"user","content":"hi","id":"m1"}',
        '{"id":"m2","role":"assistant","content":"hello",  "extra":1}',
        '{"role":"user","content":"again","id":"m3"}',
    ]
    path = tmp_path / "conversation.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    call_command("import_conversations", str(path), "--owner", user.username, stdout=io.StringIO())
    original = Conversation.objects.get(source="murmur")
    at = DisplayMessage.objects.get(conversation=original, message__message_id="m2").seq
    fork = services.fork_conversation(conversation=original, at_seq=at, owner=user)
    assert exported(fork) == lines[0] + "\n" + lines[1] + "\n"
    assert fork.source == "murmur"


def test_fork_takes_a_fixed_number_of_queries(
    user: User, make_conversation: MakeConversation
) -> None:
    def grow(conversation: Conversation, n: int) -> None:
        services.save_messages(
            conversation=conversation,
            messages=[
                {"role": "user" if i % 2 else "assistant", "content": f"m{i}"} for i in range(n)
            ],
        )

    small, large = make_conversation(), make_conversation()
    grow(small, 4)
    grow(large, 400)
    counts = []
    for conversation in (small, large):
        conversation.refresh_from_db()
        with CaptureQueriesContext(connection) as captured:
            services.fork_conversation(conversation=conversation, at_seq=3, owner=user)
        counts.append(len(captured))
    assert counts[0] == counts[1]


def test_async_twin(worked: Conversation, user: User) -> None:
    fork = async_to_sync(services.afork_conversation)(
        conversation=worked.pk, at_seq=1, owner=user.pk
    )
    assert (fork.record_length, fork.forked_from_id) == (1, worked.pk)


# ----------------------------------------------------------------------------- REST


def test_rest_fork_answers_201_with_the_summary(worked: Conversation, user: User) -> None:
    client = token_client(user)
    response = client.post(url(worked.pk, "fork/"), {"at_seq": 1}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["forked_from_id"] == str(worked.pk)
    assert body["forked_at_seq"] == 1
    assert body["message_count"] == 1
    listed = client.get("/api/conversations/").json()["results"]
    assert body["id"] in {row["id"] for row in listed}


@pytest.mark.parametrize(
    "body", [{}, {"at_seq": 0}, {"at_seq": "2"}, {"at_seq": 2, "x": 1}, {"at_seq": 999}, []]
)
def test_rest_fork_refuses_bad_bodies(worked: Conversation, user: User, body: Any) -> None:
    client = token_client(user)
    count = Conversation.objects.count()
    response = client.post(url(worked.pk, "fork/"), body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_field"
    assert Conversation.objects.count() == count


def test_rest_fork_of_another_users_conversation_is_the_usual_404(
    worked: Conversation, make_user: MakeUser
) -> None:
    stranger = token_client(make_user())
    response = stranger.post(url(worked.pk, "fork/"), {"at_seq": 1}, format="json")
    assert (response.status_code, response.content) == (404, NOT_FOUND)


# ----------------------------------------------------------------------------- while it is written


@pytest.mark.django_db(transaction=True)
def test_forks_while_the_original_is_written_are_consistent_prefixes(
    user: User, make_conversation: MakeConversation
) -> None:
    conversation = make_conversation()
    services.save_message(conversation=conversation, message={"role": "user", "content": "0"})
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            i = 1
            while not stop.is_set() and i < 400:
                services.save_message(
                    conversation=conversation.pk,
                    message={
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": str(i)},
                            {"type": "tool_call", "id": f"c{i}", "name": "t", "input": {}},
                        ],
                    },
                )
                services.save_message(
                    conversation=conversation.pk,
                    message={"role": "tool", "tool_call_id": f"c{i}", "content": str(i)},
                )
                i += 1
        except BaseException as error:  # surfaced below
            errors.append(error)
        finally:
            from django.db import connections

            connections.close_all()

    thread = threading.Thread(target=writer)
    thread.start()
    forks = []
    try:
        for _ in range(15):
            head = Conversation.objects.get(pk=conversation.pk).last_seq
            forks.append(
                services.fork_conversation(conversation=conversation, at_seq=head, owner=user)
            )
    finally:
        stop.set()
        thread.join()
    assert not errors
    final = list(Message.objects.filter(conversation=conversation).order_by("position"))
    for fork in forks:
        assert_counters_match_rows(fork)
        copied = list(fork.messages.order_by("position"))
        assert [m.message_id for m in copied] == [m.message_id for m in final[: len(copied)]]
        for call in fork.tool_calls.all():
            done = fork.messages.filter(tool_call_id=call.call_id).exists()
            assert call.status == ("completed" if done else "interrupted"), call.call_id


def test_deleting_the_original_keeps_the_fork(worked: Conversation, user: User) -> None:
    fork = services.fork_conversation(conversation=worked, at_seq=2, owner=user)
    text = exported(fork)
    services.delete_conversation(conversation=worked)
    fork.refresh_from_db()
    assert (fork.forked_from_id, fork.forked_at_seq) == (None, 2)
    assert exported(fork) == text
    body = token_client(user).get(url(fork.pk)).json()
    assert (body["forked_from_id"], body["forked_at_seq"]) == (None, 2)


def staff_scope(user: User | AnonymousUser) -> QuerySet[Conversation]:
    """A host's SCOPE: staff read every conversation, others their own."""
    if getattr(user, "is_staff", False) and user.is_active:
        return Conversation.objects.all()
    return Conversation.objects.owned_by(user)


@override_settings(MURMUR_CONVERSATIONS={"SCOPE": "tests.test_fork.staff_scope"})
def test_a_fork_or_a_link_by_a_reader_who_is_not_the_owner_is_logged(
    worked: Conversation, user: User, make_user: MakeUser
) -> None:
    staff = make_user(is_staff=True)
    client = token_client(staff)
    assert client.post(url(worked.pk, "fork/"), {"at_seq": 1}, format="json").status_code == 201
    assert client.post(url(worked.pk, "shares/"), {}, format="json").status_code == 201
    owner = token_client(user)
    assert owner.post(url(worked.pk, "fork/"), {"at_seq": 1}, format="json").status_code == 201
    surfaces = list(
        AccessLogEntry.objects.filter(conversation=worked)
        .order_by("id")
        .values_list("actor_id", "surface")
    )
    assert surfaces == [(staff.pk, "api-fork"), (staff.pk, "api-shares")]
    fork = Conversation.objects.get(owner=staff)  # the staff member's own copy
    assert fork.forked_from_id == worked.pk


@pytest.mark.django_db
def test_link_fork_names_the_original_once(
    make_conversation: MakeConversation, make_user: MakeUser
) -> None:
    original, other, fork = make_conversation(), make_conversation(), make_conversation()
    before = fork.last_event_seq
    linked = services.link_fork(conversation=fork, original=original)
    assert linked.forked_from_id == original.pk and linked.last_event_seq == before + 1
    assert linked.forked_at_seq is None
    again = services.link_fork(conversation=fork, original=other.pk)  # write-once
    assert again.forked_from_id == original.pk and again.last_event_seq == before + 1
    assert services.link_fork(conversation=other, original=other).forked_from_id is None
    with pytest.raises(OwnershipConflict):
        services.link_fork(conversation=other, original=make_conversation(owner=make_user()))
    with pytest.raises(ConversationNotFound):
        services.link_fork(conversation=other, original="00000000-0000-4000-8000-000000000000")
    other.refresh_from_db()
    assert other.forked_from_id is None
