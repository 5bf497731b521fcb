"""Shared database reads for the database tail (docs/websocket.md, "Deployment").

On a process-local layer every socket polls the database every ``DB_TAIL_INTERVAL``. Sockets of the
same conversation (or user) in one process ask the same question at nearly the same time, so a
read started by one of them is shared with the others that ask within half an interval: a thousand
sockets on one conversation cost one query per interval, not a thousand.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")
_PRUNE_AT = 1024


class SharedReads:
    """One in-flight or recent read per key, shared by the callers of one event loop."""

    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[float, asyncio.Future[Any]]] = {}

    async def read(self, key: Hashable, *, window: float, fetch: Callable[[], Awaitable[T]]) -> T:
        """The result of ``fetch()``, or of the read of ``key`` started less than ``window``
        seconds ago (its exception too). A caller cancelled while waiting never cancels the
        shared read."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        entry = self._entries.get(key)
        if entry is None or now - entry[0] >= window:
            if len(self._entries) >= _PRUNE_AT:
                self._entries = {k: e for k, e in self._entries.items() if now - e[0] < window}
            future: asyncio.Future[Any] = asyncio.ensure_future(fetch())
            future.add_done_callback(_consume_exception)
            entry = (now, future)
            self._entries[key] = entry
        result: T = await asyncio.shield(entry[1])
        return result


def _consume_exception(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved by the waiters; never "exception was never retrieved"


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SharedReads] = (
    weakref.WeakKeyDictionary()
)


def shared_reads() -> SharedReads:
    """The :class:`SharedReads` of the running event loop."""
    loop = asyncio.get_running_loop()
    reads = _by_loop.get(loop)
    if reads is None:
        reads = _by_loop[loop] = SharedReads()
    return reads
