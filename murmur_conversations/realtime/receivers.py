"""Signal receivers that turn committed writes into live events (docs/write-path.md and docs/websocket.md).

One service call sends its signals in the contract's frame order and ends with
``conversation_saved``; the receivers collect that call's frames (per thread, keyed by conversation
and event_seq) and publish them as ONE message on the conversation group when
``conversation_saved`` arrives, so consumers see every event_seq exactly once and can spot a gap.
The sidebar, deletion, delta and authentication receivers publish directly. Nothing here blocks:
``Broadcaster.publish`` only queues. Connected by ``apps.py`` when Channels is installed.

Layer messages carry frames as their text (``frames.encode``, once per frame: the frame log's
own texts when it is on), so neither a layer nor a consumer encodes a frame again: every socket
is sent those texts as they are, and Redis carries strings, not nested dicts.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from typing import Any, Final

from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_delete, post_save

from murmur_conversations import frames as framing
from murmur_conversations import signals
from murmur_conversations.frames import Frame
from murmur_conversations.models import Conversation, DisplayMessage, ToolCall
from murmur_conversations.realtime.broadcast import get_broadcaster
from murmur_conversations.realtime.groups import group_name
from murmur_conversations.tickets import credential_ref, session_digest

#: Calls whose frames are being collected in one thread; more means conversation_saved never came.
_MAX_OPEN_CALLS: Final = 64
_local = threading.local()


def auth_digest(user: Any) -> str:
    """A digest of the user's session auth hash: it changes with the password."""
    return hashlib.sha256(user.get_session_auth_hash().encode()).hexdigest()[:32]


def _collected(conversation_id: uuid.UUID, event_seq: int) -> list[Frame]:
    calls: dict[tuple[uuid.UUID, int], list[Frame]] | None = getattr(_local, "calls", None)
    if calls is None:
        calls = _local.calls = {}
    key = (conversation_id, event_seq)
    if key not in calls and len(calls) >= _MAX_OPEN_CALLS:
        calls.pop(next(iter(calls)))
    return calls.setdefault(key, [])


def _take(conversation_id: uuid.UUID, event_seq: int) -> list[Frame]:
    calls: dict[tuple[uuid.UUID, int], list[Frame]] = getattr(_local, "calls", {})
    return calls.pop((conversation_id, event_seq), [])


def on_display_messages_saved(
    sender: Any,
    *,
    conversation: Conversation,
    rows: list[DisplayMessage],
    event_seq: int,
    logged: bool = False,
    **_: Any,
) -> None:
    """One ``display_message_saved`` per created row, by seq."""
    if logged:
        return  # conversation_saved carries the frames built for the frame log
    collected = _collected(conversation.pk, event_seq)
    for row in sorted(rows, key=lambda r: r.seq):
        collected.append(
            framing.row_frame("display_message_saved", conversation.pk, row, event_seq)
        )


def on_display_message_updated(
    sender: Any,
    *,
    conversation: Conversation,
    row: DisplayMessage,
    event_seq: int,
    logged: bool = False,
    **_: Any,
) -> None:
    """One ``display_message_updated`` per changed row (sent by seq)."""
    if logged:
        return  # conversation_saved carries the frames built for the frame log
    _collected(conversation.pk, event_seq).append(
        framing.row_frame("display_message_updated", conversation.pk, row, event_seq)
    )


def on_tool_call_updated(
    sender: Any,
    *,
    conversation: Conversation,
    tool_call: ToolCall,
    event_seq: int,
    logged: bool = False,
    **_: Any,
) -> None:
    """One ``tool_execution_update`` per call whose status moved."""
    if logged:
        return  # conversation_saved carries the frames built for the frame log
    _collected(conversation.pk, event_seq).append(
        framing.tool_frame(conversation.pk, tool_call, event_seq)
    )


def on_status_changed(
    sender: Any, *, conversation: Conversation, event_seq: int, logged: bool = False, **_: Any
) -> None:
    """``status_changed`` with the status and pending ask at commit."""
    if logged:
        return  # conversation_saved carries the frames built for the frame log
    _collected(conversation.pk, event_seq).append(framing.status_frame(conversation, event_seq))


def on_conversation_updated(
    sender: Any, *, conversation: Conversation, event_seq: int, logged: bool = False, **_: Any
) -> None:
    """``conversation_updated`` with the summary at commit."""
    if logged:
        return  # conversation_saved carries the frames built for the frame log
    _collected(conversation.pk, event_seq).append(
        framing.conversation_updated_frame(conversation, event_seq)
    )


def on_child_updated(
    sender: Any,
    *,
    conversation: Conversation,
    child: Conversation,
    event_seq: int,
    logged: bool = False,
    **_: Any,
) -> None:
    """``child_updated`` on the parent's stream, with the child's summary at commit."""
    if logged:
        return  # conversation_saved carries the frames built for the frame log
    _collected(conversation.pk, event_seq).append(
        framing.child_frame(conversation.pk, child, event_seq)
    )


def on_child_deleted(
    sender: Any,
    *,
    conversation: Conversation,
    child_id: uuid.UUID,
    event_seq: int,
    logged: bool = False,
    **_: Any,
) -> None:
    """``child_deleted`` on the parent's stream."""
    if logged:
        return  # conversation_saved carries the frames built for the frame log
    _collected(conversation.pk, event_seq).append(
        framing.child_deleted_frame(conversation.pk, child_id, event_seq)
    )


def on_conversation_saved(
    sender: Any,
    *,
    conversation: Conversation,
    event_seq: int,
    frame_texts: list[str] | None = None,
    sidebar_text: str | None = None,
    **_: Any,
) -> None:
    """Publish the call's frame texts (even none: the event_seq itself is news) to the
    conversation group, and ``conversation_saved`` to the owner's sidebar. ``frame_texts`` and
    ``sidebar_text``, when given, are those the write logged (docs/websocket.md "The frame log"):
    sent as they are, so a socket gets the same bytes whichever process wrote; else the frames
    collected from this call's signals are encoded here, once."""
    broadcaster = get_broadcaster()
    collected = _take(conversation.pk, event_seq)
    texts = [framing.encode(f) for f in collected] if frame_texts is None else frame_texts
    at = time.time()  # after the commit: a socket's access is confirmed by a later check
    if event_seq > 0:
        broadcaster.publish(
            group_name("conversation", conversation.pk),
            {"type": "murmur.events", "event_seq": event_seq, "frames": texts, "at": at},
        )
    if conversation.owner_id is not None:
        if sidebar_text is None:
            sidebar_text = framing.encode(framing.saved_frame(conversation, event_seq))
        broadcaster.publish(
            group_name("sidebar", conversation.owner_id),
            {
                "type": "murmur.sidebar",
                "conversation_id": str(conversation.pk),
                "event_seq": event_seq,
                "frame": sidebar_text,
                "at": at,
            },
        )


def on_conversation_deleted(
    sender: Any, *, conversation_id: uuid.UUID, owner_id: Any, **_: Any
) -> None:
    """``conversation_deleted`` to the conversation's sockets (which then close 4404) and to the
    owner's sidebar."""
    broadcaster = get_broadcaster()
    message = {
        "type": "murmur.deleted",
        "conversation_id": str(conversation_id),
        "frame": framing.encode(framing.deleted_frame(conversation_id)),
        "at": time.time(),
    }
    broadcaster.publish(group_name("conversation", conversation_id), message)
    if owner_id is not None:
        broadcaster.publish(group_name("sidebar", owner_id), message)


def on_delta(
    sender: Any, *, conversation: Conversation, stream_id: str, text: str, **_: Any
) -> None:
    """``display_message_delta``: ephemeral, published at once."""
    get_broadcaster().publish(
        group_name("conversation", conversation.pk),
        {
            "type": "murmur.delta",
            "frame": framing.encode(framing.delta_frame(conversation.pk, stream_id, text)),
            "at": time.time(),
        },
    )


def on_user_saved(
    sender: Any, *, instance: Any, created: bool, update_fields: Any = None, **_: Any
) -> None:
    """Deactivation or a password change: every socket of the user compares its digest and closes
    4401 when the user is inactive or the digest changed. Saves of other fields are skipped."""
    if created or instance.pk is None:
        return
    if update_fields is not None and not {"password", "is_active"} & set(update_fields):
        return
    get_broadcaster().publish(
        group_name("user", instance.pk),
        {
            "type": "murmur.auth",
            "active": bool(getattr(instance, "is_active", True)),
            "digest": auth_digest(instance),
        },
    )


def on_user_logged_out(sender: Any, *, request: Any, user: Any = None, **_: Any) -> None:
    """Logout: close the sockets opened with this session or tickets issued under it (4401)."""
    session = getattr(request, "session", None)
    key = getattr(session, "session_key", None)
    if key:
        get_broadcaster().publish(
            group_name("session", session_digest(key)), {"type": "murmur.revoke"}
        )


def on_user_deleted(sender: Any, *, instance: Any, **_: Any) -> None:
    """A deleted user: every socket of the user closes 4401."""
    if instance.pk is not None:
        get_broadcaster().publish(
            group_name("user", instance.pk), {"type": "murmur.auth", "active": False, "digest": ""}
        )


def on_session_deleted(sender: Any, *, instance: Any, **_: Any) -> None:
    """A session row deleted on the server (``clearsessions``, "log out everywhere", the admin):
    the sockets opened with it or with tickets issued under it close 4401."""
    key = getattr(instance, "session_key", None)
    if key:
        get_broadcaster().publish(
            group_name("session", session_digest(key)), {"type": "murmur.revoke"}
        )


def on_credential_deleted(sender: Any, *, instance: Any, **_: Any) -> None:
    """A deleted API token: the sockets opened with tickets issued with it close 4401."""
    ref = credential_ref(instance)
    if ref is not None:
        get_broadcaster().publish(
            group_name("credential", ":".join(ref)), {"type": "murmur.revoke"}
        )


def on_share_revoked(sender: Any, *, share: Any, **_: Any) -> None:
    """A revoked share link: its sockets close 4404."""
    get_broadcaster().publish(
        group_name("share", share.pk), {"type": "murmur.revoke", "code": 4404}
    )


def on_conversation_row_saved(
    sender: Any, *, instance: Any, created: bool, update_fields: Any = None, **_: Any
) -> None:
    """A conversation saved with a possibly new owner (the admin, a host's code): its sockets
    confirm their access at once (the old owner's close 4404). The services' own writes announce
    themselves and are checked before their frames go out."""
    if created or (update_fields is not None and "owner" not in update_fields):
        return
    get_broadcaster().publish(
        group_name("conversation", instance.pk), {"type": "murmur.recheck", "at": time.time()}
    )


_CONNECTIONS: Final = (
    (signals.display_messages_saved, on_display_messages_saved),
    (signals.display_message_updated, on_display_message_updated),
    (signals.tool_call_updated, on_tool_call_updated),
    (signals.status_changed, on_status_changed),
    (signals.conversation_updated, on_conversation_updated),
    (signals.child_updated, on_child_updated),
    (signals.child_deleted, on_child_deleted),
    (signals.conversation_saved, on_conversation_saved),
    (signals.conversation_deleted, on_conversation_deleted),
    (signals.delta, on_delta),
    (signals.share_revoked, on_share_revoked),
)


def connect() -> None:
    """Connect every receiver (idempotent: each has a ``dispatch_uid``)."""
    for signal, receiver in _CONNECTIONS:
        signal.connect(receiver, weak=False, dispatch_uid=f"murmur.realtime.{receiver.__name__}")
    post_save.connect(
        on_user_saved, sender=get_user_model(), weak=False, dispatch_uid="murmur.realtime.user"
    )
    user_logged_out.connect(on_user_logged_out, weak=False, dispatch_uid="murmur.realtime.logout")
    post_delete.connect(
        on_user_deleted,
        sender=get_user_model(),
        weak=False,
        dispatch_uid="murmur.realtime.user-del",
    )
    post_save.connect(
        on_conversation_row_saved,
        sender=Conversation,
        weak=False,
        dispatch_uid="murmur.realtime.conversation-owner",
    )
    if apps.is_installed("django.contrib.sessions"):
        from django.contrib.sessions.models import Session

        post_delete.connect(
            on_session_deleted, sender=Session, weak=False, dispatch_uid="murmur.realtime.session"
        )
    if apps.is_installed("rest_framework.authtoken"):
        from rest_framework.authtoken.models import Token

        post_delete.connect(
            on_credential_deleted, sender=Token, weak=False, dispatch_uid="murmur.realtime.token"
        )
