"""Faults (RELIABILITY.md; docs/write-path.md and docs/websocket.md), on servers the tests start themselves on free
loopback ports, never the shared ones:

- a PostgreSQL connection killed (``pg_terminate_backend`` from another connection) while a
  ``save_messages`` batch holds the conversation lock: the call fails with ``WriteConflict``,
  nothing is half-written, and a retry with the same message ids lands exactly once;
- Redis stopped while writes happen: every write succeeds at once (the broadcast queue counts the
  failures), and after Redis is back a client reconnecting with ``?since=`` gets every change;
- a worker process killed in the middle of a run: ``recover_interrupted`` leaves nothing looking
  live (no pending or executing call, no running status).

Each test skips with a reason when its server binary is missing or cannot run here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from pytest_django import Settings

from murmur_conversations import services
from murmur_conversations.models import Conversation, ToolCall
from murmur_conversations.realtime import broadcast
from tests.helpers import assert_counters_match_rows
from tests.private_servers import START_TIMEOUT, postgres_cluster, redis_server
from tests.realtime_helpers import TIMEOUT, connect, db_async, frames_until
from tests.servers import database_environment

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def private_postgres() -> Iterator[str]:
    """A throwaway PostgreSQL cluster (``tests.private_servers``); yields its ``DATABASE_URL``."""
    with postgres_cluster() as cluster:
        yield cluster.url


KILL_SCENARIO = r"""
import json, os, sys, threading
import django
django.setup()
import psycopg
from django.core.management import call_command
from django.contrib.auth import get_user_model
from django.db import connection
from murmur_conversations import services
from murmur_conversations.exceptions import WriteConflict
from murmur_conversations.models import Conversation, DisplayMessage, Message, ToolCall

call_command("migrate", verbosity=0)
owner = get_user_model().objects.create_user(username="owner")
conversation = services.start_conversation(owner=owner, title="kill")
services.save_message(conversation=conversation, message={"role": "user", "content": "first", "id": "m0"})
batch = [{"role": "user", "content": f"line {i}", "id": f"m{i}"} for i in range(1, 40)]
batch.append({"role": "assistant", "content": [{"type": "tool_call", "id": "c1", "name": "t"}], "id": "m40"})

locked, proceed = threading.Event(), threading.Event()
state = {}

def paused(execute, sql, params, many, context):
    # The first statement inserting record rows (the general path's insert, the conversation row
    # locked; or the single statement, about to lock it): let the test kill this connection, then
    # go on.
    if "pid" not in state and f'INSERT INTO "{Message._meta.db_table}"' in sql:
        state["pid"] = connection.connection.info.backend_pid
        locked.set()
        assert proceed.wait(30)
    return execute(sql, params, many, context)

def writer():
    try:
        with connection.execute_wrapper(paused):
            services.save_messages(conversation=conversation.pk, messages=batch)
    except Exception as error:
        state["error"] = type(error).__name__
    finally:
        connection.close()  # what Django does at the end of a request

thread = threading.Thread(target=writer)
thread.start()
assert locked.wait(30)
with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as admin:
    killed = admin.execute("SELECT pg_terminate_backend(%s)", [state["pid"]]).fetchone()[0]
proceed.set()
thread.join(30)

def counts():
    c = Conversation.objects.get(pk=conversation.pk)
    return {
        "messages": Message.objects.filter(conversation=c).count(),
        "rows": DisplayMessage.objects.filter(conversation=c).count(),
        "calls": ToolCall.objects.filter(conversation=c).count(),
        "record_length": c.record_length, "last_seq": c.last_seq,
        "last_event_seq": c.last_event_seq,
    }

after_kill = counts()
services.save_messages(conversation=conversation.pk, messages=batch)  # the retry
services.save_messages(conversation=conversation.pk, messages=batch)  # and once more: a no-op
positions = list(Message.objects.filter(conversation=conversation).order_by("position").values_list("position", flat=True))
seqs = list(DisplayMessage.objects.filter(conversation=conversation).order_by("seq").values_list("seq", flat=True))
print(json.dumps({"killed": killed, "error": state.get("error"), "after_kill": after_kill,
                  "after_retry": counts(), "positions": positions, "seqs": seqs}))
"""


def test_a_connection_killed_mid_write_fails_cleanly_and_the_retry_lands_once(
    private_postgres: str,
) -> None:
    """The batch fails with ``WriteConflict``; the conversation is exactly as before it (one
    message, one row, one event); the retry adds the 40 messages and the call once, gapless."""
    env = database_environment(pool_max=4)
    env.update(DATABASE_URL=private_postgres, MURMUR_DB_POOL_MAX="4")
    run = subprocess.run(
        [sys.executable, "-c", KILL_SCENARIO],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["killed"] is True
    assert result["error"] == "WriteConflict"
    assert result["after_kill"] == {
        "messages": 1,
        "rows": 1,
        "calls": 0,
        "record_length": 1,
        "last_seq": 1,
        "last_event_seq": 1,
    }
    assert result["after_retry"] == {
        "messages": 41,
        "rows": 41,
        "calls": 1,
        "record_length": 41,
        "last_seq": 41,
        "last_event_seq": 2,
    }
    assert result["positions"] == list(range(1, 42))
    assert result["seqs"] == list(range(1, 42))


# ------------------------------------------------------------------------------ Redis


@pytest.fixture
def private_redis(settings: Settings) -> Iterator[tuple[Callable[[], None], Callable[[], None]]]:
    """A redis-server on a free loopback port (``tests.private_servers``), used as this test's
    channel layer; yields a ``(stop, start)`` pair of functions."""
    with redis_server() as server:
        settings.CHANNEL_LAYERS = {
            "default": {
                "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                "CONFIG": {"hosts": [server.url], "prefix": f"murmur-f-{uuid.uuid4().hex}"},
            }
        }
        try:
            yield server.stop, server.start
        finally:
            assert broadcast.get_broadcaster().flush(TIMEOUT * 3)


# Killing Redis under redis-py's asyncio client leaves its dead connections' stream writers to
# the garbage collector, which reports them as unclosed: the fault this test injects, not a leak of ours.
@pytest.mark.filterwarnings("ignore:unclosed <StreamWriter:ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.django_db(transaction=True)
async def test_writes_succeed_while_redis_is_down_and_since_recovers_them(
    private_redis: tuple[Callable[[], None], Callable[[], None]],
    user: User,
    conversation: Conversation,
) -> None:
    """With Redis killed, 30 writes all succeed and the broadcaster counts failed or dropped
    deliveries instead of blocking them; once Redis is back, ``?since=`` replays all 30 rows."""
    stop, start = private_redis
    first = await connect(f"ws/conversations/{conversation.pk}/", user)
    snapshot = await first.receive_json_from(timeout=TIMEOUT)
    since = snapshot["event_seq"]
    await first.disconnect()  # the client loses its connection

    broadcaster = broadcast.get_broadcaster()
    lost_before = broadcaster.failed + broadcaster.dropped
    stop()
    texts = [f"during outage {i}" for i in range(30)]
    for text in texts:
        rows = await db_async(services.save_message)(
            conversation=conversation, message={"role": "user", "content": text}
        )
        assert len(rows) == 1
    await db_async(broadcaster.flush)(TIMEOUT * 3)
    assert broadcaster.failed + broadcaster.dropped > lost_before
    start()

    second = await connect(f"ws/conversations/{conversation.pk}/?since={since}", user)
    frames = await frames_until(
        second, lambda f: f.get("message", {}).get("content") == {"text": texts[-1]}
    )
    replayed = [
        f["message"]["content"]["text"] for f in frames if f["type"] == "display_message_saved"
    ]
    assert replayed == texts
    await second.disconnect()
    await db_async(assert_counters_match_rows)(conversation)


# ------------------------------------------------------------------------------ killed worker

WORKER_RUN = r"""
import sys
import django
django.setup()
from murmur_conversations import services
conversation = sys.argv[1]
services.set_status(conversation=conversation, status="running")
services.save_message(conversation=conversation, message={"role": "assistant", "content": [
    {"type": "text", "text": "working"},
    {"type": "tool_call", "id": "k1", "name": "build", "input": {}},
    {"type": "tool_call", "id": "k2", "name": "test", "input": {}},
]})
services.update_tool_status(conversation=conversation, status="executing", tool_info={"call_id": "k1"})
print("mid-stream", flush=True)
sys.stdin.readline()  # never answered: the test kills this process here
"""


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_stream_leaves_nothing_looking_live(conversation: Conversation) -> None:
    """A worker process SIGKILLed while a call is executing and another pending, its conversation
    ``running``: ``recover_interrupted`` marks both calls ``interrupted`` (``worker_lost``) and the
    conversation ``interrupted``, in one event; a second run changes nothing."""
    env = database_environment(pool_max=2)
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER_RUN, str(conversation.pk)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert line.strip() == "mid-stream", worker.stderr.read() if worker.stderr else ""
    finally:
        worker.kill()
        worker.communicate(timeout=START_TIMEOUT)
    before = Conversation.objects.get(pk=conversation.pk).last_event_seq
    assert services.recover_interrupted(stale_after=timedelta(0), conversation=conversation) == 1
    assert services.recover_interrupted(stale_after=timedelta(0), conversation=conversation) == 0
    conversation.refresh_from_db()
    assert conversation.status == "interrupted"
    assert conversation.last_event_seq == before + 1
    calls = {
        c.call_id: (c.status, c.interrupt_reason)
        for c in ToolCall.objects.filter(conversation=conversation)
    }
    assert calls == {"k1": ("interrupted", "worker_lost"), "k2": ("interrupted", "worker_lost")}
    assert_counters_match_rows(conversation)
