"""The read-only stream of a live share link, ``ws/shared/<token>/`` (docs/websocket.md "Share
links", docs/security.md).

It shows exactly what ``GET shared/<token>/`` shows and nothing more: the shared summary (no id,
owner, organising fields or fork origin) and display rows as ``representations.shared_row``
writes them (no row id, feedback or private tool arguments; injected context left out). Frames
carry no ``conversation_id``; streamed deltas are not sent. Only a live link opens one (a
snapshot link never changes); a ``require_login`` link needs a signed-in, active user (cookie or
ticket, as the other streams). The link's revocation closes the socket at once (4404), its expiry
at the next re-check (within 5 s), and every event's frames wait for the link to be confirmed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from channels.db import database_sync_to_async

from murmur_conversations.conf import app_settings
from murmur_conversations.models import Conversation, Share, ShareMode
from murmur_conversations.realtime import reads
from murmur_conversations.realtime.base import CLOSE_NOT_FOUND, LiveConsumer
from murmur_conversations.realtime.groups import group_name
from murmur_conversations.representations import iso, shared_row, shared_row_shown, shared_summary
from murmur_conversations.selectors import share_for_token


def _live_share(token: Any) -> Share | None:
    share = share_for_token(token)
    return share if share is not None and share.mode == ShareMode.LIVE else None


class SharedConsumer(LiveConsumer):
    """``ws/shared/<token>/``: ``snapshot`` (the shared summary and the link), then
    ``display_message_saved`` / ``display_message_updated`` (``message``: the shared row),
    ``conversation_updated`` (``conversation``: the shared summary) and ``resync``, each with
    ``event_seq``. Closes 4404 for a token that opens nothing (malformed, unknown, revoked,
    expired, or a snapshot link) and once the link ends; 4401 when the link needs a login."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pk: uuid.UUID | None = None
        self.last_seen = 0
        self.summary: dict[str, Any] = {}
        self.lock = asyncio.Lock()

    async def connect(self) -> None:
        await self.accept_socket()
        token = self.scope.get("url_route", {}).get("kwargs", {}).get("token")
        share = await database_sync_to_async(_live_share)(token)
        if share is None:
            await self.shut(CLOSE_NOT_FOUND)
            return
        # no user, a bad ticket, a disabled user: 4401
        if share.require_login and not await self.authenticate():
            return
        self.pk = share.conversation_id
        self.watch(group_name("share", share.pk), self.user_access(share_hash=share.token_hash))
        await self.join(group_name("share", share.pk))
        await self.join_revocation()  # nothing for an anonymous reader
        await self.join(group_name("conversation", share.conversation_id))
        if self.tails():  # other processes' writes, through the frame-log poller
            await self.watch_frames(conversation=share.conversation_id)
        conversation = await database_sync_to_async(reads.conversation)(share.conversation_id)
        if conversation is None:
            await self.shut(CLOSE_NOT_FOUND)
            return
        self.summary = shared_summary(conversation)
        self.last_seen = conversation.last_event_seq
        await self.send_json(
            {
                "type": "snapshot",
                "event_seq": conversation.last_event_seq,
                "conversation": self.summary,
                "share": {
                    "mode": share.mode,
                    "expires_at": iso(share.expires_at),
                    "require_login": share.require_login,
                },
            }
        )
        if self.tails():
            self.start_tail()

    async def send_shared_changes(self, conversation: Conversation) -> None:
        """The shared rows changed after ``last_seen`` up to the conversation's head, then the
        summary when it changed; more than 500 rows: one ``resync``."""
        upto = conversation.last_event_seq
        assert self.pk is not None
        changes = await database_sync_to_async(reads.changes)(
            self.pk, after=self.last_seen, upto=upto
        )
        after, self.last_seen = self.last_seen, upto
        if changes.rows is None:
            await self.send_json({"type": "resync", "event_seq": upto})
            return
        private = app_settings.private_tools
        for row in changes.rows:
            if not shared_row_shown(row):
                continue
            kind = (
                "display_message_saved"
                if row.created_event_seq > after
                else "display_message_updated"
            )
            await self.send_json(
                {
                    "type": kind,
                    "event_seq": row.event_seq,
                    "message": shared_row(row, private_tools=private),
                }
            )
        summary = shared_summary(conversation)
        if summary != self.summary:
            self.summary = summary
            await self.send_json(
                {"type": "conversation_updated", "event_seq": upto, "conversation": summary}
            )

    async def catch_up(self, at: float) -> None:
        """Send what changed since ``last_seen``, once the link (and the reader) are confirmed
        for news of ``at``; nothing to send costs no access check."""
        async with self.lock:
            if self.closed or self.pk is None:
                return
            conversation = await database_sync_to_async(reads.conversation)(self.pk)
            if conversation is None:
                await self.shut(CLOSE_NOT_FOUND)
            elif conversation.last_event_seq > self.last_seen and await self.confirmed(at):
                await self.send_shared_changes(conversation)

    async def murmur_events(self, message: dict[str, Any]) -> None:
        """A committed write: the shared view of what it changed (read from the database)."""
        event_seq = message.get("event_seq")
        if isinstance(event_seq, int) and event_seq > self.last_seen:
            at = message.get("at")
            await self.catch_up(float(at) if isinstance(at, int | float) else time.time())

    async def murmur_delta(self, message: dict[str, Any]) -> None:
        """Streamed text is not shown on a share link (the saved row is)."""

    async def murmur_deleted(self, message: dict[str, Any]) -> None:
        """The conversation was deleted: close 4404, naming nothing."""
        await self.shut(CLOSE_NOT_FOUND)
