"""Anthropic Messages lists (docs/formats.md). Pure.

Blocks become the record's block shapes: ``tool_use`` -> ``tool_call`` (``id``, ``name``,
``input``), ``thinking`` -> ``thinking`` with ``text`` (the ``signature`` kept byte for byte).
Each ``tool_result`` block becomes its own ``role: "tool"`` message with ``tool_call_id`` (=
``tool_use_id``), ``content`` and ``is_error``, in block order, so results link to calls by id. Other
blocks are kept as they are; other message keys (a response's ``id``, ``model``, ``usage``...) go to
the record's ``extra``. A request body's top-level ``system`` becomes a ``system`` message first.
"""

from __future__ import annotations

from typing import Any

from murmur_conversations.importers.lists import ListParser
from murmur_conversations.importers.records import (
    ParseContext,
    Problem,
    json_type,
    refuse_entry,
)

NAME = "anthropic"


def _block(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    rest = {k: v for k, v in block.items() if k not in ("type", "id", "name", "input")}
    if kind == "tool_use":
        return {
            "type": "tool_call",
            "id": block.get("id"),
            "name": block.get("name"),
            "input": block.get("input", {}),
            **rest,
        }
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        rest = {k: v for k, v in block.items() if k not in ("type", "thinking")}
        return {"type": "thinking", "text": block["thinking"], **rest}
    return block


def _result(block: dict[str, Any]) -> dict[str, Any]:
    rest = {
        k: v for k, v in block.items() if k not in ("type", "tool_use_id", "content", "is_error")
    }
    is_error = block.get("is_error")
    return {
        "role": "tool",
        "content": block.get("content", ""),
        "tool_call_id": block.get("tool_use_id"),
        "is_error": is_error if isinstance(is_error, bool) else False,
        **rest,
    }


def convert(message: dict[str, Any]) -> list[dict[str, Any]]:
    """One Anthropic message as record messages: its ``tool_result`` blocks as tool messages, the
    other blocks (``tool_use`` and ``thinking`` renamed) as one message with the message's keys."""
    content = message.get("content")
    if not isinstance(content, list):
        return [message]
    out: list[dict[str, Any]] = []
    blocks: list[Any] = []
    first = True

    def flush() -> None:
        nonlocal first
        if blocks:
            keys = message if first else {"role": message.get("role")}
            out.append({**keys, "content": list(blocks)})
            first = False
            blocks.clear()

    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            flush()
            out.append(_result(block))
        else:
            blocks.append(_block(block))
    flush()
    return out or [message]


def unwrap(body: dict[str, Any]) -> tuple[Any, list[dict[str, Any] | Problem]]:
    """A request body's ``messages``, with its top-level ``system`` prompt (a string or a list of
    blocks; null or empty: none) as a first message, or the ``Problem`` refusing a ``system`` of
    another type."""
    system = body.get("system")
    prepended: list[dict[str, Any] | Problem] = []
    if isinstance(system, str | list):
        if system:
            prepended.append({"role": "system", "content": system})
    elif system is not None:
        found = json_type(system)
        prepended.append(refuse_entry(-1, f"system is {found}, not a string or a list"))
    return body.get("messages"), prepended


def parser(context: ParseContext) -> ListParser:
    """A parser for one Anthropic message list (JSON array, request body or JSON Lines)."""
    return ListParser(context, convert=convert, unwrap=unwrap)


_MARKERS = frozenset({"tool_use", "tool_result", "redacted_thinking"})


def _anthropic_block(block: Any) -> bool:
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    if not isinstance(kind, str):  # a block type that is not a string marks nothing
        return False
    return kind in _MARKERS or (kind == "thinking" and "thinking" in block)


def looks_anthropic(messages: list[Any]) -> bool:
    """Whether any message holds a block only Anthropic uses (``tool_use``, ``tool_result``,
    ``thinking`` with a ``thinking`` key) or is a Messages API response (``type: "message"``)."""
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("type") == "message":
            return True
        content = message.get("content")
        if isinstance(content, list) and any(_anthropic_block(b) for b in content):
            return True
    return False
