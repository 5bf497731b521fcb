"""What a record message holds, read once for every frontend shape (docs/formats.md "Frontend
shapes"), and the record messages those shapes give back. Pure: no Django.

A record message (``representations.record_message``: ``role``, ``content``, ``id``, ...) is read
into ``Parts``: its text, thinking, media and other blocks in order, the tool calls it asks for
(``tool_call`` blocks and OpenAI ``tool_calls``), or, for a tool result, the call it answers, its
output and whether it failed. The three shapes (``vercel_ui``, ``ag_ui``, ``openai_items``) are
written from ``Parts`` and read back into record messages with the block shapes of
docs/write-path.md, so exporting, importing and exporting again gives the same list.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from murmur_conversations import jsonenc

#: The key of the conversation id in a message's ``metadata`` (Vercel, AG-UI).
CONVERSATION_KEY: Final = "conversationId"
#: ``data:<media type>;base64,<data>``.
DATA_URL: Final = re.compile(r"^data:([^;,]+);base64,(.*)$", re.S)


@dataclass
class Call:
    """A tool call a message asks for: its id ("" when the source gave none), name, input."""

    call_id: str
    name: str
    arguments: Any


@dataclass
class Parts:
    """One record message, read. ``blocks`` are its content blocks in order with ``tool_call``
    blocks taken out (a string content is one ``text`` block; null or "" none); ``calls`` the
    calls it asks for; for a tool result ``call_id`` is the call answered and ``output`` its
    content (or the ``output`` value a frontend gave, kept in ``extra``)."""

    message_id: str
    role: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    call_id: str = ""
    output: Any = None
    is_error: bool = False

    @property
    def text(self) -> str:
        """The text blocks, joined by newlines."""
        return "\n".join(b["text"] for b in self.blocks if is_text(b))

    @property
    def thinking(self) -> list[dict[str, Any]]:
        """The thinking blocks with their text (``text`` or ``thinking``)."""
        return [b for b in self.blocks if thinking_text(b) is not None]


class UnreadablePart(ValueError):
    """A part or message that is not of the frontend shape being read (the message says why)."""


def content_blocks(content: Any, read_part: Any) -> list[dict[str, Any]]:
    """The record's blocks of a message's ``content`` in a frontend shape: a string is one text
    block ("" none); a list is read part by part, ``read_part(part)`` giving the shape's block
    for a part it knows (None: the part is kept as it came). Raises ``UnreadablePart`` for
    content that is neither, or a part that is not an object."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise UnreadablePart("'content' is a string or a list of parts")
    blocks: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            raise UnreadablePart("each content part is an object")
        block = read_part(part)
        blocks.append(dict(part) if block is None else block)
    return blocks


def is_text(block: dict[str, Any]) -> bool:
    """A text block (ours, OpenAI's and Anthropic's spelling: ``{type: "text", text}``)."""
    return block.get("type") == "text" and isinstance(block.get("text"), str)


def thinking_text(block: dict[str, Any]) -> str | None:
    """The text of a thinking block (``text``, or Anthropic's ``thinking``), else None."""
    if block.get("type") != "thinking":
        return None
    text = block.get("text", block.get("thinking"))
    return text if isinstance(text, str) else None


def _arguments(text: Any) -> Any:
    """OpenAI ``function.arguments`` parsed when it is JSON text, else as given."""
    if isinstance(text, str):
        try:
            return jsonenc.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to read
            return text
    return {} if text is None else text


def arguments_text(arguments: Any) -> str:
    """Arguments as the JSON text OpenAI and AG-UI carry (a string stays as it is)."""
    return arguments if isinstance(arguments, str) else jsonenc.dumps(arguments)


def read_message(message: dict[str, Any]) -> Parts:
    """The ``Parts`` of one record message (the dict of ``representations.record_message``)."""
    content = message.get("content")
    blocks: list[dict[str, Any]] = []
    if isinstance(content, str) and content:
        blocks = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        blocks = [b for b in content if isinstance(b, dict)]
    parts = Parts(message_id=str(message.get("id") or ""), role=str(message.get("role") or ""))
    if message.get("tool_call_id"):
        parts.call_id = str(message["tool_call_id"])
        parts.is_error = bool(message.get("is_error"))
        parts.output = message.get("output", content)
        parts.blocks = blocks
        return parts
    for block in blocks:
        if block.get("type") == "tool_call":
            parts.calls.append(
                Call(
                    str(block.get("id") or ""),
                    str(block.get("name") or ""),
                    {} if block.get("input") is None else block.get("input"),
                )
            )
        else:
            parts.blocks.append(block)
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict) and isinstance(call.get("function"), dict):
            function = call["function"]
            parts.calls.append(
                Call(
                    str(call.get("id") or ""),
                    str(function.get("name") or ""),
                    _arguments(function.get("arguments")),
                )
            )
    return parts


def read_messages(messages: Iterable[dict[str, Any]]) -> list[Parts]:
    """:func:`read_message` of each record message, in order."""
    return [read_message(m) for m in messages]


def output_text(output: Any) -> str:
    """A tool output as text: a string as it is, text blocks joined, anything else as JSON."""
    if isinstance(output, str):
        return output
    if (
        isinstance(output, list)
        and output
        and all(isinstance(b, dict) and is_text(b) for b in output)
    ):
        return "\n".join(b["text"] for b in output)
    return "" if output is None else jsonenc.dumps(output)


# ---------------------------------------------------------------------- media


@dataclass(frozen=True)
class Media:
    """An image or file block, read: ``url`` (a link, or a ``data:`` URL built from inline
    data), ``mime_type`` ("" when unknown), ``data`` (base64, "" for a link), ``filename``."""

    url: str
    mime_type: str
    data: str = ""
    filename: str = ""

    @property
    def is_image(self) -> bool:
        """Whether the media is shown as an image: an ``image/*`` type, or a bare URL."""
        return self.mime_type.startswith("image/") or (not self.mime_type and not self.data)


def read_media(block: dict[str, Any]) -> Media | None:
    """The media of an ``image`` block (``url``, or ``data`` + ``mime_type``), an Anthropic
    ``image``/``document`` block (``source``), an OpenAI ``image_url`` part, or our ``file``
    block (``url`` or ``data``, ``mime_type``, ``filename``); None for any other block."""
    kind = block.get("type")
    name = string_of(block, "filename")
    if kind == "image_url":
        inner = block.get("image_url")
        url = inner.get("url") if isinstance(inner, dict) else inner
        return _media(url, "", name) if isinstance(url, str) else None
    if kind not in ("image", "file", "document"):
        return None
    source = block.get("source")
    if isinstance(source, dict):  # Anthropic
        if source.get("type") == "base64" and isinstance(source.get("data"), str):
            return _inline(str(source.get("media_type") or ""), source["data"], name)
        if isinstance(source.get("url"), str):
            return _media(source["url"], str(source.get("media_type") or ""), name)
        return None
    mime = string_of(block, "mime_type")
    if isinstance(block.get("data"), str):
        return _inline(mime or ("image/png" if kind == "image" else ""), block["data"], name)
    if isinstance(block.get("url"), str):
        return _media(block["url"], mime, name)
    return None


def string_of(value: dict[str, Any], key: str) -> str:
    """``value[key]`` when it is a string, else ""."""
    found = value.get(key)
    return found if isinstance(found, str) else ""


def _inline(mime: str, data: str, name: str) -> Media:
    return Media(f"data:{mime or 'application/octet-stream'};base64,{data}", mime, data, name)


def _media(url: str, mime: str, name: str) -> Media:
    found = DATA_URL.match(url)
    if found is not None:
        return Media(url, mime or found.group(1), found.group(2), name)
    return Media(url, mime, "", name)


def media_block(url: str, mime_type: str = "", filename: str = "") -> dict[str, Any]:
    """The record block of a media part a frontend gave: an ``image`` block (``data`` and
    ``mime_type`` for a ``data:`` URL of an image, else ``url``), or a ``file`` block for other
    media types (``url`` or ``data``, ``mime_type``, ``filename`` when given)."""
    found = DATA_URL.match(url)
    mime = mime_type or (found.group(1) if found else "")
    image = mime.startswith("image/") or (not mime and found is None)
    block: dict[str, Any] = {"type": "image" if image else "file"}
    if found is not None and _base64(found.group(2)):
        block.update(data=found.group(2), mime_type=mime)
    else:
        block["url"] = url
        if mime:
            block["mime_type"] = mime
    if filename:
        block["filename"] = filename
    return block


def _base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


# ---------------------------------------------------------------------- back to the record


def record_content(blocks: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """The content of a record message made of ``blocks``: one text block is a string (so a
    plain message stays plain), none is "", anything else the block list."""
    if not blocks:
        return ""
    if len(blocks) == 1 and is_text(blocks[0]) and set(blocks[0]) == {"type", "text"}:
        return str(blocks[0]["text"])
    return blocks


def call_block(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """A ``tool_call`` block (docs/write-path.md)."""
    return {"type": "tool_call", "id": call_id, "name": name, "input": arguments}


def result_message(
    message_id: str, call_id: str, output: Any, *, is_error: bool = False
) -> dict[str, Any]:
    """A tool result record message: ``content`` the output when it is a string or a block
    list, else its JSON text with the value itself kept as ``output`` (an extra key, so an
    export gives the frontend its value back)."""
    message: dict[str, Any] = {"role": "tool", "id": message_id, "tool_call_id": call_id}
    blocks = isinstance(output, list) and all(
        isinstance(b, dict) and isinstance(b.get("type"), str) for b in output
    )
    if isinstance(output, str) or (blocks and output):
        message["content"] = output
    else:
        message["content"] = output_text(output)
        if output is not None:
            message["output"] = output
    message["is_error"] = is_error
    return message


def conversation_of(metadata: Any) -> str | None:
    """The conversation id a message's ``metadata`` names (:data:`CONVERSATION_KEY`), if any."""
    if isinstance(metadata, dict):
        value = metadata.get(CONVERSATION_KEY)
        if isinstance(value, str) and value:
            return value
    return None
