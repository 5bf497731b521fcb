"""Pages (docs/api.md "Pages"): the limit rule, signed and bound cursors, since, walks that
return every row once while rows are appended, totals from counters, and a fixed number of queries
whatever the conversation's length."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from murmur_conversations import services
from murmur_conversations.models import Conversation, DisplayMessage
from tests.api_helpers import API, Params, token_client, url
from tests.helpers import MakeConversation, MakeUser

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(user: User) -> APIClient:
    return token_client(user)


def fill(conversation: Conversation, count: int, start: int = 0) -> None:
    services.save_messages(
        conversation=conversation,
        messages=[{"role": "user", "content": f"m{i}"} for i in range(start, start + count)],
    )


def walk(
    client: APIClient,
    path: str,
    params: Params | None = None,
    between: Callable[[int], None] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Every page of a listing; ``between(page_number)`` runs after each page."""
    rows: list[dict[str, Any]] = []
    cursor, pages = None, 0
    while True:
        query = dict(params or {})
        if cursor:
            query["cursor"] = cursor
        response = client.get(path, query)
        assert response.status_code == 200, response.content
        body = response.json()
        rows += body["results"]
        cursor = body["next_cursor"]
        pages += 1
        if between:
            between(pages)
        if cursor is None:
            return rows, pages


# ----------------------------------------------------------------------------- limit


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, 50),
        ("", 50),
        ("abc", 50),
        ("1.5", 50),
        ("1_0", 50),
        ("+5", 50),
        (" 5", 50),
        ("\u0663", 50),
        ("0", 1),
        ("-3", 1),
        ("-99999999999999999999999999", 1),
        ("7", 7),
        ("100", 100),
        ("101", 100),
        ("99999999999999999999999999", 100),
    ],
)
def test_limit_rule(
    client: APIClient, conversation: Conversation, raw: str | None, expected: int
) -> None:
    fill(conversation, 120)
    params = {} if raw is None else {"limit": raw}
    body = client.get(url(conversation.pk, "record/"), params).json()
    assert len(body["results"]) == expected
    assert body["total"] == 120
    assert body["next_cursor"] is not None


@override_settings(MURMUR_CONVERSATIONS={"PAGE_SIZE": 3, "MAX_PAGE_SIZE": 5})
def test_limit_follows_the_settings(client: APIClient, conversation: Conversation) -> None:
    fill(conversation, 10)
    assert len(client.get(url(conversation.pk, "record/")).json()["results"]) == 3
    assert len(client.get(url(conversation.pk, "record/?limit=50")).json()["results"]) == 5


def test_next_cursor_is_null_exactly_when_nothing_follows(
    client: APIClient, conversation: Conversation
) -> None:
    fill(conversation, 4)
    first = client.get(url(conversation.pk, "record/?limit=2")).json()
    second = client.get(
        url(conversation.pk, "record/"), {"limit": 2, "cursor": first["next_cursor"]}
    ).json()
    assert [r["position"] for r in first["results"]] == [4, 3]
    assert [r["position"] for r in second["results"]] == [2, 1]
    assert second["next_cursor"] is None
    assert client.get(url(conversation.pk, "record/?limit=4")).json()["next_cursor"] is None


# ----------------------------------------------------------------------------- walks


@pytest.mark.parametrize("limit", [1, 3, 7, 100])
def test_record_walk_returns_every_row_once_while_rows_are_appended(
    client: APIClient, conversation: Conversation, limit: int
) -> None:
    fill(conversation, 20)

    def append(page: int) -> None:
        fill(conversation, 2, start=1000 + page * 2)

    rows, _ = walk(client, url(conversation.pk, "record/"), {"limit": limit}, between=append)
    positions = [r["position"] for r in rows]
    assert positions == list(range(20, 0, -1))


@pytest.mark.parametrize("limit", [1, 4, 50])
def test_display_walk_returns_every_row_once_while_rows_are_appended(
    client: APIClient, conversation: Conversation, limit: int
) -> None:
    fill(conversation, 15)  # one save_messages: every row shares one timestamp

    def append(page: int) -> None:
        fill(conversation, 1, start=500 + page)

    rows, _ = walk(client, url(conversation.pk, "display-messages/"), {"limit": limit}, append)
    assert [r["seq"] for r in rows] == list(range(15, 0, -1))
    assert len({r["id"] for r in rows}) == 15


def test_display_total_is_the_number_of_rows(client: APIClient, conversation: Conversation) -> None:
    fill(conversation, 6)
    body = client.get(url(conversation.pk, "display-messages/?limit=2")).json()
    assert body["total"] == DisplayMessage.objects.filter(conversation=conversation).count() == 6


def test_since_walk_returns_every_change_in_event_order(
    client: APIClient, conversation: Conversation
) -> None:
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "tool_call", "id": f"c{i}", "name": "t", "input": {}} for i in range(5)
            ],
        },
    )
    conversation.refresh_from_db()
    since = conversation.last_event_seq
    for i in range(5):
        services.update_tool_status(
            conversation=conversation, status="executing", tool_info={"call_id": f"c{i}"}
        )
    fill(conversation, 3)
    rows, pages = walk(
        client, url(conversation.pk, "display-messages/"), {"since": since, "limit": 2}
    )
    keys = [(r["event_seq"], r["seq"]) for r in rows]
    assert keys == sorted(keys)
    assert all(r["event_seq"] > since for r in rows)
    assert len(rows) == 8
    assert pages == 4
    body = client.get(url(conversation.pk, "display-messages/"), {"since": since}).json()
    assert body["total"] == 8
    assert client.get(url(conversation.pk, "display-messages/?since=0")).json()["total"] == 8
    far = client.get(url(conversation.pk, "display-messages/"), {"since": "9" * 40}).json()
    assert far == {"results": [], "next_cursor": None, "total": 0}


@pytest.mark.parametrize("value", ["-1", "abc", "1.0", " ", " 1", "+1", "1e3", "\u0661"])
def test_bad_since_is_invalid_since(
    client: APIClient, conversation: Conversation, value: str
) -> None:
    response = client.get(url(conversation.pk, "display-messages/"), {"since": value})
    assert response.status_code == 400
    assert response.json() == {
        "detail": "since must be an integer >= 0 (an event_seq)",
        "code": "invalid_since",
    }


def test_tool_call_walk(client: APIClient, conversation: Conversation) -> None:
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "tool_call", "id": f"c{i}", "name": "t", "input": {}} for i in range(7)
            ],
        },
    )
    rows, _ = walk(client, url(conversation.pk, "tool-calls/"), {"limit": 3, "status": "pending"})
    assert [r["call_id"] for r in rows] == [f"c{i}" for i in range(6, -1, -1)]


def test_conversation_walk_never_repeats_a_conversation(
    client: APIClient, user: User, make_conversation: MakeConversation
) -> None:
    conversations = [make_conversation(owner=user, title=f"c{i}") for i in range(9)]

    def touch(page: int) -> None:  # writing moves a conversation to the top, behind the walk
        services.update_conversation(conversation=conversations[page], title=f"t{page}")

    rows, _ = walk(client, f"{API}conversations/", {"limit": 2}, between=touch)
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids))
    assert set(ids) <= {str(c.pk) for c in conversations}
    body = client.get(f"{API}conversations/?limit=2").json()
    assert body["total"] == 9


# ----------------------------------------------------------------------------- cursors


@pytest.fixture
def cursors(
    client: APIClient, conversation: Conversation, make_conversation: MakeConversation, user: User
) -> dict[str, str]:
    fill(conversation, 5)
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "tool_call", "id": "a", "name": "t", "input": {}},
                {"type": "tool_call", "id": "b", "name": "t", "input": {}},
            ],
        },
    )
    make_conversation(owner=user)
    make_conversation(owner=user)

    def first(path: str, **params: str | int) -> str:
        cursor: str = client.get(path, {"limit": 1, **params}).json()["next_cursor"]
        return cursor

    return {
        "record": first(url(conversation.pk, "record/")),
        "display": first(url(conversation.pk, "display-messages/")),
        "since": first(url(conversation.pk, "display-messages/"), since=0),
        "tools": first(url(conversation.pk, "tool-calls/")),
        "pending-tools": first(url(conversation.pk, "tool-calls/"), status="pending"),
        "list": first(f"{API}conversations/"),
        "transcript": first(url(conversation.pk, "transcript/")),
    }


def test_cursors_are_bound_to_listing_conversation_and_parameters(
    client: APIClient,
    conversation: Conversation,
    cursors: dict[str, str],
    make_conversation: MakeConversation,
    user: User,
) -> None:
    other = make_conversation(owner=user)
    fill(other, 5)
    record, display, since = (
        url(conversation.pk, r) for r in ("record/", "display-messages/", "display-messages/")
    )
    misuse: list[tuple[str, str, Params]] = [
        (record, cursors["display"], {}),
        (record, cursors["list"], {}),
        (url(other.pk, "record/"), cursors["record"], {}),
        (display, cursors["since"], {}),
        (since, cursors["since"], {"since": 1}),
        (since, cursors["display"], {"since": 0}),
        (url(conversation.pk, "tool-calls/"), cursors["pending-tools"], {}),
        (url(conversation.pk, "tool-calls/"), cursors["tools"], {"status": "pending"}),
        (url(conversation.pk, "transcript/"), cursors["record"], {}),
        (f"{API}conversations/", cursors["record"], {}),
        (record, cursors["record"][:-2] + "xx", {}),
        (record, "x" * 3000, {}),
        (record, " ", {}),
        (record, "not-a-cursor", {}),
    ]
    for path, cursor, params in misuse:
        response = client.get(path, {"cursor": cursor, **params})
        assert response.status_code == 400, (path, params)
        assert response.json()["code"] == "invalid_cursor"
    allowed: list[tuple[str, str, Params]] = [
        (record, cursors["record"], {}),
        (since, cursors["since"], {"since": 0}),
        (url(conversation.pk, "tool-calls/"), cursors["pending-tools"], {"status": "pending"}),
    ]
    for path, cursor, params in allowed:
        assert client.get(path, {"cursor": cursor, **params}).status_code == 200


def test_a_list_cursor_is_bound_to_its_caller(
    cursors: dict[str, str], make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    stranger = make_user()
    make_conversation(owner=stranger)
    response = token_client(stranger).get(f"{API}conversations/", {"cursor": cursors["list"]})
    assert response.json()["code"] == "invalid_cursor"


# ----------------------------------------------------------------------------- query counts


ROUTES = [
    "record/",
    "display-messages/",
    "display-messages/?since=0",
    "tool-calls/",
    "tool-calls/?status=pending",
    "transcript/",
    "pending/",
    "",
]


def queries(client: APIClient, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200
    return len(captured)


def grow(conversation: Conversation, size: int) -> None:
    services.save_messages(
        conversation=conversation,
        messages=[
            message
            for i in range(size)
            for message in (
                {"role": "user", "content": f"q{i}"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": f"a{i}"},
                        {"type": "tool_call", "id": f"c{i}", "name": "t", "input": {}},
                    ],
                },
                {"role": "tool", "tool_call_id": f"c{i}", "content": "r"},
            )
        ],
    )


def test_each_page_makes_a_fixed_number_of_queries(
    client: APIClient, user: User, make_conversation: MakeConversation
) -> None:
    small, large = make_conversation(owner=user), make_conversation(owner=user)
    grow(small, 2)
    grow(large, 150)
    for route in ROUTES:
        assert queries(client, url(small.pk, route)) == queries(client, url(large.pk, route)), route
        # token, conversation, rows, a count where total is not a counter, and on display rows
        # the caller's feedback (one query a page, never one a row)
        assert queries(client, url(large.pk, route)) <= 5, route
    # the display and record pages: the token, then one statement that is also the scoped lookup
    for route in ("display-messages/", "display-messages/?since=0", "record/"):
        assert queries(client, url(large.pk, route)) == 2, route
    listed = queries(client, f"{API}conversations/")
    for _ in range(60):
        make_conversation(owner=user)
    assert queries(client, f"{API}conversations/") == listed == 3
