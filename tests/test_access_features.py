"""The access matrix of the share, fork and feedback routes (docs/api.md "Errors"): a foreign, a
missing and a malformed conversation id get one 404, byte for byte, for every verb and body,
before the body or any parameter is read, and nothing is written; unsupported verbs get one 405."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from rest_framework.test import APIClient

from murmur_conversations import services
from murmur_conversations.models import Conversation, DisplayMessage, Feedback, Share
from tests.api_helpers import NOT_FOUND, malformed_variants, missing_id, shape, token_client, url
from tests.helpers import MakeConversation, MakeUser

pytestmark = pytest.mark.django_db

#: (route below conversations/<id>/, verb, body)
WRITES = [
    ("fork/", "post", {"at_seq": 1}),
    ("fork/", "post", {"at_seq": "bad"}),
    ("shares/", "get", None),
    ("shares/", "post", {}),
    ("shares/", "post", {"mode": "bad"}),
    ("shares/{share}/", "delete", None),
    ("display-messages/{row}/feedback/", "put", {"rating": 1}),
    ("display-messages/{row}/feedback/", "put", {"rating": 9}),
    ("display-messages/{row}/feedback/", "delete", None),
]


World = tuple[APIClient, Conversation, Conversation, Share, DisplayMessage]


@pytest.fixture
def world(make_user: MakeUser, make_conversation: MakeConversation) -> World:
    owner, other = make_user(), make_user()
    own = make_conversation(owner=owner, title="mine")
    foreign = make_conversation(owner=other, title="secret title")
    for conversation in (own, foreign):
        services.save_message(conversation=conversation, message={"role": "user", "content": "x"})
    share, _token = services.create_share(conversation=foreign, created_by=other)
    row = DisplayMessage.objects.get(conversation=foreign)
    return token_client(owner), own, foreign, share, row


def stored() -> tuple[int, ...]:
    return (
        Conversation.objects.count(),
        Share.objects.filter(revoked_at__isnull=True).count(),
        Share.objects.count(),
        Feedback.objects.count(),
    )


@pytest.mark.parametrize(("route", "method", "body"), WRITES)
def test_foreign_missing_and_malformed_ids_get_one_404(
    world: World, route: str, method: str, body: Any
) -> None:
    client, own, foreign, share, row = world
    route = route.format(share=share.pk, row=row.pk)
    before = stored()
    ids = [str(foreign.pk), missing_id(), *malformed_variants(own)]
    send = getattr(client, method)
    kwargs = {"format": "json"} if body is not None else {}
    responses = [send(url(i, route) + "?cursor=forged&limit=x", body, **kwargs) for i in ids]
    assert {shape(r) for r in responses} == {shape(responses[0])}
    assert (responses[0].status_code, responses[0].content) == (404, NOT_FOUND)
    assert stored() == before


def test_rows_and_shares_of_another_conversation_are_404_under_ones_own(world: World) -> None:
    client, own, _foreign, share, row = world
    before = stored()
    for response in (
        client.delete(url(own.pk, f"shares/{share.pk}/")),
        client.put(
            url(own.pk, f"display-messages/{row.pk}/feedback/"), {"rating": 1}, format="json"
        ),
        client.delete(url(own.pk, f"display-messages/{row.pk}/feedback/")),
    ):
        assert (response.status_code, response.content) == (404, NOT_FOUND)
    assert stored() == before


@pytest.mark.parametrize(
    ("route", "methods"),
    [
        ("fork/", ["get", "put", "patch", "delete"]),
        ("shares/", ["put", "patch", "delete"]),
        ("shares/{share}/", ["get", "put", "patch", "post"]),
        ("display-messages/{row}/feedback/", ["get", "patch", "post"]),
    ],
)
def test_unsupported_verbs_get_one_405_whatever_the_id(
    world: World, route: str, methods: list[str]
) -> None:
    client, own, foreign, share, row = world
    route = route.format(share=share.pk, row=row.pk)
    for method in methods:
        ids = [str(own.pk), str(foreign.pk), missing_id(), *malformed_variants(own)]
        responses = [getattr(client, method)(url(i, route), {}, format="json") for i in ids]
        first = shape(responses[0])
        assert first[0] == 405, (route, method)
        assert json.loads(first[1])["code"] == "method_not_allowed"
        assert all(shape(r) == first for r in responses)


def test_shared_route_answers_405_to_writes(world: World) -> None:
    client = world[0]
    token = "msh_" + "a" * 43
    for method in ("post", "put", "patch", "delete"):
        response = getattr(client, method)(f"/api/shared/{token}/", {}, format="json")
        assert response.status_code == 405
    assert client.get(f"/api/shared/{uuid.uuid4()}/").status_code == 404
