"""The lists chat frontends hand a backend, read back into the record (docs/formats.md "Frontend
shapes"): ``vercel-ui`` (a ``UIMessage`` list, or a ``useChat`` request body ``{id, messages}``),
``ag-ui`` (messages, or a ``RunAgentInput`` ``{threadId, messages}``) and ``openai-items``
(items, a list page ``{data}`` or a conversation body ``{items}``). Pure: no Django.

The source is one JSON document. Its conversation: ``--conversation-id``, else the
``metadata.conversationId`` our exports write, else the body's ``id``/``threadId``, else the key
of a message list (``records.key_of_messages``). ``Begin.merge`` lets the writer put the messages
into the owner's conversation with that id: a message whose id is stored adds nothing and a tool
result whose call has one already is dropped (``Parsed.once``), so posting the whole history
every turn appends only what is new, and nothing stored is changed or removed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final

from murmur_conversations.frontends import ag_ui, openai_items, vercel_ui
from murmur_conversations.frontends.parts import UnreadablePart, conversation_of
from murmur_conversations.importers.records import (
    Begin,
    Item,
    ParseContext,
    Parsed,
    SourceLine,
    compact_json,
    excerpt,
    key_of_messages,
    parse_json,
    refuse,
    refuse_entry,
    with_id,
)

#: ``format name -> (keys of a body object that hold the list, keys that name the conversation)``.
BODIES: Final = {
    vercel_ui.NAME: (("messages",), ("id", "chatId")),
    ag_ui.NAME: (("messages",), ("threadId",)),
    openai_items.NAME: (("data", "items", "input"), ()),
}

#: A converted entry: ``(0-based indexes in the list, the record message or why it was refused,
#: once)``.
Entry = tuple[list[int], dict[str, Any] | UnreadablePart, bool]


def _vercel(messages: list[Any]) -> list[Entry]:
    out: list[Entry] = []
    for index, message in enumerate(messages):
        try:
            converted = vercel_ui.from_vercel_ui(message)
        except UnreadablePart as error:
            out.append(([index], error, False))
            continue
        out.extend(([index], record, once) for record, once in converted)
    return out


def _ag_ui(messages: list[Any]) -> list[Entry]:
    out: list[Entry] = []
    for index, record in ag_ui.from_ag_ui(messages):
        once = isinstance(record, dict) and bool(record.get("tool_call_id"))
        out.append(([index], record, once))
    return out


def _openai_items(items: list[Any]) -> list[Entry]:
    return [
        (indexes, record, isinstance(record, dict) and bool(record.get("tool_call_id")))
        for indexes, record in openai_items.from_openai_items(items)
    ]


CONVERTERS: Final[dict[str, Callable[[list[Any]], list[Entry]]]] = {
    vercel_ui.NAME: _vercel,
    ag_ui.NAME: _ag_ui,
    openai_items.NAME: _openai_items,
}


class FrontendParser:
    """Parser of one frontend list (the format ``name``); see the module docstring."""

    def __init__(self, context: ParseContext, *, name: str) -> None:
        self.context = context
        self.name = name
        self.lines: list[SourceLine] = []

    #: One JSON document: its messages are accounted for, not its lines (docs/formats.md "Every
    #: line accounted for").
    document = True

    def feed(self, line: SourceLine) -> list[Item]:
        """Lines are held: the source is one JSON document."""
        self.lines.append(line)
        return []

    def finish(self) -> list[Item]:
        """The document's conversation and messages; one ``Problem`` per refused message."""
        if not self.lines:
            return []
        first = self.lines[0]
        value, reason = parse_json("\n".join(line.text for line in self.lines), document=True)
        if reason is not None:
            return [refuse(first, reason)]
        messages, named = self._unwrap(value)
        if messages is None:
            return [refuse(first, self._not_a_list())]
        key = self.context.conversation_id or _named_in(messages) or named
        if not key:
            key = key_of_messages(messages)
        if self.name == openai_items.NAME:  # Responses input items may come without ids
            messages = [
                with_id(key, index, item) if isinstance(item, dict) else item
                for index, item in enumerate(messages)
            ]
        items: list[Item] = [Begin(key, merge=True)]
        for indexes, record, once in CONVERTERS[self.name](messages):
            if isinstance(record, UnreadablePart):
                shown = excerpt(compact_json(messages[indexes[0]]))
                items.append(replace(refuse_entry(indexes[0], str(record)), excerpt=shown))
            else:
                items.append(Parsed(record, None, once=once, entry=indexes[0]))
        return items

    def _unwrap(self, value: Any) -> tuple[list[Any] | None, str | None]:
        """The list, and the conversation a body object names."""
        if isinstance(value, list):
            return value, None
        if not isinstance(value, dict):
            return None, None
        lists, names = BODIES[self.name]
        found = next((value[k] for k in lists if isinstance(value.get(k), list)), None)
        named = next((value[k] for k in names if isinstance(value.get(k), str) and value[k]), None)
        return found, named

    def _not_a_list(self) -> str:
        lists, _names = BODIES[self.name]
        holders = " or ".join(f"'{k}'" for k in lists)
        return f"not a {self.name} list (a JSON array, or an object with {holders})"


def _named_in(messages: list[Any]) -> str | None:
    for message in messages:
        if isinstance(message, dict):
            found = conversation_of(message.get("metadata"))
            if found is not None:
                return found
    return None


def vercel_parser(context: ParseContext) -> FrontendParser:
    """A parser for one ``vercel-ui`` source."""
    return FrontendParser(context, name=vercel_ui.NAME)


def ag_ui_parser(context: ParseContext) -> FrontendParser:
    """A parser for one ``ag-ui`` source."""
    return FrontendParser(context, name=ag_ui.NAME)


def openai_items_parser(context: ParseContext) -> FrontendParser:
    """A parser for one ``openai-items`` source."""
    return FrontendParser(context, name=openai_items.NAME)


#: Item types only OpenAI Conversations items have.
ITEM_TYPES: Final = frozenset({"function_call", "function_call_output", "reasoning"})
ITEM_PARTS: Final = frozenset({"input_text", "output_text", "input_image", "input_file"})


def sniff(messages: list[Any]) -> str | None:
    """The frontend shape a JSON array plainly is, else None (``--format auto``): every entry
    with ``parts`` is ``vercel-ui``; an item of a type only Conversations items have, or a
    ``message`` item with their parts, is ``openai-items``; camelCase ``toolCalls``/``toolCallId``
    or a ``reasoning`` role is ``ag-ui``."""
    entries = [m for m in messages if isinstance(m, dict)]
    if entries and all(isinstance(m.get("parts"), list) for m in entries):
        return vercel_ui.NAME
    for entry in entries:
        content = entry.get("content")
        parts = content if isinstance(content, list) else []
        kinds = {p["type"] for p in parts if isinstance(p, dict) and isinstance(p.get("type"), str)}
        kind = entry.get("type")
        if isinstance(kind, str) and (
            kind in ITEM_TYPES or (kind == "message" and bool(kinds & ITEM_PARTS))
        ):
            return openai_items.NAME
        if "toolCalls" in entry or "toolCallId" in entry or entry.get("role") == "reasoning":
            return ag_ui.NAME
    return None
