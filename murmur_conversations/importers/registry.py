"""The formats ``import_conversations`` reads, and ``--format auto`` detection (docs/formats.md).
Pure: no Django.

Detection looks at the first JSON object of a JSON Lines source (a few more lines to tell OpenAI
from Anthropic), or at the whole document when the source is one JSON document.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

from murmur_conversations.importers import (
    agentfootprint,
    anthropic,
    claude_code,
    codex,
    murmur,
    muse,
    openai,
)
from murmur_conversations.importers.records import ParseContext, Parser, SourceLine, parse_json

#: Every format name of ``--format``, ``auto`` aside, in the order of docs/formats.md.
FORMAT_NAMES = ("murmur", "muse", "claude-code", "codex", "openai", "anthropic", "agentfootprint")

PARSERS: dict[str, Callable[[ParseContext], Parser]] = {
    murmur.NAME: murmur.parser,
    muse.NAME: muse.parser,
    claude_code.NAME: claude_code.parser,
    openai.NAME: openai.parser,
    anthropic.NAME: anthropic.parser,
    agentfootprint.NAME: agentfootprint.parser,
    codex.NAME: codex.parser,
}

#: Lines of a JSON Lines source looked at to tell OpenAI messages from Anthropic ones.
SNIFF_LINES = 50


def make_parser(name: str, context: ParseContext) -> Parser:
    """A new parser of format ``name`` (a key of :data:`PARSERS`; ``KeyError`` otherwise)."""
    return PARSERS[name](context)


def _list_format(messages: Any) -> str | None:
    if not isinstance(messages, list):
        return None
    return anthropic.NAME if anthropic.looks_anthropic(messages) else openai.NAME


def _document_format(value: Any) -> str | None:
    if isinstance(value, list):
        return _list_format(value)
    if not isinstance(value, dict):
        return None
    if agentfootprint.sniff(value):
        return agentfootprint.NAME
    if "messages" in value:
        if isinstance(value.get("system"), str | list):
            return anthropic.NAME
        return _list_format(value["messages"])
    return None


def _agent_log_format(first: dict[str, Any]) -> str | None:
    """muse journals and Claude Code logs (transcripts and stream-json)."""
    if muse.sniff(first):
        return muse.NAME
    if claude_code.sniff(first):
        return claude_code.NAME
    return None


def _line_format(first: dict[str, Any], sample: list[dict[str, Any]]) -> str | None:
    agent_log = _agent_log_format(first)
    if agent_log is not None:
        return agent_log
    if agentfootprint.sniff(first):
        return agentfootprint.NAME
    if codex.sniff(first):
        return codex.NAME
    messages = [m for m in sample if isinstance(m.get("role"), str)]
    if (
        messages
        and all(murmur.sniff(m) for m in messages)
        and not anthropic.looks_anthropic(messages)
    ):
        return murmur.NAME
    if isinstance(first.get("role"), str):
        return _list_format(sample)
    return None


def detect_live(lines: Iterator[SourceLine]) -> tuple[str | None, list[SourceLine]]:
    """Like :func:`detect`, for a live stream (``--follow``): told by the first line that is a JSON
    object, so nothing waits for more lines than that; None when the stream ends first."""
    head: list[SourceLine] = []
    for line in lines:
        head.append(line)
        value, reason = parse_json(line.text)
        if reason is None and isinstance(value, dict):
            return _line_format(value, [value]), head
    return None, head


def detect(lines: Iterator[SourceLine]) -> tuple[str | None, list[SourceLine]]:
    """The format of a source (None when it cannot be told; possibly a name of
    :data:`FORMAT_NAMES` without a parser in :data:`PARSERS`), and the lines read to tell it, which
    the caller replays to the parser before the rest of ``lines``."""
    head = list(itertools.islice(lines, 1))
    if not head:
        return None, head
    value, reason = parse_json(head[0].text)
    if reason is None and isinstance(value, dict) and "messages" not in value:
        head.extend(itertools.islice(lines, SNIFF_LINES - 1))
        sample = []
        for line in head:
            parsed, bad = parse_json(line.text)
            if bad is None and isinstance(parsed, dict):
                sample.append(parsed)
        return _line_format(value, sample), head
    head.extend(lines)  # one JSON document: read whole, as its parser will
    document, reason = parse_json("\n".join(line.text for line in head), document=True)
    if reason is None:
        return _document_format(document), head
    # Not one document: JSON Lines whose first line is bad; tell it by the lines that parse.
    sample = [v for v, bad in (parse_json(line.text) for line in head[:SNIFF_LINES]) if bad is None]
    objects = [v for v in sample if isinstance(v, dict)]
    return (_line_format(objects[0], objects) if objects else None), head
