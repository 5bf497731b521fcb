"""Share links (docs/api.md "Share links"): making, listing and revoking them, the one 404 of every
token that opens nothing, snapshots that never move, live links, and what a shared view hides."""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.dispatch import receiver
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks
from rest_framework.test import APIClient

from murmur_conversations import services, signals
from murmur_conversations.exceptions import InvalidContent, ShareNotFound
from murmur_conversations.models import Conversation, Share, ShareRow
from murmur_conversations.selectors import share_for_token
from tests.api_helpers import NOT_FOUND, shape, token_client, url
from tests.helpers import MakeConversation, MakeUser

pytestmark = pytest.mark.django_db

SHARED = "/api/shared/"


def shared(token: str, client: APIClient | None = None, query: str = "") -> Any:
    return (client or APIClient()).get(f"{SHARED}{token}/{query}")


def make_link(owner: User, conversation: Conversation, **body: Any) -> dict[str, Any]:
    response = token_client(owner).post(url(conversation.pk, "shares/"), body, format="json")
    assert response.status_code == 201, response.content
    link: dict[str, Any] = response.json()
    return link


@pytest.fixture
def chat(conversation: Conversation) -> Conversation:
    services.save_message(conversation=conversation, message={"role": "user", "content": "Hi"})
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "thinking", "text": "hmm", "signature": "SIG-SECRET"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_call", "id": "c1", "name": "bash", "input": {"cmd": "cat .env"}},
            ],
            "model": "internal-model-name",
        },
    )
    conversation.refresh_from_db()
    return conversation


# ----------------------------------------------------------------------------- making links


@override_settings(MURMUR_CONVERSATIONS={})
def test_a_new_link_answers_its_token_once_and_stores_only_a_hash(
    chat: Conversation, user: User
) -> None:
    link = make_link(user, chat)
    assert set(link) == {
        "id",
        "token",
        "url",
        "mode",
        "require_login",
        "snapshot_event_seq",
        "created_at",
        "expires_at",
        "revoked_at",
        "active",
    }
    assert (link["mode"], link["snapshot_event_seq"], link["expires_at"]) == (
        "snapshot",
        chat.last_event_seq,
        None,
    )
    token = link["token"]
    assert token.startswith("msh_") and len(token) == 47
    assert link["url"] == f"http://testserver/api/shared/{token}/"
    share = Share.objects.get(pk=link["id"])
    assert share.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in str(list(Share.objects.values_list()))
    assert str(chat.pk) not in token and link["id"] not in token
    listed = token_client(user).get(url(chat.pk, "shares/")).json()
    assert listed["total"] == 1
    assert "token" not in listed["results"][0] and listed["results"][0]["active"] is True


def test_tokens_are_random(chat: Conversation, user: User) -> None:
    tokens = {services.create_share(conversation=chat, created_by=user)[1] for _ in range(20)}
    assert len(tokens) == 20


@override_settings(MURMUR_CONVERSATIONS={"SHARE_URL": "https://chat.example/s/{token}"})
def test_share_url_setting(chat: Conversation, user: User) -> None:
    link = make_link(user, chat)
    assert link["url"] == f"https://chat.example/s/{link['token']}"


@override_settings(MURMUR_CONVERSATIONS={"SHARE_URL": "/shared/{token}/"})
def test_a_share_url_path_is_made_absolute(chat: Conversation, user: User) -> None:
    link = make_link(user, chat)
    assert link["url"] == f"http://testserver/shared/{link['token']}/"


@pytest.mark.parametrize(
    "body",
    [
        {"mode": "forever"},
        {"expires_in": 0},
        {"expires_in": "60"},
        {"expires_in": True},
        {"expires_in": 10**12},
        {"require_login": "yes"},
        {"who": "me"},
        [],
    ],
)
def test_bad_bodies_are_400_and_make_nothing(chat: Conversation, user: User, body: Any) -> None:
    response = token_client(user).post(url(chat.pk, "shares/"), body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_field"
    assert not Share.objects.exists()


def test_an_empty_body_takes_the_defaults(chat: Conversation, user: User) -> None:
    response = token_client(user).post(url(chat.pk, "shares/"))
    assert response.status_code == 201
    assert response.json()["mode"] == "snapshot"


def test_another_users_conversation_cannot_be_shared(
    chat: Conversation, user: User, make_user: MakeUser
) -> None:
    stranger = token_client(make_user())
    for response in (
        stranger.post(url(chat.pk, "shares/"), {}, format="json"),
        stranger.get(url(chat.pk, "shares/")),
    ):
        assert (response.status_code, response.content) == (404, NOT_FOUND)
    assert not Share.objects.exists()


def test_service_checks_its_arguments(chat: Conversation, user: User) -> None:
    for kwargs in ({"mode": "x"}, {"expires_in": -1}, {"require_login": 1}):
        with pytest.raises(InvalidContent):
            services.create_share(conversation=chat, created_by=user, **kwargs)
    with pytest.raises(ShareNotFound):
        services.revoke_share(share=uuid.uuid4())
    with pytest.raises(ShareNotFound):
        services.revoke_share(share="nope")


# ----------------------------------------------------------------------------- reading links


def test_a_snapshot_shows_exactly_the_rows_as_of_its_event_seq(
    chat: Conversation, user: User
) -> None:
    link = make_link(user, chat)
    first = shared(link["token"]).json()
    assert first["share"] == {
        "mode": "snapshot",
        "event_seq": chat.last_event_seq,
        "expires_at": None,
        "require_login": False,
    }
    # later: the card completes, a message arrives, the title changes
    services.update_tool_status(
        conversation=chat,
        status="completed",
        tool_info={"call_id": "c1", "result": "SECRET=1"},
    )
    services.save_message(conversation=chat, message={"role": "assistant", "content": "After"})
    services.update_conversation(conversation=chat, title="renamed")
    again = shared(link["token"]).json()
    assert again == first
    assert [m["content_type"] for m in again["messages"]] == [
        "text",
        "thinking",
        "text",
        "tool_call",
    ]
    assert again["messages"][-1]["status"] == "pending"
    assert again["conversation"]["title"] == "Test conversation"
    assert "After" not in str(again)
    assert ShareRow.objects.filter(share_id=link["id"]).count() == 4


def test_a_live_link_shows_the_current_rows(chat: Conversation, user: User) -> None:
    link = make_link(user, chat, mode="live")
    assert link["snapshot_event_seq"] is None
    services.save_message(conversation=chat, message={"role": "assistant", "content": "After"})
    services.update_conversation(conversation=chat, title="renamed")
    body = shared(link["token"]).json()
    chat.refresh_from_db()
    assert body["share"]["event_seq"] == chat.last_event_seq
    assert body["messages"][-1]["content"] == {"text": "After"}
    assert body["conversation"]["title"] == "renamed"


def test_a_shared_view_reveals_no_owner_and_no_internals(chat: Conversation, user: User) -> None:
    services.save_message(
        conversation=chat,
        message={
            "role": "user",
            "content": "<system-reminder>x</system-reminder>",
            "injected": True,
        },
    )
    link = make_link(user, chat)
    body = shared(link["token"]).json()
    text = str(body)
    for secret in (
        "SIG-SECRET",
        "internal-model-name",
        user.username,
        str(chat.pk),
        "system-reminder",
    ):
        assert secret not in text
    assert set(body) == {"conversation", "share", "messages", "next_cursor"}
    assert set(body["conversation"]) == {
        "title",
        "created_at",
        "saved_at",
        "status",
        "format",
        "message_count",
    }
    for message in body["messages"]:
        assert "id" not in message and "feedback" not in message
        assert set(message["metadata"]) <= {"display_text", "result", "error", "orphan", "late"}
    assert body["messages"][-1]["content"]["arguments"] == {"cmd": "cat .env"}


@pytest.mark.parametrize("private", [["bash"], ["*"]])
def test_private_tool_arguments_are_never_shown(
    chat: Conversation, user: User, private: list[str]
) -> None:
    services.update_tool_status(
        conversation=chat,
        status="executing",
        tool_info={"call_id": "c1", "display_text": "cat .env"},
    )
    link = make_link(user, chat, mode="live")
    with override_settings(MURMUR_CONVERSATIONS={"PRIVATE_TOOLS": private}):
        body = shared(link["token"]).json()
    card = body["messages"][-1]
    assert card["content"]["arguments"] is None and card["content"]["private"] is True
    assert ".env" not in str(body)


def test_pages_walk_every_shown_row_once(conversation: Conversation, user: User) -> None:
    services.save_messages(
        conversation=conversation,
        messages=[{"role": "user", "content": f"m{i}"} for i in range(23)],
    )
    link = make_link(user, conversation)
    seen, query = [], "?limit=5"
    while True:
        body = shared(link["token"], query=query).json()
        seen += [m["content"]["text"] for m in body["messages"]]
        if body["next_cursor"] is None:
            break
        query = f"?limit=5&cursor={body['next_cursor']}"
    assert seen == [f"m{i}" for i in range(23)]
    other = make_link(user, conversation)
    cursor = shared(link["token"], query="?limit=5").json()["next_cursor"]
    response = shared(other["token"], query=f"?cursor={cursor}")
    assert response.json()["code"] == "invalid_cursor"


# ----------------------------------------------------------------------------- one 404


def test_revoked_expired_unknown_and_malformed_tokens_are_one_404(
    chat: Conversation, user: User
) -> None:
    revoked, expired = make_link(user, chat), make_link(user, chat, expires_in=60)
    live = make_link(user, chat, mode="live")
    assert shared(live["token"]).status_code == 200
    response = token_client(user).delete(url(chat.pk, f"shares/{revoked['id']}/"))
    assert response.status_code == 204
    Share.objects.filter(pk=expired["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    answers = [
        shared(revoked["token"]),
        shared(expired["token"]),
        shared("msh_" + "A" * 43),
        shared("nope"),
        shared(live["token"] + "x"),
        shared(live["token"].upper()),
        shared("%00"),
    ]
    assert {shape(a) for a in answers} == {shape(answers[0])}
    assert (answers[0].status_code, answers[0].content) == (404, NOT_FOUND)
    assert answers[0]["Cache-Control"] == "no-store"
    assert answers[0]["Referrer-Policy"] == "no-referrer"
    # with credentials too
    signed_in = token_client(user)
    assert shape(shared(revoked["token"], signed_in)) == shape(shared("nope", signed_in))
    listed = token_client(user).get(url(chat.pk, "shares/")).json()["results"]
    assert {row["id"]: row["active"] for row in listed} == {
        revoked["id"]: False,
        expired["id"]: False,
        live["id"]: True,
    }


def test_a_malformed_token_costs_no_query() -> None:
    with CaptureQueriesContext(connection) as captured:
        assert shared("not-a-token").status_code == 404
    assert len(captured) == 0


def test_revocation_is_immediate_and_announced(
    chat: Conversation,
    user: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    link = make_link(user, chat, mode="live")
    assert share_for_token(link["token"]) is not None
    heard = []

    @receiver(signals.share_revoked, weak=False)
    def listen(sender: object, share: Share, conversation_id: uuid.UUID, **kwargs: object) -> None:
        heard.append((str(share.pk), conversation_id))

    try:
        with django_capture_on_commit_callbacks(execute=True):
            services.revoke_share(share=link["id"])
            services.revoke_share(share=link["id"])  # again: nothing new
    finally:
        signals.share_revoked.disconnect(listen)
    assert share_for_token(link["token"]) is None
    assert shared(link["token"]).status_code == 404
    assert heard == [(link["id"], chat.pk)]


def test_revoking_a_share_of_another_conversation_is_404(
    chat: Conversation, user: User, make_conversation: MakeConversation
) -> None:
    link = make_link(user, chat)
    other = make_conversation(title="other")
    client = token_client(user)
    for share_id in (link["id"], link["id"].upper(), "nope", str(uuid.uuid4())):
        response = client.delete(url(other.pk, f"shares/{share_id}/"))
        assert (response.status_code, response.content) == (404, NOT_FOUND)
    assert Share.objects.get(pk=link["id"]).revoked_at is None


def test_require_login_links_need_any_signed_in_user(
    chat: Conversation, user: User, make_user: MakeUser
) -> None:
    link = make_link(user, chat, require_login=True)
    anonymous = shared(link["token"])
    assert anonymous.status_code == 401
    assert anonymous.json()["code"] == "not_authenticated"
    assert shared(link["token"], token_client(make_user())).status_code == 200


def test_deleting_the_conversation_deletes_its_links(chat: Conversation, user: User) -> None:
    link = make_link(user, chat)
    services.delete_conversation(conversation=chat)
    assert not Share.objects.exists() and not ShareRow.objects.exists()
    assert shared(link["token"]).status_code == 404
