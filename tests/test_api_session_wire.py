"""``POST session/``: agentfootprint's session wire (docs/api.md): ops, bodies, statuses,
codes and their order (401, then 400, then 403, then 404); every failure is ``{"error","code"}``."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from murmur_conversations import services
from murmur_conversations.models import Conversation
from murmur_conversations.representations import unix_ms
from tests.api_helpers import API, malformed_variants, missing_id, post_body, token_client
from tests.helpers import MakeConversation, MakeUser, Response
from tests.import_helpers import JSON

pytestmark = pytest.mark.django_db
WIRE = f"{API}session/"
SESSION_FIRST = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ]
}


def post(client: APIClient, body: JSON, content_type: str = "application/json") -> Response:
    return post_body(client, WIRE, body, content_type)


def failure(response: Response, status: int, code: str) -> dict[str, JSON]:
    assert response.status_code == status
    assert response.headers["Content-Type"] == "application/json"
    body: dict[str, JSON] = response.json()
    assert set(body) == {"error", "code"}
    assert body["code"] == code
    assert isinstance(body["error"], str)
    assert body["error"]
    return body


@pytest.fixture
def client(user: User) -> APIClient:
    return token_client(user)


@pytest.fixture
def foreign(make_user: MakeUser, make_conversation: MakeConversation) -> Conversation:
    conversation = make_conversation(owner=make_user(), title="secret")
    services.save_message(conversation=conversation, message={"role": "user", "content": "secret"})
    return conversation


def test_session_list(
    client: APIClient,
    user: User,
    conversation: Conversation,
    make_conversation: MakeConversation,
    foreign: Conversation,
) -> None:
    services.save_message(conversation=conversation, message={"role": "user", "content": "hi"})
    later = make_conversation(owner=user)
    services.set_status(conversation=later, status="paused", pending_ask={"question": "?"})
    later.refresh_from_db()
    conversation.refresh_from_db()
    response = post(client, {"op": "session-list"})
    assert response.status_code == 200
    assert response.json() == {
        "sessions": [
            {
                "sessionId": str(later.pk),
                "savedAt": unix_ms(later.saved_at),
                "format": "flowchart-v1",
                "messageCount": 0,
            },
            {
                "sessionId": str(conversation.pk),
                "savedAt": unix_ms(conversation.saved_at),
                "format": "conversation-v1",
                "messageCount": 1,
            },
        ]
    }


def test_session_list_is_the_first_fifty(
    client: APIClient, user: User, make_conversation: MakeConversation
) -> None:
    for _ in range(51):
        make_conversation(owner=user)
    sessions = post(client, {"op": "session-list", "sessionId": "ignored"}).json()["sessions"]
    assert len(sessions) == 50
    page = client.get(f"{API}conversations/?limit=50").json()["results"]
    assert [s["sessionId"] for s in sessions] == [row["id"] for row in page]


def test_session_list_hides_archived_conversations_like_the_rest_list(
    client: APIClient, user: User, make_conversation: MakeConversation
) -> None:
    kept, archived, pinned = (make_conversation(owner=user) for _ in range(3))
    services.update_conversation(conversation=archived, archived=True)
    services.update_conversation(conversation=pinned, pinned=True)

    def wire(body: dict[str, JSON]) -> list[str]:
        response = post(client, {"op": "session-list", **body})
        assert response.status_code == 200
        return [s["sessionId"] for s in response.json()["sessions"]]

    def rest(query: str) -> list[str]:
        response = client.get(f"{API}conversations/?limit=50{query}")
        return [row["id"] for row in response.json()["results"]]

    assert wire({}) == [str(pinned.pk), str(kept.pk)] == rest("")
    assert wire({"archived": "0"}) == rest("&archived=0")
    assert wire({"archived": "1"}) == [str(archived.pk)] == rest("&archived=1")
    assert set(wire({"archived": "all"})) == {str(c.pk) for c in (kept, archived, pinned)}
    assert wire({"archived": "all"}) == rest("&archived=all")
    for bad in ("yes", "", 1, True, None, ["all"]):
        failure(post(client, {"op": "session-list", "archived": bad}), 400, "ERR_INVALID_WIRE_OP")


def test_session_transcript_is_whole_and_projected(
    client: APIClient, conversation: Conversation
) -> None:
    messages = [{"role": "user", "content": f"q{i}"} for i in range(1200)]
    messages.append({"role": "tool", "tool_call_id": "x", "content": "hidden"})
    services.save_messages(conversation=conversation, messages=messages)
    body = post(client, {"op": "session-transcript", "sessionId": str(conversation.pk)}).json()
    assert set(body) == {"transcript"}
    assert body["transcript"]["sessionId"] == str(conversation.pk)
    assert len(body["transcript"]["messages"]) == 1200
    assert body["transcript"]["messages"][0] == {"role": "user", "content": "q0"}


def test_session_pending(client: APIClient, conversation: Conversation) -> None:
    request = {"op": "session-pending", "sessionId": str(conversation.pk)}
    assert post(client, request).json() == {"pending": None}
    services.set_status(conversation=conversation, status="paused", pending_ask={"tool": "ask"})
    assert post(client, request).json() == {"pending": {"tool": "ask"}}


@pytest.mark.parametrize("op", ["session-transcript", "session-pending"])
def test_foreign_missing_and_malformed_sessions_are_one_404(
    client: APIClient, conversation: Conversation, foreign: Conversation, op: str
) -> None:
    ids = [str(foreign.pk), missing_id(), *malformed_variants(conversation), "x" * 500]
    bodies = []
    for session_id in ids:
        response = post(client, {"op": op, "sessionId": session_id})
        body = failure(response, 404, "ERR_SESSION_NOT_FOUND")
        assert "secret" not in response.content.decode()
        bodies.append(json.dumps(body).replace(json.dumps(session_id)[1:-1], "<id>"))
    assert len(set(bodies)) == 1


@pytest.mark.parametrize(
    "body",
    [
        "",
        "not json",
        "[]",
        '"session-list"',
        "null",
        "{}",
        '{"op": 1}',
        '{"op": ""}',
        '{"op": "   "}',
        '{"op": "session-delete"}',
        '{"op": "SESSION-LIST"}',
        '{"op": "session-transcript"}',
        '{"op": "session-transcript", "sessionId": 5}',
        '{"op": "session-pending", "sessionId": ""}',
        '{"op": "session-pending", "sessionId": " "}',
        '{"op": "session-pending", "sessionId": null}',
        '{"op": NaN}',
        b"\xff\xfe{",
    ],
)
def test_bad_bodies_are_invalid_wire_op(client: APIClient, body: str | bytes) -> None:
    failure(post(client, body), 400, "ERR_INVALID_WIRE_OP")


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_any_content_type_is_read_as_json(client: APIClient, content_type: str) -> None:
    assert post(client, '{"op": "session-list"}', content_type).status_code == 200
    failure(post(client, "op=session-list", content_type), 400, "ERR_INVALID_WIRE_OP")


def test_multipart_body_is_invalid_wire_op(client: APIClient) -> None:
    response = client.post(WIRE, {"op": "session-list"}, format="multipart")
    failure(response, 400, "ERR_INVALID_WIRE_OP")


@pytest.mark.parametrize("auth", [SESSION_FIRST, None])
def test_identity_comes_first(
    conversation: Conversation, auth: dict[str, list[str]] | None
) -> None:
    anonymous = APIClient()
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token nope")
    settings = override_settings(REST_FRAMEWORK=auth) if auth else override_settings()
    with settings:
        for client in (anonymous, bad):
            for body in ({"op": "session-list"}, "garbage"):
                failure(post(client, body), 401, "ERR_IDENTITY_NOT_VERIFIED")


def test_inactive_user_is_not_verified(client: APIClient, user: User) -> None:
    user.is_active = False
    user.save()
    failure(post(client, {"op": "session-list"}), 401, "ERR_IDENTITY_NOT_VERIFIED")


def test_csrf_after_the_body_and_before_the_session(
    user: User, conversation: Conversation, foreign: Conversation
) -> None:
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(user)
    failure(post(browser, "garbage"), 400, "ERR_INVALID_WIRE_OP")
    failure(post(browser, {"op": "session-list"}), 403, "ERR_CSRF_FAILED")
    failure(
        post(browser, {"op": "session-pending", "sessionId": str(foreign.pk)}),
        403,
        "ERR_CSRF_FAILED",
    )
    relaxed = APIClient()
    relaxed.force_login(user)
    assert post(relaxed, {"op": "session-list"}).status_code == 200


def test_other_verbs_are_405_in_wire_shape(client: APIClient) -> None:
    body = failure(client.get(WIRE), 405, "ERR_METHOD_NOT_ALLOWED")
    assert "GET" in body["error"]
    assert client.get(WIRE)["Allow"] == "POST, OPTIONS"
