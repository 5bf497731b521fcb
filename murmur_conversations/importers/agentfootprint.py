"""agentfootprint session envelopes, ``conversation-v1`` and ``flowchart-v1`` (docs/formats.md).
Pure: no Django.

An envelope is one JSON document ``{"format", "savedAt", "data"}``. ``conversation-v1`` holds the
conversation in ``data.history``; ``flowchart-v1`` (a paused run) holds it in
``data.conversation.history`` and the question it waits on in ``data.pending``, which becomes the
conversation's pending ask (status ``paused``); a ``conversation-v1`` leaves the status ``idle``.
Any other format is refused by name, never read as an empty conversation. The whole envelope is kept
as one source record. The key is ``--conversation-id``, else the sha256 rule of the message lists
over ``history``.

History messages (``LLMMessage``): ``role`` and ``content`` as they are; ``toolCalls`` also become
``tool_call`` blocks (``id``, ``name``, ``input`` = ``args``) after the text; ``toolCallId`` becomes
``tool_call_id``; a message with ``injectedBy`` is marked ``injected``. Every other key
(``toolCalls`` included, for lossless export) stays in the record's ``extra``.
"""

from __future__ import annotations

from typing import Any

from murmur_conversations.importers.records import (
    Begin,
    Item,
    Kept,
    ParseContext,
    Parsed,
    SourceLine,
    StatusChange,
    json_type,
    key_of_messages,
    parse_json,
    refuse,
    refuse_entry,
    unknown_key,
    with_id,
)

NAME = "agentfootprint"
FORMATS = ("conversation-v1", "flowchart-v1")


class EnvelopeError(ValueError):
    """The envelope cannot be read; ``str()`` names what is wrong."""


def _wrong_field(message: dict[str, Any]) -> str | None:
    """Why a history message cannot be read whole (a ``toolCallId`` that is not a string,
    ``toolCalls`` that are not a list of objects), or None."""
    call_id = message.get("toolCallId")
    if call_id is not None and not isinstance(call_id, str):
        return f"toolCallId is {json_type(call_id)}, not a string"
    calls = message.get("toolCalls")
    if calls is not None and not isinstance(calls, list):
        return f"toolCalls is {json_type(calls)}, not an array"
    for n, call in enumerate(calls or ()):
        if not isinstance(call, dict):
            return f"toolCalls[{n}] is {json_type(call)}, not an object"
    return None


def convert(message: dict[str, Any]) -> dict[str, Any]:
    """One ``LLMMessage`` as a record message (see the module docstring)."""
    out = {k: v for k, v in message.items() if k not in ("toolCallId",)}
    if isinstance(message.get("toolCallId"), str):
        out["tool_call_id"] = message["toolCallId"]
    calls = message.get("toolCalls")
    if isinstance(calls, list) and calls:
        text = message.get("content")
        blocks: list[Any] = (
            [{"type": "text", "text": text}] if isinstance(text, str) and text else []
        )
        for call in calls:
            if isinstance(call, dict):
                blocks.append(
                    {
                        "type": "tool_call",
                        "id": call.get("id"),
                        "name": call.get("name"),
                        "input": call.get("args", {}),
                    }
                )
        out["content"] = blocks
    if message.get("injectedBy") is not None:
        out["injected"] = True
    return out


def _field(data: Any, name: str, where: str) -> Any:
    if not isinstance(data, dict) or name not in data:
        raise EnvelopeError(f"{where} is missing required field: {name}")
    return data[name]


def _pending(ask: Any) -> dict[str, Any]:
    """agentfootprint's ``PendingAsk``: ``question``/``tool`` strings, ``component.id`` a string."""
    if not isinstance(ask, dict):
        raise EnvelopeError("data.pending must be a JSON object (a PendingAsk)")
    for key in ("question", "tool"):
        if key in ask and not isinstance(ask[key], str):
            raise EnvelopeError(f"data.pending.{key} must be a string")
    component = ask.get("component")
    if "component" in ask and not (
        isinstance(component, dict) and isinstance(component.get("id"), str)
    ):
        raise EnvelopeError("data.pending.component must be an object with a string id")
    return ask


def read_envelope(value: Any) -> tuple[str, list[Any], dict[str, Any] | None]:
    """``(format, history, pending ask or None)`` of an envelope; ``EnvelopeError`` otherwise."""
    if not isinstance(value, dict):
        raise EnvelopeError("not an agentfootprint envelope (a JSON object with 'format')")
    fmt = _field(value, "format", "the envelope")
    if fmt not in FORMATS:
        raise EnvelopeError(
            f"unknown envelope format {fmt!r}; this importer reads {', '.join(FORMATS)}"
        )
    data = _field(value, "data", "the envelope")
    pending = None
    if fmt == "flowchart-v1":
        conversation = _field(data, "conversation", "data")
        history = _field(conversation, "history", "data.conversation")
        pending = _pending(_field(data, "pending", "data"))
    else:
        history = _field(data, "history", "data")
    if not isinstance(history, list):
        raise EnvelopeError("history must be a JSON array of messages")
    return fmt, history, pending


class EnvelopeParser:
    """Parser for one envelope file: the lines are held and read as one document at the end."""

    def __init__(self, context: ParseContext) -> None:
        self.context = context
        self.lines: list[SourceLine] = []

    #: An envelope is one JSON document: its messages are accounted for, not its lines.
    document = True

    def feed(self, line: SourceLine) -> list[Item]:
        """Hold the line; an envelope is read whole."""
        self.lines.append(line)
        return []

    def finish(self) -> list[Item]:
        """The envelope's source record, messages and status, or one problem refusing it."""
        if not self.lines:
            return []
        first = self.lines[0]
        raw = "\n".join(line.text for line in self.lines)
        value, reason = parse_json(raw, document=True)
        if reason is not None:
            return [refuse(first, reason)]
        try:
            fmt, history, pending = read_envelope(value)
        except EnvelopeError as error:
            return [refuse(first, str(error))]
        key = self.context.conversation_id or key_of_messages(history)
        items: list[Item] = [Begin(key), Kept(unknown_key(raw), first.number, raw, fmt)]
        for index, message in enumerate(history):
            wrong = _wrong_field(message) if isinstance(message, dict) else None
            if wrong is not None:
                items.append(refuse_entry(index, wrong))
            elif isinstance(message, dict):
                items.append(Parsed(with_id(key, index, convert(message)), None, entry=index))
            else:
                reason = f"{json_type(message)}, not an object"
                items.append(refuse_entry(index, reason))
        items.append(
            StatusChange("paused", pending) if pending is not None else StatusChange("idle")
        )
        return items


def parser(context: ParseContext) -> EnvelopeParser:
    """A parser for one agentfootprint envelope."""
    return EnvelopeParser(context)


def sniff(first: dict[str, Any]) -> bool:
    """Whether a document looks like an envelope: ``format`` and ``data`` keys."""
    return "format" in first and "data" in first
