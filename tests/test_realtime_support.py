"""Shared helpers of the realtime tests (no tests here): a private channel layer per test, and connect/expect helpers."""

from __future__ import annotations

import os
import uuid

import pytest
from channels.testing import WebsocketCommunicator

from murmur_conversations.realtime import broadcast
from murmur_conversations.tickets import issue_ticket

TIMEOUT = 5  # seconds any expected frame may take; a bound, never a synchronisation
LOCAL_LAYER = {
    "BACKEND": "murmur_conversations.realtime.layers.ProcessLocalChannelLayer",
    "CONFIG": {"capacity": 1000},
}


def layer_settings() -> dict:
    """Redis pub/sub with a private prefix when REDIS_URL is set, else the process-local layer."""
    redis_url = os.environ.get("REDIS_URL")
    if redis_url:
        return {
            "default": {
                "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                "CONFIG": {"hosts": [redis_url], "prefix": f"murmur-t-{uuid.uuid4().hex}"},
            }
        }
    return {"default": LOCAL_LAYER}


@pytest.fixture
def private_layer(settings):
    """A fresh channel layer for the test; every queued live event is handled before teardown."""
    settings.CHANNEL_LAYERS = layer_settings()
    yield settings.CHANNEL_LAYERS
    assert broadcast.get_broadcaster().flush(TIMEOUT)


def ticket_for(user) -> str:
    return issue_ticket(user=user, session_key=None)


def demo_application():
    """``project.asgi.application`` (the real wiring)."""
    from project.asgi import application

    return application


async def connect(path: str, user=None, *, headers=None):
    """Open ``path`` (with a ticket for ``user``) through the demo ASGI application and assert the
    handshake was accepted (the contract accepts, then closes with a code)."""
    if user is not None:
        path += ("&" if "?" in path else "?") + f"ticket={ticket_for(user)}"
    communicator = WebsocketCommunicator(demo_application(), path, headers=headers or [])
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    assert connected
    return communicator


async def expect_close(communicator, code: int) -> None:
    output = await communicator.receive_output(timeout=TIMEOUT)
    assert output == {"type": "websocket.close", "code": code}
    await communicator.disconnect()


async def frames_until(communicator, predicate) -> list[dict]:
    """Frames up to and including the first one for which ``predicate`` holds."""
    received = []
    while True:
        frame = await communicator.receive_json_from(timeout=TIMEOUT)
        received.append(frame)
        if predicate(frame):
            return received
