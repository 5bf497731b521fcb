"""docs/formats.md line-kind tables, one test per row: each row's line kind, after a prompt and an
answer of our own, lands where the table says (a prompt, an answer, a result, a notice in the
record, a notice, the title, a source record, a subagent's line in its child conversation,
unknown). A test reads the tables
and checks that every row has its case here and every case its row."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from django.contrib.auth.models import User

from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    SourceRecord,
    ToolCall,
)
from murmur_conversations.projection import transcript_entry
from tests.agentlog_lines import Claude, Codex, tool_use, write_jsonl
from tests.helpers import assert_counters_match_rows
from tests.import_helpers import run

pytestmark = pytest.mark.django_db

DOCS = Path(__file__).resolve().parents[1] / "docs" / "formats.md"
TABLES = ("line kind", "stream-json line kind", "rollout line kind", "exec line kind")


def documented_rows() -> dict[str, list[str]]:
    """The first cells of the rows of each line-kind table of docs/formats.md."""
    rows: dict[str, list[str]] = {}
    current: str | None = None
    for line in DOCS.read_text("utf-8").splitlines():
        cells = (
            [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        )
        if cells and cells[0] in TABLES:
            current = cells[0]
            rows[current] = []
        elif cells and current and not set(cells[0]) <= {"-"}:
            rows[current].append(cells[0])
        elif not cells:
            current = None
    return rows


# ------------------------------------------------------------------------------ what to expect


class Landing:
    """What a case's lines must add after the base prompt and answer."""

    def __init__(self, check: Callable[[Result], object], note: str) -> None:
        self.check = check
        self.note = note


#: A table row: lines built from a fresh writer (sessions, rollouts) or given (stream-json, exec,
#: with or without the base prompt and answer before them), and where they land.
ClaudeCase = tuple[Literal["claude"], Callable[[Claude], list[Any]], Landing]
RolloutCase = tuple[Literal["rollout"], Callable[[Codex], list[Any]], Landing]
StreamCase = tuple[Literal["stream"], list[Any], Landing, bool]
ExecCase = tuple[Literal["exec"], list[Any], Landing, bool]
Case = ClaudeCase | RolloutCase | StreamCase | ExecCase


class Result:
    """What one import did: the conversation, its new record messages and display rows, output."""

    def __init__(self, conversation: Conversation, base: int, base_rows: int, out: str) -> None:
        self.conversation = conversation
        messages = list(Message.objects.filter(conversation=conversation).order_by("position"))
        self.new = messages[base:]
        self.base_transcript = sum(
            transcript_entry(
                role=m.role, content=m.content, tool_call_id=m.tool_call_id, extra=m.extra
            )
            is not None
            for m in messages[:base]
        )
        rows = DisplayMessage.objects.filter(conversation=conversation).order_by("seq")
        self.new_rows = list(rows)[base_rows:]
        self.out = out


def prompt(text: str | None = None) -> Landing:
    def check(r: Result) -> None:
        [message] = r.new
        assert (message.role, message.extra.get("injected")) == ("user", None)
        assert r.conversation.transcript_count == r.base_transcript + 1
        if text is not None:
            assert text in str(message.content)

    return Landing(check, "prompt")


def answer() -> Landing:
    def check(r: Result) -> None:
        assert [m.role for m in r.new] == ["assistant"]
        assert r.conversation.transcript_count == r.base_transcript + 1

    return Landing(check, "answer")


def result(status: str = "completed") -> Landing:
    def check(r: Result) -> None:
        assert [m.role for m in r.new][-1] == "tool"
        call = ToolCall.objects.get(conversation=r.conversation)
        assert call.status == status
        assert not any(row.metadata.get("orphan") or row.metadata.get("late") for row in r.new_rows)

    return Landing(check, "result")


def replayed_result() -> Landing:
    def check(r: Result) -> None:
        assert [m.role for m in r.new] == ["assistant", "tool", "assistant"]
        assert ToolCall.objects.get(conversation=r.conversation).status == "completed"
        assert not any(row.metadata.get("late") for row in r.new_rows)
        assert "1 replayed result(s) dropped" not in r.out  # dropped by the parser, in this read

    return Landing(check, "replayed result")


def nothing() -> Landing:
    """A replay: the row's lines add nothing but their source records."""

    def check(r: Result) -> None:
        assert r.new == []
        assert r.new_rows == []
        assert r.conversation.transcript_count == r.base_transcript

    return Landing(check, "nothing")


def record_notice(kind: str) -> Landing:
    def check(r: Result) -> None:
        message = r.new[-1]
        assert message.extra.get("injected") is True
        assert message.extra.get("notice") == kind
        assert r.conversation.transcript_count == r.base_transcript  # not in the transcript
        row = DisplayMessage.objects.get(message=message)
        assert (row.message_type, row.content_type) == ("system", "notification")

    return Landing(check, f"notice in the record ({kind})")


def notice(content_type: str = "notification", text: str | None = None) -> Landing:
    def check(r: Result) -> None:
        assert r.new == []
        [row] = [row for row in r.new_rows if row.message_id is None]
        assert (row.message_type, row.content_type) == ("system", content_type)
        if text is not None:
            assert text in row.content["text"]

    return Landing(check, f"notice ({content_type})")


def title(expected: str) -> Landing:
    def check(r: Result) -> None:
        assert r.conversation.title == expected

    return Landing(check, f"title {expected!r}")


def source() -> Landing:
    def check(r: Result) -> None:
        assert r.new == []
        assert r.new_rows == []
        assert "0 unknown record(s)" in r.out

    return Landing(check, "source record")


def subagent(call_id: str = "") -> Landing:
    """docs/formats.md "Subagents": nothing in the session; the line in a child of it."""

    def check(r: Result) -> None:
        assert r.new == []
        assert "subagent line(s) in child conversations" in r.out
        [child] = Conversation.objects.filter(parent=r.conversation)
        assert child.parent_call_id == call_id
        assert child.owner_id == r.conversation.owner_id
        assert child.record_length == 1
        assert SourceRecord.objects.filter(conversation=child).count() == 1

    return Landing(check, "subagent")


def unknown(kind: str) -> Landing:
    def check(r: Result) -> None:
        assert r.new == []
        assert f"unknown kinds: {kind} x1" in r.out

    return Landing(check, f"unknown {kind}")


def status(expected: str, error: bool = False) -> Landing:
    def check(r: Result) -> None:
        assert r.conversation.status == expected
        assert any(row.content_type == "error" for row in r.new_rows) is error

    return Landing(check, f"status {expected}")


def card(name: str, status_: str) -> Landing:
    def check(r: Result) -> None:
        [call] = ToolCall.objects.filter(conversation=r.conversation, name=name)
        assert call.status == status_

    return Landing(check, f"card {name}")


def thinking() -> Landing:
    def check(r: Result) -> None:
        [message] = r.new
        assert message.content[0]["type"] == "thinking"

    return Landing(check, "thinking")


def key(expected: str) -> Landing:
    def check(r: Result) -> None:
        assert r.conversation.external_id == expected

    return Landing(check, "key")


def todo() -> Landing:
    def check(r: Result) -> None:
        assert [row.content_type for row in r.new_rows] == ["todo_snapshot"]

    return Landing(check, "todo")


def pending() -> Landing:
    def check(r: Result) -> None:
        assert r.conversation.status == "paused"
        assert r.conversation.pending_ask is not None
        assert r.conversation.pending_ask["question"] == "Which bed first?"

    return Landing(check, "pending ask")


def structured(kind: str) -> Landing:
    def check(r: Result) -> None:
        assert [row.content_type for row in r.new_rows] == ["structured_data"]
        assert f"unknown kinds: {kind} x1" in r.out

    return Landing(check, "structured")


# ------------------------------------------------------------------------------ Claude sessions


def claude_case(build: Callable[[Claude], list[Any]], landing: Landing) -> ClaudeCase:
    return ("claude", build, landing)


def _text_prompt(c: Claude) -> list[Any]:
    return [c.prompt([{"type": "text", "text": "Add a row of carrots"}])]


def _replayed_prompt(c: Claude) -> list[Any]:
    again = c.prompt("Plan the spring beds", promptId="p-base")
    again["timestamp"] = "2025-05-04T10:00:00.000Z"
    return [again]


def _result(c: Claude) -> list[Any]:
    return [c.answer("msg_call", tool_use("toolu_a")), c.result("toolu_a", "beds.txt")]


def _replayed_result(c: Claude) -> list[Any]:
    return [
        c.answer("msg_call", tool_use("toolu_a")),
        c.result("toolu_a", "beds.txt"),
        c.answer("msg_after", "Found it."),
        c.result("toolu_a", "beds.txt"),
    ]


def _user_text(
    flag: str | None = None, value: Any = True, text: str = "x"
) -> Callable[[Claude], list[Any]]:
    def build(c: Claude) -> list[Any]:
        extra = {flag: value} if flag else {}
        return [c.line("user", message={"role": "user", "content": text}, **extra)]

    return build


def _assistant(**fields: Any) -> Callable[[Claude], list[Any]]:
    def build(c: Claude) -> list[Any]:
        return [c.answer("msg_new", "Rows are 30 cm apart.", **fields)]

    return build


def _replayed_answer(c: Claude) -> list[Any]:
    return [c.prompt("And the peas?"), c.answer("msg_base", "Sure, let's start.")]


def _sidechain(kind: str) -> Callable[[Claude], list[Any]]:
    def build(c: Claude) -> list[Any]:
        if kind == "user":
            line = c.prompt("Count the seed packets", isSidechain=True, agentId="a1")
        else:
            line = c.answer("msg_side", "Twelve packets.", isSidechain=True, agentId="a1")
        return [line]

    return build


def _attachment(attachment: dict[str, Any]) -> Callable[[Claude], list[Any]]:
    def build(c: Claude) -> list[Any]:
        return [c.line("attachment", attachment=attachment)]

    return build


def _system(subtype: str | None, **fields: Any) -> Callable[[Claude], list[Any]]:
    def build(c: Claude) -> list[Any]:
        return [c.system(subtype, **fields)]

    return build


def _bookkeeping(kind: str, **fields: Any) -> Callable[[Claude], list[Any]]:
    def build(c: Claude) -> list[Any]:
        return [c.bookkeeping(kind, **fields)]

    return build


def _summary(c: Claude) -> list[Any]:
    return [{"type": "summary", "summary": "Spring bed plan", "leafUuid": c.parent}]


CLAUDE: dict[str, Case] = {
    "`user` · text or image content": claude_case(_text_prompt, prompt("carrots")),
    "`user` · `promptId` seen before": claude_case(_replayed_prompt, nothing()),
    "`user` · `<command-name>`": claude_case(
        _user_text(
            text="<command-message>plan is running…</command-message>\n"
            "<command-name>/plan</command-name>\n<command-args>peas</command-args>"
        ),
        prompt("/plan"),
    ),
    "`user` · `tool_result`": claude_case(_result, result()),
    "`user` · `tool_result` for a call answered before": claude_case(
        _replayed_result, replayed_result()
    ),
    "`user` · `isCompactSummary: true`": claude_case(
        _user_text("isCompactSummary", text="This session is being continued..."),
        record_notice("compaction_summary"),
    ),
    "`user` · `isVisibleInTranscriptOnly: true`": claude_case(
        _user_text("isVisibleInTranscriptOnly"), record_notice("transcript_only")
    ),
    "`user` · `isMeta: true`": claude_case(_user_text("isMeta"), record_notice("meta")),
    "`user` · `isSynthetic: true`": claude_case(
        _user_text("isSynthetic"), record_notice("synthetic")
    ),
    "`user` · `<local-command-stdout>`": claude_case(
        _user_text(text="<local-command-stdout>Set model</local-command-stdout>"),
        record_notice("command_output"),
    ),
    "`user` · `<local-command-caveat>`": claude_case(
        _user_text(text="<local-command-caveat>Caveat: ...</local-command-caveat>"),
        record_notice("command_caveat"),
    ),
    "`user` · `<bash-input>`": claude_case(
        _user_text(text="<bash-input>ls beds</bash-input>"), record_notice("command")
    ),
    "`user` · `<bash-stdout>`": claude_case(
        _user_text(text="<bash-stdout>north.txt</bash-stdout><bash-stderr></bash-stderr>"),
        record_notice("command_output"),
    ),
    "`user` · `[Request interrupted by user`": claude_case(
        _user_text(text="[Request interrupted by user]"), record_notice("interrupted")
    ),
    "`user` · `This session is being continued from a previous conversation`": claude_case(
        _user_text(text="This session is being continued from a previous conversation that ran"),
        record_notice("compaction_summary"),
    ),
    "`user` · `<task-notification>`": claude_case(
        _user_text(text="<task-notification>done</task-notification>"),
        record_notice("task_notification"),
    ),
    "`user` · `<system-reminder>`": claude_case(
        _user_text(text="<system-reminder>Todo list is empty</system-reminder>"),
        record_notice("system_reminder"),
    ),
    "`user` · `isSidechain: true`": claude_case(_sidechain("user"), subagent()),
    "`assistant`": claude_case(_assistant(), answer()),
    "`assistant` · `message.id` seen before": claude_case(_replayed_answer, prompt("peas")),
    "`assistant` · `isApiErrorMessage: true`": claude_case(
        _assistant(isApiErrorMessage=True, model="<synthetic>"), record_notice("api_error")
    ),
    "`assistant` · `model: <synthetic>`": claude_case(
        _assistant(model="<synthetic>"), record_notice("synthetic")
    ),
    "`assistant` · `isSidechain: true`": claude_case(_sidechain("assistant"), subagent()),
    "`attachment` · `queued_command`": claude_case(
        _attachment(
            {"type": "queued_command", "prompt": "Also mulch the beds", "commandMode": "prompt"}
        ),
        prompt("mulch"),
    ),
    "`attachment` · other `attachment.type`": claude_case(
        _attachment(
            {"type": "deferred_tools_delta", "addedNames": [], "addedLines": [], "removedNames": []}
        ),
        source(),
    ),
    "`system` · `compact_boundary`": claude_case(
        _system(
            "compact_boundary",
            content="Conversation compacted",
            compactMetadata={"trigger": "auto", "preTokens": 155000},
        ),
        notice(text="Conversation compacted"),
    ),
    "`system` · `microcompact_boundary`": claude_case(_system("microcompact_boundary"), notice()),
    "`system` · `api_error`": claude_case(
        _system(
            "api_error",
            level="error",
            error={"status": 529, "error": {"type": "error", "error": {"message": "Overloaded"}}},
        ),
        notice("error", "Overloaded"),
    ),
    "`system` · `local_command`": claude_case(
        _system(
            "local_command",
            content="<command-name>/rename</command-name>\n<command-args>Spring beds</command-args>",
        ),
        title("Spring beds"),
    ),
    "`system` · `informational`": claude_case(
        _system("informational", content="Unknown skill argument"), notice(text="Unknown skill")
    ),
    "`system` · `away_summary`": claude_case(
        _system("away_summary", content="While you were away: beds planned"), notice()
    ),
    "`system` · `bridge_status`": claude_case(
        _system("bridge_status", content="Remote control active"), notice()
    ),
    "`system` · `stop_hook_summary`": claude_case(
        _system(
            "stop_hook_summary",
            hookCount=1,
            hookInfos=[{"command": "lint"}],
            hookErrors=[],
            preventedContinuation=False,
            stopReason="",
            hasOutput=False,
            toolUseID="t",
        ),
        source(),
    ),
    "`system` · `turn_duration`": claude_case(_system("turn_duration", durationMs=1200), source()),
    "`system` · no subtype": claude_case(
        _system(None, content="PostToolUse:Edit hook succeeded", toolUseID="toolu_x"), source()
    ),
    "`summary`": claude_case(_summary, title("Spring bed plan")),
    "`ai-title`": claude_case(
        _bookkeeping("ai-title", aiTitle="Planning spring beds"), title("Planning spring beds")
    ),
    "`custom-title`": claude_case(
        _bookkeeping("custom-title", customTitle="My beds"), title("My beds")
    ),
    "`agent-name`": claude_case(_bookkeeping("agent-name", agentName="gardener"), source()),
    "`agent-setting`": claude_case(
        _bookkeeping("agent-setting", agentSetting="gardener"), source()
    ),
    "`queue-operation`": claude_case(
        _bookkeeping(
            "queue-operation",
            operation="enqueue",
            content="later",
            timestamp="2025-05-04T10:00:09.000Z",
        ),
        source(),
    ),
    "`last-prompt`": claude_case(
        _bookkeeping("last-prompt", lastPrompt="Plan the spring beds"), source()
    ),
    "`file-history-snapshot`": claude_case(
        lambda c: [
            {
                "type": "file-history-snapshot",
                "messageId": "m1",
                "snapshot": {
                    "messageId": "m1",
                    "trackedFileBackups": {},
                    "timestamp": "2025-05-04T10:00:09.000Z",
                },
                "isSnapshotUpdate": False,
            }
        ],
        source(),
    ),
    "`permission-mode`": claude_case(
        _bookkeeping("permission-mode", permissionMode="plan"), source()
    ),
    "`mode`": claude_case(_bookkeeping("mode", mode="normal"), source()),
    "`progress`": claude_case(
        lambda c: [
            c.line(
                "progress",
                data={"type": "agent_progress", "agentId": "a1"},
                parentToolUseID="toolu_t",
            )
        ],
        source(),
    ),
    "`pr-link`": claude_case(
        _bookkeeping(
            "pr-link",
            prNumber=7,
            prUrl="https://example.invalid/pr/7",
            prRepository="garden",
            timestamp="2025-05-04T10:00:09.000Z",
        ),
        source(),
    ),
    "`bridge-session`": claude_case(_bookkeeping("bridge-session", bridgeSessionId="b1"), source()),
    "any other `type`": claude_case(
        _bookkeeping("greenhouse-sensor", reading=21), unknown("greenhouse-sensor")
    ),
}


# ------------------------------------------------------------------------------ stream-json

STREAM_SESSION = "5b6c7d8e-9f00-4a1b-8c2d-3e4f5a6b7c8d"


def stream_line(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "session_id": STREAM_SESSION, **fields}


def stream_answer(message_id: str, *blocks: Any, **fields: Any) -> dict[str, Any]:
    content = [{"type": "text", "text": b} if isinstance(b, str) else b for b in blocks]
    message = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
    }
    return stream_line(
        "assistant", message=message, parent_tool_use_id=None, uuid=f"u-{message_id}", **fields
    )


def stream_case(lines: list[Any], landing: Landing, base: bool = True) -> StreamCase:
    return ("stream", lines, landing, base)


STREAM: dict[str, Case] = {
    "`system` · `init`": stream_case(
        [
            stream_line("system", subtype="init", cwd="/home/dev/garden-planner", model="m"),
            stream_line("result", subtype="error_during_execution", is_error=True),
        ],
        title("/home/dev/garden-planner"),
        base=False,
    ),
    "`system` · `compact_boundary`": stream_case(
        [
            stream_line(
                "system",
                subtype="compact_boundary",
                uuid="cb1",
                compact_metadata={"trigger": "manual", "pre_tokens": 9000},
            )
        ],
        notice(text="compacted"),
    ),
    "`system` · `api_retry`": stream_case(
        [stream_line("system", subtype="api_retry", uuid="r1", error="overloaded", attempt=1)],
        notice("error", "retrying"),
    ),
    "`system` · other subtypes": stream_case(
        [stream_line("system", subtype="thinking_tokens", tokens=10)], source()
    ),
    "`assistant`": stream_case(
        [stream_answer("msg_first", "Beds are ready.")], title("Beds are ready."), base=False
    ),
    "`user` · `tool_result`": stream_case(
        [
            stream_answer("msg_call", tool_use("toolu_s")),
            stream_line(
                "user",
                message={
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_s", "content": "ok"}],
                },
                parent_tool_use_id=None,
                uuid="u-res",
            ),
        ],
        result(),
    ),
    "`user` · text content": stream_case(
        [
            stream_line(
                "user",
                message={"role": "user", "content": "Water them too"},
                parent_tool_use_id=None,
                uuid="u-prompt",
                isReplay=True,
            )
        ],
        prompt("Water"),
    ),
    "`assistant` · `parent_tool_use_id`": stream_case(
        [
            stream_line(
                "assistant",
                parent_tool_use_id="toolu_task",
                uuid="u-sub",
                message={
                    "id": "msg_sub",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "x"}],
                },
            )
        ],
        subagent("toolu_task"),
    ),
    "`result` · `success`": stream_case(
        [stream_line("result", subtype="success", is_error=False, result="Sure, let's start.")],
        status("idle"),
    ),
    "`result` · error": stream_case(
        [stream_line("result", subtype="error_max_turns", is_error=True)],
        status("error", error=True),
    ),
    "`stream_event`": stream_case(
        [
            stream_line(
                "stream_event",
                event={
                    "type": "content_block_delta",
                    "delta": {"type": "text_delta", "text": "Be"},
                },
            )
        ],
        source(),
    ),
    "`rate_limit_event`": stream_case(
        [stream_line("rate_limit_event", rate_limit_info={})], source()
    ),
    "`tool_progress`": stream_case(
        [stream_line("tool_progress", tool_use_id="t", elapsed_time_seconds=1)], source()
    ),
    "`auth_status`": stream_case([stream_line("auth_status", isAuthenticating=False)], source()),
    "any other `type`": stream_case(
        [stream_line("seed_catalog", items=[])], unknown("seed_catalog")
    ),
}


# ------------------------------------------------------------------------------ Codex rollouts


def rollout_case(build: Callable[[Codex], list[Any]], landing: Landing) -> RolloutCase:
    return ("rollout", build, landing)


def _items(*payloads: dict[str, Any]) -> Callable[[Codex], list[Any]]:
    def build(x: Codex) -> list[Any]:
        return [x.item(**p) for p in payloads]

    return build


def _line(kind: str, payload: dict[str, Any]) -> Callable[[Codex], list[Any]]:
    def build(x: Codex) -> list[Any]:
        return [x.line(kind, payload)]

    return build


ROLLOUT: dict[str, Case] = {
    "`session_meta`": rollout_case(lambda x: [], key("019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b")),
    "`turn_context`": rollout_case(
        _line("turn_context", {"cwd": "/x", "model": "gpt-5"}), source()
    ),
    "`world_state`": rollout_case(_line("world_state", {"agents_md": "x"}), source()),
    "`inter_agent_communication`": rollout_case(
        _line("inter_agent_communication", {"author": "a", "recipient": "b", "content": []}),
        source(),
    ),
    "`compacted`": rollout_case(
        _line("compacted", {"message": "Summary of the beds so far"}),
        notice(text="Summary of the beds"),
    ),
    "`event_msg` · `thread_name_updated`": rollout_case(
        lambda x: [x.event(type="thread_name_updated", thread_id="t", thread_name="Beds")],
        title("Beds"),
    ),
    "`event_msg` · `error`": rollout_case(
        lambda x: [x.event(type="error", message="stream disconnected")],
        notice("error", "disconnected"),
    ),
    "`event_msg` · `turn_aborted`": rollout_case(
        lambda x: [x.event(type="turn_aborted", reason="interrupted")], notice(text="interrupted")
    ),
    "`event_msg` · other types": rollout_case(
        lambda x: [x.event(type="token_count", info=None)], source()
    ),
    "`response_item` · `message`": rollout_case(
        lambda x: [x.message("user", "Add tomatoes")], prompt("tomatoes")
    ),
    "`response_item` · `message` role `developer`": rollout_case(
        lambda x: [x.message("developer", "You are a planner")],
        Landing(
            lambda r: (r.new[0].extra.get("injected") is True) or pytest.fail("not injected"),
            "injected",
        ),
    ),
    "`response_item` · `reasoning`": rollout_case(
        _items(
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "Thinking"}],
                "encrypted_content": "zz",
            }
        ),
        thinking(),
    ),
    "`response_item` · `function_call`": rollout_case(
        _items(
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": '{"cmd":"ls"}',
                "call_id": "call_f",
            },
            {"type": "function_call_output", "call_id": "call_f", "output": "beds"},
        ),
        result(),
    ),
    "`response_item` · `custom_tool_call`": rollout_case(
        _items(
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "input": "*** Begin Patch",
                "call_id": "call_c",
            },
            {"type": "custom_tool_call_output", "call_id": "call_c", "output": "Done"},
        ),
        result(),
    ),
    "`response_item` · `local_shell_call`": rollout_case(
        _items(
            {
                "type": "local_shell_call",
                "call_id": "call_l",
                "status": "completed",
                "action": {"type": "exec", "command": ["ls"]},
            },
            {"type": "function_call_output", "call_id": "call_l", "output": "beds"},
        ),
        result(),
    ),
    "`response_item` · `tool_search_call`": rollout_case(
        _items(
            {"type": "tool_search_call", "execution": "server", "arguments": {"query": "calendar"}},
            {
                "type": "tool_search_output",
                "execution": "server",
                "status": "completed",
                "tools": [],
            },
        ),
        result(),
    ),
    "`response_item` · `function_call_output`": rollout_case(
        _items(
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": "{}",
                "call_id": "call_o",
            },
            {"type": "function_call_output", "call_id": "call_o", "output": "ok"},
        ),
        result(),
    ),
    "`response_item` · `custom_tool_call_output`": rollout_case(
        _items(
            {"type": "custom_tool_call", "name": "apply_patch", "input": "x", "call_id": "call_p"},
            {"type": "custom_tool_call_output", "call_id": "call_p", "output": "ok"},
        ),
        result(),
    ),
    "`response_item` · `tool_search_output`": rollout_case(
        _items(
            {
                "type": "tool_search_call",
                "call_id": "call_t",
                "execution": "client",
                "arguments": {},
            },
            {
                "type": "tool_search_output",
                "call_id": "call_t",
                "execution": "client",
                "status": "failed",
                "tools": [],
            },
        ),
        result("failed"),
    ),
    "`response_item` · `web_search_call`": rollout_case(
        _items(
            {
                "type": "web_search_call",
                "id": "ws_1",
                "status": "completed",
                "action": {"type": "search", "query": "frost dates"},
            }
        ),
        card("web_search", "completed"),
    ),
    "`response_item` · `image_generation_call`": rollout_case(
        _items(
            {
                "type": "image_generation_call",
                "id": "ig_1",
                "status": "completed",
                "revised_prompt": "a bed plan",
                "result": "aGVsbG8=",
            }
        ),
        card("image_generation", "completed"),
    ),
    "`response_item` · `compaction`": rollout_case(
        _items({"type": "compaction", "encrypted_content": "z"}), source()
    ),
    "`response_item` · `ghost_snapshot`": rollout_case(
        _items({"type": "ghost_snapshot", "ghost_commit": {}}), source()
    ),
    "`response_item` · `additional_tools`": rollout_case(
        _items({"type": "additional_tools", "role": "system", "tools": []}), source()
    ),
    "`response_item` · `agent_message`": rollout_case(
        _items({"type": "agent_message", "author": "a", "recipient": "b", "content": []}), source()
    ),
    "`response_item` · other types": rollout_case(
        _items({"type": "soil_probe", "depth": 3}), unknown("response_item.soil_probe")
    ),
    "any other line `type`": rollout_case(
        _line("garden_state", {"beds": 2}), unknown("garden_state")
    ),
}


# ------------------------------------------------------------------------------ codex exec

THREAD = "0199aabb-ccdd-7eef-8001-123456789abc"


def exec_item(event: str, **item: Any) -> dict[str, Any]:
    return {"type": event, "item": item}


def exec_case(lines: list[Any], landing: Landing, base: bool = True) -> ExecCase:
    return ("exec", lines, landing, base)


def _exec_call(item_type: str, status_: str, **fields: Any) -> list[Any]:
    return [
        exec_item("item.started", id="item_9", type=item_type, status="in_progress", **fields),
        exec_item("item.completed", id="item_9", type=item_type, status=status_, **fields),
    ]


EXEC: dict[str, Case] = {
    "`thread.started`": exec_case([], key(THREAD)),
    "`turn.started`": exec_case([{"type": "turn.started"}], source()),
    "`turn.completed`": exec_case(
        [
            {
                "type": "turn.completed",
                "usage": {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1},
            }
        ],
        status("idle"),
    ),
    "`turn.failed`": exec_case(
        [{"type": "turn.failed", "error": {"message": "quota"}}], status("error", error=True)
    ),
    "`error`": exec_case(
        [{"type": "error", "message": "reconnecting"}], notice("error", "reconnecting")
    ),
    "`request_user_input`": exec_case(
        [
            {
                "type": "request_user_input",
                "id": "t1",
                "call_id": "c1",
                "questions": [{"id": "q", "header": "Beds", "question": "Which bed first?"}],
            }
        ],
        pending(),
    ),
    "`item.plan.delta`": exec_case(
        [{"type": "item.plan.delta", "item_id": "item_p", "delta": "1."}], source()
    ),
    "`item` · `agent_message`": exec_case(
        [exec_item("item.completed", id="item_a", type="agent_message", text="Planted.")], answer()
    ),
    "`item` · `plan`": exec_case(
        [exec_item("item.completed", id="item_p", type="plan", text="1. dig")], answer()
    ),
    "`item` · `reasoning`": exec_case(
        [exec_item("item.completed", id="item_r", type="reasoning", text="Soil first")], thinking()
    ),
    "`item` · `command_execution`": exec_case(
        _exec_call(
            "command_execution",
            "declined",
            command="rm -rf beds",
            aggregated_output="",
            exit_code=None,
        ),
        result("failed"),
    ),
    "`item` · `file_change`": exec_case(
        _exec_call("file_change", "completed", changes=[{"path": "beds.md", "kind": "update"}]),
        result(),
    ),
    "`item` · `mcp_tool_call`": exec_case(
        _exec_call(
            "mcp_tool_call",
            "failed",
            server="calendar",
            tool="add",
            arguments={},
            result=None,
            error={"message": "denied"},
        ),
        result("failed"),
    ),
    "`item` · `collab_tool_call`": exec_case(
        _exec_call(
            "collab_tool_call",
            "completed",
            tool="spawn_agent",
            sender_thread_id="t",
            receiver_thread_ids=[],
            prompt=None,
            agents_states={},
        ),
        result(),
    ),
    "`item` · `web_search`": exec_case(
        [
            exec_item(
                "item.started",
                id="item_w",
                type="web_search",
                query="frost",
                action={"type": "search", "query": "frost"},
            ),
            exec_item(
                "item.completed",
                id="item_w",
                type="web_search",
                query="frost",
                action={"type": "search", "query": "frost"},
            ),
        ],
        card("web_search", "completed"),
    ),
    "`item` · `todo_list`": exec_case(
        [
            exec_item(
                "item.completed",
                id="item_t",
                type="todo_list",
                items=[{"text": "dig", "completed": False}],
            )
        ],
        todo(),
    ),
    "`item` · `error`": exec_case(
        [exec_item("item.completed", id="item_e", type="error", message="file too big")],
        notice("error", "too big"),
    ),
    "`item` · other types": exec_case(
        [exec_item("item.completed", id="item_x", type="seed_order", count=3)],
        structured("item.seed_order"),
    ),
    "any other `type`": exec_case([{"type": "garden.tick"}], unknown("garden.tick")),
}

CASES: dict[str, dict[str, Case]] = {
    "line kind": CLAUDE,
    "stream-json line kind": STREAM,
    "rollout line kind": ROLLOUT,
    "exec line kind": EXEC,
}


def test_every_documented_row_has_a_case_and_every_case_a_row() -> None:
    documented = documented_rows()
    assert set(documented) == set(TABLES)
    for table, rows in documented.items():
        assert sorted(rows) == sorted(CASES[table]), table


def _lines_of(table: str, row: str) -> tuple[list[Any], Landing]:
    case = CASES[table][row]
    if case[0] == "claude":
        c = Claude()
        base = [
            c.prompt("Plan the spring beds", promptId="p-base"),
            c.answer("msg_base", "Sure, let's start."),
        ]
        return [*base, *case[1](c)], case[2]
    if case[0] == "stream":
        head = [stream_line("system", subtype="init", cwd="/home/dev/garden-planner", tools=[])]
        base = (
            [
                stream_line(
                    "user",
                    message={"role": "user", "content": "Plan the spring beds"},
                    parent_tool_use_id=None,
                    uuid="u-base",
                ),
                stream_answer("msg_base", "Sure, let's start."),
            ]
            if case[3]
            else []
        )
        return [*head, *base, *case[1]], case[2]
    if case[0] == "rollout":
        x = Codex()
        base = [
            x.meta(),
            x.message("user", "Plan the spring beds"),
            x.message("assistant", "Sure, let's start."),
        ]
        return [*base, *case[1](x)], case[2]
    base = [{"type": "thread.started", "thread_id": THREAD}]
    if case[3]:
        base += [
            exec_item(
                "item.completed", id="item_0", type="agent_message", text="Sure, let's start."
            ),
        ]
    return [*base, *case[1]], case[2]


ALL_ROWS = [(table, row) for table, rows in CASES.items() for row in rows]


@pytest.mark.parametrize(("table", "row"), ALL_ROWS, ids=[f"{t}: {r}" for t, r in ALL_ROWS])
def test_line_kind_lands_where_the_table_says(
    tmp_path: Path, user: User, table: str, row: str
) -> None:
    lines, landing = _lines_of(table, row)
    path = write_jsonl(tmp_path / "log.jsonl", lines)
    code, out, err = run(path, "--owner", user.username)
    assert code == 0, err
    [conversation] = Conversation.objects.filter(owner=user, parent__isnull=True)
    base = _base_messages(table, row)
    base_rows = DisplayMessage.objects.filter(
        conversation=conversation, message__position__lte=base
    ).count()
    landing.check(Result(conversation, base, base_rows, out))
    assert SourceRecord.objects.filter(conversation__owner=user).count() == len(lines)
    everything = list(Conversation.objects.filter(owner=user).order_by("pk"))
    for each in everything:
        assert_counters_match_rows(each)
    # importing again adds nothing
    before = [c.last_event_seq for c in everything]
    assert run(path, "--owner", user.username, "--reread")[0] == 0
    assert [c.last_event_seq for c in Conversation.objects.filter(owner=user).order_by("pk")] == (
        before
    )


def _base_messages(table: str, row: str) -> int:
    case = CASES[table][row]
    if case[0] == "claude" or case[0] == "rollout":
        return 2
    if not case[3]:
        return 0
    return 2 if case[0] == "stream" else 1


def test_rows_are_distinct_and_named_like_the_docs() -> None:
    for rows in documented_rows().values():
        assert len(rows) == len(set(rows))
        assert all(re.match(r"^(`|any other)", row) for row in rows)
