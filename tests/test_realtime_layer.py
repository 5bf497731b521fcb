"""The realtime plumbing (docs/websocket.md): the linear process-local layer, the
bounded broadcaster (a hanging layer never blocks a write), group names, ``layer_is_process_local``
and the app without Channels."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from murmur_conversations import services
from murmur_conversations.models import Conversation
from murmur_conversations.realtime import broadcast, layer_is_process_local
from murmur_conversations.realtime.groups import group_name
from murmur_conversations.realtime.layers import ProcessLocalChannelLayer

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------ layer


async def test_send_and_receive_in_order() -> None:
    layer = ProcessLocalChannelLayer()
    channel = await layer.new_channel()
    for i in range(3):
        await layer.send(channel, {"type": "m", "i": i})
    assert [(await layer.receive(channel))["i"] for _ in range(3)] == [0, 1, 2]


async def test_messages_are_copied() -> None:
    layer = ProcessLocalChannelLayer()
    channel = await layer.new_channel()
    items = [1]
    message = {"type": "m", "items": items}
    await layer.send(channel, message)
    items.append(2)
    assert (await layer.receive(channel))["items"] == [1]


async def test_full_channel_raises_and_group_send_skips_it() -> None:
    layer = ProcessLocalChannelLayer(capacity=2)
    full, free = await layer.new_channel(), await layer.new_channel()
    for channel in (full, free):
        await layer.group_add("g", channel)
    await layer.send(full, {"type": "a"})
    await layer.send(full, {"type": "b"})
    with pytest.raises(ChannelFull):
        await layer.send(full, {"type": "c"})
    await layer.group_send("g", {"type": "d"})
    assert (await layer.receive(free))["type"] == "d"
    assert [(await layer.receive(full))["type"] for _ in range(2)] == ["a", "b"]


async def test_group_discard_and_flush() -> None:
    layer = ProcessLocalChannelLayer()
    a, b = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("g", a)
    await layer.group_add("g", b)
    await layer.group_discard("g", a)
    await layer.group_discard("g", a)  # twice is fine
    await layer.group_discard("nobody", a)
    await layer.group_send("g", {"type": "x"})
    await layer.send(a, {"type": "direct"})
    assert (await layer.receive(a))["type"] == "direct"
    assert (await layer.receive(b))["type"] == "x"
    await layer.flush()
    await layer.group_send("g", {"type": "gone"})
    await layer.send(b, {"type": "after"})
    assert (await layer.receive(b))["type"] == "after"


@pytest.mark.parametrize("name", ["", "bad name", "é", "x" * 100])
async def test_invalid_names_are_refused(name: str) -> None:
    layer = ProcessLocalChannelLayer()
    with pytest.raises(TypeError):
        await layer.group_add(name, "ok")
    with pytest.raises(TypeError):
        await layer.send(name, {"type": "x"})


async def test_expired_messages_are_dropped_and_their_channel_leaves_its_groups() -> None:
    layer = ProcessLocalChannelLayer(expiry=-1)  # every message is already expired
    dead, live = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("g", dead)
    await layer.send(dead, {"type": "stale"})
    await layer.send(live, {"type": "stale"})
    await layer.group_send("g", {"type": "next"})  # finds dead's stale message: dead leaves g
    assert layer.group_members("g") == []


async def test_cancelled_receive_forgets_the_channel() -> None:
    layer = ProcessLocalChannelLayer()
    channel = await layer.new_channel()
    await layer.group_add("g", channel)
    task = asyncio.ensure_future(layer.receive(channel))
    await asyncio.sleep(0)  # let the receive start waiting
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert layer.group_members("g") == []
    assert layer.channel_names() == []


async def test_a_send_from_another_thread_wakes_the_receiver() -> None:
    layer = ProcessLocalChannelLayer()
    channel = await layer.new_channel()
    await layer.group_add("g", channel)
    waiting = asyncio.ensure_future(layer.receive(channel))
    await asyncio.sleep(0)
    thread = threading.Thread(target=asyncio.run, args=(layer.group_send("g", {"type": "t"}),))
    thread.start()
    assert (await asyncio.wait_for(waiting, 5))["type"] == "t"
    thread.join()


async def _fan_out_work(subscribers: int, bystanders: int) -> int:
    layer = ProcessLocalChannelLayer()
    for _ in range(subscribers):
        await layer.group_add("room", await layer.new_channel())
    for i in range(bystanders):
        channel = await layer.new_channel()
        await layer.group_add(f"other{i}", channel)
        await layer.send(channel, {"type": "idle"})
    before = layer.work
    await layer.group_send("room", {"type": "hello"})
    return layer.work - before


async def test_fan_out_work_is_linear_in_subscribers_only() -> None:
    """Issue 7: counts of work, not wall-clock. One step per member reached, whatever else the
    process holds (the stock in-memory layer scans every channel and group on each send)."""
    assert await _fan_out_work(100, 0) == 100
    assert await _fan_out_work(200, 0) == 200
    assert await _fan_out_work(1000, 0) == 1000
    assert await _fan_out_work(100, 2000) == 100


# ------------------------------------------------------------------------------ process locality


def test_layer_is_process_local() -> None:
    assert layer_is_process_local(ProcessLocalChannelLayer()) is True
    assert layer_is_process_local(InMemoryChannelLayer()) is True
    assert layer_is_process_local(object()) is False


def test_layer_is_process_local_reads_the_configured_layer(settings: Settings) -> None:
    settings.CHANNEL_LAYERS = {}
    assert layer_is_process_local() is True
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "murmur_conversations.realtime.layers.ProcessLocalChannelLayer"}
    }
    assert layer_is_process_local() is True
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]},
        }
    }
    assert layer_is_process_local() is False


# ------------------------------------------------------------------------------ group names


def test_group_names_come_from_the_prefix(settings: Settings) -> None:
    settings.MURMUR_CONVERSATIONS = {"GROUP_PREFIX": "acme-1"}
    pk = uuid.UUID("12345678-1234-4234-8234-123456789abc")
    assert group_name("conversation", pk) == "acme-1.conversation.12345678123442348234123456789abc"
    assert group_name("conversation", str(pk)) == group_name("conversation", pk)
    assert group_name("sidebar", 7) == "acme-1.sidebar.7"
    weird = group_name("user", "ünïcode pk/../x" * 20)
    layer = ProcessLocalChannelLayer()
    assert layer.require_valid_group_name(weird)
    assert weird.startswith("acme-1.user.h")
    assert weird != group_name("user", "other")


# ------------------------------------------------------------------------------ broadcaster


class HangingLayer:
    """A layer whose group_send never returns until released: a dead Redis."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.calls += 1
        while not self.release.is_set():
            await asyncio.sleep(0.01)


@pytest.mark.django_db
def test_a_hanging_layer_never_blocks_a_write(
    conversation: Conversation,
    caplog: pytest.LogCaptureFixture,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    layer = HangingLayer()
    hanging = broadcast.Broadcaster(maxsize=2, send_timeout=60, layer=lambda: layer)
    previous = broadcast.set_broadcaster(hanging)
    caplog.set_level(logging.WARNING, logger="murmur_conversations.realtime")
    try:
        for i in range(6):  # each write publishes two events (conversation and sidebar)
            with django_capture_on_commit_callbacks(execute=True):  # as a commit would
                services.save_message(
                    conversation=conversation, message={"role": "user", "content": f"m{i}"}
                )
        assert conversation.last_event_seq == 6
        assert hanging.dropped >= 12 - 3  # one in flight, two queued at most
        assert any("dropped" in r.getMessage() for r in caplog.records)
        assert all(r.name == "murmur_conversations.realtime" for r in caplog.records)
    finally:
        broadcast.set_broadcaster(previous)
        layer.release.set()
        hanging.stop(5)
    assert hanging.sent >= 1


def test_a_failing_layer_is_counted_and_the_sender_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Failing:
        async def group_send(self, group: str, message: dict[str, Any]) -> None:
            raise ConnectionError("redis is down")

    failing = broadcast.Broadcaster(layer=lambda: Failing())
    caplog.set_level(logging.WARNING, logger="murmur_conversations.realtime")
    for _ in range(3):
        assert failing.publish("g", {"type": "x"})
    assert failing.flush(5)
    assert (failing.failed, failing.sent) == (3, 0)
    assert "redis is down" in caplog.text
    failing.stop(5)
    assert failing.publish("g", {"type": "x"}) is False  # stopped: dropped, counted
    assert failing.dropped == 1


def test_a_send_that_times_out_is_abandoned() -> None:
    layer = HangingLayer()
    slow = broadcast.Broadcaster(send_timeout=0.05, layer=lambda: layer)
    slow.publish("g", {"type": "x"})
    slow.publish("g", {"type": "y"})
    assert slow.flush(5)
    assert (slow.failed, layer.calls) == (2, 2)
    layer.release.set()
    slow.stop(5)


def test_no_layer_drops() -> None:
    quiet = broadcast.Broadcaster(layer=lambda: None)
    quiet.publish("g", {"type": "x"})
    assert quiet.flush(5)
    assert quiet.dropped == 1
    quiet.stop(5)


# ------------------------------------------------------------------------------ without Channels


def test_the_app_works_without_channels(tmp_path: Path) -> None:
    """docs/architecture.md: without ``channels`` the app still works, minus live updates."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["channels"] = None  # import channels -> ImportError
        import django
        from django.conf import settings
        settings.configure(
            INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes",
                            "murmur_conversations"],
            DATABASES={{"default": {{"ENGINE": "django.db.backends.sqlite3",
                                    "NAME": {str(tmp_path / "db.sqlite3")!r}}}}},
            USE_TZ=True,
        )
        django.setup()
        from django.core.management import call_command
        call_command("migrate", verbosity=0)
        from murmur_conversations import services
        from murmur_conversations.realtime import layer_is_process_local
        c = services.start_conversation(owner=None)
        services.save_message(conversation=c, message={{"role": "user", "content": "hi"}})
        services.broadcast_delta(conversation=c, stream_id="s", text="x")
        assert layer_is_process_local() is True
        print("ok", c.last_event_seq)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok 1"
