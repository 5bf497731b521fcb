"""A failed call says why (docs/write-path.md "A failed call says why"): its ``error`` is a short
reason (``exit code N`` and the tail of its output) and its ``result`` the output, from the
services and from every importer that reads an exit status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from murmur_conversations import services
from murmur_conversations.exits import exit_status, failure_reason
from murmur_conversations.models import Conversation, DisplayMessage, Message, ToolCall
from tests.agentlog_lines import Claude, tool_use, write_jsonl
from tests.helpers import assert_counters_match_rows
from tests.import_helpers import run

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CODEX_ROLLOUT = "codex/rollout-2025-11-20T08-00-00-0190d1e2-0000-7a00-8b00-c0de00000001.jsonl"
LONG = "\n".join(f"line {n}" for n in range(1, 41))

#: (content, extra keys of the result, the reason)
REASONS: list[tuple[Any, dict[str, Any], str]] = [
    ("boom\n", {"exit_code": 42}, "exit code 42\nboom"),
    ("", {"exit_code": 42}, "exit code 42"),
    ("", {}, "failed"),
    ("permission denied", {}, "permission denied"),
    ("x", {"exitCode": 2}, "exit code 2\nx"),
    ("x", {"metadata": {"exit_code": 3}}, "exit code 3\nx"),
    ('{"output":"nope\\n","metadata":{"exit_code":4,"duration_seconds":0.1}}', {}, "exit code 4\nnope"),
    ("Exit code: 5\nWall time: 0.2 seconds\nOutput:\nno such file", {}, (
        "exit code 5\nExit code: 5\nWall time: 0.2 seconds\nOutput:\nno such file"
    )),
    ("Error: Exit code 6\nfatal: bad ref", {}, "exit code 6\nError: Exit code 6\nfatal: bad ref"),
    ([{"type": "text", "text": "Exit code 7\nstderr"}], {}, "exit code 7\nExit code 7\nstderr"),
    (LONG, {"returncode": 1}, "exit code 1\n" + "\n".join(f"line {n}" for n in range(36, 41))),
    ("y" * 1000, {}, "..." + "y" * 297),
    ([{"type": "image", "url": "https://example.invalid/x.png"}], {}, "failed"),
]  # fmt: skip


@pytest.mark.parametrize(("content", "extra", "reason"), REASONS)
def test_a_failed_result_gives_its_call_a_reason_and_keeps_the_output(
    conversation: Conversation, content: Any, extra: dict[str, Any], reason: str
) -> None:
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "c", "name": "sh", "input": {}}],
        },
    )
    services.save_message(
        conversation=conversation,
        message={
            "role": "tool",
            "tool_call_id": "c",
            "content": content,
            "is_error": True,
            **extra,
        },
    )
    call = ToolCall.objects.get(conversation=conversation)
    assert (call.status, call.error, call.result) == ("failed", reason, content)
    card = DisplayMessage.objects.get(conversation=conversation, content_type="tool_call")
    assert card.metadata == {"error": reason, "result": content}
    assert failure_reason(content, extra) == reason
    assert_counters_match_rows(conversation)


def test_a_result_without_an_exit_status_says_none() -> None:
    assert exit_status("all good", {}) is None
    assert exit_status("exit code is what we print", {}) is None
    assert exit_status("x", {"exit_code": True}) is None  # a boolean is not a status


def test_a_held_result_that_failed_fails_its_call_with_a_reason(
    conversation: Conversation,
) -> None:
    services.save_message(
        conversation=conversation,
        message={
            "role": "tool",
            "tool_call_id": "c",
            "content": "boom",
            "is_error": True,
            "exit_code": 9,
        },
    )
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "c", "name": "sh", "input": {}}],
        },
    )
    call = ToolCall.objects.get(conversation=conversation)
    assert (call.status, call.error, call.result) == ("failed", "exit code 9\nboom", "boom")


def test_a_codex_command_that_exits_42_has_a_failed_card_that_says_why(
    corpus: Path, user: User
) -> None:
    assert run(corpus / "codex_exec_jsonl/failed_command.jsonl", "--owner", user.username)[0] == 0
    call = ToolCall.objects.get()
    assert call.status == "failed"
    assert str(call.error).startswith("exit code 42")
    assert call.result is not None
    card = DisplayMessage.objects.get(content_type="tool_call")
    assert card.metadata["error"] == call.error
    assert card.metadata["result"] == call.result


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ('{"output":"boom\\n","metadata":{"exit_code":42}}', "exit code 42\nboom"),
        ("Exit code: 3\nOutput:\nnope", "exit code 3\nExit code: 3\nOutput:\nnope"),
        ('{"output":"fine","metadata":{"exit_code":0}}', None),
    ],
    ids=["envelope", "text", "exit-0"],
)
def test_a_codex_rollout_output_with_an_exit_status_fails_its_call(
    tmp_path: Path, user: User, output: str, reason: str | None
) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_bytes((FIXTURES / CODEX_ROLLOUT).read_bytes())
    line = {
        "timestamp": "2025-11-20T08:09:00.000Z",
        "type": "response_item",
        "payload": {
            "type": "function_call_output",
            "call_id": "call_fixture_exec2",
            "output": output,
        },
    }
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(line) + "\n")
    assert run(path, "--owner", user.username)[0] == 0
    call = ToolCall.objects.get(call_id="call_fixture_exec2")
    if reason is None:
        assert (call.status, call.error) == ("completed", None)
    else:
        assert (call.status, call.error, call.result) == ("failed", reason, output)
    # importing again adds nothing: the ids did not change
    before = Message.objects.count()
    assert run(path, "--owner", user.username)[0] == 0
    assert Message.objects.count() == before


def test_a_claude_code_bash_call_that_exits_42_says_why(tmp_path: Path, user: User) -> None:
    c = Claude()
    lines = [
        c.prompt("Push it"),
        c.answer("msg_01", tool_use("toolu_42", command="git push")),
        c.result("toolu_42", "Exit code 42\nfatal: no upstream", is_error=True),
    ]
    assert run(write_jsonl(tmp_path / "session.jsonl", lines), "--owner", user.username)[0] == 0
    call = ToolCall.objects.get(call_id="toolu_42")
    assert (call.status, call.error, call.result) == (
        "failed",
        "exit code 42\nExit code 42\nfatal: no upstream",
        "Exit code 42\nfatal: no upstream",
    )
