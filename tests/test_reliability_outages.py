"""Real outages (docs/deployment.md "Outages", docs/websocket.md, docs/security.md): a private
PostgreSQL cluster restarted and a private Redis killed and started again under a real uvicorn
server, with real HTTP and websocket clients.

- **PostgreSQL restarted** while sockets are open and the pool holds connections: no socket is
  signed out (it gets the next frame, or closes 1011/1013 and reconnects), and every request after
  the restart answers 200 (a read retried on a fresh connection) or 503 with ``Retry-After``,
  never 500.
- **Redis down**: a websocket handshake is accepted then closed 1011/1013 (not an HTTP 500), a
  ticket request answers 503; once Redis is back, sockets open and live frames arrive again.

They run on the PostgreSQL + Redis profile (the markers) and skip with a reason when the server
binaries are missing.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from pytest_django import Settings
from rest_framework.authtoken.models import Token
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from murmur_conversations import services
from murmur_conversations.models import Conversation
from murmur_conversations.realtime import broadcast
from tests.private_servers import PostgresCluster, RedisServer, postgres_cluster, redis_server
from tests.realtime_helpers import Frame, db_async
from tests.servers import database_environment, uvicorn_server

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 20  # seconds any answer may take on a loaded machine: a bound, never a synchronisation
RECONNECT = (1011, 1013)  # the close codes that tell a client to reconnect

SETUP = r"""
import json
import django
django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from murmur_conversations import services
call_command("migrate", verbosity=0)
owner = get_user_model().objects.create_user(username="owner", password="pw")
conversation = services.start_conversation(owner=owner, title="blink")
print(json.dumps({"conversation": str(conversation.pk), "token": Token.objects.create(user=owner).key}))
"""

WRITE = r"""
import sys
import django
django.setup()
from murmur_conversations import services
from murmur_conversations.realtime import broadcast
services.save_message(conversation=sys.argv[1], message={"role": "user", "content": sys.argv[2]})
assert broadcast.get_broadcaster().flush(20)
"""


def run(env: dict[str, str], script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def request(base: str, path: str, token: str, method: str = "GET", body: Any = None) -> Any:
    """``(status, headers, body bytes)`` of one request, errors included."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    req = urllib.request.Request(f"{base}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def ticket(base: str, token: str) -> str:
    status, _headers, body = request(base, "/api/ws-ticket/", token, "POST", {})
    assert status == 200, body
    value: str = json.loads(body)["ticket"]
    return value


async def next_frame(ws: ClientConnection) -> Frame:
    frame: Frame = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
    return frame


async def frame_or_close(ws: ClientConnection, text: str) -> int | None:
    """Frames until a row whose text starts with ``text`` (None), or the close code when the
    socket closes first."""
    try:
        while True:
            frame = await next_frame(ws)
            said = frame.get("message", {}).get("content", {})
            if isinstance(said, dict) and str(said.get("text", "")).startswith(text):
                return None
    except ConnectionClosed:
        assert ws.close_code is not None
        return ws.close_code


async def close_code_of(uri: str) -> int:
    """The code a socket opened at ``uri`` is closed with (the handshake must be accepted)."""
    async with ws_connect(uri, open_timeout=TIMEOUT) as ws:
        with pytest.raises(ConnectionClosed):
            while True:
                await next_frame(ws)
    assert ws.close_code is not None
    return ws.close_code


async def heard_after_writes(ws: ClientConnection, conversation: Conversation) -> int | None:
    """Write a message every 2 seconds (a bound, not a synchronisation) until ``ws`` receives
    one of them (None) or closes (its code), within ``TIMEOUT``."""
    deadline = time.monotonic() + TIMEOUT
    attempt = 0
    while time.monotonic() < deadline:
        attempt += 1
        await db_async(services.save_message)(
            conversation=conversation, message={"role": "user", "content": f"back {attempt}"}
        )
        try:
            return await asyncio.wait_for(frame_or_close(ws, "back"), 2)
        except TimeoutError:
            continue
    raise AssertionError("the socket heard none of the writes made after Redis came back")


@pytest.fixture
def cluster() -> Iterator[PostgresCluster]:
    with postgres_cluster() as started:
        yield started


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    with redis_server() as started:
        yield started


@pytest.mark.postgres
async def test_a_postgres_restart_signs_nobody_out_and_answers_no_500(
    cluster: PostgresCluster, private_redis: RedisServer, tmp_path: Path
) -> None:
    env = database_environment(pool_max=4)
    env.update(
        DATABASE_URL=cluster.url,
        REDIS_URL=private_redis.url,
        MURMUR_CHANNEL_PREFIX=f"blink-{uuid.uuid4().hex}",
    )
    made = json.loads(run(env, SETUP).strip().splitlines()[-1])
    pk, token = made["conversation"], made["token"]
    read = f"/api/conversations/{pk}/"
    with uvicorn_server(env, tmp_path / "server.log", scheme="http", timeout=TIMEOUT) as base:
        ws_base = base.replace("http://", "ws://")
        pool = ThreadPoolExecutor(4)
        # Four requests at once, twice: the server's pool holds four connections afterwards.
        for _ in range(2):
            warm = list(pool.map(lambda _i: request(base, read, token)[0], range(4)))
            assert warm == [200] * 4
        sockets = [
            await ws_connect(f"{ws_base}/ws/conversations/{pk}/?ticket={ticket(base, token)}")
            for _ in range(3)
        ]
        sockets.append(
            await ws_connect(f"{ws_base}/ws/conversations/?ticket={ticket(base, token)}")
        )
        for ws in sockets[:3]:
            assert (await next_frame(ws))["type"] == "snapshot"

        cluster.restart()  # every pooled connection of the server is dead now

        # A write from another process: its frames need each socket's access confirmed, on the
        # dead pool. A check that cannot run is no denial: the frame, or a reconnect code.
        await asyncio.to_thread(run, env, WRITE, pk, "after the restart")
        codes = [await frame_or_close(ws, "after the restart") for ws in sockets[:3]]
        assert all(code is None or code in RECONNECT for code in codes), codes
        # Under load: reads are retried on a fresh connection or answered 503, writes 200 or 503.
        calls: list[tuple[str, str, Any]] = [(read, "GET", None)] * 16
        calls += [("/api/conversations/", "GET", None)] * 8
        calls += [(read, "PATCH", {"title": f"t{i}"}) for i in range(4)]
        answers = list(pool.map(lambda c: request(base, c[0], token, c[1], c[2]), calls))
        pool.shutdown()
        statuses = [status for status, _h, _b in answers]
        assert set(statuses) <= {200, 503}, statuses
        assert all(h.get("Retry-After") == "2" for s, h, _b in answers if s == 503)
        assert request(base, read, token)[0] == 200
        # The sockets that stayed open still hear writes; the others reconnect and do.
        await asyncio.to_thread(run, env, WRITE, pk, "later")
        for ws, code in zip(sockets[:3], codes, strict=True):
            if code is None:
                assert await frame_or_close(ws, "later") is None
        again = await ws_connect(f"{ws_base}/ws/conversations/{pk}/?ticket={ticket(base, token)}")
        assert (await next_frame(again))["type"] == "snapshot"
        for ws in [*sockets, again]:
            await ws.close()
        await asyncio.to_thread(run, env, WRITE, pk, "closed")  # nothing listens: no error


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
@pytest.mark.filterwarnings("ignore:unclosed <StreamWriter:ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_a_redis_outage_closes_handshakes_with_a_reconnect_code_and_sockets_resume(
    private_redis: RedisServer,
    settings: Settings,
    tmp_path: Path,
    user: User,
    conversation: Conversation,
) -> None:
    prefix = f"blink-{uuid.uuid4().hex}"
    env = database_environment()
    env.update(REDIS_URL=private_redis.url, MURMUR_CHANNEL_PREFIX=prefix)
    settings.CHANNEL_LAYERS = {  # this process publishes where the server listens
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [private_redis.url], "prefix": prefix},
        }
    }
    token = (await db_async(Token.objects.get_or_create)(user=user))[0].key
    pk = conversation.pk
    with uvicorn_server(env, tmp_path / "server.log", scheme="http", timeout=TIMEOUT) as base:
        ws_base = base.replace("http://", "ws://")
        stream = f"{ws_base}/ws/conversations/{pk}/"
        before = await ws_connect(f"{stream}?ticket={ticket(base, token)}")
        assert (await next_frame(before))["type"] == "snapshot"
        kept = [ticket(base, token), ticket(base, token)]

        await asyncio.to_thread(private_redis.stop)
        # Not an HTTP 500: accepted, then told to reconnect (the ticket cannot be read).
        assert await close_code_of(f"{stream}?ticket={kept[0]}") in RECONNECT
        assert await close_code_of(f"{ws_base}/ws/conversations/?ticket={kept[1]}") in RECONNECT
        status, headers, _body = request(base, "/api/ws-ticket/", token, "POST", {})
        assert status == 503
        assert int(headers["Retry-After"]) > 0

        await asyncio.to_thread(private_redis.start)
        after = await ws_connect(f"{stream}?ticket={ticket(base, token)}")
        assert (await next_frame(after))["type"] == "snapshot"
        # The server's layer resubscribes on its own schedule: what is published before that is
        # lost to open sockets (a reconnect with ?since= gets it), so write until both hear.
        assert await heard_after_writes(after, conversation) is None
        code = await heard_after_writes(before, conversation)  # resumed, or told to reconnect
        assert code is None or code in RECONNECT, code
        for ws in (before, after):
            await ws.close()
    assert broadcast.get_broadcaster().flush(TIMEOUT)
