"""OpenTelemetry GenAI traces (docs/formats.md "OpenTelemetry GenAI traces"): ``otlp-json``, one
OTLP JSON ``ExportTraceServiceRequest`` per line, and ``otlp-proto``, the collector file
exporter's length-prefixed protobuf frames (``traces.otlp``). Pure: no Django.

Each line (frame) is decoded whole with the official classes and refused alone when it is not a
readable request or one of its GenAI spans holds messages of the wrong shape (nothing of that
line is used). Model-call and ``execute_tool`` spans (``traces.genai``) are held until the source
ends, since the spans of one conversation come in any order across lines; then each
conversation, keyed by ``gen_ai.conversation.id`` (the span's, else its nearest ancestor's in the
source), else by the trace id, becomes one transcript in which every message is kept once
(``genai.transcript``). A line whose messages all came before counts as imported; a line with no
GenAI span is not kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from murmur_conversations.importers.records import (
    Begin,
    Covered,
    Item,
    ParseContext,
    Parsed,
    Problem,
    SourceLine,
    imported_id,
    parse_line,
    refuse,
)
from murmur_conversations.traces import genai
from murmur_conversations.traces.otlp import (
    Request,
    Span,
    UnreadableTrace,
    read_binary,
    read_json,
)

JSON_NAME: Final = "otlp-json"
PROTO_NAME: Final = "otlp-proto"
NAMES: Final = (JSON_NAME, PROTO_NAME)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def time_of(nanoseconds: int) -> datetime | None:
    """A span time (nanoseconds since the epoch) as an aware ``datetime`` (microseconds); None
    for 0 (unknown) or out of range."""
    if nanoseconds <= 0:
        return None
    try:
        return _EPOCH + timedelta(microseconds=nanoseconds // 1000)
    except OverflowError:
        return None


@dataclass
class _Group:
    """One conversation's spans, in the order read."""

    key: str
    calls: list[genai.ModelCall] = field(default_factory=list)
    runs: list[genai.ToolRun] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)


class OtlpParser:
    """Parser of one OTLP trace source (``binary``: ``otlp-proto``); see the module docstring."""

    document = False

    def __init__(self, context: ParseContext, *, binary: bool) -> None:
        self.context = context
        self.binary = binary
        #: (line, span, what it is) of every GenAI span read, in order.
        self.read: list[tuple[int, Span, genai.ModelCall | genai.ToolRun]] = []
        #: (trace id, span id) -> (parent span id, conversation id) of every span read.
        self.tree: dict[tuple[str, str], tuple[str, str | None]] = {}

    def _request(self, line: SourceLine) -> Request | Item:
        if self.binary:
            if line.data is None or (not line.data and not line.complete):
                return replace(refuse(line, line.text or "not a protobuf frame"), excerpt="")
            try:
                return read_binary(line.data)
            except UnreadableTrace as error:
                return replace(refuse(line, str(error)), excerpt="")
        value = parse_line(line)
        if not isinstance(value, dict):
            return value
        try:
            return read_json(value)
        except UnreadableTrace as error:
            return refuse(line, str(error))

    def feed(self, line: SourceLine) -> list[Item]:
        """Decode the line; its GenAI spans are held until :meth:`finish`."""
        request = self._request(line)
        if not isinstance(request, Request):
            return [request]
        found: list[tuple[int, Span, genai.ModelCall | genai.ToolRun]] = []
        for span in request.spans:
            try:
                what = genai.read_span(span, line.number)
            except genai.UnreadableMessages as error:
                return [refuse(line, f"span {span.span_id} ({span.name!r}): {error}")]
            except (RecursionError, ValueError) as error:
                return [refuse(line, f"span {span.span_id} ({span.name!r}): {error}")]
            if what is not None:
                found.append((line.number, span, what))
        for span in request.spans:
            self.tree[(span.trace_id, span.span_id)] = (span.parent_id, genai.conversation_of(span))
        if not found:
            return [Covered(line.number, imported=False)]
        self.read.extend(found)
        return []

    def _key(self, span: Span) -> str:
        """The conversation of a span: ``--conversation-id``, else the ``gen_ai.conversation.id``
        of the span or its nearest ancestor read, else the trace id."""
        if self.context.conversation_id:
            return self.context.conversation_id
        seen: set[str] = set()
        at: tuple[str, str] | None = (span.trace_id, span.span_id)
        while at is not None and at[1] not in seen:
            seen.add(at[1])
            parent, conversation = self.tree.get(at, ("", None))
            if conversation is not None:
                return conversation
            at = (at[0], parent) if parent else None
        return span.trace_id

    def finish(self) -> list[Item]:
        """Every conversation's transcript: its ``Begin``, each message once (with the line and
        time it came from first), and the lines that gave nothing new as imported. Every message
        is checked first (``ParseContext.check``): a line one of whose messages would be refused
        is refused whole and its spans are left out (the transcripts are made again without
        them), so no message of a refused line is given."""
        refused: dict[int, str] = {}
        while True:
            groups = self._groups(refused)
            transcripts = [(group, self._transcript(group)) for group in groups]
            found = self._refusals(transcripts)
            if not found:
                break
            refused.update(found)
        items: list[Item] = [Problem(line, reason) for line, reason in sorted(refused.items())]
        for group, placed in transcripts:
            items.append(Begin(group.key))
            given = {entry.tag for entry in placed}
            items.extend(Parsed(p.message, p.tag, at=time_of(p.time_ns)) for p in placed)
            items.extend(Covered(line, imported=True) for line in group.lines if line not in given)
        self.read.clear()
        return items

    def _groups(self, refused: dict[int, str]) -> list[_Group]:
        """The conversations of the spans read, leaving out the lines ``refused``."""
        groups: dict[str, _Group] = {}
        for line, span, what in self.read:
            if line in refused:
                continue
            key = self._key(span)
            group = groups.setdefault(key, _Group(key))
            if isinstance(what, genai.ModelCall):
                group.calls.append(what)
            else:
                group.runs.append(what)
            if not group.lines or group.lines[-1] != line:
                group.lines.append(line)
        return list(groups.values())

    @staticmethod
    def _transcript(group: _Group) -> list[genai.Placed]:
        def make_id(occurrence: int, message: dict[str, Any], key: str = group.key) -> str:
            return imported_id(key, occurrence, message)

        return genai.transcript(group.calls, group.runs, make_id)

    def _refusals(self, transcripts: list[tuple[_Group, list[genai.Placed]]]) -> dict[int, str]:
        """``line -> reason`` of the lines one of whose messages the writer would refuse."""
        check = self.context.check
        found: dict[int, str] = {}
        if check is None:
            return found
        for _group, placed in transcripts:
            for entry in placed:
                if entry.tag in found:
                    continue
                reason = check(entry.message)
                if reason is not None:
                    role = entry.message.get("role")
                    found[entry.tag] = f"a {role} message of this line is refused: {reason}"
        return found


def json_parser(context: ParseContext) -> OtlpParser:
    """A parser for one ``otlp-json`` source."""
    return OtlpParser(context, binary=False)


def proto_parser(context: ParseContext) -> OtlpParser:
    """A parser for one ``otlp-proto`` source (frames from ``reading.FrameCursor``)."""
    return OtlpParser(context, binary=True)


def sniff(value: dict[str, Any]) -> bool:
    """Whether a JSON Lines object is an OTLP trace export (``resourceSpans``)."""
    return isinstance(value.get("resourceSpans"), list)
