"""Child conversations live (docs/websocket.md "child_updated"): a child's writes stream on the
child's own stream; the parent's stream hears ``child_updated`` when a child is created or its
status or steps change, and ``child_deleted``, each with an event_seq of the parent, so replay
with ``?since=`` and gap filling cover them; the user stream's summaries carry ``parent_id``."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from murmur_conversations import services
from murmur_conversations.models import Conversation
from tests.realtime_helpers import TIMEOUT, connect, db_async, frames_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("private_layer")]

start = db_async(services.start_conversation)
save = db_async(services.save_message)
set_status = db_async(services.set_status)
delete = db_async(services.delete_conversation)


def path_of(conversation: Conversation) -> str:
    return f"ws/conversations/{conversation.pk}/"


async def task(conversation: Conversation, call_id: str = "toolu_task") -> None:
    await save(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": call_id, "name": "Task", "input": {}}],
        },
    )


async def step(conversation: Conversation, call_id: str) -> None:
    await save(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": call_id, "name": "bash", "input": {}}],
        },
    )


async def refreshed(conversation: Conversation) -> Conversation:
    await db_async(conversation.refresh_from_db)()
    return conversation


async def test_the_parent_hears_a_child_created_running_and_stepping(
    user: User, conversation: Conversation
) -> None:
    await task(conversation)
    parent = await connect(path_of(conversation), user)
    assert (await parent.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    child = await start(owner=user, parent=conversation, parent_call_id="toolu_task", title="Count")
    created = await parent.receive_json_from(timeout=TIMEOUT)
    await refreshed(conversation)
    assert created == {
        "type": "child_updated",
        "conversation_id": str(conversation.pk),
        "event_seq": 2,
        "child": {
            "id": str(child.pk),
            "title": "Count",
            "saved_at": created["child"]["saved_at"],
            "created_at": created["child"]["created_at"],
            "status": "idle",
            "format": "conversation-v1",
            "message_count": 0,
            "parent_id": str(conversation.pk),
            "parent_call_id": "toolu_task",
            "child_count": 0,
            "steps": 0,
            "usage": created["child"]["usage"],
            "pinned": False,
            "archived": False,
            "tags": [],
            "forked_from_id": None,
            "forked_at_seq": None,
        },
    }
    assert created["child"]["usage"]["cost"] == "0"
    own = await connect(path_of(child), user)
    assert (await own.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    await set_status(conversation=child, status="running")
    await step(child, "c1")
    await step(child, "c2")
    heard = [await parent.receive_json_from(timeout=TIMEOUT) for _ in range(3)]
    assert [(f["type"], f["event_seq"]) for f in heard] == [
        ("child_updated", 3),
        ("child_updated", 4),
        ("child_updated", 5),
    ]
    assert [(f["child"]["status"], f["child"]["steps"]) for f in heard] == [
        ("running", 0),
        ("running", 1),
        ("running", 2),
    ]
    # the child's own rows stream on the child's stream, never on the parent's
    mine = await frames_until(
        own, lambda f: f["type"] == "display_message_saved" and f["event_seq"] == 3
    )
    assert {f["conversation_id"] for f in mine} == {str(child.pk)}
    await save(conversation=child, message={"role": "tool", "tool_call_id": "c1", "content": "7"})
    await save(conversation=conversation, message={"role": "user", "content": "marker"})
    [marker] = [await parent.receive_json_from(timeout=TIMEOUT)]
    assert (marker["type"], marker["event_seq"]) == ("display_message_saved", 6)
    await parent.disconnect()
    await own.disconnect()


async def test_replay_since_covers_the_children(user: User, conversation: Conversation) -> None:
    await task(conversation)  # event 1
    first = await start(owner=user, parent=conversation, parent_call_id="toolu_task")  # 2
    second = await start(owner=user, parent=conversation)  # 3
    await set_status(conversation=first, status="running")  # 4
    await save(conversation=conversation, message={"role": "user", "content": "later"})  # 5
    await step(first, "c1")  # 6
    communicator = await connect(f"{path_of(conversation)}?since=2", user)
    snapshot = await communicator.receive_json_from(timeout=TIMEOUT)
    assert snapshot["event_seq"] == 6
    assert snapshot["conversation"]["child_count"] == 2
    replay = [await communicator.receive_json_from(timeout=TIMEOUT) for _ in range(3)]
    assert [(f["type"], f["event_seq"]) for f in replay] == [
        ("child_updated", 3),
        ("display_message_saved", 5),
        ("child_updated", 6),
    ]
    assert replay[0]["child"]["id"] == str(second.pk)
    assert (replay[2]["child"]["id"], replay[2]["child"]["steps"]) == (str(first.pk), 1)
    # event 4 (the child's status) is carried by no row or child now (first changed again at 6);
    # the parent's own status never changed, so no status frame: the next frame is the next write
    await save(conversation=conversation, message={"role": "user", "content": "marker"})  # 7
    frame = await communicator.receive_json_from(timeout=TIMEOUT)
    assert (frame["type"], frame["event_seq"]) == ("display_message_saved", 7)
    await communicator.disconnect()


async def test_a_child_deleted_alone_is_heard_by_the_parent(
    user: User, conversation: Conversation
) -> None:
    child = await start(owner=user, parent=conversation)
    parent = await connect(path_of(conversation), user)
    head = (await parent.receive_json_from(timeout=TIMEOUT))["event_seq"]
    own = await connect(path_of(child), user)
    await own.receive_json_from(timeout=TIMEOUT)
    await delete(conversation=child)
    assert await parent.receive_json_from(timeout=TIMEOUT) == {
        "type": "child_deleted",
        "conversation_id": str(conversation.pk),
        "event_seq": head + 1,
        "child_id": str(child.pk),
    }
    assert (await own.receive_json_from(timeout=TIMEOUT))["type"] == "conversation_deleted"
    assert (await own.receive_output(timeout=TIMEOUT))["code"] == 4404
    await parent.disconnect()


async def test_deleting_the_parent_closes_the_childrens_streams(
    user: User, conversation: Conversation
) -> None:
    child = await start(owner=user, parent=conversation)
    own = await connect(path_of(child), user)
    await own.receive_json_from(timeout=TIMEOUT)
    await delete(conversation=conversation)
    assert await own.receive_json_from(timeout=TIMEOUT) == {
        "type": "conversation_deleted",
        "conversation_id": str(child.pk),
    }
    assert (await own.receive_output(timeout=TIMEOUT))["code"] == 4404


async def test_the_user_stream_carries_parent_id(user: User, conversation: Conversation) -> None:
    sidebar = await connect("ws/conversations/", user)
    child = await start(owner=user, parent=conversation, parent_call_id="toolu_task")
    frames = await frames_until(
        sidebar,
        lambda f: f["type"] == "conversation_saved" and f["conversation"]["id"] == str(child.pk),
    )
    saved = frames[-1]
    assert saved["event_seq"] == 0
    assert saved["conversation"]["parent_id"] == str(conversation.pk)
    assert saved["conversation"]["parent_call_id"] == "toolu_task"
    parent = await frames_until(
        sidebar,
        lambda f: (
            f["type"] == "conversation_saved" and f["conversation"]["id"] == str(conversation.pk)
        ),
    )
    assert parent[-1]["conversation"]["child_count"] == 1
    assert parent[-1]["conversation"]["parent_id"] is None
    await sidebar.disconnect()
