"""Generated agent logs for the import rows (docs/benchmarks.md): Claude Code sessions and
stream-json, Codex rollouts and ``codex exec --json`` streams of any size, in the shapes of
docs/formats.md, with our own invented content (a gardening planner). Deterministic: the same
arguments give the same bytes. No Django here.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

START = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
WORDS = [
    "bed",
    "soil",
    "compost",
    "carrot",
    "bean",
    "trellis",
    "mulch",
    "frost",
    "seedling",
    "row",
    "spacing",
    "water",
    "drip",
    "shade",
    "sun",
    "north",
    "south",
    "raised",
    "planter",
    "harvest",
    "rotate",
    "clover",
    "pea",
    "tomato",
    "basil",
    "thyme",
    "label",
    "path",
]


def _text(seed: int, words: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * 3) % len(WORDS)] for i in range(words)).capitalize() + "."


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _id(namespace: str, *parts: object) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join([namespace, *map(str, parts)])))


def claude_session(index: int, turns: int) -> Iterator[dict[str, Any]]:
    """One Claude Code session: bookkeeping lines, prompts, answers split over several lines
    (text, then a tool call), results, durations, a compaction every 20 turns, titles."""
    session = _id("claude", index)
    clock = (START + timedelta(days=index % 300, seconds=s) for s in range(10**9))
    parent: list[str | None] = [None]

    def line(kind: str, number: int, **fields: Any) -> dict[str, Any]:
        line_uuid = _id(session, number)
        out = {
            "parentUuid": parent[0],
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/garden",
            "sessionId": session,
            "version": "2.1.150",
            "gitBranch": "main",
            "type": kind,
            "uuid": line_uuid,
            "timestamp": _iso(next(clock)),
            **fields,
        }
        parent[0] = line_uuid
        return out

    yield {
        "type": "file-history-snapshot",
        "messageId": _id(session, "snap"),
        "isSnapshotUpdate": False,
        "snapshot": {
            "messageId": _id(session, "snap"),
            "trackedFileBackups": {},
            "timestamp": _iso(START),
        },
    }
    number = 0
    for turn in range(turns):
        number += 1
        yield line(
            "user",
            number,
            promptId=_id(session, "p", turn),
            message={"role": "user", "content": _text(turn, 12)},
        )
        message = f"msg_{index:05d}{turn:05d}"
        call = f"toolu_{index:05d}{turn:05d}"
        number += 1
        yield line(
            "assistant",
            number,
            requestId=f"req_{index}_{turn}",
            message={
                "model": "claude-sonnet-4-5",
                "id": message,
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": _text(turn + 1, 40)}],
                "stop_reason": None,
                "usage": {"input_tokens": 900, "output_tokens": 80},
            },
        )
        number += 1
        yield line(
            "assistant",
            number,
            requestId=f"req_{index}_{turn}",
            message={
                "model": "claude-sonnet-4-5",
                "id": message,
                "type": "message",
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": call,
                        "name": "Bash",
                        "input": {"command": f"cat beds/{turn}.txt", "description": "Read a bed"},
                    }
                ],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 900, "output_tokens": 120},
            },
        )
        number += 1
        output = _text(turn + 2, 120)
        yield line(
            "user",
            number,
            toolUseResult={"stdout": output, "stderr": "", "interrupted": False},
            message={
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": output}],
            },
        )
        number += 1
        yield line(
            "assistant",
            number,
            requestId=f"req_{index}_{turn}b",
            message={
                "model": "claude-sonnet-4-5",
                "id": f"{message}b",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": _text(turn + 3, 60)}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 1100, "output_tokens": 90},
            },
        )
        number += 1
        yield line("system", number, subtype="turn_duration", durationMs=4000 + turn)
        if turn and not turn % 20:
            number += 1
            yield line(
                "system",
                number,
                subtype="compact_boundary",
                content="Conversation compacted",
                level="info",
                compactMetadata={"trigger": "auto", "preTokens": 150000},
            )
    yield {"type": "ai-title", "aiTitle": _text(index, 5), "sessionId": session}
    yield {"type": "last-prompt", "lastPrompt": _text(turns, 12), "sessionId": session}


def claude_stream(index: int, turns: int) -> Iterator[dict[str, Any]]:
    """One ``claude -p --output-format stream-json`` run."""
    session = _id("stream", index)
    yield {
        "type": "system",
        "subtype": "init",
        "session_id": session,
        "cwd": "/home/dev/garden",
        "tools": ["Bash", "Read"],
        "model": "claude-sonnet-4-5",
        "permissionMode": "default",
    }
    for turn in range(turns):
        message, call = f"msg_s{index:05d}{turn:05d}", f"toolu_s{index:05d}{turn:05d}"
        yield {
            "type": "assistant",
            "session_id": session,
            "parent_tool_use_id": None,
            "uuid": _id(session, "a", turn),
            "message": {
                "id": message,
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [
                    {"type": "text", "text": _text(turn, 40)},
                    {
                        "type": "tool_use",
                        "id": call,
                        "name": "Read",
                        "input": {"file_path": f"/home/dev/garden/beds/{turn}.md"},
                    },
                ],
            },
        }
        yield {
            "type": "user",
            "session_id": session,
            "parent_tool_use_id": None,
            "uuid": _id(session, "u", turn),
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call, "content": _text(turn + 5, 120)}
                ],
            },
        }
    yield {
        "type": "assistant",
        "session_id": session,
        "parent_tool_use_id": None,
        "uuid": _id(session, "end"),
        "message": {
            "id": f"msg_s{index:05d}end",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": _text(index, 30)}],
        },
    }
    yield {
        "type": "result",
        "subtype": "success",
        "session_id": session,
        "is_error": False,
        "result": _text(index, 30),
        "num_turns": turns,
        "duration_ms": 1000 * turns,
    }


def codex_rollout(index: int, turns: int) -> Iterator[dict[str, Any]]:
    """One Codex rollout: meta, turn contexts, messages, reasoning, calls of several kinds with
    their outputs, web searches, usage events."""
    session = _id("codex", index)
    clock = (START + timedelta(days=index % 300, seconds=s) for s in range(10**9))

    def line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": _iso(next(clock)), "type": kind, "payload": payload}

    yield line(
        "session_meta",
        {
            "id": session,
            "timestamp": _iso(START),
            "cwd": "/home/dev/garden",
            "originator": "codex_cli_rs",
            "cli_version": "0.130.0",
            "source": "cli",
        },
    )
    for turn in range(turns):
        yield line(
            "turn_context",
            {
                "cwd": "/home/dev/garden",
                "approval_policy": "on-request",
                "model": "gpt-5-codex",
                "summary": "auto",
            },
        )
        yield line(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": _text(turn, 12)}],
            },
        )
        yield line("event_msg", {"type": "user_message", "message": _text(turn, 12)})
        yield line(
            "response_item",
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": _text(turn + 1, 30)}],
                "encrypted_content": "Z" * 200,
            },
        )
        call = f"call_{index:05d}{turn:05d}"
        if turn % 3 == 2:
            yield line(
                "response_item",
                {
                    "type": "local_shell_call",
                    "call_id": call,
                    "status": "completed",
                    "action": {"type": "exec", "command": ["ls", "beds"]},
                },
            )
        else:
            yield line(
                "response_item",
                {
                    "type": "function_call",
                    "name": "exec_command",
                    "call_id": call,
                    "arguments": json.dumps({"cmd": f"cat beds/{turn}.txt"}),
                },
            )
        yield line(
            "response_item",
            {"type": "function_call_output", "call_id": call, "output": _text(turn + 2, 120)},
        )
        if turn % 5 == 4:
            yield line(
                "response_item",
                {
                    "type": "web_search_call",
                    "id": f"ws_{index}_{turn}",
                    "status": "completed",
                    "action": {"type": "search", "query": _text(turn, 4)},
                },
            )
        yield line(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": _text(turn + 3, 60)}],
            },
        )
        yield line("event_msg", {"type": "token_count", "info": None})


def codex_exec(index: int, turns: int) -> Iterator[dict[str, Any]]:
    """One ``codex exec --json`` stream."""
    yield {"type": "thread.started", "thread_id": _id("exec", index)}
    yield {"type": "turn.started"}
    for turn in range(turns):
        yield {
            "type": "item.completed",
            "item": {"id": f"item_{turn}_r", "type": "reasoning", "text": _text(turn, 30)},
        }
        command = {
            "id": f"item_{turn}_c",
            "type": "command_execution",
            "command": f"cat beds/{turn}.txt",
            "aggregated_output": "",
            "exit_code": None,
            "status": "in_progress",
        }
        yield {"type": "item.started", "item": command}
        yield {
            "type": "item.completed",
            "item": {
                **command,
                "aggregated_output": _text(turn, 120),
                "exit_code": 0,
                "status": "completed",
            },
        }
        yield {
            "type": "item.completed",
            "item": {"id": f"item_{turn}_a", "type": "agent_message", "text": _text(turn + 1, 60)},
        }
    yield {
        "type": "turn.completed",
        "usage": {"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 5},
    }


GENERATORS: dict[str, Callable[[int, int], Iterator[dict[str, Any]]]] = {
    "claude_session": claude_session,
    "claude_stream": claude_stream,
    "codex_rollout": codex_rollout,
    "codex_exec": codex_exec,
}


def write_file(path: Path, kind: str, index: int, turns: int) -> int:
    """Write one generated log; returns its size in bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(
        json.dumps(line, separators=(",", ":")) + "\n" for line in GENERATORS[kind](index, turns)
    )
    path.write_text(data, "utf-8")
    return len(data.encode("utf-8"))


def write_logs(directory: Path, kind: str, megabytes: float, *, turns: int = 40) -> list[str]:
    """Generated logs of ``kind`` in ``directory`` until they hold ``megabytes``; their paths."""
    files, total, index = [], 0, 0
    while total < megabytes * 1_000_000:
        path = directory / f"{kind}-{index:05d}.jsonl"
        total += write_file(path, kind, index, turns)
        files.append(str(path))
        index += 1
    return files
