"""``record/`` for plug-ins over HTTP (docs/hooks.md): MurmurHook tokens, grants re-checked
at every read, the same 404 for another conversation, 401 for bad tokens, 403 without the grant."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import User
from pytest_django import Settings
from rest_framework.test import APIClient

from murmur_conversations import hooks, services
from murmur_conversations.models import Conversation
from tests.api_helpers import NOT_FOUND, missing_id, shape, token_client, url
from tests.helpers import MakeConversation

pytestmark = pytest.mark.django_db
GRANT = {"HOOKS": {"recall": {"capabilities": {"conversation": {"read": True}}}}}


@pytest.fixture(autouse=True)
def grants(settings: Settings) -> None:
    settings.MURMUR_CONVERSATIONS = GRANT


def hook_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"MurmurHook {token}")
    return client


@pytest.fixture
def filled(conversation: Conversation) -> Conversation:
    services.save_messages(
        conversation=conversation,
        messages=[{"role": "user", "content": f"m{i}", "id": f"id{i}"} for i in range(5)],
    )
    return conversation


def test_hook_token_reads_the_record_page_by_page(filled: Conversation) -> None:
    client = hook_client(hooks.issue_token(hook="recall", conversation=filled))
    first = client.get(url(filled.pk, "record/"), {"limit": 3})
    assert first.status_code == 200
    body = first.json()
    assert [row["id"] for row in body["results"]] == ["id4", "id3", "id2"]
    assert body["total"] == 5
    second = client.get(url(filled.pk, "record/"), {"limit": 3, "cursor": body["next_cursor"]})
    assert [row["id"] for row in second.json()["results"]] == ["id1", "id0"]
    assert second.json()["next_cursor"] is None


def test_token_for_another_conversation_is_the_missing_answer(
    filled: Conversation, make_conversation: MakeConversation
) -> None:
    other = make_conversation()
    client = hook_client(hooks.issue_token(hook="recall", conversation=other))
    foreign = client.get(url(filled.pk, "record/"))
    missing = client.get(url(missing_id(), "record/"))
    malformed = client.get(url("nope", "record/"))
    assert foreign.content == NOT_FOUND
    assert shape(foreign) == shape(missing) == shape(malformed)


def test_hook_without_grant_is_403_and_grant_is_rechecked(
    filled: Conversation, settings: Settings
) -> None:
    client = hook_client(hooks.issue_token(hook="recall", conversation=filled))
    assert client.get(url(filled.pk, "record/")).status_code == 200
    settings.MURMUR_CONVERSATIONS = {"HOOKS": {}}
    denied = client.get(url(filled.pk, "record/"))
    assert denied.status_code == 403
    assert denied.json()["code"] == "not_granted"


@pytest.mark.parametrize(
    "header", ["MurmurHook garbage", "MurmurHook", "MurmurHook a b", "murmurhook x.y.z"]
)
def test_bad_token_is_401_with_the_scheme(filled: Conversation, header: str) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get(url(filled.pk, "record/"))
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"
    assert response.headers["WWW-Authenticate"] == "MurmurHook"


def test_expired_token_is_401(filled: Conversation, monkeypatch: pytest.MonkeyPatch) -> None:
    token = hooks.issue_token(hook="recall", conversation=filled, max_age=5)
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 10)  # what signing reads
    response = hook_client(token).get(url(filled.pk, "record/"))
    assert response.status_code == 401


def test_hook_token_opens_no_other_route(filled: Conversation) -> None:
    client = hook_client(hooks.issue_token(hook="recall", conversation=filled))
    for route in ("", "display-messages/", "transcript/", "pending/", "tool-calls/"):
        response = client.get(url(filled.pk, route))
        assert response.status_code in (401, 403), route
        assert b"m1" not in response.content


def test_users_still_read_the_record(filled: Conversation, user: User) -> None:
    response = token_client(user).get(url(filled.pk, "record/"))
    assert response.status_code == 200
    assert response.json()["total"] == 5


def test_hook_cursor_is_not_a_user_cursor(filled: Conversation, user: User) -> None:
    page = token_client(user).get(url(filled.pk, "record/"), {"limit": 2}).json()
    client = hook_client(hooks.issue_token(hook="recall", conversation=filled))
    response = client.get(url(filled.pk, "record/"), {"cursor": page["next_cursor"]})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_cursor"
