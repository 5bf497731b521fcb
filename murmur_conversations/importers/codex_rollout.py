"""Codex CLI session rollouts, ``rollout-*.jsonl`` (docs/formats.md). Pure.

Every line is kept verbatim as a source record. Messages come from ``response_item`` lines only
(``event_msg`` lines echo them and are kept, not read): ``message`` (``input_text``/``output_text``
parts as ``text`` blocks; ``developer`` messages and ``<environment_context>``-style user messages
marked injected), ``reasoning`` (its summary as one ``thinking`` block), ``function_call`` and
``custom_tool_call`` (a ``tool_call`` block; JSON ``arguments`` parsed), and their ``*_output``
(a tool result linked by ``call_id``). Key: ``session_meta.payload.id``, else ``--conversation-id``.
Message ids follow the ``imp_`` rule with the 0-based line index, stable as the rollout grows.
"""

from __future__ import annotations

import json
from typing import Any

from murmur_conversations import jsonenc
from murmur_conversations.importers.records import (
    HeldUntilKeyed,
    Item,
    Kept,
    Parsed,
    Problem,
    SourceLine,
    parse_line,
    unknown_key,
)

KNOWN_LINES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
_INJECTED_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions",
    "# AGENTS.md",
    "<INSTRUCTIONS>",
)


def _text_blocks(content: Any) -> list[Any]:
    blocks: list[Any] = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        else:
            blocks.append(part)
    return blocks


def _injected(role: Any, blocks: list[Any]) -> bool:
    if role == "developer":
        return True
    texts = [b.get("text", "") for b in blocks if isinstance(b, dict)]
    return (
        role == "user"
        and bool(texts)
        and all(t.lstrip().startswith(_INJECTED_PREFIXES) for t in texts)
    )


def _arguments(value: Any) -> Any:
    """JSON ``arguments`` text parsed, else kept as the string (also for NaN and nesting too deep
    to read, as ``messages`` does for OpenAI arguments)."""
    if isinstance(value, str):
        try:
            return jsonenc.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def message_of(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The record message of one ``response_item`` payload, or None for a type not read."""
    kind = payload.get("type")
    rest = {k: v for k, v in payload.items() if k not in ("type", "role", "content")}
    if kind == "message":
        blocks = _text_blocks(payload.get("content"))
        message: dict[str, Any] = {"role": payload.get("role"), "content": blocks, **rest}
        if _injected(payload.get("role"), blocks):
            message["injected"] = True
        return message
    if kind == "reasoning":
        summary = payload.get("summary")
        texts = (
            [s["text"] for s in summary if isinstance(s, dict) and isinstance(s.get("text"), str)]
            if isinstance(summary, list)
            else []
        )
        return {"role": "assistant", "content": [{"type": "thinking", "text": "\n\n".join(texts)}]}
    if kind in ("function_call", "custom_tool_call"):
        args = payload.get("arguments", payload.get("input", {}))
        return {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_call",
                    "id": payload.get("call_id"),
                    "name": payload.get("name") or "",
                    "input": _arguments(args),
                }
            ],
        }
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = payload.get("output", "")
        # Not jsonenc: this text is stored content, hashed into the ids of imported messages
        # (docs/formats.md), so it stays spelled as it always was.
        return {
            "role": "tool",
            "tool_call_id": payload.get("call_id"),
            "content": output if isinstance(output, str) else json.dumps(output),
        }
    return None


class RolloutParser(HeldUntilKeyed):
    """Parser for one rollout; see the module docstring."""

    def feed(self, line: SourceLine) -> list[Item]:
        """One rollout line: kept, and read when it is a ``response_item``."""
        value = parse_line(line)
        if isinstance(value, Problem):
            return [value]
        kind = value.get("type")
        payload = value.get("payload")
        meta_id = (
            payload.get("id") if kind == "session_meta" and isinstance(payload, dict) else None
        )
        if self.key is None and isinstance(meta_id, str) and meta_id:
            self.key = meta_id
        known = isinstance(kind, str) and kind in KNOWN_LINES and isinstance(payload, dict)
        record_type = kind[:64] if isinstance(kind, str) else "unknown"
        items: list[Item] = [
            Kept(unknown_key(line.text), line.number, line.text, record_type, unknown=not known)
        ]
        if kind == "response_item" and isinstance(payload, dict):
            message = message_of(payload)
            if message is not None:
                items.append(Parsed(message, line.number))
        return self._release(items)


def sniff(first: dict[str, Any]) -> bool:
    """Whether a first line looks like a rollout line: a known ``type`` with a ``payload``."""
    kind = first.get("type")
    return isinstance(kind, str) and kind in KNOWN_LINES and isinstance(first.get("payload"), dict)
