"""The REST API's contract (docs/api.md): owner scope, the identical 404 and 405, the
app's own renderer and errors, authentication codes, detail, PATCH, DELETE, pending, tool calls,
transcript and ws-ticket."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db.models import QuerySet
from django.test import override_settings
from rest_framework.test import APIClient
from rest_framework.throttling import UserRateThrottle

from murmur_conversations import services
from murmur_conversations.models import Conversation
from murmur_conversations.tickets import redeem_ticket
from tests.api_helpers import (
    API,
    DETAIL_ROUTES,
    NOT_FOUND,
    malformed_variants,
    missing_id,
    shape,
    token_client,
    url,
)
from tests.helpers import MakeConversation, MakeUser, Response

pytestmark = pytest.mark.django_db


class OnePerMinute(UserRateThrottle):
    """A host throttle for the tests."""

    rate = "1/minute"


def everyone_scope(user: User) -> QuerySet[Conversation]:
    """A SCOPE for tests: every conversation (as a staff or team scope might)."""
    return Conversation.objects.all()


@pytest.fixture
def owner(make_user: MakeUser) -> User:
    return make_user()


@pytest.fixture
def other(make_user: MakeUser) -> User:
    return make_user()


@pytest.fixture
def own(make_conversation: MakeConversation, owner: User) -> Conversation:
    conversation = make_conversation(owner=owner, title="mine")
    services.save_message(conversation=conversation, message={"role": "user", "content": "hello"})
    return conversation


@pytest.fixture
def foreign(make_conversation: MakeConversation, other: User) -> Conversation:
    conversation = make_conversation(owner=other, title="secret title")
    services.save_message(
        conversation=conversation, message={"role": "user", "content": "secret text"}
    )
    return conversation


@pytest.fixture
def client(owner: User) -> APIClient:
    return token_client(owner)


# ----------------------------------------------------------------------------- the 404


def denials(
    client: APIClient,
    method: str,
    route: str,
    foreign: Conversation,
    own: Conversation,
    query: str = "",
) -> list[Response]:
    ids = [str(foreign.pk), missing_id(), *malformed_variants(own)]
    send = getattr(client, method)
    return [send(url(i, route) + query) for i in ids]


@pytest.mark.parametrize("route", DETAIL_ROUTES)
@pytest.mark.parametrize("method", ["get", "head", "options"])
def test_foreign_missing_and_malformed_ids_get_one_404(
    client: APIClient, own: Conversation, foreign: Conversation, route: str, method: str
) -> None:
    responses = denials(client, method, route, foreign, own)
    first = shape(responses[0])
    assert first[0] == 404
    assert dict(first[2])["Content-Type"] == "application/json"
    if method != "head":
        assert first[1] == NOT_FOUND
    assert all(shape(r) == first for r in responses)


@pytest.mark.parametrize("method", ["patch", "delete"])
def test_writes_to_foreign_missing_and_malformed_ids_get_one_404(
    client: APIClient, own: Conversation, foreign: Conversation, method: str
) -> None:
    responses = denials(client, method, "", foreign, own)
    assert {shape(r) for r in responses} == {shape(responses[0])}
    assert responses[0].content == NOT_FOUND
    foreign.refresh_from_db()
    assert foreign.title == "secret title"


@pytest.mark.parametrize("route", DETAIL_ROUTES)
def test_the_404_comes_before_any_query_parameter(
    client: APIClient, own: Conversation, foreign: Conversation, route: str
) -> None:
    query = "?limit=x&cursor=forged&since=-1&status=bogus"
    responses = denials(client, "get", route, foreign, own, query)
    assert {shape(r) for r in responses} == {shape(denials(client, "get", route, foreign, own)[0])}
    assert responses[0].content == NOT_FOUND


def test_the_404_is_english_in_every_language(client: APIClient, foreign: Conversation) -> None:
    with override_settings(LANGUAGE_CODE="de"):
        response = client.get(url(foreign.pk), HTTP_ACCEPT_LANGUAGE="fr")
    assert response.content == NOT_FOUND


@pytest.mark.parametrize(
    ("route", "methods"),
    [("", ["put", "post"]), *[(r, ["put", "post", "patch", "delete"]) for r in DETAIL_ROUTES[1:]]],
)
def test_unsupported_verbs_get_one_405_whatever_the_id(
    client: APIClient, own: Conversation, foreign: Conversation, route: str, methods: list[str]
) -> None:
    for method in methods:
        ids = [str(own.pk), str(foreign.pk), missing_id(), *malformed_variants(own)]
        responses = [getattr(client, method)(url(i, route), {}, format="json") for i in ids]
        first = shape(responses[0])
        assert first[0] == 405
        assert json.loads(first[1])["code"] == "method_not_allowed"
        assert "PUT" not in dict(first[2])["Allow"]
        assert all(shape(r) == first for r in responses)
    own.refresh_from_db()
    assert own.title == "mine"


def test_list_route_refuses_writes_with_405(client: APIClient) -> None:
    response = client.post(f"{API}conversations/", {"title": "x"}, format="json")
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"
    assert response["Allow"] == "GET, HEAD, OPTIONS"


# ----------------------------------------------------------------------------- scope


def test_list_shows_only_own_conversations_newest_first(
    client: APIClient,
    owner: User,
    own: Conversation,
    foreign: Conversation,
    make_conversation: MakeConversation,
) -> None:
    second = make_conversation(owner=owner, title="second")
    response = client.get(f"{API}conversations/?owner={foreign.owner_id}&user={foreign.owner_id}")
    body = response.json()
    assert [row["id"] for row in body["results"]] == [str(second.pk), str(own.pk)]
    assert body["total"] == 2
    assert body["next_cursor"] is None
    assert "secret" not in response.content.decode()


DETAIL_ONLY = ("metadata", "usage_with_children")


def test_summary_and_detail_rows(client: APIClient, own: Conversation) -> None:
    services.set_status(conversation=own, status="paused", pending_ask={"question": "Proceed?"})
    own.refresh_from_db()
    detail = client.get(url(own.pk)).json()
    assert detail == {
        "id": str(own.pk),
        "title": "mine",
        "saved_at": detail["saved_at"],
        "created_at": detail["created_at"],
        "status": "paused",
        "format": "flowchart-v1",
        "message_count": 1,
        "parent_id": None,
        "parent_call_id": None,
        "child_count": 0,
        "steps": 0,
        "usage": {
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "cache_write_1h_tokens": 0,
            "reasoning_tokens": 0,
            "models": [],
            "cost": "0",
            "unpriced": [],
        },
        "pinned": False,
        "archived": False,
        "tags": [],
        "forked_from_id": None,
        "forked_at_seq": None,
        "metadata": {},
        "usage_with_children": detail["usage"],
    }
    listed = client.get(f"{API}conversations/").json()["results"][0]
    assert listed == {k: v for k, v in detail.items() if k not in DETAIL_ONLY}


@override_settings(MURMUR_CONVERSATIONS={"SCOPE": "tests.test_api.everyone_scope"})
def test_scope_setting_decides_what_a_user_reads(client: APIClient, foreign: Conversation) -> None:
    assert client.get(url(foreign.pk)).json()["title"] == "secret title"


def test_inactive_user_is_refused(client: APIClient, owner: User, own: Conversation) -> None:
    owner.is_active = False
    owner.save()
    response = client.get(url(own.pk))
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


# ----------------------------------------------------------------------------- auth and rendering


def test_no_credentials_is_401_not_authenticated(own: Conversation) -> None:
    response = APIClient().get(url(own.pk))
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json()["code"] == "not_authenticated"


def test_bad_credentials_is_401_authentication_failed(own: Conversation) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    response = client.get(f"{API}conversations/")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


def test_status_follows_the_hosts_first_authentication_class(
    own: Conversation, owner: User
) -> None:
    host = {
        "DEFAULT_AUTHENTICATION_CLASSES": [
            "rest_framework.authentication.SessionAuthentication",
            "rest_framework.authentication.TokenAuthentication",
        ]
    }
    with override_settings(REST_FRAMEWORK=host):
        anonymous = APIClient().get(url(own.pk))
        signed_in = APIClient()
        signed_in.force_login(owner)
        allowed = signed_in.get(url(own.pk))
    assert anonymous.status_code == 403
    assert "WWW-Authenticate" not in anonymous
    assert anonymous.json()["code"] == "not_authenticated"
    assert allowed.status_code == 200


def test_host_throttles_apply(client: APIClient, own: Conversation) -> None:
    host = {
        "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"],
        "DEFAULT_THROTTLE_CLASSES": ["tests.test_api.OnePerMinute"],
    }
    cache.clear()
    with override_settings(REST_FRAMEWORK=host):
        assert client.get(url(own.pk)).status_code == 200
        throttled = client.get(url(own.pk))
    cache.clear()
    assert throttled.status_code == 429
    assert throttled.json()["code"] == "throttled"
    assert "Retry-After" in throttled


def test_host_renderers_and_format_are_ignored(client: APIClient, own: Conversation) -> None:
    host = {
        "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"],
        "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.BrowsableAPIRenderer"],
        "COMPACT_JSON": False,
    }
    plain = client.get(url(own.pk))
    with override_settings(REST_FRAMEWORK=host):
        for accept in ("text/html", "application/json; indent=4"):
            response = client.get(url(own.pk) + "?format=api", HTTP_ACCEPT=accept)
            assert response["Content-Type"] == "application/json"
            assert response.content == plain.content


# ----------------------------------------------------------------------------- PATCH, DELETE


def test_patch_replaces_title_and_metadata(client: APIClient, own: Conversation) -> None:
    response = client.patch(url(own.pk), {"title": "new", "metadata": {"k": [1]}}, format="json")
    assert response.status_code == 200
    assert response.json()["title"] == "new"
    assert response.json()["metadata"] == {"k": [1]}
    own.refresh_from_db()
    assert (own.title, own.metadata) == ("new", {"k": [1]})


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ("[1, 2]", "application/json"),
        ('"title"', "application/json"),
        ("null", "application/json"),
        ("{not json", "application/json"),
        ('{"title": NaN}', "application/json"),
        ('{"owner": 1}', "application/json"),
        ('{"title": "x", "status": "idle"}', "application/json"),
        ('{"title": null}', "application/json"),
        ('{"title": 5}', "application/json"),
        ('{"title": "' + "x" * 256 + '"}', "application/json"),
        ('{"metadata": []}', "application/json"),
        ('{"metadata": "x"}', "application/json"),
        ("title=x", "application/x-www-form-urlencoded"),
        ('{"title": "x"}', "text/plain"),
    ],
)
def test_patch_refuses_bad_bodies_with_invalid_field(
    client: APIClient, own: Conversation, body: str, content_type: str
) -> None:
    response = client.generic("PATCH", url(own.pk), body, content_type=content_type)
    assert response.status_code == 400
    assert set(response.json()) == {"detail", "code"}
    assert response.json()["code"] == "invalid_field"
    own.refresh_from_db()
    assert own.title == "mine"


@override_settings(MURMUR_CONVERSATIONS={"MAX_METADATA_BYTES": 100})
def test_patch_refuses_metadata_over_the_limit(client: APIClient, own: Conversation) -> None:
    response = client.patch(url(own.pk), {"metadata": {"k": "x" * 200}}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_field"


def test_delete_removes_the_conversation(client: APIClient, own: Conversation) -> None:
    response = client.delete(url(own.pk))
    assert response.status_code == 204
    assert response.content == b""
    assert not Conversation.objects.filter(pk=own.pk).exists()
    assert client.get(url(own.pk)).content == NOT_FOUND


def test_foreign_delete_changes_nothing(client: APIClient, foreign: Conversation) -> None:
    assert client.delete(url(foreign.pk)).status_code == 404
    assert Conversation.objects.filter(pk=foreign.pk).exists()


# ----------------------------------------------------------------------------- inside one


def test_pending_ask(client: APIClient, own: Conversation) -> None:
    assert client.get(url(own.pk, "pending/")).json() == {"pending": None}
    ask = {"question": "Deploy?", "component": {"id": "c1"}, "pauseData": [1]}
    services.set_status(conversation=own, status="paused", pending_ask=ask)
    assert client.get(url(own.pk, "pending/")).json() == {"pending": ask}


def tool_conversation(own: Conversation) -> None:
    services.save_message(
        conversation=own,
        message={
            "role": "assistant",
            "content": [
                {"type": "tool_call", "id": "c1", "name": "read", "input": {"p": 1}},
                {"type": "tool_call", "id": "c2", "name": "bash", "input": {"cmd": "ls"}},
                {"type": "tool_call", "id": "c3", "name": "grep", "input": {}},
            ],
        },
    )
    services.update_tool_status(
        conversation=own, status="executing", tool_info={"call_id": "c2", "display_text": "ls"}
    )
    services.save_message(
        conversation=own, message={"role": "tool", "tool_call_id": "c1", "content": "ok"}
    )


def test_tool_calls_newest_first_with_status_filter(client: APIClient, own: Conversation) -> None:
    tool_conversation(own)
    body = client.get(url(own.pk, "tool-calls/")).json()
    assert [row["call_id"] for row in body["results"]] == ["c3", "c2", "c1"]
    assert body["total"] == 3
    c2 = body["results"][1]
    assert c2["status"] == "executing"
    assert c2["display_text"] == "ls"
    assert set(c2) == {
        "id", "call_id", "name", "arguments", "status", "interrupt_reason", "display_text",
        "result", "error", "started_at", "finished_at", "event_seq", "created_at", "children",
    }  # fmt: skip
    done = client.get(url(own.pk, "tool-calls/?status=completed")).json()
    assert [row["call_id"] for row in done["results"]] == ["c1"]
    assert done["total"] == 1
    assert client.get(url(own.pk, "tool-calls/?status=failed")).json()["total"] == 0


@pytest.mark.parametrize("value", [" ", "bogus", "COMPLETED", "completed ", "pending,failed"])
def test_unknown_tool_status_filter_is_invalid_filter(
    client: APIClient, own: Conversation, value: str
) -> None:
    response = client.get(url(own.pk, "tool-calls/"), {"status": value})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_filter"


def test_display_rows_shape_and_tool_status(client: APIClient, own: Conversation) -> None:
    tool_conversation(own)
    rows = client.get(url(own.pk, "display-messages/")).json()["results"]
    assert [row["seq"] for row in rows] == [5, 4, 3, 2, 1]
    cards = {row["tool_call_id"]: row for row in rows if row["content_type"] == "tool_call"}
    assert cards["c2"]["status"] == "executing"
    assert cards["c1"]["status"] == "completed"
    assert rows[0]["content_type"] == "tool_result"
    assert rows[0]["tool_call_id"] == "c1"
    assert rows[-1]["tool_call_id"] is None


def test_transcript_projection(client: APIClient, own: Conversation) -> None:
    conversation = own
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "system", "content": "be nice"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "text": "hmm"},
                    {"type": "text", "text": "a"},
                    {"type": "text", "text": "b"},
                    {"type": "tool_call", "id": "t1", "name": "x", "input": {}},
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "result"},
            {"role": "user", "content": "injected context", "injected": True},
            {"role": "user", "content": ""},
            {"role": "user", "content": "thanks"},
        ],
    )
    body = client.get(url(own.pk, "transcript/")).json()
    assert body == {
        "conversation_id": str(own.pk),
        "messages": [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "a\nb"},
            {"role": "user", "content": "thanks"},
        ],
        "next_cursor": None,
    }
    own.refresh_from_db()
    assert own.transcript_count == 3


@pytest.mark.parametrize(
    ("limit", "served"), [("0", 1), ("-5", 1), ("x", 3), ("2", 2), ("5000", 3)]
)
def test_transcript_limit_rule(
    client: APIClient, own: Conversation, limit: str, served: int
) -> None:
    for text in ("two", "three"):
        services.save_message(conversation=own, message={"role": "user", "content": text})
    body = client.get(url(own.pk, "transcript/"), {"limit": limit}).json()
    assert len(body["messages"]) == served
    assert (body["next_cursor"] is None) == (served == 3)


def test_transcript_pages_with_its_cursor(client: APIClient, own: Conversation) -> None:
    for index in range(4):
        services.save_message(conversation=own, message={"role": "user", "content": f"m{index}"})
    seen, cursor = [], None
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        body = client.get(url(own.pk, "transcript/"), params).json()
        seen += [m["content"] for m in body["messages"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == ["hello", "m0", "m1", "m2", "m3"]
    wrong = client.get(url(own.pk, "record/"), {"cursor": cursor or "x"})
    assert wrong.json()["code"] == "invalid_cursor"


# ----------------------------------------------------------------------------- ws-ticket


def test_ws_ticket_is_bound_to_the_caller(client: APIClient, owner: User) -> None:
    response = client.post(f"{API}ws-ticket/")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"ticket", "expires_in"}
    assert body["expires_in"] == 60
    spare = client.post(f"{API}ws-ticket/").json()["ticket"]
    redeemed = redeem_ticket(body["ticket"])
    assert redeemed is not None
    assert redeemed.user.pk == owner.pk
    assert redeem_ticket(body["ticket"]) is None  # single-use
    owner.set_password("changed")
    owner.save()
    assert redeem_ticket(spare) is None


def test_ws_ticket_needs_credentials_and_post(client: APIClient) -> None:
    response = APIClient().post(f"{API}ws-ticket/")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert client.get(f"{API}ws-ticket/").status_code == 405


def test_ws_ticket_with_a_session_needs_csrf(owner: User) -> None:
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(owner)
    response = browser.post(f"{API}ws-ticket/")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
