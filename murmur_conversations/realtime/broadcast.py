"""Delivery to the channel layer off the write path (docs/websocket.md, "Deployment").

Receivers call :meth:`Broadcaster.publish`. With a layer that delivers without waiting (the
process-local layer's ``group_send_now``: a few dictionary operations under a lock) the message is
delivered at once on the caller's thread, so a write costs no thread hop. With any other layer
``publish`` only puts ``(group, message)`` on a bounded queue and returns at once; one daemon thread
with its own event loop drains the queue with ``group_send``, each bounded by a timeout. A slow, dead or missing layer therefore never blocks or
fails a write: a full queue drops the event, a failing or hanging ``group_send`` is abandoned, and
both are counted and logged under ``murmur_conversations.realtime``. Clients recover anything missed
with ``?since=``. At interpreter exit the queue is flushed for a short while, so a management
command's events still reach a shared layer such as Redis.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Final

logger = logging.getLogger("murmur_conversations.realtime")

#: Events waiting for the sender; more are dropped.
QUEUE_SIZE: Final = 10_000
#: Seconds one ``group_send`` may take before it is abandoned.
SEND_TIMEOUT: Final = 5.0
#: Seconds the queue is given to drain at interpreter exit.
EXIT_FLUSH_TIMEOUT: Final = 3.0

Item = tuple[str, dict[str, Any]]


def _default_layer() -> Any:
    from channels.layers import get_channel_layer

    return get_channel_layer()


class Broadcaster:
    """A bounded queue of ``(group, message)`` drained by one sender thread.

    Counters (ints, for monitoring and tests): ``sent``, ``dropped`` (queue full or no layer when
    sending), ``failed`` (``group_send`` raised or timed out).
    """

    def __init__(
        self,
        *,
        maxsize: int = QUEUE_SIZE,
        send_timeout: float = SEND_TIMEOUT,
        layer: Callable[[], Any] = _default_layer,
    ) -> None:
        self._maxsize = maxsize
        self._send_timeout = send_timeout
        self._layer = layer
        self._queue: queue.Queue[Item | None] = queue.Queue(maxsize)
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._start_lock = threading.Lock()
        self._stopping = False
        self.sent = 0
        self.dropped = 0
        self.failed = 0

    # ------------------------------------------------------------------ producer side

    def publish(self, group: str, message: dict[str, Any]) -> bool:
        """Deliver ``message`` to ``group`` at once when the layer can without waiting, else queue
        it; never blocks. False (logged, counted) if it was dropped because the queue is full or
        the broadcaster is stopped, or failed."""
        if self._stopping:
            self._drop(group, "the broadcaster is stopped")
            return False
        try:
            deliver = getattr(self._layer(), "group_send_now", None)
        except Exception:  # a broken layer configuration: the sender thread reports it
            deliver = None
        if deliver is not None and not self._queue.unfinished_tasks:  # nothing queued to overtake
            try:
                deliver(group, message)
            except Exception as error:  # a bad message must not fail the write
                self.failed += 1
                logger.warning(
                    "live update for %s failed: %r (%d failed so far)", group, error, self.failed
                )
                return False
            self.sent += 1
            return True
        self._ensure_thread()
        try:
            self._queue.put_nowait((group, message))
        except queue.Full:
            self._drop(group, f"the queue is full ({self._maxsize} events)")
            return False
        return True

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until every queued event was handled; True if so."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._queue.all_tasks_done.wait(remaining)
        return True

    def stop(self, timeout: float = EXIT_FLUSH_TIMEOUT) -> None:
        """Flush for up to ``timeout`` seconds, then end the sender thread; later events drop."""
        self.flush(timeout)
        self._stopping = True
        thread = self._thread
        if thread is not None and thread.is_alive():
            with contextlib.suppress(queue.Full):  # else the daemon thread dies with the process
                self._queue.put_nowait(None)
            thread.join(timeout)

    def _drop(self, group: str, reason: str) -> None:
        self.dropped += 1
        count = self.dropped
        # Every drop is counted; the log shows the first and then every power of two, so a dead
        # layer under load cannot flood it.
        if count & (count - 1) == 0:
            logger.warning(
                "live update for %s dropped: %s (%d dropped so far)", group, reason, count
            )
        else:
            logger.debug("live update for %s dropped: %s", group, reason)

    def _ensure_thread(self) -> None:
        thread = self._thread
        if thread is not None and self._pid == os.getpid():
            return
        with self._start_lock:
            if self._thread is not None and self._pid == os.getpid():
                return
            if self._pid != os.getpid():  # forked: the parent's thread and queue are not ours
                self._pid = os.getpid()
                self._queue = queue.Queue(self._maxsize)
            self._thread = threading.Thread(
                target=self._run, name="murmur-realtime-sender", daemon=True
            )
            self._thread.start()

    # ------------------------------------------------------------------ sender thread

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            while True:
                item = self._queue.get()
                try:
                    if item is None:
                        return
                    loop.run_until_complete(self._send(*item))
                finally:
                    self._queue.task_done()
        finally:
            loop.close()

    async def _send(self, group: str, message: dict[str, Any]) -> None:
        try:
            layer = self._layer()
            if layer is None:
                self._drop(group, "no channel layer is configured")
                return
            await asyncio.wait_for(layer.group_send(group, message), self._send_timeout)
        except Exception as error:  # a broken layer must not end the sender
            self.failed += 1
            logger.warning(
                "live update for %s failed: %r (%d failed so far)", group, error, self.failed
            )
        else:
            self.sent += 1


_broadcaster = Broadcaster()


def get_broadcaster() -> Broadcaster:
    """The process-wide broadcaster used by the signal receivers."""
    return _broadcaster


def set_broadcaster(broadcaster: Broadcaster) -> Broadcaster:
    """Replace the process-wide broadcaster (tests, custom queue sizes); returns the old one."""
    global _broadcaster
    old, _broadcaster = _broadcaster, broadcaster
    return old


@atexit.register
def _flush_at_exit() -> None:
    _broadcaster.flush(EXIT_FLUSH_TIMEOUT)
