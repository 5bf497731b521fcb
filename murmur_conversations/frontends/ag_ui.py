"""AG-UI messages (``RunAgentInput.messages``, ``MESSAGES_SNAPSHOT``; docs/formats.md "ag-ui"),
camelCase JSON as the ``ag-ui-protocol`` package serialises it, written from the record and read
back. Pure: no Django.

Per record message: a ``user`` message (``content`` a string, or ``text``/``image``/``document``
parts when it holds media), ``system`` and ``developer`` messages (text), an assistant message as
one ``reasoning`` message per thinking block (id ``<id>#reasoning-<n>``, a signature as
``encryptedValue``) followed by an ``assistant`` message (id the message id, ``content`` its
text, ``toolCalls`` with ``function.arguments`` as JSON text), and a tool result as a ``tool``
message (``toolCallId``; ``error`` the output's text when the call failed). Every message
carries ``metadata.conversationId``. Reading back, the ``reasoning`` messages right before an
``assistant`` message are its thinking blocks; others are assistant messages of their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from murmur_conversations.frontends.parts import (
    CONVERSATION_KEY,
    UnreadablePart,
    arguments_text,
    call_block,
    content_blocks,
    media_block,
    output_text,
    read_media,
    read_message,
    record_content,
    result_message,
    thinking_text,
)

NAME: Final = "ag-ui"
TEXT_ROLES: Final = frozenset({"system", "developer"})


def _content_part(block: dict[str, Any]) -> dict[str, Any] | None:
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    media = read_media(block)
    if media is None:
        return None
    source: dict[str, Any]
    if media.data:
        source = {"type": "data", "value": media.data, "mimeType": media.mime_type or "image/png"}
    else:
        source = {"type": "url", "value": media.url}
        if media.mime_type:
            source["mimeType"] = media.mime_type
    part: dict[str, Any] = {"type": "image" if media.is_image else "document", "source": source}
    if media.filename:
        part["metadata"] = {"filename": media.filename}
    return part


def _content(blocks: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A string when every block is text, else the content parts."""
    parts = [p for p in (_content_part(b) for b in blocks) if p is not None]
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def to_ag_ui(messages: Iterable[dict[str, Any]], *, conversation_id: str) -> list[dict[str, Any]]:
    """Record messages (``representations.record_message`` dicts, in position order) as AG-UI
    messages; see the module docstring. Messages of other roles are left out."""
    metadata = {CONVERSATION_KEY: conversation_id}
    out: list[dict[str, Any]] = []
    for message in messages:
        parts = read_message(message)
        mid = parts.message_id
        if parts.call_id:
            tool: dict[str, Any] = {
                "id": mid,
                "role": "tool",
                "content": parts.output
                if isinstance(parts.output, str)
                else (_content(parts.blocks) or output_text(parts.output)),
                "toolCallId": parts.call_id,
            }
            if parts.is_error:
                tool["error"] = output_text(parts.output) or "error"
            out.append({**tool, "metadata": metadata})
        elif parts.role == "user":
            out.append(
                {"id": mid, "role": "user", "content": _content(parts.blocks), "metadata": metadata}
            )
        elif parts.role in TEXT_ROLES:
            out.append({"id": mid, "role": parts.role, "content": parts.text, "metadata": metadata})
        elif parts.role == "assistant":
            for index, block in enumerate(parts.thinking):
                reasoning: dict[str, Any] = {
                    "id": f"{mid}#reasoning-{index}",
                    "role": "reasoning",
                    "content": thinking_text(block),
                }
                if isinstance(block.get("signature"), str):
                    reasoning["encryptedValue"] = block["signature"]
                out.append({**reasoning, "metadata": metadata})
            said: dict[str, Any] = {"id": mid, "role": "assistant"}
            if parts.text:
                said["content"] = parts.text
            if parts.calls:
                said["toolCalls"] = [
                    {
                        "id": call.call_id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": arguments_text(call.arguments),
                        },
                    }
                    for call in parts.calls
                ]
            out.append({**said, "metadata": metadata})
    return out


# ---------------------------------------------------------------------- reading


def _blocks(content: Any) -> list[dict[str, Any]]:
    return content_blocks(content, _part)


def _part(part: dict[str, Any]) -> dict[str, Any] | None:
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind in ("image", "document", "audio", "video") and isinstance(part.get("source"), dict):
        return _media(part)
    if kind == "binary":  # the part before 1.0
        url = part.get("url") or f"data:{part.get('mimeType')};base64,{part.get('data')}"
        return media_block(str(url), str(part.get("mimeType") or ""))
    return None


def _media(part: dict[str, Any]) -> dict[str, Any]:
    source = part["source"]
    value = source.get("value")
    if not isinstance(value, str):
        raise UnreadablePart(f"a {part.get('type')!r} part's source needs a string 'value'")
    mime = source.get("mimeType") if isinstance(source.get("mimeType"), str) else ""
    url = f"data:{mime};base64,{value}" if source.get("type") == "data" else value
    meta = part.get("metadata")
    filename = meta.get("filename") if isinstance(meta, dict) else None
    block = media_block(url, mime, filename if isinstance(filename, str) else "")
    if part["type"] != "image" and block["type"] == "image":
        block["type"] = "file"
    return block


def _calls(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UnreadablePart("'toolCalls' is a list")
    blocks = []
    for call in value:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str):
            raise UnreadablePart("each of 'toolCalls' needs an 'id' and a 'function'")
        arguments = function.get("arguments")
        parsed = (
            read_message(
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "", "function": {"arguments": arguments}}],
                }
            )
            .calls[0]
            .arguments
        )
        blocks.append(call_block(call["id"], str(function.get("name") or ""), parsed))
    return blocks


def from_ag_ui(messages: list[Any]) -> list[tuple[int, dict[str, Any] | UnreadablePart]]:
    """AG-UI messages as record messages, each with the 0-based index of the AG-UI message it
    came from (a refused one as ``UnreadablePart``); see the module docstring. ``activity``
    messages (UI state, not conversation) are left out."""
    out: list[tuple[int, dict[str, Any] | UnreadablePart]] = []
    thinking: list[tuple[int, dict[str, Any]]] = []

    def flush() -> None:
        for index, block_message in thinking:
            out.append((index, block_message))
        thinking.clear()

    for index, message in enumerate(messages):
        try:
            if not isinstance(message, dict):
                raise UnreadablePart(
                    f"an AG-UI message is a JSON object, not {type(message).__name__}"
                )
            role, mid = message.get("role"), message.get("id")
            if not isinstance(mid, str) or not mid:
                raise UnreadablePart("an AG-UI message needs a non-empty string 'id'")
            if role == "reasoning":
                text = message.get("content")
                if not isinstance(text, str):
                    raise UnreadablePart("a reasoning message needs a string 'content'")
                block: dict[str, Any] = {"type": "thinking", "text": text}
                if isinstance(message.get("encryptedValue"), str):
                    block["signature"] = message["encryptedValue"]
                thinking.append((index, {"role": "assistant", "id": mid, "content": [block]}))
                continue
            if role == "assistant":
                blocks = [b for _, m in thinking for b in m["content"]]
                thinking.clear()
                if message.get("content") is not None:
                    blocks.extend(_blocks(message.get("content")))
                blocks.extend(_calls(message.get("toolCalls")))
                out.append(
                    (index, {"role": "assistant", "id": mid, "content": record_content(blocks)})
                )
                continue
            flush()
            if role == "tool":
                call_id = message.get("toolCallId")
                if not isinstance(call_id, str) or not call_id:
                    raise UnreadablePart("a tool message needs a string 'toolCallId'")
                error = message.get("error")
                content = message.get("content")
                output = content if isinstance(content, str) else record_content(_blocks(content))
                out.append((index, result_message(mid, call_id, output, is_error=bool(error))))
            elif role in ("user", *TEXT_ROLES):
                out.append(
                    (
                        index,
                        {
                            "role": role,
                            "id": mid,
                            "content": record_content(_blocks(message.get("content"))),
                        },
                    )
                )
            elif role != "activity":
                raise UnreadablePart(f"an AG-UI message 'role' is not {role!r}")
        except UnreadablePart as error:
            out.append((index, error))
    flush()
    return out
