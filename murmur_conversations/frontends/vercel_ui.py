"""The Vercel AI SDK 5 ``UIMessage`` list (``useChat``'s ``messages``; docs/formats.md
"vercel-ui"), written from the record and read back. Pure: no Django.

One ``UIMessage`` per user, system and assistant record message, with the message id as its
``id`` and ``metadata.conversationId``. Parts in block order: ``text``, ``reasoning`` (a thinking
block's signature as ``providerMetadata.anthropic.signature``), ``file`` (images and files;
inline data as a ``data:`` URL), ``data-*``/``source-*`` blocks as they are, then one
``tool-<name>`` part per call with its ``toolCallId``, ``input`` and a ``state`` from its result:
``output-available`` with ``output``, ``output-error`` with ``errorText``, ``input-available``
while it has none. Tool results fold into the part of their call; a result whose call no
message made is a ``dynamic-tool`` part (``toolName`` "unknown") of its own assistant message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from murmur_conversations.frontends.parts import (
    CONVERSATION_KEY,
    Parts,
    UnreadablePart,
    call_block,
    media_block,
    output_text,
    read_media,
    read_message,
    record_content,
    result_message,
    string_of,
    thinking_text,
)

NAME: Final = "vercel-ui"
ROLES: Final = frozenset({"user", "assistant", "system"})
#: Part types the AI SDK keeps as they are (its own, which the record keeps as blocks).
KEPT_PREFIXES: Final = ("data-", "source-")
#: The ``toolName`` of a result whose call no message made.
ORPHAN: Final = "unknown"


def _part(block: dict[str, Any]) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    thought = thinking_text(block)
    if thought is not None:
        part: dict[str, Any] = {"type": "reasoning", "text": thought}
        if isinstance(block.get("signature"), str):
            part["providerMetadata"] = {"anthropic": {"signature": block["signature"]}}
        return part
    media = read_media(block)
    if media is not None:
        part = {"type": "file", "mediaType": media.mime_type or "image/*", "url": media.url}
        if media.filename:
            part["filename"] = media.filename
        return part
    if isinstance(kind, str) and kind.startswith(KEPT_PREFIXES):
        return dict(block)
    return None


def _settle(part: dict[str, Any], result: Parts) -> None:
    """Give a tool part its result: ``output-available`` or ``output-error``."""
    if result.is_error:
        part["state"] = "output-error"
        part["errorText"] = output_text(result.output)
    else:
        part["state"] = "output-available"
        part["output"] = result.output


def to_vercel_ui(
    messages: Iterable[dict[str, Any]], *, conversation_id: str
) -> list[dict[str, Any]]:
    """Record messages (``representations.record_message`` dicts, in position order) as a
    ``UIMessage`` list; see the module docstring. Messages of other roles are left out."""
    out: list[dict[str, Any]] = []
    open_calls: dict[str, dict[str, Any]] = {}
    metadata = {CONVERSATION_KEY: conversation_id}
    for message in messages:
        parts = read_message(message)
        if parts.call_id:
            part = open_calls.pop(parts.call_id, None)
            if part is None:
                part = {
                    "type": "dynamic-tool",
                    "toolName": ORPHAN,
                    "toolCallId": parts.call_id,
                    "input": {},
                }
                out.append(
                    {
                        "id": parts.message_id,
                        "role": "assistant",
                        "parts": [part],
                        "metadata": metadata,
                    }
                )
            _settle(part, parts)
            continue
        if parts.role not in ROLES:
            continue
        shown = [p for p in (_part(b) for b in parts.blocks) if p is not None]
        for call in parts.calls:
            part = {
                "type": f"tool-{call.name}",
                "toolCallId": call.call_id,
                "state": "input-available",
                "input": call.arguments,
            }
            shown.append(part)
            open_calls[call.call_id] = part
        if not shown and parts.role != "assistant":
            shown = [{"type": "text", "text": ""}]  # the AI SDK wants one part at least
        out.append(
            {"id": parts.message_id, "role": parts.role, "parts": shown, "metadata": metadata}
        )
    return out


# ---------------------------------------------------------------------- reading


def _block(part: dict[str, Any]) -> dict[str, Any] | None:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": _string(part, "text")}
    if kind == "reasoning":
        block: dict[str, Any] = {"type": "thinking", "text": _string(part, "text")}
        meta = part.get("providerMetadata")
        anthropic = meta.get("anthropic") if isinstance(meta, dict) else None
        if isinstance(anthropic, dict) and isinstance(anthropic.get("signature"), str):
            block["signature"] = anthropic["signature"]
        return block
    if kind == "file":
        filename = string_of(part, "filename")
        return media_block(_string(part, "url"), _string(part, "mediaType"), filename)
    if kind == "step-start":
        return None  # a step boundary of the stream, no content
    return dict(part)


def _string(part: dict[str, Any], key: str) -> str:
    value = part.get(key)
    if not isinstance(value, str):
        raise UnreadablePart(f"a {part.get('type')!r} part needs a string {key!r}")
    return value


def _tool(part: dict[str, Any]) -> tuple[str, str] | None:
    """``(call id, tool name)`` of a ``tool-<name>`` or ``dynamic-tool`` part, else None."""
    kind = part.get("type")
    if kind == "dynamic-tool":
        name = _string(part, "toolName")
    elif isinstance(kind, str) and kind.startswith("tool-"):
        name = kind[len("tool-") :]
    else:
        return None
    return _string(part, "toolCallId"), name


def from_vercel_ui(message: Any) -> list[tuple[dict[str, Any], bool]]:
    """One ``UIMessage`` as record messages, each with whether it is a tool result to keep only
    when its call has none yet (``Parsed.once``): the message (``id``, ``role``, ``content`` of
    its parts; tool parts as ``tool_call`` blocks), then one result per settled tool part (id
    ``<message id>#result-<call id>``). Raises ``UnreadablePart``."""
    if not isinstance(message, dict):
        raise UnreadablePart(f"a UIMessage is a JSON object, not {type(message).__name__}")
    role, message_id, parts = message.get("role"), message.get("id"), message.get("parts")
    if not isinstance(role, str) or role not in ROLES:
        raise UnreadablePart(f"a UIMessage 'role' is user, assistant or system, not {role!r}")
    if not isinstance(message_id, str) or not message_id:
        raise UnreadablePart("a UIMessage needs a non-empty string 'id'")
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        raise UnreadablePart("a UIMessage needs 'parts', a list of objects")
    blocks: list[dict[str, Any]] = []
    results: list[tuple[dict[str, Any], bool]] = []
    for part in parts:
        tool = _tool(part)
        if tool is None:
            block = _block(part)
            if block is not None:
                blocks.append(block)
            continue
        call_id, name = tool
        state = part.get("state")
        result_id = f"{message_id}#result-{call_id}"
        if part.get("type") == "dynamic-tool" and name == ORPHAN and len(parts) == 1:
            result_id = message_id  # a result without its call, as ``to_vercel_ui`` writes it
        else:
            blocks.append(call_block(call_id, name, part.get("input", {})))
        if state == "output-available":
            results.append((result_message(result_id, call_id, part.get("output")), True))
        elif state == "output-error":
            text = part.get("errorText")
            results.append(
                (
                    result_message(
                        result_id, call_id, text if isinstance(text, str) else "", is_error=True
                    ),
                    True,
                )
            )
    out: list[tuple[dict[str, Any], bool]] = []
    if blocks or not results:
        out.append(({"role": role, "id": message_id, "content": record_content(blocks)}, False))
    return out + results
