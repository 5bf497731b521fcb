"""Helpers of the realtime tests (docs/websocket.md): channel layer settings, tickets, and
connect/expect helpers around Channels' ``WebsocketCommunicator``."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from channels.db import database_sync_to_async
from channels.routing import get_default_application
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from murmur_conversations.realtime.layers import ProcessLocalChannelLayer
from murmur_conversations.tickets import issue_ticket

#: A websocket frame as JSON (docs/websocket.md).
Frame = dict[str, Any]

P = ParamSpec("P")
R = TypeVar("R")

#: Seconds any expected frame may take (a loaded 2-core CI machine): a bound, never a synchronisation.
TIMEOUT = 15
LOCAL_LAYER = {
    "BACKEND": "murmur_conversations.realtime.layers.ProcessLocalChannelLayer",
    "CONFIG": {"capacity": 1000},
}


def layer_settings(prefix: str = "murmur-t") -> dict[str, Any]:
    """``CHANNEL_LAYERS``: Redis pub/sub with a private prefix (``prefix`` + random) when
    ``REDIS_URL`` is set, else the process-local layer."""
    redis_url = os.environ.get("REDIS_URL")
    if redis_url:
        return {
            "default": {
                "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                "CONFIG": {"hosts": [redis_url], "prefix": f"{prefix}-{uuid.uuid4().hex}"},
            }
        }
    return {"default": LOCAL_LAYER}


def db_async(function: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """Channels' ``database_sync_to_async`` (the ORM in a worker thread, its connection closed
    when stale), with the wrapped function's types."""
    wrapped: Callable[P, Awaitable[R]] = database_sync_to_async(function)
    return wrapped


def ticket_for(user: User) -> str:
    return issue_ticket(user=user, session_key=None)


async def connect(
    path: str, user: User | None = None, *, headers: list[tuple[bytes, bytes]] | None = None
) -> WebsocketCommunicator:
    """Open ``path`` (with a ticket for ``user``) through the settings' ASGI application (the
    real wiring) and assert the handshake was accepted (the contract accepts, then closes with a
    code)."""
    if user is not None:
        path += ("&" if "?" in path else "?") + f"ticket={ticket_for(user)}"
    communicator = WebsocketCommunicator(get_default_application(), path, headers=headers or [])
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    assert connected
    return communicator


async def expect_close(communicator: WebsocketCommunicator, code: int) -> None:
    output = await communicator.receive_output(timeout=TIMEOUT)
    assert output == {"type": "websocket.close", "code": code}
    await communicator.disconnect()


async def frames_then_close(communicator: WebsocketCommunicator, code: int) -> list[Frame]:
    """The frames ``communicator`` receives before it is closed with ``code`` (asserted). Events
    published before the cause of the close may still be on their way (a layer delivers them
    later than the write's commit), so a close may come after them."""
    received: list[Frame] = []
    while True:
        output = await communicator.receive_output(timeout=TIMEOUT)
        if output["type"] != "websocket.send":
            assert output == {"type": "websocket.close", "code": code}
            await communicator.disconnect()
            return received
        received.append(json.loads(output["text"]))


async def frames_until(
    communicator: WebsocketCommunicator, predicate: Callable[[Frame], bool]
) -> list[Frame]:
    """Frames up to and including the first one for which ``predicate`` holds."""
    received = []
    while True:
        frame = await communicator.receive_json_from(timeout=TIMEOUT)
        received.append(frame)
        if predicate(frame):
            return received


class UnreachableLayer(ProcessLocalChannelLayer):
    """A channel layer whose server cannot be reached (Redis down): every call that would talk
    to it raises ``ConnectionRefusedError``, as a socket to a stopped server does."""

    async def new_channel(self, prefix: str = "specific.") -> str:
        raise ConnectionRefusedError(111, "Connection refused")

    async def group_add(self, group: str, channel: str) -> None:
        raise ConnectionRefusedError(111, "Connection refused")
