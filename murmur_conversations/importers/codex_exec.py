"""``codex exec --json`` streams (docs/formats.md). Pure.

Every line is kept verbatim. Items are upserted by ``item.id`` (last state wins): ``reasoning`` and
``agent_message`` items become assistant ``thinking``/``text`` messages when completed; an item with
a ``status`` (``command_execution``, ``file_change``, ``mcp_tool_call``...) is a tool call named by its
type, with the item id as call id: its call message when first seen (``executing`` while
``in_progress``), its result when completed (``aggregated_output``, else the item), failed when the
status is ``failed`` or the exit code is not 0. Key: ``thread.started.thread_id``, else
``--conversation-id``. The user's prompt is not in the stream.
"""

from __future__ import annotations

import json
from typing import Any

from murmur_conversations.importers.records import (
    HeldUntilKeyed,
    Item,
    Kept,
    ParseContext,
    Parsed,
    Problem,
    SourceLine,
    ToolUpdate,
    parse_line,
    unknown_key,
)

KNOWN_TYPES = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
        "error",
    }
)
_TOOL_INPUT_SKIP = ("id", "type", "status", "aggregated_output", "exit_code")


class ExecParser(HeldUntilKeyed):
    """Parser for one ``codex exec --json`` stream; see the module docstring."""

    def __init__(self, context: ParseContext) -> None:
        super().__init__(context)
        self.calls: set[str] = set()  # item ids whose call message was given

    def feed(self, line: SourceLine) -> list[Item]:
        """One stream line: kept, and read when it is an item event."""
        value = parse_line(line)
        if isinstance(value, Problem):
            return [value]
        kind = value.get("type")
        if (
            kind == "thread.started"
            and self.key is None
            and isinstance(value.get("thread_id"), str)
        ):
            self.key = value["thread_id"] or None
        record_type = kind[:64] if isinstance(kind, str) else "unknown"
        items: list[Item] = [
            Kept(
                unknown_key(line.text),
                line.number,
                line.text,
                record_type,
                unknown=kind not in KNOWN_TYPES,
            )
        ]
        item = value.get("item")
        if isinstance(kind, str) and kind.startswith("item.") and isinstance(item, dict):
            items.extend(self._item(kind, item, line.number))
        return self._release(items)

    def _item(self, kind: str, item: dict[str, Any], line: int) -> list[Item]:
        item_id, item_type = item.get("id"), item.get("type")
        if not isinstance(item_id, str) or not isinstance(item_type, str):
            return []
        if "status" not in item:
            if kind != "item.completed":
                return []
            text = item.get("text", "")
            block_type = "thinking" if item_type == "reasoning" else "text"
            if item_type not in ("reasoning", "agent_message"):
                block = {"type": item_type, "item": item}
                return [Parsed({"role": "assistant", "content": [block]}, line)]
            return [
                Parsed({"role": "assistant", "content": [{"type": block_type, "text": text}]}, line)
            ]
        out: list[Item] = []
        if item_id not in self.calls:
            self.calls.add(item_id)
            arguments = {k: v for k, v in item.items() if k not in _TOOL_INPUT_SKIP}
            call = {"type": "tool_call", "id": item_id, "name": item_type, "input": arguments}
            out.append(Parsed({"role": "assistant", "content": [call]}, line))
        status = item.get("status")
        if kind == "item.completed" or status in ("completed", "failed"):
            exit_code = item.get("exit_code")
            failed = status == "failed" or (isinstance(exit_code, int) and exit_code != 0)
            output = item.get("aggregated_output")
            # Not jsonenc: this text is stored content, hashed into the ids of imported messages
            # (docs/formats.md), so it stays spelled as it always was.
            content = output if isinstance(output, str) else json.dumps(item, ensure_ascii=False)
            result = {
                "role": "tool",
                "tool_call_id": item_id,
                "content": content,
                "is_error": failed,
            }
            if exit_code is not None:
                result["exit_code"] = exit_code
            out.append(Parsed(result, line))
        elif status == "in_progress":
            out.append(ToolUpdate("executing", {"call_id": item_id}, line))
        return out

    def message_index(self, line: int, previous: int, slot: int) -> tuple[int, int]:
        """Two index slots per line: a call and its result can share a line."""
        slot = slot + 1 if line == previous else 0
        return (line - 1) * 2 + slot, slot


def sniff(first: dict[str, Any]) -> bool:
    """Whether a first line looks like a ``codex exec --json`` event."""
    kind = first.get("type")
    return isinstance(kind, str) and kind in KNOWN_TYPES and "payload" not in first
