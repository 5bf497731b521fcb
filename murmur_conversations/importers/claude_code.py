"""Claude Code, ``--format claude-code``: a session transcript or ``claude -p --output-format
stream-json`` output, told apart by the first line (docs/formats.md). Pure."""

from __future__ import annotations

from typing import Any

from murmur_conversations.importers.claude_session import KNOWN_TYPES, SessionParser
from murmur_conversations.importers.claude_stream import StreamParser
from murmur_conversations.importers.records import (
    Item,
    ParseContext,
    Parser,
    SourceLine,
    parse_json,
)

NAME = "claude-code"


def is_stream(first: dict[str, Any]) -> bool:
    """Whether a first line is stream-json's (``session_id``, not a transcript's ``sessionId``)."""
    return "session_id" in first and "sessionId" not in first


class ClaudeCodeParser:
    """Hands the lines to the transcript or the stream-json parser, chosen by the first line."""

    def __init__(self, context: ParseContext) -> None:
        self.context = context
        self.inner: Parser | None = None

    def feed(self, line: SourceLine) -> list[Item]:
        """Choose the parser on the first line, then delegate."""
        if self.inner is None:
            value, _ = parse_json(line.text)
            stream = isinstance(value, dict) and is_stream(value)
            self.inner = StreamParser(self.context) if stream else SessionParser(self.context)
        return self.inner.feed(line)

    def finish(self) -> list[Item]:
        """Delegate."""
        return self.inner.finish() if self.inner is not None else []


def parser(context: ParseContext) -> ClaudeCodeParser:
    """A parser for one Claude Code transcript or stream-json output."""
    return ClaudeCodeParser(context)


def sniff(first: dict[str, Any]) -> bool:
    """Whether a first line looks like Claude Code's (either kind)."""
    kind = first.get("type")
    if not isinstance(kind, str):
        return False
    return (kind in KNOWN_TYPES or kind in ("result", "rate_limit_event")) and any(
        key in first for key in ("sessionId", "session_id", "uuid")
    )
