"""Live updates across processes (docs/websocket.md and docs/deployment.md), with real uvicorn
servers on loopback and a real websocket client: the close codes a browser sees; a write made by a
management command reaching a client through database tailing (embedded default) or Redis; and, on
Redis, two servers whose clients both receive the same writes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

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
from tests.realtime_helpers import Frame, db_async, ticket_for
from tests.servers import child_environment
from tests.servers import uvicorn_server as serve

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 15  # seconds; servers start inside this bound, frames arrive well within it


@pytest.fixture
def shared_env(settings: Settings) -> Iterator[dict[str, str]]:
    """Environment for child processes: the test database, and on Redis a private prefix that
    this process's channel layer uses too."""
    yield child_environment(settings, prefix="murmur-p")
    assert broadcast.get_broadcaster().flush(TIMEOUT)


@contextlib.contextmanager
def uvicorn_server(env: dict[str, str], log_path: Path) -> Iterator[str]:
    """A uvicorn process serving the demo's websockets (see ``tests.servers``)."""
    with serve(env, log_path, scheme="ws", timeout=TIMEOUT) as base:
        yield base


async def close_code(uri: str) -> int:
    async with ws_connect(uri, open_timeout=TIMEOUT) as ws:
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(ws.recv(), TIMEOUT)
        assert ws.close_code is not None
        return ws.close_code


async def next_frame(ws: ClientConnection) -> Frame:
    frame: Frame = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
    return frame


async def frames_until(ws: ClientConnection, predicate: Callable[[Frame], bool]) -> list[Frame]:
    received = []
    while True:
        received.append(await next_frame(ws))
        if predicate(received[-1]):
            return received


def run_recover_interrupted(env: dict[str, str], conversation: Conversation) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "recover_interrupted",
            "--stale-after",
            "0",
            "--conversation",
            str(conversation.pk),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1 conversation(s) marked interrupted"


def patch_title(http_base: str, conversation: Conversation, token: str) -> int:
    request = urllib.request.Request(
        f"{http_base}/api/conversations/{conversation.pk}/",
        data=json.dumps({"title": "Through server one"}).encode(),
        method="PATCH",
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
        status: int = response.status
        return status


def start_run(conversation: Conversation) -> None:
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "c1", "name": "bash", "input": {}}],
        },
    )
    services.set_status(conversation=conversation, status="running")


async def test_real_client_close_codes_and_command_writes(
    shared_env: dict[str, str], tmp_path: Path, user: User, conversation: Conversation
) -> None:
    """Close codes through uvicorn; a write from this process and one from ``manage.py
    recover_interrupted`` reach the client (embedded default: through the server's database tail;
    with REDIS_URL: through Redis)."""
    await db_async(start_run)(conversation)
    tickets = [await db_async(ticket_for)(user) for _ in range(4)]  # single-use: one a socket
    with uvicorn_server(shared_env, tmp_path / "server.log") as base:
        assert await close_code(f"{base}/ws/conversations/{conversation.pk}/") == 4401
        bad = f"{base}/ws/conversations/{uuid.uuid4()}/?ticket={tickets[0]}"
        assert await close_code(bad) == 4404
        malformed = f"{base}/ws/conversations/nope/?ticket={tickets[1]}"
        assert await close_code(malformed) == 4404
        since = f"{base}/ws/conversations/{conversation.pk}/?since=x&ticket={tickets[2]}"
        assert await close_code(since) == 4400
        used = f"{base}/ws/conversations/{conversation.pk}/?ticket={tickets[2]}"
        assert await close_code(used) == 4401  # a ticket opens one socket, across processes
        uri = f"{base}/ws/conversations/{conversation.pk}/?since=0&ticket={tickets[3]}"
        async with ws_connect(uri, open_timeout=TIMEOUT) as ws:
            snapshot = await next_frame(ws)
            assert (snapshot["type"], snapshot["event_seq"]) == ("snapshot", 2)
            replay = await frames_until(ws, lambda f: f["type"] == "status_changed")
            assert replay[0]["message"]["content_type"] == "tool_call"
            await db_async(services.save_message)(
                conversation=conversation, message={"role": "user", "content": "here"}
            )
            frame = await next_frame(ws)
            assert (frame["event_seq"], frame["message"]["content"]) == (3, {"text": "here"})
            await asyncio.to_thread(run_recover_interrupted, shared_env, conversation)
            frames = await frames_until(ws, lambda f: f["type"] == "status_changed")
            assert frames[-1]["status"] == "interrupted"
            assert frames[-1]["event_seq"] == 4
            card = next(f for f in frames if f["type"] == "display_message_updated")
            assert card["message"]["status"] == "interrupted"
            await ws.send("x" * 5000)
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), TIMEOUT)
            assert ws.close_code == 1009


@pytest.mark.redis
async def test_two_servers_share_redis(
    shared_env: dict[str, str], tmp_path: Path, user: User, conversation: Conversation
) -> None:
    """Issue 7: clients of two ASGI servers sharing Redis both receive a write made in a third
    process, one made through the first server (REST PATCH) and one made by a management
    command."""
    await db_async(start_run)(conversation)
    tickets = [await db_async(ticket_for)(user) for _ in range(3)]  # single-use: one a socket
    with (
        uvicorn_server(shared_env, tmp_path / "one.log") as one,
        uvicorn_server(shared_env, tmp_path / "two.log") as two,
    ):
        path = f"/ws/conversations/{conversation.pk}/?ticket="
        async with (
            ws_connect(one + path + tickets[0], open_timeout=TIMEOUT) as first,
            ws_connect(two + path + tickets[1], open_timeout=TIMEOUT) as second,
            ws_connect(
                f"{two}/ws/conversations/?ticket={tickets[2]}", open_timeout=TIMEOUT
            ) as stream,
        ):
            for ws in (first, second):
                assert (await next_frame(ws))["type"] == "snapshot"
            await db_async(services.save_message)(
                conversation=conversation, message={"role": "user", "content": "both"}
            )
            for ws in (first, second):
                frame = await next_frame(ws)
                assert (frame["event_seq"], frame["message"]["content"]) == (3, {"text": "both"})
            assert (await next_frame(stream))["event_seq"] == 3
            token = await db_async(Token.objects.create)(user=user)
            status = await asyncio.to_thread(
                patch_title, one.replace("ws://", "http://"), conversation, token.key
            )
            assert status == 200
            for ws in (first, second):
                frame = await next_frame(ws)
                assert (frame["type"], frame["event_seq"]) == ("conversation_updated", 4)
                assert frame["conversation"]["title"] == "Through server one"
            assert (await next_frame(stream))["event_seq"] == 4
            await asyncio.to_thread(run_recover_interrupted, shared_env, conversation)
            for ws in (first, second):
                frames = await frames_until(ws, lambda f: f["type"] == "status_changed")
                assert [f["type"] for f in frames] == [
                    "display_message_updated",
                    "tool_execution_update",
                    "status_changed",
                ]
                assert {f["event_seq"] for f in frames} == {5}
            saved = await next_frame(stream)
            assert (saved["type"], saved["event_seq"]) == ("conversation_saved", 5)
