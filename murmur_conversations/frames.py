"""The JSON frames sent to websocket clients (docs/websocket.md), built from the shared row
representations so REST and websockets agree. Core, not part of ``realtime``: the services build
each event's frames inside its transaction for the frame log (docs/websocket.md "The frame log"),
and the realtime receivers send those same frames.

A frame is encoded once, by :func:`encode` (``jsonenc.encode``): that text is what the frame
log stores (:func:`log_text`), what the channel layer carries (also across processes: Redis), and
what every socket is sent as its text frame; nothing decodes and encodes it again on the way
(:func:`logged_texts` splits a logged event back into its frames' texts without decoding them).

Large values are capped: when the compact UTF-8 JSON of a row's ``content``, a ``result`` or an
``error`` (also inside a tool-call row's ``metadata``) exceeds :data:`MAX_VALUE_BYTES`, the value
becomes null and the frame gets ``"truncated": true``; REST serves the whole value.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from typing import Any, Final

from murmur_conversations import jsonenc
from murmur_conversations.models import Conversation, DisplayMessage, ToolCall
from murmur_conversations.representations import display_row, summary_row

Frame = dict[str, Any]

#: Between two frames in the frame log's text, and around them: compact JSON text never holds a
#: raw line feed, so the texts come back by splitting (and the whole is still a JSON list).
_LOG_OPEN: Final = "[\n"
_LOG_JOIN: Final = ",\n"
_LOG_CLOSE: Final = "\n]"

#: Largest compact UTF-8 JSON of one capped value, in bytes (docs/websocket.md).
MAX_VALUE_BYTES: Final = 65_536


def encode(frame: Frame) -> str:
    """THE encoding of a frame: its compact JSON text (``jsonenc.encode``, orjson), made once per
    frame, stored, carried and sent as it is. Raises what ``jsonenc.encode`` raises."""
    return jsonenc.encode(frame).decode("utf-8")


def log_text(texts: list[str]) -> str:
    """The frame log's ``frames`` text of one event's frame texts (:func:`encode`), in order: the
    JSON list of the frames, one a line (``"[]"`` for none)."""
    if not texts:
        return "[]"
    return _LOG_OPEN + _LOG_JOIN.join(texts) + _LOG_CLOSE


def logged_texts(text: str) -> list[str]:
    """The frame texts of a frame log ``frames`` text, in order: :func:`log_text` undone by
    splitting, nothing decoded. Any other JSON list of frames (a row written before the log held
    one frame a line) is decoded and each frame encoded. Raises ``ValueError`` for text that is
    not a JSON list."""
    if text == "[]":
        return []
    if text.startswith(_LOG_OPEN) and text.endswith(_LOG_CLOSE):
        return text[len(_LOG_OPEN) : -len(_LOG_CLOSE)].split(_LOG_JOIN)
    listed = jsonenc.loads(text)
    if not isinstance(listed, list):
        raise ValueError("the frame log's frames are not a JSON list")
    return [encode(frame) for frame in listed]


def kind_of(text: str) -> str | None:
    """The ``type`` of a frame text (:func:`encode`: every frame's first key), without decoding
    it; None when it does not start that way."""
    if not text.startswith('{"type":"'):
        return None
    end = text.find('"', 9)
    return None if end < 0 else text[9:end]


def _too_big(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, str) and len(value) * 6 + 2 <= MAX_VALUE_BYTES:
        return False  # even escaped (6 bytes a character at most) it fits: skip encoding
    return jsonenc.size(value) > MAX_VALUE_BYTES


def _capped_row(row: DisplayMessage) -> tuple[dict[str, Any], bool]:
    data = display_row(row)
    truncated = False
    if _too_big(data["content"]):
        data["content"], truncated = None, True
    metadata = data["metadata"]
    if isinstance(metadata, dict) and any(_too_big(metadata.get(k)) for k in ("result", "error")):
        data["metadata"] = {
            key: (None if key in ("result", "error") and _too_big(value) else value)
            for key, value in metadata.items()
        }
        truncated = True
    return data, truncated


def _durable(kind: str, conversation_id: uuid.UUID | str, event_seq: int, **fields: Any) -> Frame:
    return {"type": kind, "conversation_id": str(conversation_id), "event_seq": event_seq, **fields}


def row_frame(
    kind: str, conversation_id: uuid.UUID | str, row: DisplayMessage, event_seq: int
) -> Frame:
    """``{"type": kind, "conversation_id", "event_seq", "message": <display row>}`` where ``kind``
    is ``display_message_saved`` or ``display_message_updated``; capped as the module says."""
    data, truncated = _capped_row(row)
    frame = _durable(kind, conversation_id, event_seq, message=data)
    if truncated:
        frame["truncated"] = True
    return frame


def tool_frame(conversation_id: uuid.UUID | str, call: ToolCall, event_seq: int) -> Frame:
    """``tool_execution_update``: ``call_id, name, status, display_text, result, error``."""
    frame = _durable(
        "tool_execution_update",
        conversation_id,
        event_seq,
        call_id=call.call_id,
        name=call.name,
        status=call.status,
        display_text=call.display_text,
        result=call.result,
        error=call.error,
    )
    for key in ("result", "error"):
        if _too_big(frame[key]):
            frame[key] = None
            frame["truncated"] = True
    return frame


def status_frame(conversation: Conversation, event_seq: int) -> Frame:
    """``status_changed``: ``status`` and ``pending`` (the pending ask or null)."""
    return _durable(
        "status_changed",
        conversation.pk,
        event_seq,
        status=conversation.status,
        pending=conversation.pending_ask,
    )


def conversation_updated_frame(conversation: Conversation, event_seq: int) -> Frame:
    """``conversation_updated``: ``conversation`` is the summary row."""
    return _durable(
        "conversation_updated", conversation.pk, event_seq, conversation=summary_row(conversation)
    )


def child_frame(conversation_id: uuid.UUID | str, child: Conversation, event_seq: int) -> Frame:
    """``child_updated`` on the parent's stream: ``child`` is the child's summary row (its
    ``status``, its ``steps``: the number of its tool calls, its ``parent_call_id``...); sent when
    the child is created, its status or steps change, or its launching call becomes known."""
    return _durable("child_updated", conversation_id, event_seq, child=summary_row(child))


def child_deleted_frame(
    conversation_id: uuid.UUID | str, child_id: uuid.UUID | str, event_seq: int
) -> Frame:
    """``child_deleted`` on the parent's stream: ``child_id``, a child deleted on its own."""
    return _durable("child_deleted", conversation_id, event_seq, child_id=str(child_id))


def snapshot_frame(conversation: Conversation) -> Frame:
    """The first frame of a conversation socket: ``{"type": "snapshot", "conversation_id",
    "event_seq", "conversation": <summary>, "status", "pending"}``."""
    return {
        "type": "snapshot",
        "conversation_id": str(conversation.pk),
        "event_seq": conversation.last_event_seq,
        "conversation": summary_row(conversation),
        "status": conversation.status,
        "pending": conversation.pending_ask,
    }


def resync_frame(event_seq: int) -> Frame:
    """``{"type": "resync", "event_seq"}``: too much changed; page REST ``?since=`` instead."""
    return {"type": "resync", "event_seq": event_seq}


def delta_frame(conversation_id: uuid.UUID | str, stream_id: str, text: str) -> Frame:
    """``display_message_delta`` (ephemeral, no event_seq): ``stream_id`` and ``text``."""
    return {
        "type": "display_message_delta",
        "conversation_id": str(conversation_id),
        "stream_id": stream_id,
        "text": text,
    }


def saved_frame(conversation: Conversation, event_seq: int) -> Frame:
    """User stream: ``{"type": "conversation_saved", "conversation": <summary>, "event_seq"}``."""
    return {
        "type": "conversation_saved",
        "conversation": summary_row(conversation),
        "event_seq": event_seq,
    }


def deleted_frame(conversation_id: uuid.UUID | str) -> Frame:
    """``{"type": "conversation_deleted", "conversation_id"}`` (both streams)."""
    return {"type": "conversation_deleted", "conversation_id": str(conversation_id)}


def event_frames(
    conversation: Conversation,
    event_seq: int,
    *,
    created: Iterable[DisplayMessage] = (),
    updated: Iterable[DisplayMessage] = (),
    calls: Iterable[ToolCall] = (),
    status_changed: bool = False,
    conversation_updated: bool = False,
    children: Iterable[Conversation] = (),
    children_deleted: Iterable[uuid.UUID] = (),
) -> list[Frame]:
    """The conversation stream's frames of one event, in the contract's order (docs/websocket.md
    "The frames of one write come in this order"): ``display_message_saved`` per created row and
    ``display_message_updated`` per changed row (each by ``seq``), ``tool_execution_update`` per
    call, ``status_changed``, ``conversation_updated``, ``child_updated`` per child,
    ``child_deleted`` per deleted child. The caller passes the rows already ordered."""
    pk = conversation.pk
    built = [row_frame("display_message_saved", pk, row, event_seq) for row in created]
    built += [row_frame("display_message_updated", pk, row, event_seq) for row in updated]
    built += [tool_frame(pk, call, event_seq) for call in calls]
    if status_changed:
        built.append(status_frame(conversation, event_seq))
    if conversation_updated:
        built.append(conversation_updated_frame(conversation, event_seq))
    built += [child_frame(pk, child, event_seq) for child in children]
    built += [child_deleted_frame(pk, child_id, event_seq) for child_id in children_deleted]
    return built


_origin: tuple[int, str] = (0, "")


def process_origin() -> str:
    """This process's token (32 hex) in the frame log's ``origin``: a process skips the rows it
    wrote itself, as their frames reached its sockets through its own channel layer. A forked
    child gets a new one."""
    global _origin
    pid = os.getpid()
    if _origin[0] != pid:
        _origin = (pid, uuid.uuid4().hex)
    return _origin[1]
