"""The access matrix (RELIABILITY.md, docs/api.md, docs/hooks.md and docs/websocket.md): nobody reads what is not theirs.

Every HTTP route of ``murmur_conversations.api.urls`` (read from its urlpatterns, so a new route is
covered without editing this file) is called with every verb by the owner, another user, a staff
superuser who does not own the conversation, an anonymous client, a plug-in hook token issued for
another conversation, and an expired websocket ticket; every websocket path is opened by the same
callers. The owner's conversation carries a unique marker in its title, metadata (keys and values),
message text, thinking, message and source ids, tool arguments, display text, results, errors, a
notice and the pending ask. The matrix proves:

- the marker shows up for the owner (so the planting works and the checks can fail);
- no other caller ever receives it, in any body or header, nor the conversation's id;
- every answer a denied caller gets for the existing conversation equals, byte for byte (status,
  body, headers but ``Date``), the answer for a missing id and for a malformed one;
- no write verb of a denied caller changes anything.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any
from unittest import mock

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.urls import URLPattern
from pytest_django import Settings
from rest_framework.test import APIClient

from murmur_conversations import services
from murmur_conversations.api import urls as api_urls
from murmur_conversations.hooks import issue_token
from murmur_conversations.models import Conversation
from murmur_conversations.realtime.routing import websocket_urlpatterns
from tests.api_helpers import API, shape, token_client
from tests.helpers import MakeUser, Response
from tests.import_helpers import JSON
from tests.realtime_helpers import TIMEOUT, connect, db_async, frames_until, ticket_for

VERBS = ("GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE")
DENIED = ("other", "staff", "anonymous", "hook_elsewhere", "expired_ticket")
HOOKS = {"recall": {"capabilities": {"conversation": {"read": True}}}}
WRITE_BODY = {"title": "taken over", "metadata": {"owned": True}}
MALFORMED = "not-a-conversation"


def http_routes() -> list[str]:
    """Every route of the API as a path template, ``{id}`` standing for a conversation id."""
    routes = []
    for pattern in api_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        routes.append(str(pattern.pattern).replace("<str:id>", "{id}"))
    assert len(routes) >= 9, routes  # list, 6 detail routes, ws-ticket, session
    return routes


def ws_paths() -> list[str]:
    """Every websocket route, ``{id}`` standing for a conversation id (the catch-all included)."""
    paths = []
    for pattern in websocket_urlpatterns:
        text = str(pattern.pattern).lstrip("^").rstrip("$")
        paths.append(text.replace("<str:id>", "{id}").replace("(?P<id>.*)", "{id}/extra"))
    assert len(paths) >= 3, paths
    return paths


def expired_ticket(user: User) -> str:
    """A ticket for ``user`` issued two minutes ago (tickets live 60 seconds)."""
    from murmur_conversations.tickets import issue_ticket

    two_minutes_ago = time.time() - 120
    with mock.patch("time.time", return_value=two_minutes_ago):
        return issue_ticket(user=user, session_key=None)


@pytest.fixture
def marker() -> str:
    return f"SECRET{uuid.uuid4().hex}"


@pytest.fixture
def planted(make_user: MakeUser, marker: str) -> Conversation:
    """The owner's conversation, with the marker in every field any surface could show."""
    owner = make_user()
    m = marker
    conversation = services.start_conversation(
        owner=owner,
        title=f"{m}-title",
        metadata={f"{m}-key": f"{m}-meta"},
        source="murmur",
        external_id=f"{m}-external",
    )
    services.save_message(
        conversation=conversation,
        message={"role": "user", "content": f"{m}-user", "id": f"{m}-msgid", "source_id": f"{m}-s"},
    )
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "thinking", "text": f"{m}-thinking"},
                {"type": "text", "text": f"{m}-answer"},
                {"type": "tool_call", "id": f"{m}-call1", "name": "read", "input": {"p": f"{m}-a"}},
                {"type": "tool_call", "id": f"{m}-call2", "name": "run", "input": {"p": f"{m}-b"}},
            ],
        },
    )
    services.update_tool_status(
        conversation=conversation,
        status="executing",
        tool_info={"call_id": f"{m}-call1", "display_text": f"{m}-display"},
    )
    services.save_message(
        conversation=conversation,
        message={"role": "tool", "tool_call_id": f"{m}-call1", "content": f"{m}-result"},
    )
    services.update_tool_status(
        conversation=conversation,
        status="failed",
        tool_info={"call_id": f"{m}-call2", "error": f"{m}-error"},
    )
    services.save_synthetic_message(
        conversation=conversation,
        message_type="system",
        content_type="notification",
        content={"text": f"{m}-notice"},
    )
    services.set_status(
        conversation=conversation, status="paused", pending_ask={"question": f"{m}-ask"}
    )
    conversation.refresh_from_db()
    return conversation


@pytest.fixture
def callers(
    make_user: MakeUser, planted: Conversation, settings: Settings
) -> dict[str, tuple[APIClient, str, str]]:
    """name -> (APIClient, query suffix, websocket query) for every caller of the matrix."""
    settings.MURMUR_CONVERSATIONS = {"HOOKS": HOOKS}
    other = make_user()
    staff = make_user(is_staff=True, is_superuser=True)
    # The hook token names another conversation of the same owner: the worst case.
    owner = planted.owner
    assert owner is not None
    elsewhere = services.start_conversation(owner=owner, title="elsewhere")
    hook = APIClient()
    hook.credentials(
        HTTP_AUTHORIZATION=f"MurmurHook {issue_token(hook='recall', conversation=elsewhere.pk)}"
    )
    for someone in (other, staff):  # they have conversations of their own
        services.start_conversation(owner=someone, title="mine")
    hook_token = issue_token(hook="recall", conversation=elsewhere.pk)
    expired = expired_ticket(owner)
    return {
        "owner": (token_client(owner), "", f"{FRESH}{owner.pk}"),
        "other": (token_client(other), "", f"{FRESH}{other.pk}"),
        "staff": (token_client(staff), "", f"{FRESH}{staff.pk}"),
        "anonymous": (APIClient(), "", ""),
        "hook_elsewhere": (hook, "", f"ticket={hook_token}"),  # a hook token is not a ticket
        "expired_ticket": (APIClient(), f"?ticket={expired}", f"ticket={expired}"),
    }


#: A websocket query of ``callers`` that stands for a fresh ticket of this user pk (single-use).
FRESH = "fresh-ticket-of:"


async def ws_query(query: str) -> str:
    """The websocket query to send: a new ticket for a ``FRESH`` query, else the query."""
    if not query.startswith(FRESH):
        return query
    user = await db_async(User.objects.get)(pk=int(query.removeprefix(FRESH)))
    return f"ticket={await db_async(ticket_for)(user)}"


def call(client: APIClient, verb: str, path: str) -> Response:
    if verb in ("POST", "PUT", "PATCH"):
        return client.generic(verb, path, _json(WRITE_BODY), content_type="application/json")
    return client.generic(verb, path)


def _json(value: JSON) -> str:
    return json.dumps(value)


def leaks(response: Response, marker: str, conversation_id: str) -> list[str]:
    """What of the owner's conversation ``response`` reveals (body or headers)."""
    found = []
    for secret in (marker, conversation_id):
        if secret.encode() in response.content:
            found.append(f"{secret[:12]}... in body")
        for name, value in response.headers.items():
            if secret in name or secret in value:
                found.append(f"{secret[:12]}... in header {name}")
    return found


def snapshot(conversation: Conversation) -> tuple[object, ...]:
    fresh = Conversation.objects.get(pk=conversation.pk)
    return (
        fresh.title,
        fresh.metadata,
        fresh.status,
        fresh.pending_ask,
        fresh.record_length,
        fresh.last_seq,
        fresh.last_event_seq,
    )


@pytest.mark.django_db
@pytest.mark.parametrize("who", DENIED)
def test_denied_callers_learn_nothing_and_change_nothing(
    planted: Conversation, callers: dict[str, tuple[APIClient, str, str]], marker: str, who: str
) -> None:
    """For each route x verb: no marker or id leaks, and the answer for the existing conversation
    equals the answers for a missing and a malformed id; afterwards the conversation is unchanged."""
    client, query, _ = callers[who]
    before = snapshot(planted)
    existing, missing = str(planted.pk), str(uuid.uuid4())
    problems: list[str] = []
    for route in http_routes():
        for verb in VERBS:
            if "{id}" in route:
                paths = [API + route.format(id=i) + query for i in (existing, missing, MALFORMED)]
                answers = [call(client, verb, path) for path in paths]
                if shape(answers[0]) != shape(answers[1]):
                    problems.append(f"{verb} {route}: existing != missing: {answers[0].content!r}")
                if shape(answers[1]) != shape(answers[2]):
                    problems.append(f"{verb} {route}: missing != malformed")
            else:
                answers = [call(client, verb, API + route + query)]
            for answer in answers:
                if answer.status_code >= 500:
                    problems.append(f"{verb} {route}: {answer.status_code}")
                problems.extend(f"{verb} {route}: {x}" for x in leaks(answer, marker, existing))
    assert problems == []
    assert snapshot(planted) == before


@pytest.mark.django_db
@pytest.mark.parametrize("who", DENIED)
@pytest.mark.parametrize("op", ["session-transcript", "session-pending"])
def test_session_wire_denials_equal_the_missing_session(
    planted: Conversation,
    callers: dict[str, tuple[APIClient, str, str]],
    marker: str,
    who: str,
    op: str,
) -> None:
    """``POST session/`` naming the owner's conversation answers a denied caller exactly like a
    missing session once the echoed id is replaced, and session-list shows none of it."""
    client, query, _ = callers[who]
    existing, missing = str(planted.pk), str(uuid.uuid4())

    def ask(session_id: str) -> Response:
        body = _json({"op": op, "sessionId": session_id})
        return client.generic("POST", API + "session/" + query, body, "application/json")

    first, second = ask(existing), ask(missing)
    assert first.status_code in (401, 404)
    normalised = first.content.replace(existing.encode(), missing.encode())
    assert (first.status_code, normalised) == (second.status_code, second.content)
    headers = [(k, v) for k, v in shape(first)[2] if k.lower() != "content-length"]
    assert headers == [(k, v) for k, v in shape(second)[2] if k.lower() != "content-length"]
    listing = client.generic(
        "POST", API + "session/" + query, '{"op":"session-list"}', "application/json"
    )
    assert leaks(listing, marker, existing) == []
    assert marker.encode() not in first.content


@pytest.mark.django_db
def test_the_owner_sees_the_marker_everywhere(
    planted: Conversation, callers: dict[str, tuple[APIClient, str, str]], marker: str
) -> None:
    """The positive control: every readable route shows the owner what was planted, so the
    denial checks above are able to fail."""
    client, _, _ = callers["owner"]
    for route in ("", "display-messages/", "record/", "transcript/", "pending/", "tool-calls/"):
        answer = client.get(API + f"conversations/{planted.pk}/" + route)
        assert answer.status_code == 200, route
        assert marker.encode() in answer.content, route
    assert marker.encode() in client.get(API + "conversations/").content


@pytest.mark.django_db
def test_a_hook_token_reads_only_its_own_conversation(
    planted: Conversation, callers: dict[str, tuple[APIClient, str, str]], marker: str
) -> None:
    """The hook token opens the record of its own conversation and no other route: the planted
    conversation's record answers 404 like a missing one."""
    client, _, _ = callers["hook_elsewhere"]
    answer = client.get(API + f"conversations/{planted.pk}/record/")
    assert answer.status_code == 404
    assert marker.encode() not in answer.content


# ------------------------------------------------------------------------------ websockets


async def outputs_until_close(communicator: WebsocketCommunicator) -> list[dict[str, Any]]:
    """Every output of a socket up to and including its close (bounded by TIMEOUT each)."""
    received = []
    while True:
        output = await communicator.receive_output(timeout=TIMEOUT)
        received.append(output)
        if output["type"] == "websocket.close":
            await communicator.disconnect()
            return received


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("private_layer")
@pytest.mark.parametrize("who", DENIED)
async def test_websocket_denials_equal_the_missing_conversation(
    planted: Conversation, callers: dict[str, tuple[APIClient, str, str]], marker: str, who: str
) -> None:
    """Each conversation websocket path, opened by a denied caller, sends no frame and closes
    exactly as it does for a missing and a malformed id (4401 without a valid user, else 4404)."""
    existing, missing = str(planted.pk), str(uuid.uuid4())
    query = callers[who][2]
    for template in ws_paths():
        if "{id}" not in template:
            continue
        answers = []
        for conversation_id in (existing, missing, MALFORMED):
            for since in ("", "since=0"):
                suffix = "&".join(x for x in (await ws_query(query), since) if x)
                path = template.format(id=conversation_id) + (f"?{suffix}" if suffix else "")
                answers.append(await outputs_until_close(await connect(path)))
        expected = 4401 if who in ("anonymous", "hook_elsewhere", "expired_ticket") else 4404
        assert all(a == [{"type": "websocket.close", "code": expected}] for a in answers), answers


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("private_layer")
async def test_another_users_stream_hears_nothing_of_the_owners_writes(
    planted: Conversation,
    callers: dict[str, tuple[APIClient, str, str]],
    make_user: MakeUser,
    marker: str,
) -> None:
    """``ws/conversations/`` of another user and of staff: while the owner writes (with the
    marker) and renames, their streams carry only their own conversations; a sentinel write of
    their own, sent after the owner's writes, bounds the wait."""
    spies = [await db_async(make_user)(is_staff=flag) for flag in (False, True)]
    own = [await db_async(services.start_conversation)(owner=spy, title="mine") for spy in spies]
    streams = [await connect("ws/conversations/", spy) for spy in spies]
    await db_async(services.save_message)(
        conversation=planted, message={"role": "user", "content": f"{marker}-live"}
    )
    await db_async(services.update_conversation)(conversation=planted, title=f"{marker}-renamed")
    owner_query = await ws_query(callers["owner"][2])
    owner_stream = await connect(f"ws/conversations/{planted.pk}/?since=0&{owner_query}")
    for stream, conversation in zip(streams, own, strict=True):
        await db_async(services.update_conversation)(conversation=conversation, title="sentinel")
        frames = await frames_until(
            stream, lambda f: f.get("conversation", {}).get("title") == "sentinel"
        )
        text = _json(frames)
        assert marker not in text and str(planted.pk) not in text
        await stream.disconnect()
    seen = _json(await frames_until(owner_stream, lambda f: f"{marker}-live" in _json(f)))
    assert marker in seen  # positive control: the owner's replay carries it
    await owner_stream.disconnect()
