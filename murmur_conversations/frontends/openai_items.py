"""OpenAI Conversations items (``conversations.items.list``, a Responses API ``input``;
docs/formats.md "openai-items"), written from the record and read back. Pure: no Django.

Per record message: a user, system or developer message is a ``message`` item (``input_text``,
``input_image`` and ``input_file`` parts); an assistant message is one ``reasoning`` item per
thinking block (id ``<id>#reasoning-<n>``; ``content`` one ``reasoning_text``, the signature as
``encrypted_content``), a ``message`` item (id the message id, ``output_text`` parts) unless it
has no text but thinking or calls, and one ``function_call`` item per call (id ``<id>#call-<n>``, ``arguments`` JSON text);
a tool result is a ``function_call_output`` item (``call_id``, ``output`` its text, or
``input_text``/``input_image`` parts). Items carry no error flag: a failed call's output comes
back as plain output. Reading back, consecutive items whose ids share the ``<id>#`` stem are one
assistant message; any other item is a record message of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from murmur_conversations.frontends.parts import (
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
    string_of,
    thinking_text,
)

NAME: Final = "openai-items"
MESSAGE_ROLES: Final = frozenset({"user", "system", "developer", "assistant"})
#: The suffix of an item that is one part of a record message.
STEM: Final = re.compile(r"^(.*)#(?:reasoning|call)-\d+$", re.S)


def _input_part(block: dict[str, Any], text_type: str) -> dict[str, Any] | None:
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        part: dict[str, Any] = {"type": text_type, "text": block["text"]}
        if text_type == "output_text":
            part["annotations"] = []
        return part
    media = read_media(block)
    if media is None:
        return None
    if media.is_image:
        return {"type": "input_image", "image_url": media.url, "detail": "auto"}
    part = (
        {"type": "input_file", "file_url": media.url}
        if not media.data
        else {
            "type": "input_file",
            "file_data": media.url,
        }
    )
    if media.filename:
        part["filename"] = media.filename
    return part


def _parts(blocks: list[dict[str, Any]], text_type: str) -> list[dict[str, Any]]:
    return [p for p in (_input_part(b, text_type) for b in blocks) if p is not None]


def to_openai_items(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Record messages (``representations.record_message`` dicts, in position order) as
    Conversations items; see the module docstring. Messages of other roles are left out."""
    out: list[dict[str, Any]] = []
    for message in messages:
        parts = read_message(message)
        mid = parts.message_id
        if parts.call_id:
            output: Any = parts.output
            if not isinstance(output, str):
                shown = _parts(parts.blocks, "input_text")
                output = shown if shown and len(shown) == len(parts.blocks) else output_text(output)
            out.append(
                {
                    "type": "function_call_output",
                    "id": mid,
                    "call_id": parts.call_id,
                    "output": output,
                    "status": "completed",
                }
            )
            continue
        if parts.role not in MESSAGE_ROLES:
            continue
        if parts.role != "assistant":
            out.append(
                {
                    "type": "message",
                    "id": mid,
                    "role": parts.role,
                    "content": _parts(parts.blocks, "input_text"),
                    "status": "completed",
                }
            )
            continue
        for index, block in enumerate(parts.thinking):
            reasoning: dict[str, Any] = {
                "type": "reasoning",
                "id": f"{mid}#reasoning-{index}",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": thinking_text(block)}],
            }
            if isinstance(block.get("signature"), str):
                reasoning["encrypted_content"] = block["signature"]
            out.append(reasoning)
        said = _parts(parts.blocks, "output_text")
        if said or not (parts.thinking or parts.calls):
            out.append(
                {
                    "type": "message",
                    "id": mid,
                    "role": "assistant",
                    "content": said,
                    "status": "completed",
                }
            )
        for index, call in enumerate(parts.calls):
            out.append(
                {
                    "type": "function_call",
                    "id": f"{mid}#call-{index}",
                    "call_id": call.call_id,
                    "name": call.name,
                    "arguments": arguments_text(call.arguments),
                    "status": "completed",
                }
            )
    return out


# ---------------------------------------------------------------------- reading


def _blocks(content: Any) -> list[dict[str, Any]]:
    return content_blocks(content, _part)


def _part(part: dict[str, Any]) -> dict[str, Any] | None:
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return {"type": "text", "text": part["refusal"]}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        return media_block(part["image_url"])
    if kind == "input_file" and isinstance(part.get("file_url") or part.get("file_data"), str):
        filename = string_of(part, "filename")
        block = media_block(str(part.get("file_url") or part.get("file_data")), "", filename)
        block["type"] = "file"
        return block
    return None


def _thinking(item: dict[str, Any]) -> dict[str, Any]:
    parts = item.get("content") or item.get("summary")
    texts = [
        p.get("text")
        for p in (parts if isinstance(parts, list) else [])
        if isinstance(p, dict) and isinstance(p.get("text"), str)
    ]
    block: dict[str, Any] = {"type": "thinking", "text": "\n".join(str(t) for t in texts)}
    if isinstance(item.get("encrypted_content"), str):
        block["signature"] = item["encrypted_content"]
    return block


def _item(item: dict[str, Any]) -> tuple[str, dict[str, Any] | list[dict[str, Any]]]:
    """``(role, blocks)`` of an assistant part item, or ``("tool", result)`` / ``(role, message)``."""
    kind = item.get("type", "message")
    mid = item.get("id")
    if not isinstance(mid, str) or not mid:
        raise UnreadablePart("an item needs a non-empty string 'id'")
    if kind == "reasoning":
        return "assistant", [_thinking(item)]
    if kind == "function_call":
        call_id, name = item.get("call_id"), item.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise UnreadablePart("a function_call item needs a string 'call_id' and 'name'")
        arguments = (
            read_message(
                {
                    "role": "assistant",
                    "tool_calls": [{"function": {"arguments": item.get("arguments")}}],
                }
            )
            .calls[0]
            .arguments
        )
        return "assistant", [call_block(call_id, name, arguments)]
    if kind == "function_call_output":
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise UnreadablePart("a function_call_output item needs a string 'call_id'")
        output = item.get("output")
        value = output if isinstance(output, str) else record_content(_blocks(output))
        return "tool", result_message(mid, call_id, value)
    if kind == "message":
        role = item.get("role")
        if not isinstance(role, str) or role not in MESSAGE_ROLES:
            raise UnreadablePart(
                f"a message item 'role' is user, assistant, system or developer, not {role!r}"
            )
        blocks = _blocks(item.get("content"))
        if role == "assistant":
            return "assistant", blocks
        return str(role), {"role": role, "id": mid, "content": record_content(blocks)}
    raise UnreadablePart(f"an item of type {kind!r} is not a conversation item this reads")


def from_openai_items(items: list[Any]) -> list[tuple[list[int], dict[str, Any] | UnreadablePart]]:
    """Conversations items as record messages, each with the 0-based indexes of the items it
    came from (a refused item as ``UnreadablePart``); see the module docstring."""
    out: list[tuple[list[int], dict[str, Any] | UnreadablePart]] = []
    group: tuple[str, list[int], list[dict[str, Any]]] | None = None

    def close() -> None:
        nonlocal group
        if group is not None:
            stem, indexes, blocks = group
            out.append(
                (indexes, {"role": "assistant", "id": stem, "content": record_content(blocks)})
            )
            group = None

    for index, item in enumerate(items):
        try:
            if not isinstance(item, dict):
                raise UnreadablePart(f"an item is a JSON object, not {type(item).__name__}")
            role, value = _item(item)
        except UnreadablePart as error:
            close()
            out.append(([index], error))
            continue
        if role != "assistant" or not isinstance(value, list):
            close()
            out.append(([index], value if isinstance(value, dict) else {}))
            continue
        mid = str(item["id"])
        found = STEM.match(mid)
        stem = found.group(1) if found else mid
        if group is not None and group[0] == stem and (found or item.get("type") == "message"):
            group[1].append(index)
            group[2].extend(value)
            continue
        close()  # an item with an id of its own (OpenAI's ``rs_``, ``msg_``, ``fc_``) is alone
        group = (stem, [index], list(value))
    close()
    return out
