"""Feedback on display rows (docs/api.md "Feedback"): one per user and row, PUT replaces, DELETE
removes, each row carries the caller's own; the change is one event with its frame; exported,
re-imported (idempotent) and counted."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.core.management import call_command
from django.db.models import QuerySet
from django.test.utils import override_settings
from pytest_django import DjangoAssertNumQueries, DjangoCaptureOnCommitCallbacks

from murmur_conversations import services, signals
from murmur_conversations.exceptions import DisplayMessageNotFound, InvalidContent
from murmur_conversations.exporters import FEEDBACK_RECORD
from murmur_conversations.importers.murmur import FEEDBACK_TYPE
from murmur_conversations.models import Conversation, DisplayMessage, Feedback
from murmur_conversations.selectors import feedback_counts
from tests.api_helpers import NOT_FOUND, token_client, url
from tests.helpers import MakeConversation, MakeUser

pytestmark = pytest.mark.django_db


def everyone_scope(user: User | AnonymousUser) -> QuerySet[Conversation]:
    from murmur_conversations.models import Conversation

    return Conversation.objects.all() if user.is_authenticated else Conversation.objects.none()


def feedback_url(conversation: Conversation, row: DisplayMessage | str) -> str:
    return url(
        conversation.pk, f"display-messages/{row if isinstance(row, str) else row.pk}/feedback/"
    )


@pytest.fixture
def answered(conversation: Conversation) -> Conversation:
    services.save_message(conversation=conversation, message={"role": "user", "content": "Q"})
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "text", "text": "A1"},
                {"type": "text", "text": "A2"},
                {"type": "tool_call", "id": "c", "name": "t", "input": {}},
            ],
        },
    )
    services.save_synthetic_message(
        conversation=conversation,
        message_type="system",
        content_type="notification",
        content={"text": "note"},
    )
    conversation.refresh_from_db()
    return conversation


def row(
    conversation: Conversation, text: str | None = None, content_type: str | None = None
) -> DisplayMessage:
    rows = DisplayMessage.objects.filter(conversation=conversation).order_by("seq")
    if text is not None:
        return next(r for r in rows if r.content.get("text") == text)
    return next(r for r in rows if r.content_type == content_type)


def test_put_replace_delete(answered: Conversation, user: User) -> None:
    client, target = token_client(user), row(answered, "A2")
    put = client.put(
        feedback_url(answered, target), {"rating": 1, "comment": "good"}, format="json"
    )
    assert put.status_code == 200
    assert put.json()["id"] == str(target.pk)
    assert put.json()["feedback"] == {"rating": 1, "comment": "good"}
    answered.refresh_from_db()
    first_event = answered.last_event_seq
    assert put.json()["event_seq"] == first_event
    again = client.put(
        feedback_url(answered, target), {"rating": 1, "comment": "good"}, format="json"
    )
    answered.refresh_from_db()
    assert again.json()["feedback"] == {"rating": 1, "comment": "good"}
    assert answered.last_event_seq == first_event  # the same feedback again: no event
    replaced = client.put(feedback_url(answered, target), {"rating": -1}, format="json")
    assert replaced.json()["feedback"] == {"rating": -1, "comment": ""}
    assert Feedback.objects.count() == 1
    page = client.get(url(answered.pk, "display-messages/")).json()["results"]
    assert {r["id"]: r["feedback"] for r in page}[str(target.pk)] == {"rating": -1, "comment": ""}
    assert sum(r["feedback"] is not None for r in page) == 1
    since = client.get(url(answered.pk, f"display-messages/?since={first_event}")).json()
    assert [r["id"] for r in since["results"]] == [str(target.pk)]
    deleted = client.delete(feedback_url(answered, target))
    assert (deleted.status_code, deleted.json()["feedback"]) == (200, None)
    answered.refresh_from_db()
    event = answered.last_event_seq
    assert client.delete(feedback_url(answered, target)).json()["feedback"] is None
    answered.refresh_from_db()
    assert answered.last_event_seq == event
    assert not Feedback.objects.exists()


@override_settings(MURMUR_CONVERSATIONS={"SCOPE": "tests.test_feedback.everyone_scope"})
def test_each_reader_sees_only_their_own_feedback(
    answered: Conversation, user: User, make_user: MakeUser
) -> None:
    other = make_user()
    target = row(answered, "A1")
    token_client(user).put(feedback_url(answered, target), {"rating": 1}, format="json")
    token_client(other).put(
        feedback_url(answered, target), {"rating": -1, "comment": "no"}, format="json"
    )
    mine = token_client(user).get(url(answered.pk, "display-messages/")).json()["results"]
    theirs = token_client(other).get(url(answered.pk, "display-messages/")).json()["results"]
    assert [r["feedback"] for r in mine if r["id"] == str(target.pk)] == [
        {"rating": 1, "comment": ""}
    ]
    assert [r["feedback"] for r in theirs if r["id"] == str(target.pk)] == [
        {"rating": -1, "comment": "no"}
    ]
    # the frames every reader shares carry the owner's
    target.refresh_from_db()
    assert target.owner_feedback == {"rating": 1, "comment": ""}
    assert feedback_counts(answered) == {"up": 1, "down": 1, "total": 2}


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"rating": 0},
        {"rating": 2},
        {"rating": True},
        {"rating": "1"},
        {"rating": 1, "x": 1},
        {"rating": 1, "comment": 5},
        {"rating": 1, "comment": "x" * 2001},
        [],
    ],
)
def test_bad_bodies_are_400(answered: Conversation, user: User, body: Any) -> None:
    response = token_client(user).put(
        feedback_url(answered, row(answered, "A1")), body, format="json"
    )
    assert (response.status_code, response.json()["code"]) == (400, "invalid_field")
    assert not Feedback.objects.exists()


def test_a_notice_outside_the_record_takes_no_feedback(answered: Conversation, user: User) -> None:
    response = token_client(user).put(
        feedback_url(answered, row(answered, "note")), {"rating": 1}, format="json"
    )
    assert response.status_code == 400
    assert "record" in response.json()["detail"]


def test_foreign_missing_and_malformed_rows_are_the_usual_404(
    answered: Conversation, user: User, make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    other = make_conversation(title="other")
    services.save_message(conversation=other, message={"role": "user", "content": "x"})
    elsewhere = DisplayMessage.objects.get(conversation=other)
    client = token_client(user)
    for display_id in (str(elsewhere.pk), "999999999", "abc", "1.0", "-1", "9" * 30):
        for response in (
            client.put(feedback_url(answered, display_id), {"rating": 1}, format="json"),
            client.delete(feedback_url(answered, display_id)),
        ):
            assert (response.status_code, response.content) == (404, NOT_FOUND), display_id
    stranger = token_client(make_user())
    response = stranger.put(
        feedback_url(answered, row(answered, "A1")), {"rating": 1}, format="json"
    )
    assert (response.status_code, response.content) == (404, NOT_FOUND)
    assert (
        response.status_code == 404
        and client.get(feedback_url(answered, row(answered, "A1"))).status_code == 405
    )


def test_service_errors(answered: Conversation, user: User) -> None:
    target = row(answered, "A1")
    with pytest.raises(InvalidContent):
        services.set_feedback(conversation=answered, display_message=target, user=user, rating=3)
    with pytest.raises(InvalidContent):
        services.set_feedback(conversation=answered, display_message=target, user=None, rating=1)
    with pytest.raises(DisplayMessageNotFound):
        services.set_feedback(conversation=answered, display_message="x", user=user, rating=1)
    assert (
        services.clear_feedback(conversation=answered, display_message=target, user=user) is False
    )


def test_one_event_and_one_updated_signal(
    answered: Conversation,
    user: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    heard = []

    def listen(sender: object, row: DisplayMessage, event_seq: int, **kwargs: object) -> None:
        heard.append((row.pk, event_seq, row.owner_feedback))

    signals.display_message_updated.connect(listen)
    target = row(answered, "A1")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            services.set_feedback(
                conversation=answered, display_message=target, user=user, rating=1, comment="ok"
            )
    finally:
        signals.display_message_updated.disconnect(listen)
    answered.refresh_from_db()
    assert heard == [(target.pk, answered.last_event_seq, {"rating": 1, "comment": "ok"})]


def test_display_page_joins_the_feedback_to_its_one_statement(
    answered: Conversation, user: User, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    client = token_client(user)
    for candidate in DisplayMessage.objects.filter(conversation=answered, message__isnull=False):
        services.set_feedback(conversation=answered, display_message=candidate, user=user, rating=1)
    with django_assert_num_queries(2):  # the token, then the page with the scope and feedback
        response = client.get(url(answered.pk, "display-messages/"))
    rated = [r for r in response.json()["results"] if r["feedback"] is not None]
    assert rated and all(r["feedback"] == {"rating": 1, "comment": ""} for r in rated)


# ----------------------------------------------------------------------------- export and import


def export(conversation: Conversation, *args: str) -> str:
    out = io.StringIO()
    call_command("export_conversation", str(conversation.pk), *args, stdout=out)
    return out.getvalue()


def test_feedback_survives_export_and_reimport(
    answered: Conversation, user: User, make_user: MakeUser, tmp_path: Path
) -> None:
    rater = make_user()
    services.set_feedback(
        conversation=answered, display_message=row(answered, "A2"), user=user, rating=1, comment="ü"
    )
    services.set_feedback(
        conversation=answered, display_message=row(answered, "A2"), user=rater, rating=-1
    )
    services.set_feedback(
        conversation=answered,
        display_message=row(answered, content_type="tool_call"),
        user=user,
        rating=-1,
    )
    text = export(answered)
    lines = text.splitlines()
    message = row(answered, "A2").message
    assert message is not None
    message_id = message.message_id
    head = f'{{"type":"murmur.feedback","message_id":"{message_id}",'
    assert lines[-3:] == [
        head + '"part":1,"rating":1,"comment":"ü","user":null}',
        head + f'"part":1,"rating":-1,"comment":"","user":"{rater.username}"}}',
        head + '"part":2,"rating":-1,"comment":"","user":null}',
    ]
    assert export(answered, "--no-feedback").splitlines() == lines[:-3]
    path = tmp_path / "conversation.jsonl"
    path.write_text(text, encoding="utf-8")
    owner = make_user()
    for _ in range(2):  # the second import adds nothing
        call_command(
            "import_conversations",
            str(path),
            "--owner",
            owner.username,
            "--conversation-id",
            "k",
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    copy = Conversation.objects.get(owner=owner)
    assert Feedback.objects.filter(conversation=copy).count() == 3
    assert export(copy) == text
    assert feedback_counts(copy) == {"up": 1, "down": 2, "total": 3}
    mine = Feedback.objects.get(conversation=copy, user=owner, rating=1)
    assert (mine.comment, mine.display_message.content) == ("ü", {"text": "A2"})
    copy_row = DisplayMessage.objects.get(pk=mine.display_message_id)
    assert copy_row.owner_feedback == {"rating": 1, "comment": "ü"}


def test_bad_feedback_lines_are_reported_and_the_rest_lands(user: User, tmp_path: Path) -> None:
    lines = [
        '{"role":"user","content":"hi","id":"m1"}',
        '{"type":"murmur.feedback","message_id":"m1","part":0,"rating":1,"comment":"","user":null}',
        '{"type":"murmur.feedback","message_id":"m1","part":0,"rating":5,"comment":"","user":null}',
        '{"type":"murmur.feedback","message_id":"m9","part":0,"rating":1,"comment":"","user":null}',
        '{"type":"murmur.feedback","message_id":"m1","part":0,"rating":1,"comment":"","user":"ghost"}',
    ]
    path = tmp_path / "conversation.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    err = io.StringIO()
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as raised:
        call_command(
            "import_conversations",
            str(path),
            "--owner",
            user.username,
            stdout=io.StringIO(),
            stderr=err,
        )
    assert raised.value.returncode == 1
    report = err.getvalue()
    assert ":3:" in report and ":4:" in report and ":5:" in report and ":2:" not in report
    assert Feedback.objects.get().rating == 1


def test_the_two_modules_agree_on_the_line_type() -> None:
    assert FEEDBACK_RECORD == FEEDBACK_TYPE


#: A token shape the redaction finds (built here so this file holds no secret-looking literal).
SECRET = "gh" + "p_" + ("Qz7Lm2Xv9Kp4Rt8Wn3Hb6Jc1Fd5Gs0Ay" * 2)[:36]


def test_a_secret_in_a_comment_is_redacted_and_counted(answered: Conversation, user: User) -> None:
    from murmur_conversations.models import RedactionCount

    target = row(answered, "A1")
    services.set_feedback(
        conversation=answered,
        display_message=target,
        user=user,
        rating=-1,
        comment=f"it leaked {SECRET}",
    )
    stored = Feedback.objects.get()
    assert SECRET not in stored.comment and "[REDACTED:github-token]" in stored.comment
    assert RedactionCount.objects.get(conversation=answered).count == 1
    again = services.set_feedback(
        conversation=answered,
        display_message=target,
        user=user,
        rating=-1,
        comment=f"it leaked {SECRET}",
    )
    assert again.pk == stored.pk  # the same feedback again: nothing written, nothing counted
    assert RedactionCount.objects.get(conversation=answered).count == 1
