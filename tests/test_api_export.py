"""``GET conversations/{id}/export/?format=NAME`` (docs/api.md "Export"): every export format as a
download of the bytes ``export_conversation`` writes, scoped like every read."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from murmur_conversations import services
from murmur_conversations.exporters import EXPORTERS
from murmur_conversations.models import Conversation
from tests.api_helpers import API, token_client
from tests.helpers import MakeConversation, MakeUser
from tests.import_helpers import export

pytestmark = pytest.mark.django_db


@pytest.fixture
def saved(make_conversation: MakeConversation, user: User) -> Conversation:
    conversation = make_conversation(owner=user)
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "user", "id": "u1", "content": "hi"},
            {
                "role": "assistant",
                "id": "a1",
                "content": [
                    {"type": "text", "text": "looking"},
                    {"type": "tool_call", "id": "c1", "name": "bash", "input": {"cmd": "ls"}},
                ],
            },
            {"role": "tool", "id": "r1", "tool_call_id": "c1", "content": "a.txt"},
        ],
    )
    return conversation


@pytest.mark.parametrize("fmt", list(EXPORTERS))
def test_each_format_downloads_what_the_command_writes(
    saved: Conversation, user: User, fmt: str
) -> None:
    response = token_client(user).get(f"{API}conversations/{saved.pk}/export/", {"format": fmt})
    assert response.status_code == 200
    assert response.content.decode() == export(saved, "--format", fmt)
    assert response["Content-Disposition"].startswith("attachment; filename=")
    if fmt in ("murmur", "otlp-json"):  # JSON Lines
        assert response["Content-Type"].startswith("application/x-ndjson")
        assert all(json.loads(line) for line in response.content.decode().splitlines())
    else:
        assert response["Content-Type"].startswith("application/json")
        json.loads(response.content)


def test_the_default_is_murmur(saved: Conversation, user: User) -> None:
    response = token_client(user).get(f"{API}conversations/{saved.pk}/export/")
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert response.content.decode() == export(saved)


def test_foreign_missing_and_malformed_ids_are_the_same_404(
    saved: Conversation, make_user: MakeUser
) -> None:
    stranger = token_client(make_user("stranger"))
    answers = [
        stranger.get(f"{API}conversations/{cid}/export/", {"format": "vercel-ui"})
        for cid in (saved.pk, uuid.uuid4(), "nope")
    ]
    assert {a.status_code for a in answers} == {404}
    assert len({a.content for a in answers}) == 1
    assert APIClient().get(f"{API}conversations/{saved.pk}/export/").status_code in (401, 403)


def test_an_unknown_format_is_a_400(saved: Conversation, user: User) -> None:
    response = token_client(user).get(f"{API}conversations/{saved.pk}/export/", {"format": "xml"})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_field"
    assert "vercel-ui" in response.json()["detail"]


def test_the_route_is_in_the_openapi_schema(user: User) -> None:
    raw = token_client(user).get(f"{API}schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    route = json.loads(raw.content)["paths"]["/api/conversations/{id}/export/"]["get"]
    assert {p["name"] for p in route["parameters"]} >= {"id", "format"}
    assert set(route["responses"]["200"]["content"]) == {"application/json", "application/x-ndjson"}


@pytest.mark.parametrize("fmt", ["ag-ui", "openai-items"])
def test_pages_walk_to_the_whole_list(saved: Conversation, user: User, fmt: str) -> None:
    client = token_client(user)
    url = f"{API}conversations/{saved.pk}/export/"
    whole = json.loads(client.get(url, {"format": fmt}).content)
    walked, cursor, pages = [], "", 0
    while True:
        page = client.get(url, {"format": fmt, "limit": "1", "cursor": cursor}).json()
        assert page["total"] == saved.record_length
        walked.extend(page["results"])
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == saved.record_length and walked == whole


def test_a_cursor_of_another_format_or_conversation_is_refused(
    saved: Conversation, user: User, make_conversation: MakeConversation
) -> None:
    client = token_client(user)
    url = f"{API}conversations/{saved.pk}/export/"
    cursor = client.get(url, {"format": "ag-ui", "limit": "1"}).json()["next_cursor"]
    other = make_conversation(owner=user)
    for where, fmt in ((url, "openai-items"), (f"{API}conversations/{other.pk}/export/", "ag-ui")):
        answer = client.get(where, {"format": fmt, "cursor": cursor})
        assert (answer.status_code, answer.json()["code"]) == (400, "invalid_cursor")
    # vercel-ui has no pages: limit is ignored, the whole list comes
    listed = client.get(url, {"format": "vercel-ui", "limit": "1"})
    assert listed.content.decode() == export(saved, "--format", "vercel-ui")


def test_a_page_costs_the_same_queries_whatever_the_length(
    make_conversation: MakeConversation, user: User
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = token_client(user)
    counts = []
    for length in (3, 40):
        conversation = make_conversation(owner=user)
        services.save_messages(
            conversation=conversation,
            messages=[{"role": "user", "content": f"m{i}"} for i in range(length)],
        )
        url = f"{API}conversations/{conversation.pk}/export/"
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url, {"format": "openai-items", "limit": "2"}).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]
