"""The conversation stream ``ws/conversations/<id>/`` (docs/websocket.md): close codes, snapshot,
replay with ``since``, live events in order, gap filling, rollback, frame caps, client frames."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import transaction

from murmur_conversations import services
from murmur_conversations.frames import MAX_VALUE_BYTES
from murmur_conversations.models import Conversation, DisplayMessage
from murmur_conversations.realtime import broadcast
from tests.helpers import MakeConversation, MakeUser
from tests.import_helpers import JSON
from tests.realtime_helpers import (
    TIMEOUT,
    Frame,
    connect,
    db_async,
    expect_close,
    frames_until,
    ticket_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("private_layer")]


def path_of(conversation: Conversation) -> str:
    return f"ws/conversations/{conversation.pk}/"


save = db_async(services.save_message)
set_status = db_async(services.set_status)


async def call_bash(conversation: Conversation, call_id: str = "c1") -> list[DisplayMessage]:
    """The assistant asks for one ``bash`` call (a pending tool-call card)."""
    return await save(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": call_id, "name": "bash", "input": {}}],
        },
    )


async def say(conversation: Conversation, text: str, **extra: JSON) -> list[DisplayMessage]:
    return await save(conversation=conversation, message={"role": "user", "content": text, **extra})


async def sentinel(communicator: WebsocketCommunicator, conversation: Conversation) -> list[Frame]:
    """Write a marker and return every frame up to its ``display_message_saved``: proves that
    nothing else was waiting before it (no duplicate, nothing extra)."""
    marker = f"marker-{uuid.uuid4().hex}"
    await say(conversation, marker)
    return await frames_until(
        communicator,
        lambda f: (
            f["type"] == "display_message_saved" and f["message"]["content"] == {"text": marker}
        ),
    )


# ------------------------------------------------------------------------------ close codes


async def test_no_credentials_closes_4401(conversation: Conversation) -> None:
    communicator = await connect(path_of(conversation))
    await expect_close(communicator, 4401)


@pytest.mark.parametrize("ticket", ["", "garbage", "a" * 2000, "x:y:z"])
async def test_bad_ticket_closes_4401_even_with_a_good_one_repeated(
    conversation: Conversation, user: User, ticket: str
) -> None:
    communicator = await connect(f"{path_of(conversation)}?ticket={ticket}")
    await expect_close(communicator, 4401)
    repeated = f"{path_of(conversation)}?ticket={ticket_for(user)}&ticket={ticket_for(user)}"
    communicator = await connect(repeated)
    await expect_close(communicator, 4401)


async def test_inactive_user_ticket_closes_4401(
    make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    owner = await db_async(make_user)()
    conversation = await db_async(make_conversation)(owner=owner)
    ticket = ticket_for(owner)
    owner.is_active = False
    await db_async(owner.save)()
    communicator = await connect(f"{path_of(conversation)}?ticket={ticket}")
    await expect_close(communicator, 4401)


@pytest.mark.parametrize(
    "conversation_id",
    [
        "missing",
        "not-a-uuid",
        "ABCDEF00-0000-4000-8000-000000000000",
        "abcdef0000004000800000000000000a",
        "{abcdef00-0000-4000-8000-000000000000}",
        "%00",
        "x" * 300,
        "nested/deeper",
    ],
)
async def test_malformed_ids_close_4404(user: User, conversation_id: str) -> None:
    if conversation_id == "missing":
        conversation_id = str(uuid.uuid4())
    communicator = await connect(f"ws/conversations/{conversation_id}/", user)
    await expect_close(communicator, 4404)


async def test_uppercase_spelling_of_an_own_id_closes_4404(
    user: User, conversation: Conversation
) -> None:
    communicator = await connect(f"ws/conversations/{str(conversation.pk).upper()}/", user)
    await expect_close(communicator, 4404)


async def test_foreign_conversation_closes_4404_like_a_missing_one(
    make_user: MakeUser, conversation: Conversation
) -> None:
    stranger = await db_async(make_user)()
    communicator = await connect(path_of(conversation), stranger)
    await expect_close(communicator, 4404)


async def test_foreign_id_with_bad_since_still_closes_4404(
    make_user: MakeUser, conversation: Conversation
) -> None:
    stranger = await db_async(make_user)()
    communicator = await connect(f"{path_of(conversation)}?since=-1", stranger)
    await expect_close(communicator, 4404)


@pytest.mark.parametrize("since", ["-1", "abc", "1.5", "", "1e3", "+1", " 1", "٣"])
async def test_bad_since_closes_4400(user: User, conversation: Conversation, since: str) -> None:
    communicator = await connect(f"{path_of(conversation)}?since={since}", user)
    await expect_close(communicator, 4400)


async def test_repeated_since_closes_4400(user: User, conversation: Conversation) -> None:
    communicator = await connect(f"{path_of(conversation)}?since=0&since=1", user)
    await expect_close(communicator, 4400)


# ------------------------------------------------------------------------------ snapshot, replay


async def test_snapshot_frame(user: User, conversation: Conversation) -> None:
    await set_status(conversation=conversation, status="paused", pending_ask={"question": "ok?"})
    communicator = await connect(path_of(conversation), user)
    snapshot = await communicator.receive_json_from(timeout=TIMEOUT)
    await db_async(conversation.refresh_from_db)()
    assert snapshot == {
        "type": "snapshot",
        "conversation_id": str(conversation.pk),
        "event_seq": 1,
        "conversation": {
            "id": str(conversation.pk),
            "title": "Test conversation",
            "saved_at": snapshot["conversation"]["saved_at"],
            "created_at": snapshot["conversation"]["created_at"],
            "status": "paused",
            "format": "flowchart-v1",
            "message_count": 0,
            "parent_id": None,
            "parent_call_id": None,
            "child_count": 0,
            "steps": 0,
            "usage": {
                "input_tokens": 0,
                "output_tokens": 0,
                "cache_read_tokens": 0,
                "cache_write_tokens": 0,
                "cache_write_1h_tokens": 0,
                "reasoning_tokens": 0,
                "models": [],
                "cost": "0",
                "unpriced": [],
            },
            "pinned": False,
            "archived": False,
            "tags": [],
            "forked_from_id": None,
            "forked_at_seq": None,
        },
        "status": "paused",
        "pending": {"question": "ok?"},
    }
    assert snapshot["conversation"]["saved_at"].endswith("Z")
    await communicator.disconnect()


async def test_replay_since_sends_changes_in_event_order(
    user: User, conversation: Conversation
) -> None:
    await say(conversation, "one")  # event 1
    await save(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "text", "text": "two"},
                {"type": "tool_call", "id": "c1", "name": "bash", "input": {"cmd": "ls"}},
            ],
        },
    )  # event 2
    await db_async(services.update_tool_status)(
        conversation=conversation, status="executing", tool_info={"call_id": "c1"}
    )  # event 3
    await say(conversation, "three")  # event 4
    communicator = await connect(f"{path_of(conversation)}?since=1", user)
    snapshot = await communicator.receive_json_from(timeout=TIMEOUT)
    assert snapshot["event_seq"] == 4
    replay = [await communicator.receive_json_from(timeout=TIMEOUT) for _ in range(3)]
    assert [(f["type"], f["event_seq"], f["message"]["seq"]) for f in replay] == [
        ("display_message_saved", 2, 2),
        ("display_message_saved", 3, 3),  # the card, created at 2 (after since), changed at 3
        ("display_message_saved", 4, 4),
    ]
    assert replay[1]["message"]["status"] == "executing"
    assert all(f["conversation_id"] == str(conversation.pk) for f in replay)
    # the card changed at 3 and the text at 2 cover every event: no status_changed, nothing else
    after = await sentinel(communicator, conversation)
    assert len(after) == 1
    await communicator.disconnect()


async def test_replay_marks_rows_created_before_since_as_updated(
    user: User, conversation: Conversation
) -> None:
    await call_bash(conversation)  # event 1
    await db_async(services.update_tool_status)(
        conversation=conversation, status="executing", tool_info={"call_id": "c1"}
    )  # event 2
    communicator = await connect(f"{path_of(conversation)}?since=1", user)
    await communicator.receive_json_from(timeout=TIMEOUT)
    frame = await communicator.receive_json_from(timeout=TIMEOUT)
    assert (frame["type"], frame["event_seq"], frame["message"]["status"]) == (
        "display_message_updated",
        2,
        "executing",
    )
    await communicator.disconnect()


async def test_replay_announces_a_status_change(user: User, conversation: Conversation) -> None:
    await say(conversation, "one")  # event 1
    await set_status(conversation=conversation, status="running")  # event 2
    communicator = await connect(f"{path_of(conversation)}?since=1", user)
    snapshot = await communicator.receive_json_from(timeout=TIMEOUT)
    frame = await communicator.receive_json_from(timeout=TIMEOUT)
    assert frame == {
        "type": "status_changed",
        "conversation_id": str(conversation.pk),
        "event_seq": 2,
        "status": "running",
        "pending": None,
    }
    assert snapshot["status"] == "running"
    await communicator.disconnect()


@pytest.mark.parametrize("since", ["3", str(2**63 - 1)])
async def test_since_at_or_above_the_head_replays_nothing(
    user: User, conversation: Conversation, since: str
) -> None:
    for text in ("a", "b", "c"):
        await say(conversation, text)
    communicator = await connect(f"{path_of(conversation)}?since={since}", user)
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    assert len(await sentinel(communicator, conversation)) == 1
    await communicator.disconnect()


async def test_more_than_500_rows_send_one_resync(user: User, conversation: Conversation) -> None:
    messages = [{"role": "user", "content": f"m{i}"} for i in range(501)]
    await db_async(services.save_messages)(conversation=conversation, messages=messages)
    await say(conversation, "last")
    communicator = await connect(f"{path_of(conversation)}?since=0", user)
    snapshot = await communicator.receive_json_from(timeout=TIMEOUT)
    assert await communicator.receive_json_from(timeout=TIMEOUT) == {
        "type": "resync",
        "event_seq": snapshot["event_seq"],
    }
    assert len(await sentinel(communicator, conversation)) == 1
    await communicator.disconnect()


async def test_exactly_500_rows_are_replayed(user: User, conversation: Conversation) -> None:
    messages = [{"role": "user", "content": f"m{i}"} for i in range(500)]
    await db_async(services.save_messages)(conversation=conversation, messages=messages)
    communicator = await connect(f"{path_of(conversation)}?since=0", user)
    await communicator.receive_json_from(timeout=TIMEOUT)
    replay = [await communicator.receive_json_from(timeout=TIMEOUT) for _ in range(500)]
    assert [f["message"]["seq"] for f in replay] == list(range(1, 501))
    await communicator.disconnect()


# ------------------------------------------------------------------------------ live events


async def test_live_events_of_one_call_come_in_contract_order(
    user: User, conversation: Conversation
) -> None:
    await call_bash(conversation)
    communicator = await connect(path_of(conversation), user)
    await communicator.receive_json_from(timeout=TIMEOUT)
    await save(
        conversation=conversation,
        message={"role": "tool", "tool_call_id": "c1", "content": "done"},
    )
    frames = [await communicator.receive_json_from(timeout=TIMEOUT) for _ in range(3)]
    assert [f["type"] for f in frames] == [
        "display_message_saved",
        "display_message_updated",
        "tool_execution_update",
    ]
    assert {f["event_seq"] for f in frames} == {2}
    assert frames[0]["message"]["content_type"] == "tool_result"
    assert frames[1]["message"]["status"] == "completed"
    tool = frames[2]
    assert tool == {
        "type": "tool_execution_update",
        "conversation_id": str(conversation.pk),
        "event_seq": 2,
        "call_id": "c1",
        "name": "bash",
        "status": "completed",
        "display_text": "",
        "result": "done",
        "error": None,
    }
    await db_async(services.cancel_run)(conversation=conversation)
    frames = [await communicator.receive_json_from(timeout=TIMEOUT) for _ in range(2)]
    assert [f["type"] for f in frames] == ["display_message_saved", "status_changed"]
    assert frames[1]["status"] == "cancelled"
    await db_async(services.update_conversation)(conversation=conversation, title="Renamed")
    frame = await communicator.receive_json_from(timeout=TIMEOUT)
    assert frame["type"] == "conversation_updated"
    assert frame["event_seq"] == 4
    assert frame["conversation"]["title"] == "Renamed"
    await communicator.disconnect()


async def test_display_message_row_matches_the_rest_shape(
    user: User, conversation: Conversation
) -> None:
    communicator = await connect(path_of(conversation), user)
    await communicator.receive_json_from(timeout=TIMEOUT)
    rows = await say(conversation, "hello")
    frame = await communicator.receive_json_from(timeout=TIMEOUT)
    assert set(frame) == {"type", "conversation_id", "event_seq", "message"}
    assert frame["message"]["id"] == str(rows[0].pk)
    assert set(frame["message"]) == {
        "id",
        "seq",
        "message_type",
        "content_type",
        "content",
        "status",
        "tool_call_id",
        "metadata",
        "created_event_seq",
        "event_seq",
        "created_at",
        "updated_at",
        "feedback",
    }
    await communicator.disconnect()


async def test_a_rolled_back_write_sends_nothing(user: User, conversation: Conversation) -> None:
    communicator = await connect(path_of(conversation), user)
    await communicator.receive_json_from(timeout=TIMEOUT)

    def rolled_back() -> None:
        with pytest.raises(RuntimeError), transaction.atomic():
            services.save_message(
                conversation=conversation, message={"role": "user", "content": "ghost"}
            )
            services.set_status(conversation=conversation, status="running")
            raise RuntimeError("abort")

    await db_async(rolled_back)()
    frames = await sentinel(communicator, conversation)
    assert len(frames) == 1
    assert frames[0]["event_seq"] == 1  # the rolled-back event_seq was never taken
    assert not await db_async(DisplayMessage.objects.filter(content={"text": "ghost"}).exists)()
    await communicator.disconnect()


async def test_delta_is_forwarded(user: User, conversation: Conversation) -> None:
    communicator = await connect(path_of(conversation), user)
    await communicator.receive_json_from(timeout=TIMEOUT)
    await db_async(services.broadcast_delta)(
        conversation=conversation, stream_id="turn-1", text="Hel"
    )
    assert await communicator.receive_json_from(timeout=TIMEOUT) == {
        "type": "display_message_delta",
        "conversation_id": str(conversation.pk),
        "stream_id": "turn-1",
        "text": "Hel",
    }
    await communicator.disconnect()


async def test_events_of_other_conversations_are_not_sent(
    user: User, conversation: Conversation, make_conversation: MakeConversation
) -> None:
    other = await db_async(make_conversation)()
    communicator = await connect(path_of(conversation), user)
    await communicator.receive_json_from(timeout=TIMEOUT)
    await say(other, "elsewhere")
    await db_async(services.broadcast_delta)(conversation=other, stream_id="s", text="x")
    assert len(await sentinel(communicator, conversation)) == 1
    await communicator.disconnect()


async def test_a_lost_event_is_filled_from_the_database(
    user: User, conversation: Conversation
) -> None:
    communicator = await connect(path_of(conversation), user)
    await communicator.receive_json_from(timeout=TIMEOUT)
    real = broadcast.get_broadcaster()
    lost: list[str] = []

    class Lossy(broadcast.Broadcaster):
        def publish(self, group: str, message: dict[str, Any]) -> bool:
            if message["type"] == "murmur.events" and not lost:
                lost.append(group)
                return False
            return real.publish(group, message)

    broadcast.set_broadcaster(Lossy())
    try:
        await say(conversation, "lost in transit")  # event 1, never published
        await set_status(conversation=conversation, status="running")  # event 2
    finally:
        broadcast.set_broadcaster(real)
    frames = [await communicator.receive_json_from(timeout=TIMEOUT) for _ in range(2)]
    assert lost
    assert [(f["type"], f["event_seq"]) for f in frames] == [
        ("display_message_saved", 1),
        ("status_changed", 2),
    ]
    assert frames[0]["message"]["content"] == {"text": "lost in transit"}
    assert len(await sentinel(communicator, conversation)) == 1
    await communicator.disconnect()


async def test_reconnect_with_since_while_writes_continue(
    user: User, conversation: Conversation
) -> None:
    first = await connect(path_of(conversation), user)
    await first.receive_json_from(timeout=TIMEOUT)
    for i in range(3):
        await say(conversation, f"early {i}")
    seen = [await first.receive_json_from(timeout=TIMEOUT) for _ in range(3)]
    last = seen[-1]["event_seq"]
    await first.disconnect()

    async def writer() -> None:
        for i in range(25):
            await say(conversation, f"late {i}")

    task = asyncio.ensure_future(writer())
    second = await connect(f"{path_of(conversation)}?since={last}", user)
    snapshot = await second.receive_json_from(timeout=TIMEOUT)
    assert snapshot["type"] == "snapshot"
    await task
    frames = await frames_until(
        second, lambda f: f.get("message", {}).get("content") == {"text": "late 24"}
    )
    texts = [f["message"]["content"]["text"] for f in frames]
    assert texts == [f"late {i}" for i in range(25)]
    assert [f["event_seq"] for f in frames] == list(range(last + 1, last + 26))
    assert all(f["type"] == "display_message_saved" for f in frames)
    assert len(await sentinel(second, conversation)) == 1
    await second.disconnect()


async def test_large_values_are_capped(user: User, conversation: Conversation) -> None:
    await call_bash(conversation)
    communicator = await connect(path_of(conversation), user)
    await communicator.receive_json_from(timeout=TIMEOUT)
    big = "é" * 40_000  # 80,002 bytes of JSON: over the cap
    await db_async(services.update_tool_status)(
        conversation=conversation, status="completed", tool_info={"call_id": "c1", "result": big}
    )
    updated = await communicator.receive_json_from(timeout=TIMEOUT)
    assert updated["truncated"] is True
    assert updated["message"]["metadata"]["result"] is None
    tool = await communicator.receive_json_from(timeout=TIMEOUT)
    assert (tool["type"], tool["result"], tool["truncated"]) == (
        "tool_execution_update",
        None,
        True,
    )
    # content {"text": ...}: 11 bytes of JSON around the text
    await say(conversation, "x" * 65_525)  # exactly 65,536 bytes: kept
    kept = await communicator.receive_json_from(timeout=TIMEOUT)
    assert "truncated" not in kept
    assert kept["message"]["content"] == {"text": "x" * 65_525}
    await say(conversation, "x" * 65_526)
    cut = await communicator.receive_json_from(timeout=TIMEOUT)
    assert (cut["message"]["content"], cut["truncated"]) == (None, True)
    await communicator.disconnect()


async def test_non_ascii_text_at_the_cap_is_sent_as_measured(
    user: User, conversation: Conversation
) -> None:
    """The cap is measured on the bytes that are sent: CJK text (3 UTF-8 bytes a character) at
    exactly 65,536 bytes goes out as itself, not as 6-byte ``\\u`` escapes twice the cap."""
    cap = MAX_VALUE_BYTES
    await call_bash(conversation)
    communicator = await connect(path_of(conversation), user)
    await communicator.receive_json_from(timeout=TIMEOUT)

    text = "中" * ((cap - 11) // 3) + "x" * ((cap - 11) % 3)  # {"text": ...} is 11 bytes more
    await say(conversation, text)
    raw = await communicator.receive_from(timeout=TIMEOUT)
    content = '{"text":"' + text + '"}'
    assert len(content.encode("utf-8")) == cap
    assert content in raw and "truncated" not in raw
    assert len(raw.encode("utf-8")) < cap + 1024  # the envelope and row fields around it
    await say(conversation, text + "x")
    assert json.loads(await communicator.receive_from(timeout=TIMEOUT))["truncated"] is True

    result = "語" * ((cap - 2) // 3) + "x" * ((cap - 2) % 3)  # a JSON string: 2 quotes more
    await db_async(services.update_tool_status)(
        conversation=conversation, status="completed", tool_info={"call_id": "c1", "result": result}
    )
    for frame_type in ("display_message_updated", "tool_execution_update"):
        raw = await communicator.receive_from(timeout=TIMEOUT)
        assert json.loads(raw)["type"] == frame_type
        assert f'"result":"{result}"' in raw and "truncated" not in raw
        assert len(raw.encode("utf-8")) < cap + 1024
    await communicator.disconnect()


# ------------------------------------------------------------------------------ client frames


async def test_small_client_frames_are_ignored(user: User, conversation: Conversation) -> None:
    communicator = await connect(path_of(conversation), user)
    await communicator.receive_json_from(timeout=TIMEOUT)
    for text in ('{"type": "subscribe", "conversation_id": "x"}', "not json", "é" * 2048):
        await communicator.send_to(text_data=text)
    assert len(await sentinel(communicator, conversation)) == 1
    await communicator.disconnect()


async def test_large_text_frame_closes_1009(user: User, conversation: Conversation) -> None:
    communicator = await connect(path_of(conversation), user)
    await communicator.receive_json_from(timeout=TIMEOUT)
    await communicator.send_to(text_data="é" * 2049)  # 4,098 bytes
    await expect_close(communicator, 1009)


async def test_binary_frame_closes_1003(user: User, conversation: Conversation) -> None:
    communicator = await connect(path_of(conversation), user)
    await communicator.receive_json_from(timeout=TIMEOUT)
    await communicator.send_to(bytes_data=b"\x00")
    await expect_close(communicator, 1003)


# ------------------------------------------------------------------------------ deletion


async def test_deleted_conversation_sends_deleted_then_closes_4404(
    user: User, conversation: Conversation
) -> None:
    communicator = await connect(path_of(conversation), user)
    await communicator.receive_json_from(timeout=TIMEOUT)
    await db_async(services.delete_conversation)(conversation=conversation)
    assert await communicator.receive_json_from(timeout=TIMEOUT) == {
        "type": "conversation_deleted",
        "conversation_id": str(conversation.pk),
    }
    await expect_close(communicator, 4404)
