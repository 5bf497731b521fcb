"""Websocket authentication and revocation, the user stream, and database tailing (docs/websocket.md): cookie-origin rule, tickets, logout / deactivation / password change closing 4401,
``ws/conversations/``, and writes from "another process" arriving through the tail."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client
from pytest_django import Settings

from murmur_conversations import frames, services
from murmur_conversations.models import Conversation, DisplayMessage
from murmur_conversations.realtime import broadcast
from murmur_conversations.realtime.middleware import origin_allowed
from murmur_conversations.tickets import issue_ticket
from tests.helpers import MakeUser
from tests.realtime_helpers import (
    LOCAL_LAYER,
    TIMEOUT,
    Frame,
    connect,
    db_async,
    expect_close,
    frames_then_close,
    frames_until,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("private_layer")]

ALLOWED = (b"origin", b"http://testserver")
HOST = (b"host", b"testserver")


def path_of(conversation: Conversation) -> str:
    return f"ws/conversations/{conversation.pk}/"


def logged_in(user: User) -> tuple[Client, str]:
    client = Client()
    client.force_login(user)
    return client, client.cookies["sessionid"].value


def cookie(session_key: str) -> tuple[bytes, bytes]:
    return (b"cookie", f"sessionid={session_key}".encode())


async def say(conversation: Conversation, text: str) -> list[DisplayMessage]:
    return await db_async(services.save_message)(
        conversation=conversation, message={"role": "user", "content": text}
    )


async def sentinel(communicator: WebsocketCommunicator, conversation: Conversation) -> list[Frame]:
    marker = f"marker-{uuid.uuid4().hex}"
    await say(conversation, marker)
    return await frames_until(
        communicator,
        lambda f: f.get("message", {}).get("content") == {"text": marker},
    )


# ------------------------------------------------------------------------------ cookies, origins


async def test_session_cookie_from_an_allowed_origin_authenticates(
    user: User, conversation: Conversation
) -> None:
    _client, key = await db_async(logged_in)(user)
    communicator = await connect(path_of(conversation), headers=[ALLOWED, HOST, cookie(key)])
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    await communicator.disconnect()


@pytest.mark.parametrize(
    "origin",
    [
        None,
        b"http://evil.example",
        b"http://testserver.evil.example",
        b"null",
        b"http://[::1",
        b"\xff\xfe",
        b"http://testserver:8001",  # another port of the same host
        b"https://testserver",  # another scheme
        b"ws://testserver",
        b"http://sub.testserver",
        b"http://TESTSERVER",
        b"http://testserver/",
        b"",
    ],
)
async def test_session_cookie_from_another_origin_is_ignored(
    user: User, conversation: Conversation, origin: bytes | None
) -> None:
    _client, key = await db_async(logged_in)(user)
    headers = [HOST, cookie(key)] + ([(b"origin", origin)] if origin is not None else [])
    communicator = await connect(path_of(conversation), headers=headers)
    await expect_close(communicator, 4401)


@pytest.mark.parametrize(
    ("origin", "host", "scheme", "trusted", "allowed"),
    [
        (b"http://testserver", b"testserver", "ws", [], True),
        (b"https://testserver", b"testserver", "wss", [], True),
        (b"http://testserver", b"testserver", "wss", [], False),  # the scheme must match
        (b"http://localhost:8000", b"localhost:8000", "ws", [], True),
        (b"http://localhost:8001", b"localhost:8000", "ws", [], False),  # and the port
        (b"http://evil.example", b"evil.example", "ws", [], False),  # Host not allowed
        (b"https://app.example.com", b"testserver", "ws", ["https://app.example.com"], True),
        (b"https://app.example.com:444", b"testserver", "ws", ["https://app.example.com"], False),
        (b"http://app.example.com", b"testserver", "ws", ["https://app.example.com"], False),
        (b"https://a.example.com", b"testserver", "ws", ["https://*.example.com"], True),
        (b"https://example.com", b"testserver", "ws", ["https://*.example.com"], True),
        (b"http://a.example.com", b"testserver", "ws", ["https://*.example.com"], False),
        (b"https://a.example.com.evil", b"testserver", "ws", ["https://*.example.com"], False),
    ],
)
def test_trusted_origins_match_exactly(
    settings: Settings,
    origin: bytes,
    host: bytes,
    scheme: str,
    trusted: list[str],
    allowed: bool,
) -> None:
    """Scheme, host and port, as Django's CSRF origin check: the connection's own origin (an
    allowed Host) or an entry of CSRF_TRUSTED_ORIGINS."""
    settings.CSRF_TRUSTED_ORIGINS = trusted
    scope = {
        "type": "websocket",
        "scheme": scheme,
        "headers": [(b"origin", origin), (b"host", host)],
    }
    assert origin_allowed(scope) is allowed


async def test_ticket_works_from_any_origin(user: User, conversation: Conversation) -> None:
    communicator = await connect(
        path_of(conversation), user, headers=[(b"origin", b"http://elsewhere.example")]
    )
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    await communicator.disconnect()


async def test_a_bad_ticket_wins_over_a_good_cookie(user: User, conversation: Conversation) -> None:
    _client, key = await db_async(logged_in)(user)
    communicator = await connect(
        f"{path_of(conversation)}?ticket=forged", headers=[ALLOWED, HOST, cookie(key)]
    )
    await expect_close(communicator, 4401)


# ------------------------------------------------------------------------------ revocation


async def test_logout_closes_the_sessions_sockets_and_its_tickets(
    user: User, conversation: Conversation
) -> None:
    client, key = await db_async(logged_in)(user)
    by_cookie = await connect(path_of(conversation), headers=[ALLOWED, HOST, cookie(key)])
    ticket = issue_ticket(user=user, session_key=key)
    by_ticket = await connect(f"{path_of(conversation)}?ticket={ticket}")
    other_session = await connect("ws/conversations/", user)  # a ticket without this session
    for communicator in (by_cookie, by_ticket):
        assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    await db_async(client.logout)()
    await expect_close(by_cookie, 4401)
    await expect_close(by_ticket, 4401)
    # the socket of another session stays open: it still receives its user's news
    await db_async(services.start_conversation)(owner=user)
    frame = await other_session.receive_json_from(timeout=TIMEOUT)
    assert frame["type"] == "conversation_saved"
    await other_session.disconnect()


@pytest.mark.parametrize("change", ["deactivate", "password"])
async def test_deactivation_and_password_change_close_every_socket(
    user: User, conversation: Conversation, change: str
) -> None:
    stream = await connect("ws/conversations/", user)
    socket = await connect(path_of(conversation), user)
    await socket.receive_json_from(timeout=TIMEOUT)

    def apply() -> None:
        if change == "deactivate":
            user.is_active = False
        else:
            user.set_password("new password")
        user.save()

    await db_async(apply)()
    # Only what was published before the change (the fixture's conversation_saved) may precede
    # the close; nothing written after it reaches either socket.
    for received in (await frames_then_close(stream, 4401), await frames_then_close(socket, 4401)):
        assert all(frame.get("event_seq", 0) == 0 for frame in received), received


async def test_other_user_saves_do_not_close(
    user: User, conversation: Conversation, make_user: MakeUser
) -> None:
    socket = await connect(path_of(conversation), user)
    await socket.receive_json_from(timeout=TIMEOUT)

    def touch() -> None:
        user.first_name = "Ada"
        user.save()
        user.save(update_fields=["last_login"])
        other = make_user()
        other.is_active = False
        other.save()

    await db_async(touch)()
    assert len(await sentinel(socket, conversation)) == 1
    await socket.disconnect()


# ------------------------------------------------------------------------------ user stream


async def test_user_stream_needs_a_user() -> None:
    communicator = await connect("ws/conversations/")
    await expect_close(communicator, 4401)


async def test_user_stream_announces_saves_and_deletions(user: User, make_user: MakeUser) -> None:
    stream = await connect("ws/conversations/", user)
    stranger = await db_async(make_user)()
    await db_async(services.start_conversation)(owner=stranger, title="not mine")
    mine = await db_async(services.start_conversation)(owner=user, title="mine")
    created = await stream.receive_json_from(timeout=TIMEOUT)
    assert created["type"] == "conversation_saved"
    assert created["event_seq"] == 0
    assert created["conversation"]["id"] == str(mine.pk)
    assert created["conversation"]["title"] == "mine"
    await say(mine, "hi")
    saved = await stream.receive_json_from(timeout=TIMEOUT)
    assert set(saved) == {"type", "conversation", "event_seq"}
    assert (saved["event_seq"], saved["conversation"]["message_count"]) == (1, 1)
    await db_async(services.delete_conversation)(conversation=mine)
    assert await stream.receive_json_from(timeout=TIMEOUT) == {
        "type": "conversation_deleted",
        "conversation_id": str(mine.pk),
    }
    await stream.disconnect()


async def test_user_stream_ignores_client_frames_and_closes_on_binary(user: User) -> None:
    stream = await connect("ws/conversations/", user)
    await stream.send_to(text_data='{"type": "subscribe", "user": 1}')
    conversation = await db_async(services.start_conversation)(owner=user)
    assert (await stream.receive_json_from(timeout=TIMEOUT))["conversation"]["id"] == str(
        conversation.pk
    )
    await stream.send_to(bytes_data=b"\x01\x02")
    await expect_close(stream, 1003)


# ------------------------------------------------------------------------------ database tail


@pytest.fixture
def other_process(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> Iterator[broadcast.Broadcaster]:
    """The process-local layer with a fast tail, a broadcaster that publishes nothing and the
    frame log's origin of another process: every write looks as if another process made it, so
    only the database tail can deliver it."""
    monkeypatch.setattr(frames, "process_origin", lambda: "another-process")
    settings.CHANNEL_LAYERS = {"default": LOCAL_LAYER}
    settings.MURMUR_CONVERSATIONS = {"DB_TAIL_INTERVAL": 0.05}
    silent = broadcast.Broadcaster(layer=lambda: None)
    previous = broadcast.set_broadcaster(silent)
    yield silent
    broadcast.set_broadcaster(previous)
    silent.stop(TIMEOUT)


async def test_tail_delivers_writes_of_other_processes(
    user: User, conversation: Conversation, other_process: broadcast.Broadcaster
) -> None:
    socket = await connect(path_of(conversation), user)
    stream = await connect("ws/conversations/", user)
    await socket.receive_json_from(timeout=TIMEOUT)
    await say(conversation, "from a command")
    await db_async(services.set_status)(conversation=conversation, status="running")
    frame = await socket.receive_json_from(timeout=TIMEOUT)
    assert (frame["type"], frame["message"]["content"]) == (
        "display_message_saved",
        {"text": "from a command"},
    )
    frames = await frames_until(socket, lambda f: f["type"] == "status_changed")
    assert frames[-1]["status"] == "running"
    assert frames[-1]["event_seq"] == 2
    saved = await frames_until(stream, lambda f: f["event_seq"] == 2)
    assert all(f["conversation"]["id"] == str(conversation.pk) for f in saved)
    assert other_process.dropped > 0
    await db_async(services.delete_conversation)(conversation=conversation)
    assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "conversation_deleted"
    await expect_close(socket, 4404)
    await stream.disconnect()


async def test_tail_announces_a_rename_by_another_process(
    user: User, conversation: Conversation, other_process: broadcast.Broadcaster
) -> None:
    socket = await connect(path_of(conversation), user)
    await socket.receive_json_from(timeout=TIMEOUT)
    await db_async(services.update_conversation)(
        conversation=conversation, title="Renamed by a command"
    )
    frame = await socket.receive_json_from(timeout=TIMEOUT)
    assert frame["type"] == "conversation_updated"
    assert frame["conversation"]["title"] == "Renamed by a command"
    assert frame["event_seq"] == 1
    await socket.disconnect()


async def test_tail_notices_a_password_change(
    user: User, conversation: Conversation, other_process: broadcast.Broadcaster
) -> None:
    socket = await connect(path_of(conversation), user)
    await socket.receive_json_from(timeout=TIMEOUT)

    def change() -> None:
        user.set_password("elsewhere")
        user.save()

    await db_async(change)()
    await expect_close(socket, 4401)
