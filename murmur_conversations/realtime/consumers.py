"""The websocket streams (docs/websocket.md): one conversation, and the user's conversation list.

``ConversationConsumer`` (``ws/conversations/<id>/?since=N``): snapshot, replay from the database,
then live events in event_seq order with no duplicate and no gap. It subscribes to the
conversation's group BEFORE reading the snapshot, and Channels dispatches one message at a time, so
live events that arrive meanwhile wait in the layer and are dropped if their event_seq is already
covered. A jump in event_seq is filled from the database first. ``UserStreamConsumer``
(``ws/conversations/``): ``conversation_saved`` and ``conversation_deleted`` of the user's
conversations. On a process-local layer the process's frame-log poller (``realtime.poller``)
brings both the frames other processes wrote, as the same layer messages.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from channels.db import database_sync_to_async

from murmur_conversations import frames, jsonenc, services
from murmur_conversations.exceptions import ConversationNotFound, WriteConflict
from murmur_conversations.models import AccessSurface, Conversation
from murmur_conversations.realtime import access, reads
from murmur_conversations.realtime.base import (
    CLOSE_BAD_SINCE,
    CLOSE_NOT_FOUND,
    CLOSE_TRY_LATER,
    LiveConsumer,
)
from murmur_conversations.realtime.groups import group_name
from murmur_conversations.realtime.scope import InvalidSince, since_of
from murmur_conversations.selectors import conversation_for


def _readable_pk(user: Any, raw_id: Any) -> uuid.UUID | None:
    conversation = conversation_for(user, raw_id)
    return None if conversation is None else conversation.pk


class ConversationConsumer(LiveConsumer):
    """One conversation's live events; see the module docstring. Closes 4401 / 4404 / 4400."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pk: uuid.UUID | None = None
        self.last_seen = 0
        self.status: tuple[str, Any] = ("", None)
        self.title = ""
        self.lock = asyncio.Lock()

    @property
    def conversation_pk(self) -> uuid.UUID:
        """The conversation of this socket, known once ``connect`` passed the checks (everything
        that reads it runs after that); ``RuntimeError`` before."""
        if self.pk is None:
            raise RuntimeError("this socket has no conversation yet")
        return self.pk

    async def connect(self) -> None:
        await self.accept_socket()
        if not await self.authenticate():
            return
        raw_id = self.scope.get("url_route", {}).get("kwargs", {}).get("id")
        pk = await database_sync_to_async(_readable_pk)(self.user, raw_id)
        if pk is None:
            await self.shut(CLOSE_NOT_FOUND)
            return
        try:
            since = since_of(self.scope)
        except InvalidSince:
            await self.shut(CLOSE_BAD_SINCE)
            return
        self.pk = pk
        self.watch(group_name("conversation", pk), self.user_access(pk))
        await self.join_revocation()
        await self.join(group_name("conversation", pk))  # before the snapshot: see module doc
        if self.tails():
            await self.watch_frames(conversation=pk)  # likewise
        conversation = await database_sync_to_async(reads.conversation)(pk)
        if conversation is None:
            await self.gone()
            return
        if conversation.owner_id != self.user.pk and not await self.log_read(conversation):
            return
        await self.send_json(frames.snapshot_frame(conversation))
        self.last_seen = conversation.last_event_seq
        self.status = (conversation.status, conversation.pending_ask)
        self.title = conversation.title
        if since is not None and since < self.last_seen:
            await self.send_changes(conversation, after=since, replay=True)
        if self.tails():
            self.start_tail()

    async def log_read(self, conversation: Conversation) -> bool:
        """A ``SCOPE`` reader who is not the owner: one access-log entry for this socket
        (``ws-conversation``, docs/api.md "Access log"); a read that cannot be logged is not
        shown (close 1013, try again later)."""
        try:
            await database_sync_to_async(services.log_access)(
                conversation=conversation, actor=self.user, surface=AccessSurface.WS_CONVERSATION
            )
        except ConversationNotFound:
            await self.gone()
            return False
        except WriteConflict:
            await self.shut(CLOSE_TRY_LATER)
            return False
        return True

    async def send_changes(self, conversation: Conversation, *, after: int, replay: bool) -> None:
        """Send the rows changed in ``(after, conversation.last_event_seq]`` (created after
        ``after``: ``display_message_saved``, else ``display_message_updated``), then
        ``status_changed`` if the status or pending ask changed in the range (a replay: its
        ``status_event_seq`` is above ``after``; a gap fill: it differs from what was sent); more
        than 500 rows: one ``resync``. Leaves ``last_seen`` at the conversation's head."""
        upto = conversation.last_event_seq
        pk = self.conversation_pk
        changes = await database_sync_to_async(reads.changes)(pk, after=after, upto=upto)
        self.last_seen = upto
        if changes.rows is None:
            await self.send_json(frames.resync_frame(upto))
            return
        ordered: list[tuple[int, int, frames.Frame]] = []
        for row in changes.rows:
            kind = (
                "display_message_saved"
                if row.created_event_seq > after
                else "display_message_updated"
            )
            ordered.append((row.event_seq, 0, frames.row_frame(kind, pk, row, row.event_seq)))
        for child in changes.children:  # after the rows of the same event, as live
            ordered.append(
                (child.parent_event_seq, 1, frames.child_frame(pk, child, child.parent_event_seq))
            )
        for _event_seq, _order, frame in sorted(ordered, key=lambda item: item[:2]):
            await self.send_json(frame)
        current = (conversation.status, conversation.pending_ask)
        # Replay: the snapshot already holds the current status; a status change is announced when
        # the last one is after ``after``, exactly. Gap fill: when it differs from what was sent.
        changed = conversation.status_event_seq > after if replay else current != self.status
        if changed and not self.closed:
            await self.send_json(frames.status_frame(conversation, upto))
        self.status = current
        # Gap fill: a rename made by another process (a management command on the process-local
        # layer) is announced like a live one; the snapshot already carries the current title.
        if not replay and conversation.title != self.title and not self.closed:
            await self.send_json(frames.conversation_updated_frame(conversation, upto))
        self.title = conversation.title

    async def fill(self) -> None:
        """Catch up from the database to its head (the lock is held), once access is confirmed by
        a check that started after the head was read (docs/security.md): the logged frames of the
        missing events when the frame log still holds them all (docs/websocket.md "The frame
        log"), else the rows changed since."""
        read_at = time.time()
        conversation = await database_sync_to_async(reads.conversation)(self.conversation_pk)
        if conversation is None:
            await self.gone()
            return
        head = conversation.last_event_seq
        if head <= self.last_seen or self.closed or not await self.confirmed(read_at):
            return
        events = await database_sync_to_async(reads.logged_events)(
            self.conversation_pk, after=self.last_seen, upto=head
        )
        if events is None:
            await self.send_changes(conversation, after=self.last_seen, replay=False)
            return
        for event_seq, logged in events:
            await self.deliver(event_seq, logged)

    async def deny(self, code: int) -> None:
        """Lost access; a deleted conversation (``access.GONE``, found by a re-check before its
        deletion's frame came) is said with ``conversation_deleted`` first (:meth:`gone`)."""
        if code == access.GONE:
            await self.gone()
        else:
            await super().deny(code)

    async def gone(self) -> None:
        """The conversation was deleted: ``conversation_deleted``, then close 4404."""
        if self.closed:
            return
        if self.pk is not None:
            await self.send_json(frames.deleted_frame(self.pk))
        await self.shut(CLOSE_NOT_FOUND)

    # ------------------------------------------------------------------ group messages

    async def murmur_events(self, message: dict[str, Any]) -> None:
        """The frames of one committed service call, in the contract's order."""
        event_seq = message.get("event_seq")
        if self.closed or not isinstance(event_seq, int):
            return
        async with self.lock:
            if event_seq <= self.last_seen:
                return  # already covered by the snapshot, the replay or a gap fill
            # The frames come encoded (``frames.encode``, once for every socket); nothing goes
            # out before the access check answers (docs/security.md).
            check = self.start_confirming(message.get("at"))
            texts = message.get("frames", ())
            if not await self.finish_confirming(check):
                return  # lost access: closed, nothing of this event goes out
            if event_seq > self.last_seen + 1:
                await self.fill()
                if self.closed or event_seq <= self.last_seen:
                    return
            await self.deliver(event_seq, texts)

    async def deliver(self, event_seq: int, texts: Any) -> None:
        """Send the frame texts of one event as they are and move ``last_seen`` to it (the lock
        is held); nothing once the socket closed. Only a ``status_changed`` or
        ``conversation_updated`` frame is decoded (what a gap fill compares with is kept)."""
        if self.closed:
            return
        for text in texts:
            kind = frames.kind_of(text)
            if kind == "status_changed":
                frame = jsonenc.loads(text)
                self.status = (frame.get("status", ""), frame.get("pending"))
            elif kind == "conversation_updated":
                frame = jsonenc.loads(text)
                self.title = frame.get("conversation", {}).get("title", self.title)
            await self.send_text(text)
        self.last_seen = event_seq

    async def murmur_delta(self, message: dict[str, Any]) -> None:
        """Ephemeral streamed text: forwarded once access is confirmed."""
        if not self.closed and await self.confirmed(message.get("at")):
            await self.send_text(message["frame"])

    async def murmur_deleted(self, message: dict[str, Any]) -> None:
        """The conversation was deleted."""
        async with self.lock:
            await self.gone()


class UserStreamConsumer(LiveConsumer):
    """The user's conversation list: ``conversation_saved`` and ``conversation_deleted``; no
    snapshot. Closes 4401 without a user."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: dict[str, int] = {}

    async def connect(self) -> None:
        await self.accept_socket()
        if not await self.authenticate():
            return
        self.watch(group_name("sidebar", self.user.pk), self.user_access())
        await self.join_revocation()
        await self.join(group_name("sidebar", self.user.pk))
        if self.tails():
            await self.watch_frames(owner=self.user.pk)
            self.start_tail()

    async def murmur_sidebar(self, message: dict[str, Any]) -> None:
        """``conversation_saved``, unless this socket already sent that event or a later one."""
        conversation_id, event_seq = message.get("conversation_id"), message.get("event_seq")
        if self.closed or not isinstance(conversation_id, str) or not isinstance(event_seq, int):
            return
        if self.sent.get(conversation_id, -1) >= event_seq:
            return
        if not await self.confirmed(message.get("at")):
            return
        self.sent[conversation_id] = event_seq
        await self.send_text(message["frame"])

    async def murmur_deleted(self, message: dict[str, Any]) -> None:
        """``conversation_deleted``."""
        if not await self.confirmed(message.get("at")):
            return
        self.sent.pop(str(message.get("conversation_id")), None)
        await self.send_text(message["frame"])
