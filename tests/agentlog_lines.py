"""Builders of Claude Code and Codex log lines for the import tests: the shapes of docs/formats.md,
with our own invented content (a small gardening-planner project). No tests here."""

from __future__ import annotations

import itertools
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

START = datetime(2025, 5, 4, 10, 0, tzinfo=UTC)
SESSION = "0f5e2b1c-7a44-4c1e-9d2a-3b6c8e9f1a20"
CWD = "/home/dev/garden-planner"


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Claude:
    """Lines of one Claude Code session: each line one second after the previous one, chained by
    ``parentUuid``."""

    def __init__(self, session: str = SESSION, start: datetime = START) -> None:
        self.session = session
        self.clock = itertools.count()
        self.start = start
        self.parent: str | None = None
        self.numbers = itertools.count(1)

    def time(self) -> datetime:
        return self.start + timedelta(seconds=next(self.clock))

    def line(self, kind: str, **fields: Any) -> dict[str, Any]:
        """A message-chain line (with uuid, parentUuid, timestamp, sessionId...)."""
        line_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.session}/{next(self.numbers)}"))
        line = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": CWD,
            "sessionId": self.session,
            "version": "2.1.150",
            "gitBranch": "main",
            "type": kind,
            "uuid": line_uuid,
            "timestamp": iso(self.time()),
        }
        line.update(fields)
        self.parent = line_uuid
        return line

    def bookkeeping(self, kind: str, **fields: Any) -> dict[str, Any]:
        """A bookkeeping line (no uuid chain): ``ai-title``, ``custom-title``, ``mode``..."""
        return {"type": kind, "sessionId": self.session, **fields}

    def prompt(self, text: Any, **fields: Any) -> dict[str, Any]:
        prompt_id = fields.pop("promptId", str(uuid.uuid4()))
        return self.line(
            "user", promptId=prompt_id, message={"role": "user", "content": text}, **fields
        )

    def answer(self, message_id: str, *blocks: Any, **fields: Any) -> dict[str, Any]:
        content = [{"type": "text", "text": b} if isinstance(b, str) else b for b in blocks]
        message = {
            "model": fields.pop("model", "claude-sonnet-4-5"),
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "content": content,
            "stop_reason": fields.pop("stop_reason", None),
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        return self.line("assistant", message=message, requestId=f"req_{message_id}", **fields)

    def result(self, tool_use_id: str, content: Any, **fields: Any) -> dict[str, Any]:
        is_error = fields.pop("is_error", None)
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": content,
        }
        if is_error is not None:
            block["is_error"] = is_error
        return self.line(
            "user",
            message={"role": "user", "content": [block, *fields.pop("extra_blocks", [])]},
            toolUseResult=fields.pop("toolUseResult", {"stdout": str(content)}),
            **fields,
        )

    def system(self, subtype: str | None, **fields: Any) -> dict[str, Any]:
        extra: dict[str, Any] = {"subtype": subtype} if subtype else {}
        fields.setdefault("level", "info")
        return self.line("system", **extra, **fields)


def tool_use(call_id: str, name: str = "Bash", **arguments: Any) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": call_id,
        "name": name,
        "input": arguments or {"command": "ls"},
    }


class Codex:
    """Lines of one Codex rollout (``{timestamp, type, payload}``), one second apart."""

    def __init__(
        self, session: str = "019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b", start: datetime = START
    ) -> None:
        self.session = session
        self.start = start
        self.clock = itertools.count()

    def line(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        moment = self.start + timedelta(seconds=next(self.clock))
        return {"timestamp": iso(moment), "type": kind, "payload": payload}

    def meta(self) -> dict[str, Any]:
        return self.line(
            "session_meta",
            {
                "id": self.session,
                "timestamp": iso(self.start),
                "cwd": CWD,
                "originator": "codex_cli_rs",
                "cli_version": "0.130.0",
                "source": "cli",
                "model_provider": "openai",
            },
        )

    def item(self, **payload: Any) -> dict[str, Any]:
        return self.line("response_item", payload)

    def message(self, role: str, text: str) -> dict[str, Any]:
        kind = "output_text" if role == "assistant" else "input_text"
        return self.item(type="message", role=role, content=[{"type": kind, "text": text}])

    def event(self, **payload: Any) -> dict[str, Any]:
        return self.line("event_msg", payload)


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    """``lines`` (dicts as compact JSON, strings as they are) one per line, each ending ``\\n``."""
    text = "".join(
        (x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)) + "\n" for x in lines
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path
