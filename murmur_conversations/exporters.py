"""Exports of the durable record (docs/formats.md): murmur JSON Lines and an OpenAI list.

Murmur lines are the stored raw line when the conversation was imported from murmur (kept as a
source record under the message id), else compact JSON (``ensure_ascii=False``) with the keys
``role, content, id``, then ``tool_call_id`` and ``is_error`` for tool results (``is_error`` also
whenever true), ``source_id`` when set, then the ``extra`` keys in stored order. Importing that output
as murmur and exporting again gives the same bytes. Reads go in chunks, so memory stays bounded.

After the record come the conversation's feedback lines (docs/formats.md "Feedback"), one per
user and display row: ``{"type": "murmur.feedback", "message_id", "part", "rating", "comment",
"user"}``, where ``part`` is the row's 0-based place among the display rows of that record message
and ``user`` is null for the conversation's owner, else the username. The murmur importer reads
them back through ``services.set_feedback``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from django.contrib.auth import get_user_model

from murmur_conversations import jsonenc
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Feedback,
    Message,
    SourceRecord,
)

CHUNK: Final = 500
MURMUR: Final = "murmur"
#: The ``type`` of a feedback line of a murmur export (``importers.murmur.FEEDBACK_TYPE``).
FEEDBACK_RECORD: Final = "murmur.feedback"
#: Message keys the OpenAI Chat Completions API knows besides role, content and tool_call_id.
OPENAI_KEYS: Final = ("name", "tool_calls", "refusal", "audio", "function_call")


def _messages(conversation: Conversation) -> Iterator[list[Message]]:
    """The record in position order, in chunks of :data:`CHUNK`."""
    chunk: list[Message] = []
    for message in (
        Message.objects.filter(conversation=conversation)
        .order_by("position")
        .iterator(chunk_size=CHUNK)
    ):
        chunk.append(message)
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def murmur_message(message: Message) -> dict[str, Any]:
    """The murmur record line of a message, as a dict in export key order."""
    line: dict[str, Any] = {
        "role": message.role,
        "content": message.content,
        "id": message.message_id,
    }
    if message.tool_call_id:
        line["tool_call_id"] = message.tool_call_id
    if message.tool_call_id or message.is_error:
        line["is_error"] = message.is_error
    if message.source_id:
        line["source_id"] = message.source_id
    for key, value in message.extra.items():
        line.setdefault(key, value)
    return line


def export_murmur(conversation: Conversation, *, feedback: bool = True) -> Iterator[str]:
    """The conversation as murmur JSON Lines, one ``\\n``-terminated line per record message, then
    (unless ``feedback`` is false) one per feedback (:func:`feedback_lines`)."""
    for chunk in _messages(conversation):
        raw: dict[str, str] = {}
        if conversation.source == MURMUR:
            raw = dict(
                SourceRecord.objects.filter(
                    conversation=conversation,
                    source=MURMUR,
                    source_key__in=[m.message_id for m in chunk],
                ).values_list("source_key", "raw")
            )
        for message in chunk:
            yield raw.get(message.message_id) or jsonenc.dumps(murmur_message(message))
            yield "\n"
    if feedback:
        for line in feedback_lines(conversation):
            yield jsonenc.dumps(line)
            yield "\n"


def feedback_lines(conversation: Conversation) -> list[dict[str, Any]]:
    """The feedback lines of the module docstring, ordered by display row, the owner's first, then
    by username (so the order does not depend on database ids). Three queries."""
    username = get_user_model().USERNAME_FIELD
    items = list(
        Feedback.objects.filter(conversation=conversation)
        .select_related("display_message__message", "user")
        .order_by("display_message__seq")
    )
    if not items:
        return []
    places: dict[int, int] = {}
    counters: dict[int, int] = {}
    for pk, message_pk in (
        DisplayMessage.objects.filter(message_id__in={f.display_message.message_id for f in items})
        .order_by("seq")
        .values_list("pk", "message_id")
    ):
        places[pk] = counters.get(message_pk, 0)
        counters[message_pk] = places[pk] + 1
    lines = []
    for item in items:
        message = item.display_message.message
        if message is None:  # feedback is only ever given on rows of the record
            continue
        owner = item.user_id == conversation.owner_id
        lines.append(
            (
                item.display_message.seq,
                not owner,
                "" if owner else str(getattr(item.user, username)),
                {
                    "type": FEEDBACK_RECORD,
                    "message_id": message.message_id,
                    "part": places[item.display_message_id],
                    "rating": item.rating,
                    "comment": item.comment,
                    "user": None if owner else str(getattr(item.user, username)),
                },
            )
        )
    lines.sort(key=lambda entry: entry[:3])
    return [entry[3] for entry in lines]


def _openai_calls(content: Any) -> list[dict[str, Any]]:
    calls = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_call":
            arguments = block.get("input", {})
            calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {
                        "name": block.get("name"),
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else jsonenc.dumps(arguments),
                    },
                }
            )
    return calls


def openai_message(message: Message) -> dict[str, Any]:
    """A record message as an OpenAI Chat Completions message: ``tool_call`` blocks become
    ``tool_calls`` (unless the message already carries them), thinking blocks are left out, content
    without text is ``null`` beside tool calls; only keys the API knows are kept."""
    content: Any = message.content
    calls = _openai_calls(content)
    if isinstance(content, list):
        content = [
            b
            for b in content
            if not (isinstance(b, dict) and b.get("type") in ("tool_call", "thinking"))
        ]
    extra_calls = message.extra.get("tool_calls")
    if (extra_calls or calls) and content in ("", []):
        content = None
    out: dict[str, Any] = {"role": message.role, "content": content}
    for key in OPENAI_KEYS:
        if key in message.extra:
            out[key] = message.extra[key]
    if calls and "tool_calls" not in out:
        out["tool_calls"] = calls
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out


def export_openai(conversation: Conversation) -> Iterator[str]:
    """The conversation as one OpenAI message list: a compact JSON array and a newline."""
    yield "["
    first = True
    for chunk in _messages(conversation):
        for message in chunk:
            if not first:
                yield ","
            first = False
            yield jsonenc.dumps(openai_message(message))
    yield "]\n"


EXPORTERS: Final = {"murmur": export_murmur, "openai": export_openai}
