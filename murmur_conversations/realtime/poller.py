"""The database tail of a process-local channel layer: ONE poller per process (docs/websocket.md
"The frame log").

Every write logs its frames (``FrameLogEntry``) in its own transaction. The poller reads the rows
after its cursor every ``DB_TAIL_INTERVAL`` seconds in one query, whatever the number of sockets,
and hands the frames of the rows that another process wrote to the groups of the conversations and
users its sockets watch, as the same layer messages the signal receivers publish
(``murmur.events``, ``murmur.sidebar``, ``murmur.deleted``). Only the consumers whose stream moved
wake; they treat those messages exactly as their own process's, so a socket gets the same frames
in the same order whichever process wrote.

Ids are taken when a row is inserted and become visible when its transaction commits, so a later id
may be read before an earlier one. An id the poller passed without seeing is a *hole*: it is read
again (in the same query) until it shows up or :data:`HOLE_SECONDS` have passed (a write rolled
back leaves its id unused for ever).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
import weakref
from collections import Counter
from typing import Any, Final

from channels.db import database_sync_to_async

from murmur_conversations.conf import app_settings
from murmur_conversations.frames import deleted_frame, encode, logged_texts, process_origin
from murmur_conversations.realtime import reads
from murmur_conversations.realtime.groups import group_name

logger = logging.getLogger("murmur_conversations.realtime")

#: Seconds an id the poller passed without seeing stays looked for.
HOLE_SECONDS: Final = 10.0
#: Holes looked for at most; the oldest are given up first.
MAX_HOLES: Final = 1000
#: Reads made by every poller of the process (``queries_made``).
_made = [0]


class FramePoller:
    """The frame-log tail of one process (one event loop and channel layer); see the module
    docstring. Consumers call :meth:`watch` before reading their snapshot, so every write committed
    after it reaches them, and :meth:`unwatch` when they close. The poller runs while anything is
    watched. ``queries`` counts the database reads it made (for monitoring; tests count queries
    on the connection)."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.conversations: Counter[uuid.UUID] = Counter()
        self.owners: Counter[str] = Counter()
        self.cursor: int | None = None
        self.holes: dict[int, float] = {}
        self.task: asyncio.Task[None] | None = None
        self.queries = 0
        self._start = asyncio.Lock()

    # ------------------------------------------------------------------ watching

    async def watch(self, *, conversation: uuid.UUID | None = None, owner: Any = None) -> None:
        """Deliver the frames of ``conversation`` (its group) and/or of the user ``owner`` (the
        sidebar group) from now on; starts the poller (reading where the log ends) if needed."""
        if conversation is not None:
            self.conversations[conversation] += 1
        if owner is not None:
            self.owners[str(owner)] += 1
        try:
            await self._begin()
        except Exception as error:  # the loop retries; the socket still gets its own process's
            logger.warning("the frame-log poller could not start: %r", error)
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._run())

    async def _begin(self) -> None:
        """Read where the log ends, once (until :meth:`stop`)."""
        async with self._start:
            if self.cursor is None:
                cursor, holes = await database_sync_to_async(reads.frame_log_start)()
                self._count()
                now = asyncio.get_running_loop().time()
                self.cursor, self.holes = cursor, dict.fromkeys(holes, now)

    def unwatch(self, *, conversation: uuid.UUID | None = None, owner: Any = None) -> None:
        """Undo one :meth:`watch`; the poller stops when nothing is watched (and starts afresh)."""
        if conversation is not None:
            self.conversations[conversation] -= 1
            if self.conversations[conversation] <= 0:
                del self.conversations[conversation]
        if owner is not None:
            key = str(owner)
            self.owners[key] -= 1
            if self.owners[key] <= 0:
                del self.owners[key]
        if not self.conversations and not self.owners:
            self.stop()

    def stop(self) -> None:
        """End the loop; the next :meth:`watch` starts from the end of the log."""
        task, self.task = self.task, None
        self.cursor, self.holes = None, {}
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    # ------------------------------------------------------------------ polling

    async def _run(self) -> None:
        while self.conversations or self.owners:
            await asyncio.sleep(app_settings.db_tail_interval)
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a database hiccup must not end the tail for good
                logger.warning("the frame-log poller failed: %r", error)

    async def tick(self) -> int:
        """One poll: one query (another at once only while pages come back full); deliver what
        moved. Returns the number of rows read. A poller that could not read where the log ends
        when it started reads it first."""
        await self._begin()
        total = 0
        while self.cursor is not None and (self.conversations or self.owners):
            cursor = self.cursor
            now = asyncio.get_running_loop().time()
            self.holes = {i: seen for i, seen in self.holes.items() if now - seen < HOLE_SECONDS}
            rows = await database_sync_to_async(reads.frame_log_after)(
                cursor,
                sorted(self.holes),
                conversations=list(self.conversations),
                owners=list(self.owners),
                origin=process_origin(),
            )
            self._count()
            total += len(rows)
            for row in rows:
                await self._deliver(row, now)
            if len(rows) < reads.LOG_PAGE:
                return total
        return total

    def _count(self) -> None:
        self.queries += 1
        _made[0] += 1

    async def _deliver(self, row: reads.Logged, now: float) -> None:
        cursor = self.cursor or 0
        if row.id > cursor:
            for missing in range(cursor + 1, row.id):
                self.holes[missing] = now
            if len(self.holes) > MAX_HOLES:
                for oldest in sorted(self.holes)[: len(self.holes) - MAX_HOLES]:
                    del self.holes[oldest]
            self.cursor = row.id
        else:
            self.holes.pop(row.id, None)
        if not row.frames and not row.sidebar:
            return  # nobody here watches it, or this process wrote it (and delivered it)
        conversation_id = str(row.conversation_id)
        watched = row.conversation_id in self.conversations
        owner_watched = bool(row.owner) and row.owner in self.owners
        if row.deleted:
            message = {
                "type": "murmur.deleted",
                "conversation_id": conversation_id,
                "frame": encode(deleted_frame(row.conversation_id)),
            }
            if watched:
                await self._send(group_name("conversation", row.conversation_id), message)
            if owner_watched:
                await self._send(group_name("sidebar", row.owner), message)
            return
        if watched and row.frames and row.event_seq > 0:
            await self._send(
                group_name("conversation", row.conversation_id),
                {
                    "type": "murmur.events",
                    "event_seq": row.event_seq,
                    "frames": logged_texts(row.frames),
                },
            )
        if owner_watched and row.sidebar:
            await self._send(
                group_name("sidebar", row.owner),
                {
                    "type": "murmur.sidebar",
                    "conversation_id": conversation_id,
                    "event_seq": row.event_seq,
                    "frame": row.sidebar,
                },
            )

    async def _send(self, group: str, message: dict[str, Any]) -> None:
        try:
            await self.layer.group_send(group, message)
        except Exception as error:  # one full or broken channel must not stop the others
            logger.warning("the frame-log poller could not deliver to %s: %r", group, error)


_pollers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, FramePoller]] = (
    weakref.WeakKeyDictionary()
)


def poller_for(layer: Any) -> FramePoller:
    """The :class:`FramePoller` of the running event loop and ``layer``."""
    loop = asyncio.get_running_loop()
    by_layer = _pollers.setdefault(loop, {})
    poller = by_layer.get(id(layer))
    if poller is None or poller.layer is not layer:
        poller = by_layer[id(layer)] = FramePoller(layer)
    return poller


def queries_made() -> int:
    """The database reads every poller of this process made so far (monitoring, the benchmark)."""
    return _made[0]


def stop_all() -> None:
    """Stop every poller of the running event loop (tests; a server shutting down)."""
    with contextlib.suppress(RuntimeError):
        for poller in _pollers.get(asyncio.get_running_loop(), {}).values():
            poller.stop()
