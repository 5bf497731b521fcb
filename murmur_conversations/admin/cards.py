"""The transcript of a conversation as cards for the admin change page (docs/admin.md).

Cards carry plain strings only; the template escapes every one of them. Long payloads are cut at
``PREVIEW_CHARS`` and link to the row's own admin page, which shows the whole value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from murmur_conversations.models import ContentType, DisplayMessage, MessageType

#: Characters of one payload shown on the transcript page before it is cut.
PREVIEW_CHARS: Final = 2000

#: Display rows per transcript page.
TRANSCRIPT_PAGE_SIZE: Final = 50

UrlFor = Callable[[str, Any], str]


def pretty(value: Any) -> str:
    """A string as it is; anything else as indented JSON (non-ASCII kept)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Section:
    """One labelled payload of a card: ``text`` is at most ``PREVIEW_CHARS`` characters;
    ``truncated`` says the payload (``total`` characters) continues at ``url``."""

    label: str
    text: str
    total: int
    url: str
    kind: str = "plain"

    @property
    def truncated(self) -> bool:
        """Whether ``text`` is only the start of the payload."""
        return self.total > len(self.text)


@dataclass
class Card:
    """One display row as the template draws it. ``kind`` picks the style (``text``,
    ``thinking``, ``tool-call``, ``tool-result``, ``error``, ``notice``, ``data``); thinking
    cards are collapsed."""

    seq: int
    kind: str
    label: str
    url: str
    created_at: datetime | None = None  # when it happened (an import: the log's time)
    name: str = ""
    status: str = ""
    flags: list[str] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)

    @property
    def collapsed(self) -> bool:
        """Thinking is drawn collapsed."""
        return self.kind == "thinking"

    def add(self, label: str, value: Any, *, url: str | None = None, kind: str = "plain") -> None:
        """Append a section for ``value`` (skipped when it is None or empty)."""
        if value is None or value == "" or value == {} or value == []:
            return
        text = pretty(value)
        self.sections.append(
            Section(label, text[:PREVIEW_CHARS], len(text), url or self.url, kind=kind)
        )


def _who(row: DisplayMessage) -> str:
    return str(MessageType(row.message_type).label) if row.message_type in MessageType else "?"


def _tool_call_card(card: Card, row: DisplayMessage, url_for: UrlFor) -> None:
    content = row.content
    call = row.tool_call
    card.kind = "tool-call"
    card.name = str(content.get("name") or (call.name if call else ""))
    card.status = call.status if call is not None else row.status
    call_url = url_for("toolcall", call.pk) if call is not None else card.url
    metadata = row.metadata or {}
    if call is not None and call.interrupt_reason:
        card.flags.append(call.interrupt_reason)
    card.add("call id", content.get("call_id"))
    card.add("display text", call.display_text if call else metadata.get("display_text"))
    card.add("arguments", content.get("arguments"), kind="json")
    card.add("result", call.result if call else metadata.get("result"), url=call_url, kind="json")
    card.add("error", call.error if call else metadata.get("error"), url=call_url, kind="error")


def _tool_result_card(card: Card, row: DisplayMessage) -> None:
    content = row.content
    metadata = row.metadata or {}
    card.kind = "error" if content.get("is_error") else "tool-result"
    card.name = str(content.get("name") or "")
    for flag, present in (
        ("error", content.get("is_error")),
        ("awaiting input", content.get("is_interrupt")),
        ("orphan", metadata.get("orphan")),
        ("late", metadata.get("late")),
    ):
        if present:
            card.flags.append(flag)
    card.add("call id", content.get("tool_call_id"))
    card.add("result", content.get("content"), kind="json")


def _image_card(card: Card, row: DisplayMessage) -> None:
    # Never drawn: a stored URL or data could point anywhere or be megabytes of base64.
    content = row.content
    card.kind = "data"
    if content.get("url"):
        card.add("image url", content.get("url"))
    else:
        data = content.get("data")
        size = len(data) if isinstance(data, str) else 0
        card.add("inline image", f"{content.get('mime_type', '?')}, {size} base64 characters")


def card_for(row: DisplayMessage, url_for: UrlFor) -> Card:
    """The card of one display row. ``url_for(model_name, pk)`` gives admin change-page URLs;
    ``row.tool_call`` should be selected with the row."""
    content = row.content if isinstance(row.content, dict) else {"value": row.content}
    url = url_for("displaymessage", row.pk)
    card = Card(seq=row.seq, kind="text", label=_who(row), url=url, created_at=row.created_at)
    content_type = row.content_type
    if content_type == ContentType.TOOL_CALL:
        _tool_call_card(card, row, url_for)
    elif content_type == ContentType.TOOL_RESULT:
        _tool_result_card(card, row)
    elif content_type in (ContentType.TEXT, ContentType.THINKING):
        card.kind = "thinking" if content_type == ContentType.THINKING else "text"
        card.add("", content.get("text"))
    elif content_type in (ContentType.ERROR, ContentType.NOTIFICATION):
        card.kind = "error" if content_type == ContentType.ERROR else "notice"
        card.name = str(content.get("error_type") or content.get("stop_reason") or "")
        card.add("", content.get("text"), kind="error" if card.kind == "error" else "plain")
    elif content_type == ContentType.IMAGE:
        _image_card(card, row)
    elif content_type == ContentType.FILE_REFERENCE:
        card.kind = "data"
        card.name = str(content.get("name") or "")
        card.add("path", content.get("path"))
    elif content_type == ContentType.STRUCTURED_DATA:
        card.kind = "data"
        card.name = str(content.get("format") or "")
        card.add("data", content.get("data"), kind="json")
    elif content_type == ContentType.TODO_SNAPSHOT:
        card.kind = "data"
        card.name = "todos"
        card.add("summary", content.get("summary"))
        card.add("todos", content.get("todos"), kind="json")
    else:
        card.kind = "data"
        card.add("content", content, kind="json")
    if (row.metadata or {}).get("injected"):
        card.flags.append("injected")
    return card


def cards_for(rows: Iterable[DisplayMessage], url_for: UrlFor) -> list[Card]:
    """The cards of ``rows``, in the given order."""
    return [card_for(row, url_for) for row in rows]
