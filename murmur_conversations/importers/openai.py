"""OpenAI Chat Completions message lists (docs/formats.md). Pure.

Messages are stored as they are: ``tool_calls`` (``function.arguments`` as JSON text) and
``role: "tool"`` results with ``tool_call_id`` are read by ``services.save_messages`` directly, and
every other key (``name``, ``refusal``, ``annotations``...) is kept in the record's ``extra``.
"""

from __future__ import annotations

from typing import Any

from murmur_conversations.importers.lists import ListParser
from murmur_conversations.importers.records import ParseContext, Problem

NAME = "openai"


def convert(message: dict[str, Any]) -> list[dict[str, Any]]:
    """One OpenAI message as one record message, unchanged."""
    return [message]


def unwrap(body: dict[str, Any]) -> tuple[Any, list[dict[str, Any] | Problem]]:
    """A request body's ``messages`` (the system prompt is already one of them)."""
    return body.get("messages"), []


def parser(context: ParseContext) -> ListParser:
    """A parser for one OpenAI message list (JSON array, request body or JSON Lines)."""
    return ListParser(context, convert=convert, unwrap=unwrap)


def sniff(first: dict[str, Any]) -> bool:
    """Whether a first JSONL object looks like an OpenAI message (no murmur ``id``)."""
    return isinstance(first.get("role"), str) and "id" not in first
