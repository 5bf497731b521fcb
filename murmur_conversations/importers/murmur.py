"""Murmur conversation records, ``conversation.jsonl`` (docs/formats.md).
Pure: no Django.

Each line is one message as it entered the model context and is stored as it is; the line itself is
kept as a source record under the message id, so ``export_conversation`` gives it back byte for
byte. The conversation key is ``<record>/<context-id>`` from a ``.../<record>/<context-id>/
conversation.jsonl`` path, else ``--conversation-id``, else the first message's id. A JSON object
without a string ``role`` is not a message: it is kept as an unknown record, except the lines of
an export (``exporters``), each kept as a source record of its type and read back: feedback
(``"type": "murmur.feedback"``) through ``services.set_feedback``; the conversation line
(``murmur.conversation``: its title, ``created_at`` dating it, the ``conversation_id`` it was
exported from refused when that conversation was deleted, its status set at its ``saved_at``
when its lines end) and times lines (``murmur.times``: the time of each message, by id, before the
uuid-v7 of its id). A conversation line with a ``key`` starts a child, keyed
``<the exported conversation's key>/<key>``, whose parent is the one its ``parent`` names.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from murmur_conversations.importers.records import (
    MISSING,
    TITLE_EXPORTED,
    Begin,
    Item,
    Kept,
    ParseContext,
    Parsed,
    Problem,
    Rated,
    SourceLine,
    StatusChange,
    Title,
    known,
    parse_line,
    parse_time,
    refuse,
    sha256_hex,
    unknown_key,
    with_id,
    wrong_type,
)

NAME = "murmur"
FILE_NAME = "conversation.jsonl"
#: The ``type`` of an export's feedback lines (``exporters.FEEDBACK_RECORD``; this module stays free
#: of Django, so it names the value itself).
FEEDBACK_TYPE = "murmur.feedback"
FEEDBACK_KEYS = frozenset({"type", "message_id", "part", "rating", "comment", "user"})
#: The ``type`` of an export's conversation line (``exporters.CONVERSATION_RECORD``).
CONVERSATION_TYPE = "murmur.conversation"
#: The ``type`` of an export's times line (``exporters.TIMES_RECORD``).
TIMES_TYPE = "murmur.times"


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
        return refuse(
            line,
            "a feedback line needs message_id (string), part (integer >= 0), rating (1 or -1), "
            "comment (string) and user (null or a username), and nothing else",
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
        self.root: str | None = None  # the exported conversation's key, once known
        self.held: list[tuple[dict[str, Any], SourceLine]] = []  # before the first message
        self.begun = False
        self.index = 0
        #: The conversation line of the conversation being read (an export), if any.
        self.header: dict[str, Any] | None = None
        #: Message times of an export's times lines, by message id, not used yet.
        self.times: dict[str, datetime] = {}

    def feed(self, line: SourceLine) -> list[Item]:
        """One line: a message (kept with its raw line), an unknown record, or a problem."""
        value = parse_line(line)
        if isinstance(value, Problem):
            self.index += 1
            return [value]
        if value.get("type") == TIMES_TYPE and not isinstance(value.get("role"), str):
            self._read_times(value)
        elif value.get("type") == CONVERSATION_TYPE and not isinstance(value.get("role"), str):
            if isinstance(value.get("key"), str) and value["key"]:
                return self._child(value, line)
            self.header = value
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
        """Unknown records of a record without any message still land (keyed by their hash);
        the last conversation's status is set."""
        items = self._release()
        return [*items, *self._status()]

    def _release(self) -> list[Item]:
        """The lines held before the first message, keyed by their hash when none came."""
        if not self.held:
            return []
        if self.key is None:
            self.key = sha256_hex([value for value, _ in self.held])
        held, self.held = self.held, []
        items: list[Item] = []
        for value, line in held:
            items.extend(self._items(value, line))
        return items

    def _read_times(self, value: dict[str, Any]) -> None:
        """Remember the message times of an export's times line (unreadable ones are left out:
        those messages are dated as any other line)."""
        times = value.get("times")
        for message_id, text in times.items() if isinstance(times, dict) else ():
            at = parse_time(text)
            if at is not None:
                self.times[str(message_id)] = at

    def _status(self) -> list[Item]:
        """The status of the conversation read so far (an export's conversation line), set at
        its ``saved_at``."""
        header, self.header = self.header, None
        if not self.begun or header is None or not isinstance(header.get("status"), str):
            return []
        ask = header.get("pending_ask")
        return [
            StatusChange(
                header["status"],
                ask if isinstance(ask, dict) else None,
                at=parse_time(header.get("saved_at")),
            )
        ]

    def _child(self, value: dict[str, Any], line: SourceLine) -> list[Item]:
        """An export's conversation line of a child: the conversation before it ends, the child
        begins (keyed below the exported conversation), titled and dated by the line."""
        items = self._release()
        items += self._status()
        if self.root is None:
            self.root = known(self.key)
        parent = value.get("parent")
        call_id = value.get("call_id")
        self.key = f"{self.root}/{value['key']}"
        self.begun = True
        self.header = value
        begin = Begin(
            self.key,
            parent=f"{self.root}/{parent}" if isinstance(parent, str) and parent else self.root,
            call_id=call_id if isinstance(call_id, str) and call_id else None,
            created_at=parse_time(value.get("created_at")),
            exported_from=_exported_from(value),
        )
        kept = Kept(unknown_key(line.text), line.number, line.text, CONVERSATION_TYPE)
        self.index += 1
        return [*items, begin, *self._title(value), kept]

    def _title(self, header: dict[str, Any]) -> list[Item]:
        title = header.get("title")
        return [Title(title, TITLE_EXPORTED)] if isinstance(title, str) else []

    def _items(self, value: dict[str, Any], line: SourceLine) -> list[Item]:
        key = known(self.key)
        index, self.index = self.index, self.index + 1
        begin: list[Item] = []
        if not self.begun:
            header = self.header or {}
            created_at = parse_time(header.get("created_at")) if header else None
            begin = [
                Begin(key, created_at=created_at, exported_from=_exported_from(header)),
                *self._title(header),
            ]
        self.begun = True
        control = value.get("type") in (CONVERSATION_TYPE, TIMES_TYPE)
        if control and not isinstance(value.get("role"), str):
            return [*begin, Kept(unknown_key(line.text), line.number, line.text, value["type"])]
        if value.get("type") == FEEDBACK_TYPE and not isinstance(value.get("role"), str):
            rated = read_feedback(value, line)
            if isinstance(rated, Problem):
                return [*begin, rated]
            kept = Kept(unknown_key(line.text), line.number, line.text, FEEDBACK_TYPE)
            return [*begin, kept, rated]
        role, given = value.get("role", MISSING), value.get("id")
        if role is not MISSING and not isinstance(role, str):
            return [*begin, wrong_type(line, "role", role, "a string")]
        if given is not None and not isinstance(given, str):
            return [*begin, wrong_type(line, "id", given, "a string")]
        if role is MISSING:
            kind = value.get("type")
            record_type = kind[:64] if isinstance(kind, str) else "unknown"
            return [
                *begin,
                Kept(unknown_key(line.text), line.number, line.text, record_type, unknown=True),
            ]
        message = with_id(key, index, value)
        at = self.times.pop(str(message["id"]), None) or uuid7_time(message["id"])
        return [
            *begin,
            Parsed(message, line.number, at),
            Kept(message["id"], line.number, line.text, "message", at=at),
        ]


def _exported_from(header: dict[str, Any]) -> str | None:
    """The ``conversation_id`` an export's conversation line names, if any."""
    named = header.get("conversation_id")
    return named if isinstance(named, str) and named else None


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
    """Whether a first JSONL object looks like a murmur message: a string ``role`` and an ``id``
    (OpenAI's messages have none; an ``id`` that is null or not a string is still murmur's,
    refused by the parser rather than read as another format)."""
    return isinstance(first.get("role"), str) and "id" in first
