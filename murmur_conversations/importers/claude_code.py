"""Claude Code, ``--format claude-code``: a session transcript or ``claude -p --output-format
stream-json`` output, told apart by the first line (docs/formats.md). Pure."""

from __future__ import annotations

from typing import Any

from murmur_conversations.importers import claude_session, claude_stream
from murmur_conversations.importers.claude_session import SessionParser
from murmur_conversations.importers.claude_stream import StreamParser
from murmur_conversations.importers.records import (
    Item,
    ParseContext,
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
        self.inner: SessionParser | StreamParser | None = None
        resume = context.resume or {}
        if resume.get("inner") == "stream":
            self.inner = StreamParser(context)
        elif resume.get("inner") == "session":
            self.inner = SessionParser(context)

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

    def subagent_links(self) -> dict[str, str]:
        """Agent id -> the call that launched it, as far as the lines read tell (for the
        session's ``subagents/agent-*.jsonl`` files, docs/formats.md "Subagents")."""
        return dict(self.inner.agents) if self.inner is not None else {}

    def snapshot(self) -> dict[str, Any] | None:
        """The inner parser's resume state, and which parser it was."""
        if self.inner is None:
            return None
        state = self.inner.snapshot()
        kind = "stream" if isinstance(self.inner, StreamParser) else "session"
        return None if state is None else {**state, "inner": kind}


def parser(context: ParseContext) -> ClaudeCodeParser:
    """A parser for one Claude Code transcript or stream-json output."""
    return ClaudeCodeParser(context)


def identify(value: dict[str, Any]) -> bool:
    """Whether a line is plainly Claude Code's: a session line (bookkeeping lines included, see
    ``claude_session.identify``) or a stream-json line (a known type with ``session_id``)."""
    if claude_session.identify(value):
        return True
    kind = value.get("type")
    return isinstance(kind, str) and kind in claude_stream.KNOWN_TYPES and "session_id" in value


def sniff(first: dict[str, Any]) -> bool:
    """Whether a line looks like Claude Code's (either kind); see :func:`identify`."""
    return identify(first)
