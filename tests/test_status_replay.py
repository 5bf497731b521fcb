"""Exact status replay (docs/websocket.md): a reconnect with ``?since=N`` sends ``status_changed``
exactly when the status or pending ask changed after ``N`` (``Conversation.status_event_seq``),
never an extra frame for events that left no row behind (a rename, a pin, a deleted child)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from murmur_conversations import services
from murmur_conversations.models import Conversation
from tests.realtime_helpers import TIMEOUT, connect, db_async, frames_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("private_layer")]

Step = Callable[[Conversation], Awaitable[Any]]


def say(text: str) -> Step:
    return lambda c: db_async(services.save_message)(
        conversation=c, message={"role": "user", "content": text}
    )


def status(value: str, ask: dict[str, Any] | None = None) -> Step:
    return lambda c: db_async(services.set_status)(conversation=c, status=value, pending_ask=ask)


def rename(title: str) -> Step:
    return lambda c: db_async(services.update_conversation)(conversation=c, title=title)


def pin(value: bool) -> Step:
    return lambda c: db_async(services.update_conversation)(conversation=c, pinned=value)


def child() -> Step:
    async def make(c: Conversation) -> None:
        kid = await db_async(services.start_conversation)(owner=None, parent=c)
        await db_async(services.delete_conversation)(conversation=kid)

    return make


#: Scripts of writes; each takes one event_seq per step (a child takes two: created, deleted).
SCRIPTS: dict[str, list[Step]] = {
    "rename-after-status": [say("a"), status("running"), rename("x"), pin(True), say("b")],
    "status-last": [say("a"), rename("x"), status("running")],
    "ask-and-answer": [status("paused", {"question": "go?"}), say("a"), status("idle"), pin(True)],
    "child-after-status": [status("running"), child(), say("a")],
    "no-status-change": [say("a"), rename("y"), pin(True)],
}


async def frames_after(user: User, conversation: Conversation, since: int) -> list[str]:
    """The frame types a reconnect with ``?since=since`` receives before a marker written after
    it (the snapshot left out)."""
    communicator = await connect(f"ws/conversations/{conversation.pk}/?since={since}", user)
    snapshot = await communicator.receive_json_from(timeout=TIMEOUT)
    assert snapshot["type"] == "snapshot"
    marker = f"marker-{since}"
    await say(marker)(conversation)
    received = await frames_until(
        communicator,
        lambda f: (
            f["type"] == "display_message_saved" and f["message"]["content"] == {"text": marker}
        ),
    )
    await communicator.disconnect()
    return [f["type"] for f in received[:-1]]


@pytest.mark.parametrize("script", SCRIPTS, ids=list(SCRIPTS))
async def test_replay_sends_status_changed_exactly_when_it_changed_after_since(
    user: User, conversation: Conversation, script: str
) -> None:
    for step in SCRIPTS[script]:
        await step(conversation)
    await db_async(conversation.refresh_from_db)()
    head, changed_at = conversation.last_event_seq, conversation.status_event_seq
    for since in range(head + 1):
        types = await frames_after(user, conversation, since)
        await db_async(conversation.refresh_from_db)()
        expected = 1 if changed_at > since else 0
        assert types.count("status_changed") == expected, (since, types)
    # the markers took events, none a status change
    assert conversation.status_event_seq == changed_at
