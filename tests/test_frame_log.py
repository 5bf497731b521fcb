"""Every frame reaches every socket, whichever process wrote (docs/websocket.md "The frame log").

The same script of writes (``tests.frame_script``) runs in this process and in a child process
while a conversation socket and a user stream are open here: both streams get the same frames in
the same order, on the process-local layer (through the frame log and the process's one poller)
and on Redis. The poller reads the log in one query per interval whatever the number of sockets,
and wakes only the sockets whose stream moved.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.db import OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pytest_django import Settings

from murmur_conversations import frames, jsonenc, services
from murmur_conversations.models import Conversation, FrameLogEntry
from murmur_conversations.realtime import broadcast, reads
from murmur_conversations.realtime.poller import poller_for
from tests.frame_script import CONVERSATION_KINDS, DONE_TITLE, SIDEBAR_KINDS, run
from tests.realtime_helpers import (
    LOCAL_LAYER,
    TIMEOUT,
    Frame,
    connect,
    db_async,
    frames_until,
)
from tests.servers import ROOT, child_environment

pytestmark = pytest.mark.django_db(transaction=True)

_UUID = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


@pytest.fixture
def shared_env(settings: Settings) -> Iterator[dict[str, str]]:
    """A child process's environment on this run's database and layer, and a fast poller."""
    env = child_environment(settings, prefix="murmur-fl")
    settings.MURMUR_CONVERSATIONS = {"DB_TAIL_INTERVAL": 0.05}
    yield env
    assert broadcast.get_broadcaster().flush(TIMEOUT)


def normalized(received: list[Frame]) -> list[Any]:
    """The frames with what differs between two runs replaced by placeholders in order of first
    appearance: conversation ids, display row ids, times."""
    names: dict[str, str] = {}

    def walk(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        if isinstance(value, str) and (_UUID.match(value) or key == "id"):
            return names.setdefault(value, f"<{key or 'id'} {len(names)}>")
        if isinstance(value, str) and _TIME.match(value):
            return "<time>"
        return value

    return [walk(frame) for frame in received]


def run_in_child(env: dict[str, str], conversation: Conversation, phase: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tests.frame_script", str(conversation.pk), phase],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


async def script_frames(user: User, env: dict[str, str] | None) -> tuple[list[Frame], list[Frame]]:
    """Open both streams on a new conversation, run the script (in a child process when ``env``
    is given) and return what each stream received until the conversation's deletion."""
    conversation = await db_async(services.start_conversation)(owner=user, title="Script")
    socket = await connect(f"ws/conversations/{conversation.pk}/", user)
    sidebar = await connect("ws/conversations/", user)
    assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    gone = str(conversation.pk)

    def done(frame: Frame) -> bool:
        return bool(frame.get("conversation", {}).get("title") == DONE_TITLE)

    def deleted(frame: Frame) -> bool:
        return bool(frame["type"] == "conversation_deleted" and frame["conversation_id"] == gone)

    on_socket: list[Frame] = []
    on_sidebar: list[Frame] = []
    # The events first, read to their last one; then the deletion (a socket confirms access before
    # an event's frames go out, so frames still queued when the conversation is gone are not sent).
    for phase, socket_end, sidebar_end in (("events", done, done), ("delete", deleted, deleted)):
        if env is None:
            await db_async(run)(gone, phase)
        else:
            await asyncio.to_thread(run_in_child, env, conversation, phase)
        on_socket += await frames_until(socket, socket_end)
        on_sidebar += await frames_until(sidebar, sidebar_end)
    await socket.disconnect()
    await sidebar.disconnect()
    return on_socket, on_sidebar


async def test_a_script_gives_the_same_frames_from_this_process_and_another(
    shared_env: dict[str, str], user: User
) -> None:
    here = await script_frames(user, None)
    there = await script_frames(user, shared_env)
    assert {f["type"] for f in here[0]} == CONVERSATION_KINDS
    assert {f["type"] for f in here[1]} == SIDEBAR_KINDS

    # The script deletes a child and a fork it made. A deletion takes their content out of the
    # log (docs/websocket.md "The frame log"): the child's summary leaves the parent's logged
    # ``child_updated`` frames (they keep its id), and the deleted conversations' own rows go, so
    # a process that reads the log after a deletion gets that conversation's
    # ``conversation_deleted`` alone. Every other frame is the same, in the same order.
    def without_child_summaries(frames: list[Frame]) -> list[Frame]:
        return [{**f, "child": f["child"]["id"]} if "child" in f else f for f in frames]

    def without_deleted(frames: list[Frame]) -> list[Frame]:
        # the conversations deleted before the end (the last deletion is the script's own)
        gone = {f["conversation_id"] for f in frames[:-1] if f["type"] == "conversation_deleted"}
        assert len(gone) == 2
        return [
            f
            for f in frames
            if f["type"] != "conversation_saved" or f["conversation"]["id"] not in gone
        ]

    assert normalized(without_child_summaries(there[0])) == normalized(
        without_child_summaries(here[0])
    )
    assert normalized(without_deleted(there[1])) == normalized(without_deleted(here[1]))


# ------------------------------------------------------------------------------ the poller


@pytest.fixture
def local_layer(settings: Settings) -> Iterator[None]:
    """The process-local layer with a poller that never polls by itself (the test ticks it), and
    a broadcaster that publishes nothing: only the poller delivers."""
    settings.CHANNEL_LAYERS = {"default": LOCAL_LAYER}
    settings.MURMUR_CONVERSATIONS = {"DB_TAIL_INTERVAL": 3600}
    silent = broadcast.Broadcaster(layer=lambda: None)
    previous = broadcast.set_broadcaster(silent)
    yield
    broadcast.set_broadcaster(previous)
    silent.stop(TIMEOUT)


class Queries:
    """Counts the statements run on the database thread's connection (``execute_wrapper``)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.count += 1
        return execute(sql, params, many, context)


def _add_wrapper(queries: Queries) -> None:
    connection.execute_wrappers.append(queries)  # the connection of the thread this runs in


def _remove_wrapper(queries: Queries) -> None:
    connection.execute_wrappers.remove(queries)


async def _wrap(queries: Queries) -> None:
    """Count on the connection of the thread that runs the consumers' and poller's reads."""
    await db_async(_add_wrapper)(queries)


async def _unwrap(queries: Queries) -> None:
    await db_async(_remove_wrapper)(queries)


def _write_elsewhere(conversation: Conversation, text: str) -> None:
    original = frames.process_origin
    frames.process_origin = lambda: "another-process"
    try:
        services.save_message(conversation=conversation, message={"role": "user", "content": text})
    finally:
        frames.process_origin = original


async def write_as_another_process(conversation: Conversation, text: str) -> None:
    """A write whose frame-log rows carry another process's origin (this process skips its own)."""
    await db_async(_write_elsewhere)(conversation, text)


async def test_one_query_per_interval_for_many_sockets_and_only_moved_ones_wake(
    local_layer: None, user: User
) -> None:
    conversations = [
        await db_async(services.start_conversation)(owner=user, title=f"c{i}") for i in range(30)
    ]
    sockets = [await connect(f"ws/conversations/{c.pk}/", user) for c in conversations]
    for socket in sockets:
        assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    sidebar = await connect("ws/conversations/", user)
    poller = poller_for(get_channel_layer())
    assert len(poller.conversations) == 30 and list(poller.owners) == [str(user.pk)]
    queries = Queries()
    await _wrap(queries)
    try:
        assert await poller.tick() == 0
        assert queries.count == 1  # nothing moved: one query all the same
        await _unwrap(queries)
        for index in (3, 17):
            await write_as_another_process(conversations[index], f"to {index}")
        await _wrap(queries)
        queries.count = 0
        assert await poller.tick() == 2
        assert queries.count == 1  # two streams moved: still one query
    finally:
        await _unwrap(queries)
    for index, socket in enumerate(sockets):
        if index in (3, 17):
            frame = await socket.receive_json_from(timeout=TIMEOUT)
            assert frame["type"] == "display_message_saved"
            assert frame["message"]["content"] == {"text": f"to {index}"}
        assert await socket.receive_nothing(timeout=0.01)
    saved = [await sidebar.receive_json_from(timeout=TIMEOUT) for _ in range(2)]
    assert [f["conversation"]["id"] for f in saved] == [
        str(conversations[3].pk),
        str(conversations[17].pk),
    ]
    for socket in [*sockets, sidebar]:
        await socket.disconnect()
    assert not poller.conversations and not poller.owners and poller.task is None


async def test_the_poller_finds_a_row_committed_after_a_later_one(
    local_layer: None, user: User
) -> None:
    """An id passed without seeing it (its write not committed yet) is read again until it shows
    up: the frame arrives late, never lost."""
    first, second = [
        await db_async(services.start_conversation)(owner=user, title=t) for t in ("A", "B")
    ]
    sidebar = await connect("ws/conversations/", user)
    poller = poller_for(get_channel_layer())
    await write_as_another_process(first, "first")
    row = await db_async(lambda: FrameLogEntry.objects.order_by("-id").first())()
    assert row is not None
    await db_async(FrameLogEntry.objects.filter(pk=row.pk).delete)()  # not committed yet
    await write_as_another_process(second, "second")
    assert await poller.tick() == 1
    assert row.pk in poller.holes
    frame = await sidebar.receive_json_from(timeout=TIMEOUT)
    assert frame["conversation"]["id"] == str(second.pk)
    await db_async(row.save)()  # the earlier write commits now, under its own id
    assert await poller.tick() == 1
    assert row.pk not in poller.holes
    frame = await sidebar.receive_json_from(timeout=TIMEOUT)
    assert (frame["conversation"]["id"], frame["event_seq"]) == (str(first.pk), 1)
    await sidebar.disconnect()


def test_pruning_keeps_the_recent_rows(user: User) -> None:
    old = services.start_conversation(owner=user, title="old")
    services.save_message(conversation=old, message={"role": "user", "content": "a"})
    FrameLogEntry.objects.update(created_at=timezone.now() - timedelta(minutes=5))
    recent = services.start_conversation(owner=user, title="recent")
    kept = set(FrameLogEntry.objects.filter(conversation_id=recent.pk).values_list("id", flat=True))
    assert services.prune_frame_log() == 2
    assert set(FrameLogEntry.objects.values_list("id", flat=True)) == kept
    FrameLogEntry.objects.update(created_at=timezone.now() - timedelta(minutes=5))
    assert services.prune_frame_log() == 1
    assert not FrameLogEntry.objects.exists()


def test_each_event_is_one_insert_into_the_log(user: User, conversation: Conversation) -> None:
    table = FrameLogEntry._meta.db_table
    with CaptureQueriesContext(connection) as captured:
        services.save_message(
            conversation=conversation, message={"role": "user", "content": "hello"}
        )
    inserts = [q for q in captured.captured_queries if f'INTO "{table}"' in q["sql"]]
    assert len(inserts) == 1
    row = FrameLogEntry.objects.get(conversation_id=conversation.pk, event_seq=1)
    assert row.origin == frames.process_origin() and row.owner == str(user.pk)


def test_the_log_is_off_when_asked(
    settings: Settings, user: User, conversation: Conversation
) -> None:
    settings.MURMUR_CONVERSATIONS = {"FRAME_LOG": False}
    services.save_message(conversation=conversation, message={"role": "user", "content": "x"})
    assert not FrameLogEntry.objects.filter(event_seq=1).exists()


def test_a_deletion_is_logged_with_its_owner(user: User) -> None:
    gone = services.start_conversation(owner=user)
    services.delete_conversation(conversation=gone)
    row = FrameLogEntry.objects.get(conversation_id=gone.pk, kind=1)
    assert row.owner == str(user.pk)
    assert uuid.UUID(str(row.conversation_id)) == gone.pk


def test_a_write_that_rolls_back_logs_nothing(user: User, conversation: Conversation) -> None:
    before = FrameLogEntry.objects.count()
    with pytest.raises(RuntimeError), transaction.atomic():
        services.save_message(conversation=conversation, message={"role": "user", "content": "x"})
        services.set_status(conversation=conversation, status="running")
        raise RuntimeError("the caller's transaction fails")
    assert FrameLogEntry.objects.count() == before
    services.save_message(conversation=conversation, message={"role": "user", "content": "y"})
    assert list(
        FrameLogEntry.objects.filter(conversation_id=conversation.pk)
        .order_by("id")
        .values_list("event_seq", flat=True)
    ) == [0, 1]


async def test_a_poller_that_could_not_start_starts_at_its_next_tick(
    local_layer: None, user: User, conversation: Conversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = [OperationalError("the database is restarting")]
    start = reads.frame_log_start

    def flaky() -> tuple[int, list[int]]:
        if failures:
            raise failures.pop()
        return start()

    monkeypatch.setattr(reads, "frame_log_start", flaky)
    socket = await connect(f"ws/conversations/{conversation.pk}/", user)
    assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    poller = poller_for(get_channel_layer())
    assert poller.cursor is None
    assert await poller.tick() == 0  # starts where the log ends
    await write_as_another_process(conversation, "after the restart")
    assert await poller.tick() == 1
    frame = await socket.receive_json_from(timeout=TIMEOUT)
    assert frame["message"]["content"] == {"text": "after the restart"}
    await socket.disconnect()


async def test_each_frame_is_encoded_once_for_the_log_and_every_socket(
    private_layer: dict[str, Any], user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One write, five sockets: each of its frames is encoded once (``frames.encode``), and
    every socket is sent exactly the text the frame log holds, on the process-local layer and
    through Redis alike."""
    conversation = await db_async(services.start_conversation)(owner=user, title="once")
    sockets = [await connect(f"ws/conversations/{conversation.pk}/", user) for _ in range(3)]
    for socket in sockets:
        assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    sidebars = [await connect("ws/conversations/", user) for _ in range(2)]
    encoded: list[Any] = []
    real = jsonenc.encode

    def counting(value: Any) -> bytes:
        encoded.append(value)
        return real(value)

    monkeypatch.setattr(jsonenc, "encode", counting)
    await db_async(services.save_message)(
        conversation=conversation, message={"role": "user", "content": "héllo ✓ 1e-05"}
    )
    texts = [await socket.receive_from(timeout=TIMEOUT) for socket in sockets]
    saved = [await sidebar.receive_from(timeout=TIMEOUT) for sidebar in sidebars]
    # the conversation stream's one frame and the sidebar's: once each, not once a socket
    assert [value["type"] for value in encoded] == ["display_message_saved", "conversation_saved"]
    row = await db_async(FrameLogEntry.objects.get)(conversation_id=conversation.pk, event_seq=1)
    assert texts == frames.logged_texts(row.frames) * 3
    assert saved == [row.sidebar] * 2
    assert json.loads(row.frames) == [json.loads(texts[0])]
    assert texts[0] == jsonenc.dumps(json.loads(texts[0]))  # the spelling of jsonenc.dumps
    for socket in [*sockets, *sidebars]:
        await socket.disconnect()


def test_the_logged_text_is_a_json_list_split_back_without_decoding() -> None:
    texts = [frames.encode({"type": "a", "x": "line\nfeed,\n"}), frames.encode({"type": "b"})]
    logged = frames.log_text(texts)
    assert json.loads(logged) == [json.loads(text) for text in texts]
    assert frames.logged_texts(logged) == texts
    assert frames.log_text([]) == "[]" and frames.logged_texts("[]") == []
    # a row written as one compact JSON list (before one frame a line) is read all the same
    assert frames.logged_texts(jsonenc.dumps([json.loads(t) for t in texts])) == texts
    assert [frames.kind_of(text) for text in texts] == ["a", "b"]
    with pytest.raises(ValueError, match="not a JSON list"):
        frames.logged_texts('{"type":"a"}')
