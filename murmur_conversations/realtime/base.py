"""What both websocket consumers share: accept-then-close, authentication and revocation groups,
ignoring client frames, and a clean shutdown (docs/websocket.md)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Final

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.contrib.auth import get_user_model

from murmur_conversations.conf import app_settings
from murmur_conversations.frames import encode
from murmur_conversations.outage import unavailable
from murmur_conversations.realtime import access, layer_is_process_local, reads
from murmur_conversations.realtime.access import Access
from murmur_conversations.realtime.access import gate as access_gate
from murmur_conversations.realtime.groups import group_name
from murmur_conversations.realtime.poller import FramePoller, poller_for
from murmur_conversations.realtime.receivers import auth_digest
from murmur_conversations.realtime.scope import SUBPROTOCOL, session_of
from murmur_conversations.realtime.shared import shared_reads

logger = logging.getLogger("murmur_conversations.realtime")

#: Client text frames up to this many UTF-8 bytes are ignored; larger ones close with 1009.
MAX_CLIENT_FRAME_BYTES: Final = 4096
#: Close codes of the contract.
CLOSE_NO_USER: Final = access.CLOSE_NO_USER
CLOSE_NOT_FOUND: Final = access.CLOSE_NOT_FOUND
CLOSE_BAD_SINCE: Final = 4400
CLOSE_TOO_BIG: Final = 1009
CLOSE_BINARY: Final = 1003
CLOSE_INTERNAL: Final = access.CLOSE_INTERNAL
CLOSE_TRY_LATER: Final = access.CLOSE_TRY_LATER


class LiveConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """Base of the two streams. Subclasses implement ``connect`` (calling :meth:`authenticate`
    right after ``accept``); on a process-local layer they watch their streams in the process's
    frame-log poller (:meth:`watch_frames`) and re-check the user (:meth:`start_tail`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.joined: list[str] = []
        self.closed = False
        self.user: Any = None
        self.digest = ""
        self.session_key = ""
        self.credential: tuple[str, str] | None = None
        self.tail_task: asyncio.Task[None] | None = None
        self.watching: list[tuple[FramePoller, Any, Any]] = []
        self.access: Access | None = None
        self.topic = ""

    async def send_json(self, content: Any, close: bool = False) -> None:
        """Send a frame, unless the socket is closed (denied): nothing is sent after the close."""
        if self.closed:
            return
        await super().send_json(content, close=close)

    async def send_text(self, text: str) -> None:
        """Send a frame already encoded (``frames.encode``: the text a layer message carries) as
        it is, as a text frame, unless the socket is closed."""
        if not self.closed:
            await self.send(text_data=text)

    @classmethod
    async def encode_json(cls, content: Any) -> str:
        """Frames built for this socket alone (a snapshot, a replay) are ``frames.encode`` text,
        as every other frame: the value cap of ``frames`` is measured on exactly these bytes
        (docs/websocket.md)."""
        return encode(content)

    # ------------------------------------------------------------------ connection

    async def accept_socket(self) -> None:
        """Accept the handshake; with the ``murmur`` subprotocol when the client offered it (a
        browser that passes its ticket in ``Sec-WebSocket-Protocol`` offers ``murmur`` too, and
        must get one protocol back: never the ticket itself)."""
        offered = self.scope.get("subprotocols") or []
        await self.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)

    async def authenticate(self) -> bool:
        """Check the scope's user, else close 4401. Joins nothing: every other check of the
        connection (the id, ``since``) comes before :meth:`join_revocation`, so a refused
        connection never subscribed to anything."""
        user = self.scope.get("user")
        if (
            user is None
            or not getattr(user, "is_authenticated", False)
            or not getattr(user, "is_active", False)
        ):
            await self.shut(CLOSE_NO_USER)
            return False
        self.user = user
        self.digest = auth_digest(user)
        ticket = self.scope.get("murmur_ticket")
        if ticket is not None:
            self.session_key, self.credential = ticket.session_key, ticket.credential
        else:
            session = self.scope.get("session")
            self.session_key = str(getattr(session, "session_key", None) or "")
        return True

    def user_access(self, conversation: Any = None, *, share_hash: str | None = None) -> Access:
        """The :class:`access.Access` of this socket's user (None for an anonymous share
        reader), session and credential, reading ``conversation`` or the share link whose token
        hashes to ``share_hash``."""
        return Access(
            user_pk=None if self.user is None else self.user.pk,
            digest=self.digest,
            session_key=self.session_key,
            credential=self.credential,
            conversation=conversation,
            share_hash=share_hash,
        )

    def watch(self, topic: str, access: Access) -> None:
        """Have the process's access gate watch this socket under ``topic`` (docs/security.md):
        its access is confirmed before each event's frames and re-checked while idle."""
        self.access, self.topic = access, topic
        access_gate().watch(topic, self)

    async def confirmed(self, at: Any = None) -> bool:
        """Whether this socket may still receive news published at ``at`` (the publisher's
        ``time.time()``; now when absent); closes it 4401/4404 when not (``Gate.confirm``)."""
        if self.closed:
            return False
        if self.access is None:
            return True
        if isinstance(at, bool) or not isinstance(at, int | float):
            at = time.time()
        return await access_gate().confirm(self.topic, self, float(at))

    def start_confirming(self, at: Any = None) -> asyncio.Future[dict[int, int]] | None:
        """Start (or join) the access check that covers news published at ``at``, without
        waiting: frames are prepared meanwhile, then :meth:`finish_confirming` decides."""
        if self.closed or self.access is None:
            return None
        if isinstance(at, bool) or not isinstance(at, int | float):
            at = time.time()
        return access_gate().start(self.topic, float(at))

    async def finish_confirming(self, check: asyncio.Future[dict[int, int]] | None) -> bool:
        """The answer of :meth:`start_confirming`'s check (a denied socket is closed)."""
        if self.closed:
            return False
        if check is None:
            return True
        return await access_gate().settle(self, check)

    async def deny(self, code: int) -> None:
        """Lost access: close with ``code`` (4401 or 4404; ``access.GONE`` closes 4404)."""
        await self.shut(CLOSE_NOT_FOUND if code == access.GONE else code)

    async def join_revocation(self) -> None:
        """Join the groups that revoke this socket: the user's (deactivation, password change,
        deletion), the session's (logout, deletion) and its API token's (deletion). An anonymous
        share reader has none of them and joins nothing."""
        if self.user is None:
            return
        await self.join(group_name("user", self.user.pk))
        session = session_of(self.scope)
        if session:
            await self.join(group_name("session", session))
        if self.credential is not None:
            await self.join(group_name("credential", ":".join(self.credential)))

    async def join(self, group: str) -> None:
        """Subscribe to ``group`` (nothing without a channel layer). A layer connection left stale
        by a layer restart (Redis came back) fails once and is reopened, so one retry follows."""
        if self.channel_layer is None:
            return
        try:
            await self.channel_layer.group_add(group, self.channel_name)
        except Exception as error:
            logger.warning("joining %s failed, retrying once: %r", group, error)
            await self.channel_layer.group_add(group, self.channel_name)
        self.joined.append(group)

    async def leave(self) -> None:
        """Unsubscribe from every group joined; layer errors are logged, never raised."""
        joined, self.joined = self.joined, []
        for group in joined:
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception as error:  # a dead layer must not break the shutdown
                logger.warning("leaving %s failed: %r", group, error)

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch, but an error in a handler closes the socket instead of crashing
        the consumer without a close frame: 1013 when a service is unreachable (the database or
        the channel layer's Redis: ``outage.unavailable``, logged in one line), else 1011 (logged
        with its traceback). Both tell the client to reconnect."""
        try:
            await super().dispatch(message)
        except StopConsumer:
            raise
        except Exception as error:
            kind = message.get("type")
            if unavailable(error):
                logger.warning(
                    "websocket %s: a service failed on %r: %r", self.channel_name, kind, error
                )
                code = CLOSE_TRY_LATER
            else:
                logger.exception("websocket %s failed on %r", self.channel_name, kind)
                code = CLOSE_INTERNAL
            with contextlib.suppress(Exception):
                await self.shut(code)

    async def shut(self, code: int) -> None:
        """Close with ``code`` once; stop the tail and leave the groups."""
        if self.closed:
            return
        self.closed = True
        self.forget()
        self.stop_tail()
        await self.close(code)
        await self.leave()

    def forget(self) -> None:
        if self.access is not None:
            access_gate().forget(self.topic, self)

    async def disconnect(self, code: int) -> None:
        self.closed = True
        self.forget()
        task = self.stop_tail()
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.leave()

    # ------------------------------------------------------------------ client frames

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The server acts on no client frame: text up to 4 KiB is ignored, larger text closes
        1009, binary closes 1003."""
        if self.closed:
            return
        if bytes_data is not None:
            await self.shut(CLOSE_BINARY)
        elif text_data is not None and (
            len(text_data) > MAX_CLIENT_FRAME_BYTES
            or len(text_data.encode("utf-8", "surrogatepass")) > MAX_CLIENT_FRAME_BYTES
        ):
            await self.shut(CLOSE_TOO_BIG)

    # ------------------------------------------------------------------ revocation

    async def murmur_auth(self, message: dict[str, Any]) -> None:
        """The user was saved: close 4401 if inactive now or the password changed."""
        if not message.get("active") or message.get("digest") != self.digest:
            await self.shut(CLOSE_NO_USER)

    async def murmur_revoke(self, message: dict[str, Any]) -> None:
        """The session or API token ended (4401), or the share link was revoked (4404)."""
        await self.shut(
            CLOSE_NOT_FOUND if message.get("code") == CLOSE_NOT_FOUND else CLOSE_NO_USER
        )

    async def murmur_recheck(self, message: dict[str, Any]) -> None:
        """Something this socket's access depends on changed (an owner, a ``SCOPE`` the host
        re-checks through ``access.recheck``): confirm it now."""
        await self.confirmed(message.get("at"))

    async def check_user(self) -> None:
        """Re-read the user (tail only): close 4401 when gone, inactive or its password changed;
        nothing to re-read for an anonymous share reader."""
        if self.user is None:
            return
        pk = self.user.pk
        user = await shared_reads().read(
            ("user", pk),
            window=app_settings.db_tail_interval * 4,  # sockets of a user share one read
            fetch=lambda: database_sync_to_async(reads.user_state)(get_user_model(), pk),
        )
        if user is None or not user.is_active or auth_digest(user) != self.digest:
            await self.shut(CLOSE_NO_USER)

    # ------------------------------------------------------------------ database tail

    def tails(self) -> bool:
        """Whether this socket needs the process's frame-log poller: the layer cannot carry other
        processes' events (docs/websocket.md, "Deployment")."""
        return layer_is_process_local(self.channel_layer)

    async def watch_frames(self, *, conversation: Any = None, owner: Any = None) -> None:
        """Have the process's poller deliver other processes' frames of ``conversation`` and/or
        of the user ``owner`` to this socket's groups (docs/websocket.md "The frame log"). Called
        before the snapshot is read, like the group join."""
        poller = poller_for(self.channel_layer)
        await poller.watch(conversation=conversation, owner=owner)
        self.watching.append((poller, conversation, owner))

    def start_tail(self) -> None:
        """Re-check the user every ``8 * DB_TAIL_INTERVAL`` seconds until the socket closes (an
        anonymous share reader has no user: no tail)."""
        if self.user is None:
            return
        self.tail_task = asyncio.ensure_future(self._tail_loop())

    def stop_tail(self) -> asyncio.Task[None] | None:
        watching, self.watching = self.watching, []
        for poller, conversation, owner in watching:
            poller.unwatch(conversation=conversation, owner=owner)
        task, self.tail_task = self.tail_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            return task
        return None

    async def _tail_loop(self) -> None:
        while not self.closed:
            await asyncio.sleep(app_settings.db_tail_interval * 8)
            try:
                if not self.closed:
                    await self.check_user()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a database hiccup must not end the checks for good
                logger.warning("user check of %s failed: %r", self.channel_name, error)
