"""``codex exec --json`` streams (docs/formats.md "Codex"). Pure.

Every line is kept verbatim. Items are upserted by ``item.id`` (last state wins), and every item
type of current Codex versions is read on purpose (``ThreadItemDetails``, openai/codex
``codex-rs/exec``):

- ``agent_message``, ``plan`` and ``reasoning`` items become assistant ``text``/``thinking``
  messages when completed; the first answer titles the conversation (the stream carries no prompt).
- An item with a ``status`` (``command_execution``, ``file_change``, ``mcp_tool_call``,
  ``collab_tool_call``...) is a tool call named by its type, with the item id as call id: its call
  message when first seen (``executing`` while ``in_progress``), its result when completed
  (``aggregated_output``, else the item as JSON), failed when the status is ``failed`` or
  ``declined``, the exit code is not 0, or the item carries an ``error``.
- ``web_search`` items are ``web_search`` tool-call cards, completed with the item.
- ``todo_list`` items are todo snapshots, ``error`` items error notices.
- An unknown item type is shown as structured data and counted by name (``item.<type>``).

``turn.completed`` sets the status ``idle``; ``turn.failed`` and ``error`` events are error notices
(a failed turn sets ``error``); ``request_user_input`` pauses the conversation with a pending ask;
``item.plan.delta`` is a live preview. Key: ``thread.started.thread_id``, else
``--conversation-id``. The stream carries no times; its lines take the file's.
"""

from __future__ import annotations

import json
from typing import Any, Final

from murmur_conversations.importers.records import (
    MISSING,
    TITLE_FALLBACK,
    Delta,
    HeldUntilKeyed,
    Item,
    Kept,
    Notice,
    ParseContext,
    Parsed,
    Problem,
    SourceLine,
    StatusChange,
    Title,
    ToolUpdate,
    first_text,
    kind_of,
    parse_line,
    sha256_hex,
    unknown_key,
    wrong_type,
)

KNOWN_TYPES: Final = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
        "item.plan.delta",
        "request_user_input",
        "error",
    }
)
#: Item types read without a ``status`` (the ones with a status are tool calls).
TEXT_ITEMS: Final = {"agent_message": "text", "plan": "text", "reasoning": "thinking"}
KNOWN_ITEMS: Final = frozenset(
    {
        *TEXT_ITEMS,
        "command_execution",
        "file_change",
        "mcp_tool_call",
        "collab_tool_call",
        "web_search",
        "todo_list",
        "error",
    }
)
_TOOL_INPUT_SKIP: Final = ("id", "type", "status", "aggregated_output", "exit_code")


class ExecParser(HeldUntilKeyed):
    """Parser for one ``codex exec --json`` stream; see the module docstring."""

    def __init__(self, context: ParseContext) -> None:
        super().__init__(context)
        resume = context.resume or {}
        if self.key is None and isinstance(resume.get("key"), str):
            self.key = resume["key"]
        self.calls: set[str] = set(resume.get("calls") or ())  # items whose call was given
        self.titled = bool(resume.get("titled"))

    def snapshot(self) -> dict[str, Any] | None:
        """The key, the items whose call message was given, whether the title was given."""
        if self.key is None:
            return None
        return {"key": self.key, "calls": sorted(self.calls), "titled": self.titled}

    def feed(self, line: SourceLine) -> list[Item]:
        """One stream line: kept, and read when it is an event this version knows."""
        value = parse_line(line)
        if isinstance(value, Problem):
            return [value]
        kind = kind_of(value, "type", line)
        refused = kind if isinstance(kind, Problem) else _wrong_item(kind, value, line)
        if refused is not None:
            return [refused]
        if (
            kind == "thread.started"
            and self.key is None
            and isinstance(value.get("thread_id"), str)
        ):
            self.key = value["thread_id"] or None
        record_type = kind[:64] if isinstance(kind, str) else "unknown"
        item = value.get("item")
        item_type = item.get("type") if isinstance(item, dict) else None
        unknown_item = (
            isinstance(kind, str)
            and kind.startswith("item.")
            and isinstance(item_type, str)
            and item_type not in KNOWN_ITEMS
        )
        items: list[Item] = [
            Kept(
                unknown_key(line.text),
                line.number,
                line.text,
                record_type,
                unknown=kind not in KNOWN_TYPES or unknown_item,
                kind=f"item.{item_type}" if unknown_item else "",
                cut=kind == "item.updated",
            )
        ]
        if isinstance(kind, str) and kind.startswith("item.") and isinstance(item, dict):
            items.extend(self._item(kind, item, line.number))
        elif kind == "item.plan.delta" and isinstance(value.get("delta"), str):
            items.append(Delta(str(value.get("item_id") or self.key or ""), value["delta"]))
        else:
            items.extend(self._event(value, line))
        return self._release(items)

    def _event(self, value: dict[str, Any], line: SourceLine) -> list[Item]:
        kind = value.get("type")
        if kind == "turn.completed":
            return [StatusChange("idle")]
        if kind in ("turn.failed", "error"):
            error = value.get("error") if kind == "turn.failed" else value
            message = error.get("message") if isinstance(error, dict) else None
            text = message if isinstance(message, str) and message else "The turn failed."
            content = {"text": text, "error_type": str(kind)}
            notice = Notice(
                f"codex:{unknown_key(line.text)}", "system", "error", content, {}, line.number
            )
            return [notice, StatusChange("error")] if kind == "turn.failed" else [notice]
        if kind == "request_user_input":
            questions = value.get("questions")
            first = questions[0] if isinstance(questions, list) and questions else None
            question = first.get("question") if isinstance(first, dict) else None
            ask: dict[str, Any] = {"tool": "request_user_input", "pauseData": value}
            if isinstance(question, str):
                ask["question"] = question
            return [StatusChange("paused", pending_ask=ask)]
        return []

    def _item(self, kind: str, item: dict[str, Any], line: int) -> list[Item]:
        item_id, item_type = item.get("id"), item.get("type")
        if not isinstance(item_id, str) or not isinstance(item_type, str):
            return []
        if item_type == "web_search":
            return self._web_search(kind, item_id, item, line)
        if item_type == "todo_list":
            todos = item.get("items")
            if not isinstance(todos, list):
                return []
            key = f"codex:todo:{item_id}:{sha256_hex(todos)[:16]}"
            return [Notice(key, "system", "todo_snapshot", {"todos": todos}, {}, line)]
        if item_type == "error" and kind == "item.completed":
            text = item.get("message")
            content = {
                "text": text if isinstance(text, str) and text else "Error",
                "error_type": "error",
            }
            return [Notice(f"codex:error:{item_id}", "system", "error", content, {}, line)]
        if "status" not in item:
            if kind != "item.completed":
                return []
            if item_type not in TEXT_ITEMS:
                block = {"type": item_type, "item": item}
                return [Parsed({"role": "assistant", "content": [block]}, line)]
            text = item.get("text", "")
            out: list[Item] = [
                Parsed(
                    {
                        "role": "assistant",
                        "content": [{"type": TEXT_ITEMS[item_type], "text": text}],
                    },
                    line,
                )
            ]
            if item_type == "agent_message" and not self.titled and first_text(text):
                self.titled = True
                out.append(Title(first_text(text), TITLE_FALLBACK))
            return out
        return self._call(kind, item_id, item_type, item, line)

    def _call(
        self, kind: str, item_id: str, item_type: str, item: dict[str, Any], line: int
    ) -> list[Item]:
        out: list[Item] = []
        if item_id not in self.calls:
            self.calls.add(item_id)
            arguments = {k: v for k, v in item.items() if k not in _TOOL_INPUT_SKIP}
            call = {"type": "tool_call", "id": item_id, "name": item_type, "input": arguments}
            out.append(Parsed({"role": "assistant", "content": [call]}, line))
        status = item.get("status")
        if kind == "item.completed" or status in ("completed", "failed", "declined"):
            exit_code = item.get("exit_code")
            failed = (
                status in ("failed", "declined")
                or (isinstance(exit_code, int) and exit_code != 0)
                or bool(item.get("error"))
            )
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

    def _web_search(self, kind: str, item_id: str, item: dict[str, Any], line: int) -> list[Item]:
        out: list[Item] = []
        if item_id not in self.calls:
            self.calls.add(item_id)
            arguments = {"query": item.get("query"), "action": item.get("action")}
            call = {"type": "tool_call", "id": item_id, "name": "web_search", "input": arguments}
            out.append(Parsed({"role": "assistant", "content": [call]}, line))
        if kind == "item.completed":
            out.append(ToolUpdate("completed", {"call_id": item_id, "result": item}, line))
        return out

    def message_index(self, line: int, previous: int, slot: int) -> tuple[int, int]:
        """Two index slots per line: a call and its result can share a line."""
        slot = slot + 1 if line == previous else 0
        return (line - 1) * 2 + slot, slot


def _wrong_item(kind: str | None, value: dict[str, Any], line: SourceLine) -> Problem | None:
    """The refusal of an ``item.*`` event whose item cannot be read (not an object, an ``id`` or
    ``type`` that is not a string, a ``status`` that is not a string, a todo list's ``items``
    that are not an array), else None."""
    if kind is None or not kind.startswith("item.") or kind == "item.plan.delta":
        return None
    item = value.get("item", MISSING)
    if not isinstance(item, dict):
        return wrong_type(line, "item", item, "an object")
    for name in ("id", "type"):
        if not isinstance(item.get(name), str):
            return wrong_type(line, f"item.{name}", item.get(name, MISSING), "a string")
    if "status" in item and not isinstance(item["status"], str):
        return wrong_type(line, "item.status", item["status"], "a string")
    if item["type"] == "todo_list" and not isinstance(item.get("items"), list):
        return wrong_type(line, "item.items", item.get("items", MISSING), "an array")
    return None


def sniff(first: dict[str, Any]) -> bool:
    """Whether a line looks like a ``codex exec --json`` event."""
    kind = first.get("type")
    return isinstance(kind, str) and kind in KNOWN_TYPES and "payload" not in first
