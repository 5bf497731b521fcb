"""The demo's token endpoint (docs/api.md "Authentication"): DRF's ``obtain_auth_token`` at
``/api/token/`` of the demo project, whose token then reads the app's API."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from murmur_conversations.models import Conversation
from tests.api_helpers import API

pytestmark = pytest.mark.django_db


def test_token_endpoint_gives_a_token_for_authorization_token(
    user: User, conversation: Conversation
) -> None:
    anonymous = APIClient()
    response = anonymous.post(
        f"{API}token/", {"username": user.username, "password": "pw"}, format="json"
    )
    assert response.status_code == 200
    token = response.json()["token"]
    assert set(response.json()) == {"token"}
    form = anonymous.post(f"{API}token/", {"username": user.username, "password": "pw"})
    assert form.json() == {"token": token}  # one token per user, form bodies too
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    listed = reader.get(f"{API}conversations/").json()["results"]
    assert [row["id"] for row in listed] == [str(conversation.pk)]


@pytest.mark.parametrize(
    "body",
    [
        {"username": "{user}", "password": "wrong"},
        {"username": "nobody", "password": "pw"},
        {"username": "{user}"},
        {"username": "", "password": ""},
    ],
)
def test_token_endpoint_refuses_bad_credentials(user: User, body: dict[str, str]) -> None:
    body = {key: value.replace("{user}", user.username) for key, value in body.items()}
    response = APIClient().post(f"{API}token/", body, format="json")
    assert response.status_code == 400
    assert "token" not in response.json()


def test_inactive_users_get_no_token(user: User) -> None:
    user.is_active = False
    user.save()
    response = APIClient().post(
        f"{API}token/", {"username": user.username, "password": "pw"}, format="json"
    )
    assert response.status_code == 400
