"""The formats ``import_conversations`` reads, and ``--format auto`` detection (docs/formats.md).
Pure: no Django.

Detection looks at the first lines of a JSON Lines source and takes the format of the first line
that identifies one: agent logs start with bookkeeping lines often enough (a Claude Code session
may open with a ``summary``, ``file-history-snapshot`` or ``ai-title`` line), so line 1 alone does
not decide. Message lists are told apart by their messages (a few lines, OpenAI from Anthropic).
A source that is one JSON document is read whole.
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
    frontends,
    murmur,
    muse,
    openai,
    otlp,
)
from murmur_conversations.importers.records import (
    ParseContext,
    Parser,
    Problem,
    SourceLine,
    parse_json,
    parse_line,
)

#: Every format name of ``--format``, ``auto`` aside, in the order of docs/formats.md.
FORMAT_NAMES = (
    "murmur",
    "muse",
    "claude-code",
    "codex",
    "openai",
    "anthropic",
    "agentfootprint",
    "vercel-ui",
    "ag-ui",
    "openai-items",
    "otlp-json",
    "otlp-proto",
)

PARSERS: dict[str, Callable[[ParseContext], Parser]] = {
    murmur.NAME: murmur.parser,
    muse.NAME: muse.parser,
    claude_code.NAME: claude_code.parser,
    openai.NAME: openai.parser,
    anthropic.NAME: anthropic.parser,
    agentfootprint.NAME: agentfootprint.parser,
    codex.NAME: codex.parser,
    "vercel-ui": frontends.vercel_parser,
    "ag-ui": frontends.ag_ui_parser,
    "openai-items": frontends.openai_items_parser,
    otlp.JSON_NAME: otlp.json_parser,
    otlp.PROTO_NAME: otlp.proto_parser,
}

#: Lines of a JSON Lines source looked at to tell OpenAI messages from Anthropic ones.
SNIFF_LINES = 50


def make_parser(name: str, context: ParseContext) -> Parser:
    """A new parser of format ``name`` (a key of :data:`PARSERS`; ``KeyError`` otherwise)."""
    return PARSERS[name](context)


def _list_format(messages: Any) -> str | None:
    if not isinstance(messages, list):
        return None
    shape = frontends.sniff(messages)
    if shape is not None:
        return shape
    return anthropic.NAME if anthropic.looks_anthropic(messages) else openai.NAME


def _document_format(value: Any) -> str | None:
    if isinstance(value, list):
        return _list_format(value)
    if not isinstance(value, dict):
        return None
    if agentfootprint.sniff(value):
        return agentfootprint.NAME
    for holder in ("data", "items"):  # a Conversations list page or body
        if isinstance(value.get(holder), list) and frontends.sniff(value[holder]):
            return frontends.sniff(value[holder])
    if "messages" in value:
        if "system" in value:  # only Anthropic's request bodies have a top-level system prompt
            return anthropic.NAME
        return _list_format(value["messages"])
    return None


def identify(value: dict[str, Any]) -> str | None:
    """The format a single line plainly belongs to (muse, Claude Code, agentfootprint, Codex, an
    OTLP JSON trace export), or None when the line alone does not tell."""
    if otlp.sniff(value):
        return otlp.JSON_NAME
    if muse.sniff(value):
        return muse.NAME
    if claude_code.identify(value):
        return claude_code.NAME
    if agentfootprint.sniff(value):
        return agentfootprint.NAME
    if codex.sniff(value):
        return codex.NAME
    return None


def _line_format(first: dict[str, Any], sample: list[dict[str, Any]]) -> str | None:
    for value in sample:
        found = identify(value)
        if found is not None:
            return found
        if isinstance(value.get("role"), str):
            break  # a message: message lists are told by their messages, below
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
    """Like :func:`detect`, for a live stream (``--follow``): told by the first line that
    identifies a format or is a message, so nothing waits for more lines than that (at most
    :data:`SNIFF_LINES` JSON objects); None when the stream ends first."""
    head: list[SourceLine] = []
    sample: list[dict[str, Any]] = []
    for line in lines:
        head.append(line)
        value, reason = parse_json(line.text)
        if reason is not None or not isinstance(value, dict):
            continue
        sample.append(value)
        if identify(value) is not None or isinstance(value.get("role"), str):
            return _line_format(sample[0], sample), head
        if len(sample) >= SNIFF_LINES:
            break
    return (_line_format(sample[0], sample) if sample else None), head


def undetected_reason(head: list[SourceLine]) -> str:
    """Why :func:`detect` could not tell the format of a source whose first lines are ``head``:
    the first line that is not a JSON object, named with its JSON error, else that no line says
    (docs/formats.md "Detection")."""
    for line in head[:SNIFF_LINES]:
        problem = parse_line(line)
        if isinstance(problem, Problem):
            return f"cannot tell the format: line {line.number}: {problem.reason}; pass --format"
    return (
        f"cannot tell the format: none of the first {min(len(head), SNIFF_LINES)} line(s) is a "
        "line of a known format; pass --format"
    )


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


#: Formats that detection tells apart without doubt (agent logs, OTLP JSON traces).
DISTINCT_FORMATS = frozenset({"muse", "codex", "claude-code", otlp.JSON_NAME})


def contradicts(forced: str, detected: str | None) -> bool:
    """Whether a forced ``--format`` is plainly wrong for a source: detection names another format
    and one of the two is an agent log, whose records the other could only keep as unknown (which
    would import an empty conversation)."""
    return (
        detected is not None and detected != forced and bool({forced, detected} & DISTINCT_FORMATS)
    )
