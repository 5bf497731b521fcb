"""How the API reads what a client sends (docs/api.md "Authentication", "Request bodies" and
"Pages"): bodies of every content type on every route that takes one (never a 415; a cookie
client without a CSRF token always gets the 403 first), and empty query parameters, which count as
absent on every listing. The demo's token endpoint is tested with the demo (project/tests)."""

from __future__ import annotations

import json
from itertools import product

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from murmur_conversations import services
from murmur_conversations.models import Conversation
from tests.api_helpers import API, Params, token_client, url
from tests.helpers import MakeConversation, MakeUser, Response

pytestmark = pytest.mark.django_db

CSRF = "a" * 32  # a well-formed CSRF secret, set as the cookie and sent as the header
CONTENT_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "text/plain",
    "text/plain;charset=UTF-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=xyz",
    "application/xml",
    "",
]


# ----------------------------------------------------------------------------- bodies


def token(user: User) -> APIClient:
    return token_client(user)


def cookie(user: User, *, csrf: bool) -> APIClient:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    if csrf:
        client.cookies["csrftoken"] = CSRF
    return client


def send(
    client: APIClient, method: str, path: str, body: str, content_type: str, csrf: bool
) -> Response:
    if csrf:
        return client.generic(method, path, body, content_type=content_type, HTTP_X_CSRFTOKEN=CSRF)
    return client.generic(method, path, body, content_type=content_type)


def routes(conversation: Conversation) -> list[tuple[str, str, str, dict[str, str], int, int]]:
    """(name, method, path, a valid JSON body, what it answers with application/json, what it
    answers with any other content type): every route that takes a request body."""
    detail, answer = url(conversation.pk), url(conversation.pk, "pending/answer/")
    return [
        ("patch", "PATCH", detail, {"title": "renamed"}, 200, 400),
        ("answer", "POST", answer, {"answer": "yes"}, 200, 400),
        ("wire", "POST", f"{API}session/", {"op": "session-list"}, 200, 200),
        ("ws-ticket", "POST", f"{API}ws-ticket/", {}, 200, 200),
        ("delete", "DELETE", detail, {}, 204, 204),
    ]


@pytest.mark.parametrize(
    ("content_type", "caller"), list(product(CONTENT_TYPES, ["token", "cookie+csrf", "cookie"]))
)
def test_no_body_is_a_415_and_csrf_comes_first(
    make_user: MakeUser, make_conversation: MakeConversation, content_type: str, caller: str
) -> None:
    user = make_user()
    for name, method, _path, body, json_status, other_status in routes(make_conversation()):
        conversation = make_conversation(owner=user, title="before")
        services.set_status(conversation=conversation, status="paused", pending_ask={"q": "?"})
        path = {r[0]: r[2] for r in routes(conversation)}[name]
        client = token(user) if caller == "token" else cookie(user, csrf=caller == "cookie+csrf")
        response = send(client, method, path, json.dumps(body), content_type, caller != "token")
        assert response.status_code != 415, (name, content_type, caller)
        if caller == "cookie":
            assert response.status_code == 403, (name, content_type)
            code = response.json().get("code")
            assert code == ("ERR_CSRF_FAILED" if name == "wire" else "permission_denied")
            assert Conversation.objects.get(pk=conversation.pk).title == "before"
            continue
        is_json = content_type.startswith("application/json")
        expected = json_status if is_json else other_status
        assert response.status_code == expected, (name, content_type, caller, response.content)
        if expected == 400:
            assert response.json()["code"] == "invalid_field"


@pytest.mark.parametrize("caller", ["token", "cookie+csrf"])
@pytest.mark.parametrize("content_type", ["application/json", "text/plain", ""])
def test_empty_bodies_are_refused_where_a_key_is_required(
    user: User, conversation: Conversation, caller: str, content_type: str
) -> None:
    services.set_status(conversation=conversation, status="paused", pending_ask={"q": "?"})
    client = token(user) if caller == "token" else cookie(user, csrf=True)
    csrf = caller != "token"
    response = send(client, "POST", url(conversation.pk, "pending/answer/"), "", content_type, csrf)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_field"
    assert "empty" in response.json()["detail"]
    # Every key of a PATCH is optional, as of a share link: no body changes nothing; a blank
    # body is not JSON.
    patch = send(client, "PATCH", url(conversation.pk), "", content_type, csrf)
    assert patch.status_code == 200, patch.content
    for path, method in (
        (url(conversation.pk), "PATCH"),
        (url(conversation.pk, "shares/"), "POST"),
    ):
        blank = send(client, method, path, " \n", content_type, csrf)
        assert (blank.status_code, blank.json()["code"]) == (400, "invalid_field")
    wire = send(client, "POST", f"{API}session/", "", content_type, csrf)
    assert (wire.status_code, wire.json()["code"]) == (400, "ERR_INVALID_WIRE_OP")
    conversation.refresh_from_db()
    assert (conversation.title, conversation.status) == ("Test conversation", "paused")


def test_a_same_site_fetch_with_a_string_body_reaches_the_wire(
    user: User, conversation: Conversation
) -> None:
    """``fetch("/api/session/", {method: "POST", body: JSON.stringify(...)})`` sends text/plain."""
    browser = cookie(user, csrf=True)
    body = json.dumps({"op": "session-pending", "sessionId": str(conversation.pk)})
    response = send(browser, "POST", f"{API}session/", body, "text/plain;charset=UTF-8", True)
    assert (response.status_code, response.json()) == (200, {"pending": None})
    refused = send(cookie(user, csrf=False), "POST", f"{API}session/", body, "text/plain", False)
    assert (refused.status_code, refused.json()["code"]) == (403, "ERR_CSRF_FAILED")


def test_a_form_token_is_not_read_bodies_are_json(user: User, conversation: Conversation) -> None:
    browser = cookie(user, csrf=True)
    form = f"csrfmiddlewaretoken={CSRF}&title=x"
    response = browser.generic(
        "POST", f"{API}ws-ticket/", form, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 403


# ----------------------------------------------------------------------------- query parameters


@pytest.fixture
def listings(
    user: User, conversation: Conversation, make_conversation: MakeConversation
) -> list[str]:
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "user", "content": "one"},
            {
                "role": "assistant",
                "content": [{"type": "tool_call", "id": "c1", "name": "bash", "input": {}}],
            },
        ],
    )
    make_conversation(owner=user)
    return [
        f"{API}conversations/",
        url(conversation.pk, "display-messages/"),
        url(conversation.pk, "record/"),
        url(conversation.pk, "transcript/"),
        url(conversation.pk, "tool-calls/"),
        url(conversation.pk, "pending/"),
        url(conversation.pk),
    ]


@pytest.mark.parametrize(
    "query",
    ["cursor=", "since=", "status=", "limit=", "cursor=&since=&status=&limit=", "since=&cursor="],
)
def test_an_empty_parameter_is_an_absent_one(user: User, listings: list[str], query: str) -> None:
    client = token(user)
    for path in listings:
        plain = client.get(path)
        empty = client.get(f"{path}?{query}")
        assert (empty.status_code, empty.content) == (plain.status_code, plain.content), path
        assert plain.status_code == 200


def test_an_empty_cursor_after_a_real_one_starts_again(user: User, listings: list[str]) -> None:
    client = token(user)
    path = listings[1]
    first = client.get(path, {"limit": 1}).json()
    assert first["next_cursor"]
    empty_cursor: Params = {"limit": 1, "cursor": ""}
    again = client.get(path, empty_cursor).json()
    # a cursor is signed with the time it was made: the same page, the same cursor payload
    payload = [page.pop("next_cursor").split(":")[0] for page in (first, again)]
    assert again == first and payload[0] == payload[1]
