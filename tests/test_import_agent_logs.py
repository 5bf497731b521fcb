"""Agent CLI logs from the real corpus (docs/formats.md):
per file the hand-counted conversations, record messages and tool calls, every result paired with
its call, and a re-import that adds nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    SourceRecord,
    ToolCall,
)
from tests.helpers import assert_counters_match_rows
from tests.import_helpers import run, write_lines

pytestmark = pytest.mark.django_db

# file -> (record messages, {status: tool calls}, key) counted by hand from the response_item and
# item lines (docs/formats.md: messages from response_item only; items upserted by id).
CODEX = {
    "codex_exec_jsonl/failed_command.jsonl": (
        5,
        {"failed": 1},
        "019c8143-0e53-7271-89e8-3eec4d067c77",
    ),
    "codex_exec_jsonl/multi_command.jsonl": (
        9,
        {"completed": 3},
        "019c8143-abe2-7722-9bd1-fd70f687175b",
    ),
    "codex_rollout/agent-history__real_sessions__codex__session-01.jsonl": (
        4,
        {},
        "019e9625-802f-7e91-840a-cfe88d14117a",
    ),
    "codex_rollout/rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl": (
        286,
        {"completed": 118},
        "019c8a4d-8f45-7010-8b5d-7fad920aa6f9",
    ),
    "codex_rollout/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl": (
        11,
        {"interrupted": 1},
        "019c8a70-dda7-7f33-98ea-f30553347322",
    ),
}


@pytest.mark.parametrize("name", sorted(CODEX))
def test_codex_corpus_file(corpus: Path, user: User, name: str) -> None:
    path = corpus / name
    expected_messages, expected_calls, key = CODEX[name]
    code, out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    assert "(codex)" in out
    conversation = Conversation.objects.get(owner=user)
    assert (conversation.source, conversation.external_id) == ("codex", key)
    assert Message.objects.filter(conversation=conversation).count() == expected_messages
    calls = ToolCall.objects.filter(conversation=conversation)
    statuses: dict[str, int] = {}
    for call in calls:
        statuses[call.status] = statuses.get(call.status, 0) + 1
    assert statuses == expected_calls
    assert all(c.interrupt_reason == "log_ended" for c in calls if c.status == "interrupted")
    results = DisplayMessage.objects.filter(conversation=conversation, content_type="tool_result")
    assert all(r.tool_call_id is not None and not r.metadata for r in results)
    lines = [line for line in path.read_text("utf-8").splitlines() if line.strip()]
    assert SourceRecord.objects.filter(conversation=conversation).count() == len(set(lines))
    assert_counters_match_rows(conversation)
    before = (conversation.last_event_seq, Message.objects.count(), SourceRecord.objects.count())
    assert run(path, "--owner", user.username)[0] == 0
    conversation.refresh_from_db()
    assert (
        conversation.last_event_seq,
        Message.objects.count(),
        SourceRecord.objects.count(),
    ) == before


def test_codex_rollout_injected_context_and_reasoning(corpus: Path, user: User) -> None:
    name = "codex_rollout/agent-history__real_sessions__codex__session-01.jsonl"
    assert run(corpus / name, "--owner", user.username)[0] == 0
    messages = list(Message.objects.order_by("position"))
    assert [(m.role, m.extra.get("injected", False)) for m in messages] == [
        ("developer", True),
        ("user", True),  # <environment_context>: written by the CLI, not typed
        ("user", False),
        ("assistant", False),
    ]
    conversation = Conversation.objects.get()
    assert conversation.transcript_count == 2
    other = "codex_rollout/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"
    assert run(corpus / other, "--owner", user.username)[0] == 0
    assert DisplayMessage.objects.filter(content_type="thinking").count() == 1


def test_codex_exec_failed_command_is_a_failed_call(corpus: Path, user: User) -> None:
    assert run(corpus / "codex_exec_jsonl/failed_command.jsonl", "--owner", user.username)[0] == 0
    call = ToolCall.objects.get()
    assert (call.call_id, call.name, call.status) == ("item_2", "command_execution", "failed")
    assert call.arguments == {"command": "/bin/bash -lc 'exit 42'"}
    result = Message.objects.get(tool_call_id="item_2")
    assert (result.is_error, result.extra["exit_code"]) == (True, 42)


def test_codex_exec_call_left_in_progress_is_interrupted(
    corpus: Path, tmp_path: Path, user: User
) -> None:
    lines = (corpus / "codex_exec_jsonl/multi_command.jsonl").read_text("utf-8").splitlines()
    path = write_lines(tmp_path / "cut.jsonl", *lines[:5])  # item_2 started, never completed
    code, out, _ = run(path, "--owner", user.username)
    assert code == 0
    assert "1 open call(s) interrupted" in out
    call = ToolCall.objects.get()
    assert (call.status, call.interrupt_reason) == ("interrupted", "log_ended")
    assert run(corpus / "codex_exec_jsonl/multi_command.jsonl", "--owner", user.username)[0] == 0
    call.refresh_from_db()
    assert call.status == "completed"
    assert Conversation.objects.count() == 1
