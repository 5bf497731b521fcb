"""An open sidebar learns of a conversation imported by another process even though its
``saved_at`` lies in the past (docs/formats.md "Times", docs/websocket.md "The user stream"):
``import_conversations`` runs as a child process while a user stream is open here."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from pytest_django import Settings

from murmur_conversations.realtime import broadcast
from tests.agentlog_lines import START, Claude, iso, write_jsonl
from tests.realtime_helpers import TIMEOUT, connect
from tests.servers import ROOT, child_environment

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shared_env(settings: Settings) -> Iterator[dict[str, str]]:
    yield child_environment(settings, prefix="murmur-imp")
    assert broadcast.get_broadcaster().flush(TIMEOUT)


def import_in_child(env: dict[str, str], path: Path, username: str) -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "import_conversations", str(path), "--owner", username],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


async def test_an_open_sidebar_learns_of_a_conversation_imported_from_the_past(
    shared_env: dict[str, str], tmp_path: Path, user: User
) -> None:
    c = Claude()
    path = write_jsonl(
        tmp_path / "old.jsonl", [c.prompt("Last spring's beds"), c.answer("msg_1", "ok")]
    )
    sidebar = await connect("ws/conversations/", user)
    await asyncio.to_thread(import_in_child, shared_env, path, user.username)
    frame = await sidebar.receive_json_from(timeout=TIMEOUT)
    assert frame["type"] == "conversation_saved"
    assert frame["conversation"]["title"] == "Last spring's beds"
    assert frame["conversation"]["created_at"].startswith(iso(START)[:19])
    await sidebar.disconnect()
