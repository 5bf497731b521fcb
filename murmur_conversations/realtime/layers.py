"""A process-local channel layer whose work grows linearly with the members reached
(docs/websocket.md "Deployment").

The stock ``InMemoryChannelLayer`` scans every channel and group on each receive and group send,
so its cost grows with everything connected to the process. This layer keeps a reverse index from
channels to groups and checks expiry only on the channel it touches: ``group_send`` costs one step
per member of the group, ``send`` and ``receive`` a constant. It is thread-safe: messages may be
sent from any thread or event loop (the broadcaster's sender thread does) and wake receivers on
their own loops. ``work`` counts the steps, so tests can measure cost without clocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections import deque
from copy import deepcopy
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer

__all__ = ["ProcessLocalChannelLayer"]


class _Channel:
    __slots__ = ("messages", "waiters")

    def __init__(self) -> None:
        self.messages: deque[tuple[float, dict[str, Any]]] = deque()
        self.waiters: list[tuple[asyncio.Future[None], asyncio.AbstractEventLoop]] = []


def _check_message(message: Any) -> None:
    if not isinstance(message, dict):
        raise TypeError(f"a channel layer message is a dict, not {type(message).__name__}")


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class ProcessLocalChannelLayer(BaseChannelLayer):  # type: ignore[misc]
    """Channels layer API (``send``, ``receive``, ``new_channel``, groups, ``flush``) for one process.

    Options as the stock in-memory layer: ``expiry`` (seconds a message waits, 60),
    ``group_expiry`` (seconds a membership lasts, 86400), ``capacity`` (messages a channel holds,
    100) and ``channel_capacity`` (glob or regex -> capacity). ``send`` to a full channel raises
    ``ChannelFull``; ``group_send`` skips full members. A channel whose messages expire unread is
    removed from its groups, as its consumer is gone.
    """

    extensions = ["groups", "flush"]
    #: Read by ``realtime.layer_is_process_local()``.
    process_local = True

    def __init__(
        self,
        expiry: float = 60,
        group_expiry: float = 86400,
        capacity: int = 100,
        channel_capacity: dict[Any, int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(expiry=expiry, capacity=capacity, **kwargs)
        self.channel_capacity = self.compile_capacities(channel_capacity or {})
        self.group_expiry = group_expiry
        self.work = 0
        self._lock = threading.Lock()
        self._channels: dict[str, _Channel] = {}
        self._groups: dict[str, dict[str, float]] = {}
        self._memberships: dict[str, set[str]] = {}

    # ------------------------------------------------------------------ internals (lock held)

    def _forget(self, channel: str) -> None:
        for group in self._memberships.pop(channel, ()):
            members = self._groups.get(group)
            if members is not None:
                members.pop(channel, None)
                if not members:
                    del self._groups[group]
        self._channels.pop(channel, None)

    def _expire(self, channel: str, state: _Channel, now: float) -> bool:
        """Drop expired messages at the head; True (and the channel forgotten) if any expired."""
        expired = False
        while state.messages and state.messages[0][0] < now:
            state.messages.popleft()
            self.work += 1
            expired = True
        if expired and not state.waiters:
            self._forget(channel)
        return expired

    def _put(
        self, channel: str, message: dict[str, Any], now: float
    ) -> tuple[bool, list[tuple[asyncio.Future[None], asyncio.AbstractEventLoop]]]:
        self.work += 1
        state = self._channels.get(channel)
        if state is not None and self._expire(channel, state, now):
            state = self._channels.get(channel)
        if state is None:
            state = self._channels[channel] = _Channel()
        if len(state.messages) >= self.get_capacity(channel):
            return False, []
        state.messages.append((now + self.expiry, message))
        waiters, state.waiters = state.waiters, []
        return True, waiters

    @staticmethod
    def _wake_all(waiters: list[tuple[asyncio.Future[None], asyncio.AbstractEventLoop]]) -> None:
        for future, loop in waiters:
            # A closed loop raises RuntimeError: that receiver is gone, nobody waits any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_wake, future)

    # ------------------------------------------------------------------ channel layer API

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        """Put a copy of ``message`` on ``channel``; ``ChannelFull`` when it holds ``capacity``,
        ``TypeError`` for a message that is not a dict or a bad channel name, ``ValueError`` for a
        message carrying ``__asgi_channel__``."""
        _check_message(message)
        self.require_valid_channel_name(channel)
        if "__asgi_channel__" in message:
            raise ValueError("a message sent to a channel cannot carry __asgi_channel__")
        copy = deepcopy(message)
        with self._lock:
            accepted, waiters = self._put(channel, copy, time.time())
        self._wake_all(waiters)
        if not accepted:
            raise ChannelFull(channel)

    async def receive(self, channel: str) -> dict[str, Any]:
        """The next message on ``channel``, waiting for one. Cancelling the wait (the consumer is
        exiting) forgets the channel and its group memberships."""
        self.require_valid_channel_name(channel)
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                state = self._channels.get(channel)
                if state is not None:
                    self._expire(channel, state, time.time())
                    state = self._channels.get(channel)
                if state is None:
                    state = self._channels[channel] = _Channel()
                if state.messages:
                    self.work += 1
                    return state.messages.popleft()[1]
                future: asyncio.Future[None] = loop.create_future()
                state.waiters.append((future, loop))
            try:
                await future
            except asyncio.CancelledError:
                with self._lock:
                    self._forget(channel)
                raise

    async def new_channel(self, prefix: str = "specific.") -> str:
        """A new process-specific channel name."""
        return f"{prefix}.local!{uuid.uuid4().hex}"

    async def group_add(self, group: str, channel: str) -> None:
        """Add ``channel`` to ``group`` (renewing the membership)."""
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        with self._lock:
            self.work += 1
            self._groups.setdefault(group, {})[channel] = time.time()
            self._memberships.setdefault(channel, set()).add(group)

    async def group_discard(self, group: str, channel: str) -> None:
        """Remove ``channel`` from ``group``; nothing if it is not a member."""
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        with self._lock:
            self.work += 1
            members = self._groups.get(group)
            if members is not None:
                members.pop(channel, None)
                if not members:
                    del self._groups[group]
            groups = self._memberships.get(channel)
            if groups is not None:
                groups.discard(group)
                if not groups:
                    del self._memberships[channel]

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """Put a copy of ``message`` on every member of ``group``: one step per member; full members
        are skipped and expired memberships end. ``TypeError`` for a message that is not a dict
        or a bad group name."""
        self.group_send_now(group, message)

    def group_send_now(self, group: str, message: dict[str, Any]) -> None:
        """``group_send`` without an event loop, from any thread: the broadcaster calls it on the
        writer's own thread after commit, so a write costs no thread hop (docs/websocket.md
        "Deployment"). Same behaviour and errors as ``group_send``."""
        _check_message(message)
        self.require_valid_group_name(group)
        with self._lock:
            members = list(self._groups.get(group, {}).items())
        if not members:
            return
        copies = [(channel, joined, deepcopy(message)) for channel, joined in members]
        now = time.time()
        to_wake: list[tuple[asyncio.Future[None], asyncio.AbstractEventLoop]] = []
        with self._lock:
            for channel, joined, copy in copies:
                if joined < now - self.group_expiry:
                    self.work += 1
                    self._groups.get(group, {}).pop(channel, None)
                    continue
                _accepted, waiters = self._put(channel, copy, now)
                to_wake.extend(waiters)
        self._wake_all(to_wake)

    def group_members(self, group: str) -> list[str]:
        """The channels in ``group`` now, without expiring anything (for inspection and tests)."""
        with self._lock:
            return sorted(self._groups.get(group, {}))

    def channel_names(self) -> list[str]:
        """The channels this layer holds state for now (messages or a waiting receiver)."""
        with self._lock:
            return sorted(self._channels)

    async def flush(self) -> None:
        """Forget every channel, message and group."""
        with self._lock:
            waiters = [w for state in self._channels.values() for w in state.waiters]
            self._channels.clear()
            self._groups.clear()
            self._memberships.clear()
        self._wake_all(waiters)

    async def close(self) -> None:
        """Nothing to release."""
