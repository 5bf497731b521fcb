"""What parsers yield, and the pure helpers they share (docs/formats.md).

No Django and no database here, so parsers can be fuzzed. A parser turns ``SourceLine`` objects into
a stream of items: ``Begin`` (the conversation that the following items belong to, maybe a child
of another), ``Link`` (a child's launching call, learned later), ``Parsed``
(a message for ``services.save_messages``), ``Kept`` (a line kept verbatim as a source record),
``ToolUpdate``, ``StatusChange``, ``Notice`` (a display row outside the record, such as a run's
error), ``Title`` (a title the log gives, with its rank), ``Rated`` (feedback on a display row),
``Delta`` (streamed text, live only), ``Covered`` (a line accounted for without a write) and
``Problem`` (a refused line, with its number and an
excerpt).

Items carry ``at``, the time of the line they come from (docs/formats.md "Times"), or None when the
line has none; the writer then uses the nearest earlier time.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from murmur_conversations import jsonenc
from murmur_conversations.redaction import redact_and_cut

#: How many characters of a bad line a report shows.
EXCERPT_CHARS = 80


@dataclass(frozen=True)
class SourceLine:
    """One line of a source: 1-based ``number``, ``text`` without its line ending (and without a
    UTF-8 BOM on line 1); ``complete`` is false for a last line with no final newline. A binary
    source (``otlp-proto``) gives frames instead: ``data`` the frame's bytes (``text`` "";
    ``complete`` false and ``data`` empty for a torn frame)."""

    number: int
    text: str
    complete: bool = True
    data: bytes | None = None


@dataclass(frozen=True)
class Begin:
    """The following items belong to the conversation with this key (``external_id``).

    ``parent`` is the key of the conversation that launched it (a subagent's parent,
    docs/formats.md "Subagents"), ``call_id`` the parent's call that launched it when known;
    ``created_at`` when the log says when the conversation began (a murmur export), else its
    first line time dates it."""

    key: str
    parent: str | None = None
    call_id: str | None = None
    #: The key may be the id of a conversation of the owner (a frontend's list names the
    #: conversation it came from): the items then go into that conversation, whatever its source.
    merge: bool = False
    #: The key of the conversation of this source that this one was forked from (a Codex fork's
    #: ``forked_from_id``): linked as ``Conversation.forked_from`` when that one is stored.
    forked_from: str | None = None
    created_at: datetime | None = None
    #: The id of the conversation this source was exported from (a murmur export's conversation
    #: line names it): refused, like the key, when that conversation was deleted.
    exported_from: str | None = None


@dataclass(frozen=True)
class Link:
    """The child conversation keyed ``key`` was launched by the call ``call_id`` of its parent:
    learned after its lines (a Claude Code ``Task`` result naming its agent). Sets the child's
    ``parent_call_id`` when the child exists and has none; nothing otherwise."""

    key: str
    call_id: str


@dataclass(frozen=True)
class Parsed:
    """A message dict in the shape of docs/write-path.md, always with an ``id``; ``line`` is the
    1-based source line, or None when the message came from a whole JSON document."""

    message: dict[str, Any]
    line: int | None
    at: datetime | None = None
    #: A tool result that a log may write again (a resumed Claude Code session replays its
    #: turns): dropped when its call already has a result in the conversation.
    once: bool = False
    #: The 0-based position of the message in a one-document source (``line`` None), so each
    #: message of a document is accounted for (docs/formats.md "Every line accounted for").
    entry: int | None = None


@dataclass(frozen=True)
class Subagent:
    """Who wrote a line that belongs to a subagent (Claude Code sidechains, ``subagents/agent-*``
    files, stream-json ``parent_tool_use_id``): its agent id and the ``tool_use`` id that launched
    it, either possibly unknown. Such lines belong to the subagent's child conversation."""

    agent_id: str | None = None
    tool_use_id: str | None = None


@dataclass(frozen=True)
class Kept:
    """A source line kept verbatim (``SourceRecord``). ``unknown`` marks a record type the parser
    does not read; it is counted by ``kind`` (default: the record type), and does not make an
    import partial. ``subagent`` names the agent a subagent's line belongs to. ``cut``: the line's
    texts stop mid-way (a Codex ``item.updated``: a later line carries them whole), so their ends
    are redacted as text cut short (``redaction.Redactor.cut_text``)."""

    source_key: str
    line: int | None
    raw: str
    record_type: str
    unknown: bool = False
    at: datetime | None = None
    kind: str = ""
    subagent: Subagent | None = None
    cut: bool = False
    entry: int | None = None  # as ``Parsed.entry``


@dataclass(frozen=True)
class ToolUpdate:
    """Move a tool call (``services.update_tool_status``); ``info`` has ``call_id`` and the keys the
    status takes. A move the call has already passed (re-imports) is skipped silently."""

    status: str
    info: dict[str, Any]
    line: int | None = None
    at: datetime | None = None


@dataclass(frozen=True)
class StatusChange:
    """Set the conversation status and pending ask (``services.set_status``)."""

    status: str
    pending_ask: dict[str, Any] | None = None
    at: datetime | None = None


@dataclass(frozen=True)
class Notice:
    """A display row that is not in the record (``services.save_synthetic_message``), such as a
    run's error. ``key`` is unique within the conversation: a notice whose key is already there
    (a re-import) is not saved again."""

    key: str
    message_type: str
    content_type: str
    content: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    line: int | None = None
    at: datetime | None = None


#: Ranks of ``Title`` items: a higher rank wins; within a rank, the later one.
TITLE_FALLBACK = 0  # what a log without a prompt carries: the first answer, the directory
TITLE_PROMPT = 1  # the first prompt a person typed
TITLE_SUMMARY = 2  # a summary the tool wrote of this conversation
TITLE_GENERATED = 3  # a title the tool generated (Claude Code ``ai-title``)
TITLE_CUSTOM = 4  # a title the person set (Claude Code ``custom-title``, Codex thread name)
TITLE_EXPORTED = 5  # the title a murmur export carries: kept as it is, an empty one too


@dataclass(frozen=True)
class Title:
    """A title the log gives for the current conversation (docs/formats.md "Titles")."""

    text: str
    rank: int


@dataclass(frozen=True)
class Rated:
    """Feedback on one display row (``services.set_feedback``): the ``part``-th (0-based, by seq)
    display row of the record message ``message_id``; ``user`` is a username, or None for the
    conversation's owner (the import's ``--owner``). Setting the same feedback again changes
    nothing, so re-imports add nothing."""

    message_id: str
    part: int
    rating: int
    comment: str
    user: str | None
    line: int | None = None


@dataclass(frozen=True)
class Delta:
    """Streamed text (``services.broadcast_delta``): ephemeral, sent only by ``--follow``."""

    stream_id: str
    text: str


@dataclass(frozen=True)
class Covered:
    """A line that needs no write of its own: ``imported`` when what it holds lands through the
    items of another line (an OTLP model call repeating the history an earlier call gave: the
    line counts as imported), else a line this format reads that holds nothing it imports (spans
    of no GenAI call: not kept)."""

    line: int
    imported: bool


@dataclass(frozen=True)
class Problem:
    """A refused line (or document): ``line`` is None for a whole document or source, or for a
    message of a one-document source (``entry``, its 0-based position). ``refused`` False: a
    notice about a line that was imported (e.g. without its unreadable usage). Parsers make
    refusals with :func:`refuse` (or :func:`wrong_type`)."""

    line: int | None
    reason: str
    excerpt: str = ""
    refused: bool = True
    entry: int | None = None


Item = (
    Begin
    | Link
    | Parsed
    | Kept
    | ToolUpdate
    | StatusChange
    | Notice
    | Title
    | Rated
    | Delta
    | Covered
    | Problem
)


@dataclass(frozen=True)
class ParseContext:
    """What a parser may know besides the lines: the source's file name parts (empty for stdin),
    the ``--conversation-id`` option, and ``resume``: the state a parser of the same format gave
    (``snapshot``) when an earlier import of this file stopped, when the lines fed now are the
    ones appended since; ``live`` for ``--follow``."""

    path_parts: tuple[str, ...] = ()
    conversation_id: str | None = None
    resume: dict[str, Any] | None = None
    #: A live stream (``--follow``): a parser gives what it can at once rather than wait for
    #: lines that may complete it.
    live: bool = False
    #: What other sources told of subagents: agent id -> the call id that launched it (a
    #: Claude Code session's ``Task`` results, for its ``subagents/agent-*.jsonl`` files).
    links: dict[str, str] = field(default_factory=dict)
    #: The writer's check of one message dict: why it would refuse it, None when it imports it
    #: (``base.message_refusal``). A parser whose line yields several messages checks them all
    #: before giving any, so the line is refused whole or imported whole; None: nothing checked.
    check: Callable[[dict[str, Any]], str | None] | None = None


class Parser(Protocol):
    """One source being parsed: ``feed`` each line in order, then ``finish`` once. A parser that
    can go on from where it stopped also has ``snapshot() -> dict | None`` (see ``resumable``)."""

    def feed(self, line: SourceLine) -> list[Item]:
        """Items produced by this line (possibly none until later lines arrive)."""

    def finish(self) -> list[Item]:
        """Items still held back when the source ends."""


def resumable(parser: Any) -> dict[str, Any] | None:
    """``parser.snapshot()`` after ``finish``: JSON-ready state to give the next parser of the same
    file as ``ParseContext.resume``; None when the parser cannot go on (its file is then read whole
    again, which imports nothing twice)."""
    snapshot = getattr(parser, "snapshot", None)
    return snapshot() if callable(snapshot) else None


def subagent_links(parser: Any) -> dict[str, str]:
    """``parser.subagent_links()`` after ``finish``: agent id -> the call that launched it, for
    the subagents' own files read after it (Claude Code); empty for other formats."""
    links = getattr(parser, "subagent_links", None)
    found = links() if callable(links) else {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}


def parse_time(value: Any) -> datetime | None:
    """docs/formats.md "Times": an ISO 8601 text (``Z`` or an offset; a time without one is UTC) or
    a number of seconds, milliseconds or microseconds since the Unix epoch (told apart by size), as
    an aware ``datetime``; None for anything else or out of range."""
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, str) and value:
            parsed = datetime.fromisoformat(value.strip())
            return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
        if isinstance(value, int | float):
            seconds = float(value)
            while abs(seconds) >= 1e11:  # milliseconds, microseconds, nanoseconds
                seconds /= 1000
            return datetime.fromtimestamp(seconds, tz=UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None


_WRAPPER = re.compile(
    r"<(command-message|system-reminder|local-command-caveat|local-command-stdout|"
    r"local-command-stderr)>.*?</\1>",
    re.S,
)
_COMMAND_NAME = re.compile(r"<command-name>(.*?)</command-name>", re.S)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)
_TAG = re.compile(r"</?(command-[a-z]+|local-command-[a-z]+|system-reminder|bash-[a-z]+)>")


def prompt_title(content: Any, limit: int = 80) -> str:
    """A title from a prompt a person typed (docs/formats.md "Titles"): its text with the wrappers
    agent CLIs add removed: ``<command-name>/x</command-name>`` and ``<command-args>`` become
    ``/x args``, and ``<command-message>``, ``<system-reminder>`` and ``<local-command-*>`` blocks
    go; redacted, then cut to at most ``limit`` characters (``redaction.redact_and_cut``)."""
    text = first_text(content, limit=10_000)
    name = _COMMAND_NAME.search(text)
    if name:
        args = _COMMAND_ARGS.search(text)
        text = " ".join(
            p for p in (name.group(1).strip(), args.group(1).strip() if args else "") if p
        )
    else:
        text = _TAG.sub("", _WRAPPER.sub("", text))
    return redact_and_cut(" ".join(text.split()), limit, ellipsis="…").value


def canonical_json(value: Any) -> str:
    """docs/formats.md: ``json.dumps(value, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` (:func:`jsonenc.canonical`); hash its UTF-8 bytes."""
    return jsonenc.canonical(value)


def sha256_hex(value: Any) -> str:
    """Hex sha256 of the UTF-8 bytes of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value).encode("utf-8", "surrogatepass")).hexdigest()


def compact_json(value: Any) -> str:
    """Compact JSON keeping key order and non-ASCII text (the export line format), for the text of
    imported input that is reported or kept verbatim: a non-finite number (``1e999`` read as
    infinity) is written as Python spells it rather than losing the line."""
    return jsonenc.dumps(value, allow_non_finite=True)


def imported_id(key: str, index: int, message: dict[str, Any]) -> str:
    """``imp_`` + the first 32 hex of sha256 of the canonical JSON of ``[key, index, message]``:
    the id of a message (``index`` 0-based) that the source gave none (docs/formats.md)."""
    return "imp_" + sha256_hex([key, index, message])[:32]


def with_id(key: str, index: int, message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with its own non-empty string ``id``, else with :func:`imported_id` first."""
    given = message.get("id")
    if isinstance(given, str) and given:
        return message
    rest = {k: v for k, v in message.items() if k != "id"}
    return {"id": imported_id(key, index, rest), **rest}


def key_of_messages(messages: list[Any]) -> str:
    """The conversation key of a message list: sha256 hex of the canonical JSON of the messages up
    to and including the first assistant message (all of them when there is none)."""
    prefix: list[Any] = []
    for message in messages:
        prefix.append(message)
        if isinstance(message, dict) and message.get("role") == "assistant":
            break
    return sha256_hex(prefix)


def excerpt(text: str) -> str:
    """At most :data:`EXCERPT_CHARS` characters of ``text`` (redacted before the cut), control
    characters escaped."""
    short = redact_and_cut(text, EXCERPT_CHARS, ellipsis="...").value
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in short)


def parse_json(text: str, *, document: bool = False) -> tuple[Any, str | None]:
    """``(value, None)`` for valid JSON text, else ``(None, reason)``; the reason names the column
    (and the line, for a ``document`` of several lines). NaN and Infinity are refused; so is
    nesting too deep to read."""
    try:
        return jsonenc.loads(text), None
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}" if document else f"column {error.colno}"
        at = "" if error.msg.endswith(" at") else " at"
        return None, f"not JSON ({error.msg}{at} {where})"
    except (ValueError, RecursionError) as error:
        return None, f"not JSON ({error})"


def json_type(value: Any) -> str:
    """The JSON type of a value ``json.loads`` gave, as a report names it: ``a string``,
    ``a number``, ``true``, ``null``, ``an array``, ``an object``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def refuse(line: SourceLine, reason: str) -> Problem:
    """The one way a parser refuses a line (docs/formats.md "Every line accounted for"): the
    ``Problem`` naming its number, ``reason`` and an excerpt of it. The writer reports it on
    stderr, counts it refused, keeps nothing of it (not even its source record) and the import
    exits 1."""
    return Problem(line.number, reason, excerpt(line.text))


def refuse_entry(position: int, reason: str) -> Problem:
    """:func:`refuse` for a message of a one-document source, by its 0-based ``position`` (-1: a
    request body's top-level ``system``); reported as ``item N`` (``system``)."""
    return Problem(None, reason, entry=position)


def wrong_type(line: SourceLine, name: str, value: Any, wanted: str) -> Problem:
    """:func:`refuse` a line whose field ``name`` (a dotted path, ``item.id``) holds ``value``
    where ``wanted`` (``a string``, ``an object``...) belongs, or is missing (``value`` is
    :data:`MISSING`)."""
    found = "missing" if value is MISSING else json_type(value)
    return refuse(line, f"{name} is {found}, not {wanted}")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: What :func:`wrong_type` is given for a key the line does not have.
MISSING: Any = _Missing()


def kind_of(value: dict[str, Any], name: str, line: SourceLine) -> str | Problem | None:
    """The record kind a line names in its field ``name`` (``type``, ``payload_type``...): the
    string, None when the line has no such key (an unknown record, kept as a source record), or
    the ``Problem`` refusing a line whose kind is not a string (``{"type": 5}`` is not a record
    type a later version may write; it is a broken line)."""
    if name not in value:
        return None
    kind = value[name]
    if isinstance(kind, str):
        return kind
    return wrong_type(line, name, kind, "a string")


def parse_line(line: SourceLine) -> dict[str, Any] | Problem:
    """The JSON object on ``line``, or the ``Problem`` that refuses it (a torn last line, text that
    is not JSON, or JSON that is not an object)."""
    value, reason = parse_json(line.text)
    if reason is not None:
        if not line.complete:
            reason = "torn last line (no final newline; the writer stopped mid-line)"
        return refuse(line, reason)
    if not isinstance(value, dict):
        return refuse(line, f"a JSON {type(value).__name__}, not an object")
    return value


def known(key: str | None) -> str:
    """``key`` where a parser's conversation key is known by construction (items are released only
    after it is); ``RuntimeError`` (a bug in the parser, never bad input) if it is not."""
    if key is None:
        raise RuntimeError("a parser used its conversation key before it was known")
    return key


def unknown_key(raw: str) -> str:
    """The source key of a kept line that has no id of its own: ``raw:`` + 32 hex of its sha256,
    so the same line is kept once however often it is imported."""
    return "raw:" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def first_text(content: Any, limit: int = 80) -> str:
    """A short title from message content: the string, or its first ``text`` block, redacted,
    then cut to at most ``limit`` characters (``redaction.redact_and_cut``)."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = next(
            (
                b["text"]
                for b in content
                if isinstance(b, dict)
                and b.get("type") == "text"
                and isinstance(b.get("text"), str)
            ),
            "",
        )
    else:
        text = ""
    return redact_and_cut(" ".join(text.split()), limit, ellipsis="…").value


class HeldUntilKeyed:
    """Base of parsers whose conversation key may come after the first lines (Codex): items are
    held until the key is known, then released after one ``Begin``, messages without an id getting
    the ``imp_`` id of :meth:`message_index`. A source that never names its key is keyed by the
    sha256 of its first kept line."""

    def __init__(self, context: ParseContext) -> None:
        self.key: str | None = context.conversation_id or None
        self.begun = False
        self.held: list[Item] = []
        #: the key of the conversation this one was forked from, for its ``Begin``
        self.forked_from: str | None = None

    def message_index(self, line: int, previous: int, slot: int) -> tuple[int, int]:
        """``(index, slot)`` of a parsed message of 1-based ``line``; ``previous`` is the line of
        the message before it and ``slot`` the slot that one used. Default: one index per line."""
        return line - 1, 0

    def after_id(self, message: dict[str, Any]) -> dict[str, Any]:
        """A parsed message once its id is set: what a parser adds here (a failure it reads from
        the output, say) does not change the message's id, so importing again still adds
        nothing. Default: the message as it is."""
        return message

    def finish(self) -> list[Item]:
        """Release what is held, keying a source that never named its key."""
        if self.key is None and self.held:
            first = next((i for i in self.held if isinstance(i, Kept)), None)
            self.key = sha256_hex(first.raw if first else "")
        return self._release([])

    def _release(self, items: list[Item]) -> list[Item]:
        self.held.extend(items)
        if self.key is None:
            return []
        out: list[Item] = [] if self.begun else [Begin(self.key, forked_from=self.forked_from)]
        self.begun = True
        previous, slot = -1, 0
        for item in self.held:
            if isinstance(item, Parsed) and item.line is not None:
                index, slot = self.message_index(item.line, previous, slot)
                previous = item.line
                item = replace(item, message=self.after_id(with_id(self.key, index, item.message)))
            out.append(item)
        self.held.clear()
        return out
