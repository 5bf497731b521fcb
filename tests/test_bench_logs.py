"""The generated agent logs of the benchmark's import rows (``bench.agentlog_gen``) are real input:
each kind imports with exit 0, no unknown record, every call paired, and again as a no-op."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from bench.agentlog_gen import GENERATORS, write_file
from murmur_conversations.models import Conversation, DisplayMessage, ToolCall
from tests.helpers import assert_counters_match_rows
from tests.import_helpers import run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_generated_logs_import_cleanly(tmp_path: Path, user: User, kind: str) -> None:
    path = tmp_path / f"{kind}.jsonl"
    write_file(path, kind, 3, 5)
    assert write_file(tmp_path / "again.jsonl", kind, 3, 5) == path.stat().st_size  # deterministic
    code, out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    assert "0 unknown record(s)" in out and "0 open call(s) interrupted" in out
    [conversation] = Conversation.objects.filter(owner=user)
    assert conversation.title
    assert (
        ToolCall.objects.filter(conversation=conversation).exclude(status="completed").count() == 0
    )
    assert not DisplayMessage.objects.filter(metadata__orphan=True).exists()
    assert not DisplayMessage.objects.filter(metadata__late=True).exists()
    assert_counters_match_rows(conversation)
    before = conversation.last_event_seq
    assert run(path, "--owner", user.username, "--reread")[0] == 0
    conversation.refresh_from_db()
    assert conversation.last_event_seq == before
