"""Message lists as JSON or JSON Lines, shared by the OpenAI and Anthropic parsers (docs/formats.md). Pure: no Django.

A source is a JSON document (an array of messages, or a request body object with ``messages``) or
JSON Lines (one message object per line). The conversation key is the sha256 of the canonical JSON
of the messages as given, up to and including the first assistant message, unless
``--conversation-id`` names it; items are held back until the key is known.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from murmur_conversations.importers.records import (
    Begin,
    Item,
    Kept,
    ParseContext,
    Parsed,
    Problem,
    SourceLine,
    compact_json,
    json_type,
    key_of_messages,
    known,
    parse_json,
    parse_line,
    refuse,
    refuse_entry,
    unknown_key,
    with_id,
    wrong_type,
)

#: Turns one message as the source gives it into the messages of docs/write-path.md.
Convert = Callable[[dict[str, Any]], list[dict[str, Any]]]
#: Extracts the message list of a request body object: ``(messages, prepended)``; a prepended
#: entry is a message, or the ``Problem`` refusing a top-level key it would come from.
Unwrap = Callable[[dict[str, Any]], tuple[Any, list[dict[str, Any] | Problem]]]


class ListParser:
    """Parser for one message-list source; see the module docstring."""

    def __init__(self, context: ParseContext, *, convert: Convert, unwrap: Unwrap) -> None:
        self.context = context
        self.convert = convert
        self.unwrap = unwrap
        self.mode: str | None = None  # "jsonl" or "document"
        self.lines: list[SourceLine] = []  # a document's lines, read at the end
        self.key: str | None = context.conversation_id or None
        self.begun = False
        self.originals: list[Any] = []  # the messages as given, for the key, until it is known
        #: (message or Problem, its line or None, its position in a document or None)
        self.held: list[tuple[Any, SourceLine | None, int | None]] = []
        self.index = 0  # 0-based ordinal of the id rule; a refused item takes one too
        self.as_lines = False  # a "document" that is not one, read as JSON Lines after all

    @property
    def document(self) -> bool:
        """Whether the source is read as one JSON document (its messages are accounted for, not
        its lines: docs/formats.md "Every line accounted for")."""
        return self.mode == "document" and not self.as_lines

    def feed(self, line: SourceLine) -> list[Item]:
        """A JSONL line is read at once; a document's lines are held until ``finish``."""
        if self.mode is None:
            value, reason = parse_json(line.text)
            single = reason is None and isinstance(value, dict) and not _is_body(value)
            self.mode = "jsonl" if single else "document"
        if self.mode == "document":
            self.lines.append(line)
            return []
        return self._jsonl(line)

    def finish(self) -> list[Item]:
        """Read a held document, then release everything held back for the key."""
        items: list[Item] = []
        if self.lines:
            items.extend(self._read_document())
        if self.key is None:
            self.key = key_of_messages(self.originals)
            items.extend(self._release())
        return items

    def _jsonl(self, line: SourceLine) -> list[Item]:
        return self._take(parse_line(line), line, None)

    def _read_document(self) -> list[Item]:
        lines, self.lines = self.lines, []
        value, reason = parse_json("\n".join(line.text for line in lines), document=True)
        if reason is not None and lines[0].text.lstrip().startswith("{"):
            # Not one document: read it as JSON Lines, so each bad line is reported alone.
            self.as_lines = True
            return [item for line in lines for item in self._jsonl(line)]
        first = lines[0]
        if reason is not None:
            return self._take(refuse(first, reason), None, None)
        prepended: list[dict[str, Any] | Problem] = []
        if isinstance(value, dict):
            value, prepended = self.unwrap(value)
        if not isinstance(value, list):
            problem = refuse(
                first, "not a message list (a JSON array of messages, or an object with 'messages')"
            )
            return self._take(problem, None, None)
        items: list[Item] = []
        # A prepended message (a body's ``system``) is accounted for as the document's entry -1.
        for message in prepended:
            items.extend(self._take(message, None, -1, for_key=False))
        for position, message in enumerate(value):
            if isinstance(message, dict):
                items.extend(self._take(message, None, position))
            else:
                found = json_type(message)
                problem = refuse_entry(position, f"{found}, not an object")
                items.extend(self._take(problem, None, position))
        return items

    def _take(
        self, entry: Any, line: SourceLine | None, position: int | None, *, for_key: bool = True
    ) -> list[Item]:
        if isinstance(entry, dict) and for_key:
            self.originals.append(entry)
        self.held.append((entry, line, position))
        if self.key is None and isinstance(entry, dict) and entry.get("role") == "assistant":
            self.key = key_of_messages(self.originals)
        return self._release() if self.key is not None else []

    def _release(self) -> list[Item]:
        items: list[Item] = []
        for entry, line, position in self.held:
            items.extend(self._items_of(entry, line, position))
        self.held.clear()
        self.originals.clear()
        return items

    def _begin(self) -> list[Item]:
        key = known(self.key)
        if self.begun:
            return []
        self.begun = True
        return [Begin(key)]

    def _items_of(self, entry: Any, line: SourceLine | None, position: int | None) -> list[Item]:
        key = known(self.key)
        self.index += 1
        if isinstance(entry, Problem):
            return [entry]
        number = line.number if line is not None else None
        if "role" in entry and not isinstance(entry["role"], str):
            return [self._refuse(line, position, "role", entry["role"], "a string")]
        if "role" not in entry:
            raw = compact_json(entry)
            kind = entry.get("type")
            record_type = kind if isinstance(kind, str) else "unknown"
            kept = Kept(
                unknown_key(raw), number, raw, record_type[:64], unknown=True, entry=position
            )
            return [*self._begin(), kept]
        self.index -= 1
        items: list[Item] = self._begin()
        for message in self.convert(entry):
            items.append(Parsed(with_id(key, self.index, message), number, entry=position))
            self.index += 1
        return items

    @staticmethod
    def _refuse(
        line: SourceLine | None, position: int | None, name: str, value: Any, wanted: str
    ) -> Problem:
        """A message of a list whose ``name`` holds the wrong type: its line refused, or in a
        document its entry."""
        if line is not None:
            return wrong_type(line, name, value, wanted)
        return refuse_entry(position or 0, f"{name} is {json_type(value)}, not {wanted}")


def _is_body(value: Any) -> bool:
    """A one-line request body (``{"messages": [...]}``) is a document, not a JSONL message."""
    return isinstance(value, dict) and "messages" in value and "role" not in value
