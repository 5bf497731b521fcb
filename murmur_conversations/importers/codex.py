"""Codex, ``--format codex``: a session rollout or a ``codex exec --json`` stream, told apart by the
first line (docs/formats.md). Pure."""

from __future__ import annotations

from typing import Any

from murmur_conversations.importers import codex_exec, codex_rollout
from murmur_conversations.importers.records import (
    Item,
    ParseContext,
    SourceLine,
    parse_json,
)

NAME = "codex"


class CodexParser:
    """Hands the lines to the rollout or the exec parser, chosen by the first line."""

    def __init__(self, context: ParseContext) -> None:
        self.context = context
        self.inner: codex_exec.ExecParser | codex_rollout.RolloutParser | None = None
        inner = (context.resume or {}).get("inner")
        if inner == "exec":
            self.inner = codex_exec.ExecParser(context)
        elif inner == "rollout":
            self.inner = codex_rollout.RolloutParser(context)

    def feed(self, line: SourceLine) -> list[Item]:
        """Choose the parser on the first line, then delegate."""
        if self.inner is None:
            value, _ = parse_json(line.text)
            exec_stream = isinstance(value, dict) and codex_exec.sniff(value)
            self.inner = (
                codex_exec.ExecParser(self.context)
                if exec_stream
                else codex_rollout.RolloutParser(self.context)
            )
        return self.inner.feed(line)

    def finish(self) -> list[Item]:
        """Delegate."""
        return self.inner.finish() if self.inner is not None else []

    def snapshot(self) -> dict[str, Any] | None:
        """The inner parser's resume state, and which parser it was."""
        if self.inner is None:
            return None
        state = self.inner.snapshot()
        kind = "exec" if isinstance(self.inner, codex_exec.ExecParser) else "rollout"
        return None if state is None else {**state, "inner": kind}


def parser(context: ParseContext) -> CodexParser:
    """A parser for one Codex rollout or exec stream."""
    return CodexParser(context)


def sniff(first: dict[str, Any]) -> bool:
    """Whether a first line is Codex's (either stream)."""
    return codex_rollout.sniff(first) or codex_exec.sniff(first)
