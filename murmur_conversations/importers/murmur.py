"""Murmur conversation records, ``conversation.jsonl`` (docs/formats.md).
Pure: no Django.

Each line is one message as it entered the model context and is stored as it is; the line itself is
kept as a source record under the message id, so ``export_conversation`` gives it back byte for
byte. The conversation key is ``<record>/<context-id>`` from a ``.../<record>/<context-id>/
conversation.jsonl`` path, else ``--conversation-id``, else the first message's id. A JSON object
without a string ``role`` is not a message: it is kept as an unknown record, except the feedback
lines of an export (``"type": "murmur.feedback"``), which are read back as feedback.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from murmur_conversations.importers.records import (
    Begin,
    Item,
    Kept,
    ParseContext,
    Parsed,
    Problem,
    Rated,
    SourceLine,
    excerpt,
    known,
    parse_line,
    parse_time,
    sha256_hex,
    unknown_key,
    with_id,
)

NAME = "murmur"
FILE_NAME = "conversation.jsonl"
#: The ``type`` of an export's feedback lines (``exporters.FEEDBACK_RECORD``; this module stays free
#: of Django, so it names the value itself).
FEEDBACK_TYPE = "murmur.feedback"
FEEDBACK_KEYS = frozenset({"type", "message_id", "part", "rating", "comment", "user"})


def read_feedback(value: dict[str, Any], line: SourceLine) -> Rated | Problem:
    """A feedback line as a ``Rated`` item, or the ``Problem`` that refuses it."""
    message_id, part = value.get("message_id"), value.get("part")
    rating, comment, user = value.get("rating"), value.get("comment", ""), value.get("user")
    if (
        set(value) - FEEDBACK_KEYS
        or not isinstance(message_id, str)
        or not message_id
        or isinstance(part, bool)
        or not isinstance(part, int)
        or part < 0
        or isinstance(rating, bool)
        or rating not in (1, -1)
        or not isinstance(comment, str)
        or not (user is None or (isinstance(user, str) and user))
    ):
        return Problem(
            line.number,
            "a feedback line needs message_id (string), part (integer >= 0), rating (1 or -1), "
            "comment (string) and user (null or a username), and nothing else",
            excerpt(line.text),
        )
    return Rated(message_id, part, rating, comment, user, line.number)


def path_key(parts: tuple[str, ...]) -> str | None:
    """``<record>/<context-id>`` when the path ends ``<record>/<context-id>/conversation.jsonl``."""
    if len(parts) >= 3 and parts[-1] == FILE_NAME:
        return f"{parts[-3]}/{parts[-2]}"
    return None


class MurmurParser:
    """Parser for one murmur record; see the module docstring."""

    def __init__(self, context: ParseContext) -> None:
        self.key = path_key(context.path_parts) or context.conversation_id or None
        self.held: list[tuple[dict[str, Any], SourceLine]] = []  # before the first message
        self.begun = False
        self.index = 0

    def feed(self, line: SourceLine) -> list[Item]:
        """One line: a message (kept with its raw line), an unknown record, or a problem."""
        value = parse_line(line)
        if isinstance(value, Problem):
            self.index += 1
            return [value]
        if self.key is None:
            if not isinstance(value.get("role"), str):
                self.held.append((value, line))
                return []
            given = value.get("id")
            self.key = given if isinstance(given, str) and given else sha256_hex(value)
            held, self.held = self.held, []
            items: list[Item] = []
            for earlier, earlier_line in held:
                items.extend(self._items(earlier, earlier_line))
            return [*items, *self._items(value, line)]
        return self._items(value, line)

    def finish(self) -> list[Item]:
        """Unknown records of a record without any message still land (keyed by their hash)."""
        if not self.held:
            return []
        self.key = sha256_hex([value for value, _ in self.held])
        held, self.held = self.held, []
        items: list[Item] = []
        for value, line in held:
            items.extend(self._items(value, line))
        return items

    def _items(self, value: dict[str, Any], line: SourceLine) -> list[Item]:
        key = known(self.key)
        index, self.index = self.index, self.index + 1
        begin: list[Item] = [] if self.begun else [Begin(key)]
        self.begun = True
        if value.get("type") == FEEDBACK_TYPE and not isinstance(value.get("role"), str):
            rated = read_feedback(value, line)
            if isinstance(rated, Problem):
                return [*begin, rated]
            kept = Kept(unknown_key(line.text), line.number, line.text, FEEDBACK_TYPE)
            return [*begin, kept, rated]
        if not isinstance(value.get("role"), str):
            kind = value.get("type")
            record_type = kind[:64] if isinstance(kind, str) else "unknown"
            return [
                *begin,
                Kept(unknown_key(line.text), line.number, line.text, record_type, unknown=True),
            ]
        message = with_id(key, index, value)
        at = uuid7_time(message["id"])
        return [
            *begin,
            Parsed(message, line.number, at),
            Kept(message["id"], line.number, line.text, "message", at=at),
        ]


def uuid7_time(message_id: Any) -> datetime | None:
    """The time in a murmur message id, ``msg_`` + the 32 hex digits of a uuid-v7 (whose first 48
    bits are milliseconds since the Unix epoch; docs/formats.md "Times"), else None."""
    if not isinstance(message_id, str) or not message_id.startswith("msg_"):
        return None
    digits = message_id[4:]
    if len(digits) != 32 or digits[12] != "7":
        return None
    try:
        return parse_time(int(digits[:12], 16))
    except ValueError:
        return None


def parser(context: ParseContext) -> MurmurParser:
    """A parser for one murmur ``conversation.jsonl``."""
    return MurmurParser(context)


def sniff(first: dict[str, Any]) -> bool:
    """Whether a first JSONL object looks like a murmur message: a string ``role`` and ``id``."""
    return isinstance(first.get("role"), str) and isinstance(first.get("id"), str)
