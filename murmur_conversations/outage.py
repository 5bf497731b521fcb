"""Outages of the services the app depends on: the database restarted or unreachable, the channel
layer's Redis down (docs/deployment.md "Outages").

An error that says a service cannot be reached right now is not the request's fault and not a
denial: it is answered "try again" (HTTP 503 with ``Retry-After``, websocket close 1013), and the
database connections it left dead are replaced, without any extra round trip while the database is
healthy (the pool is checked only after a failure, never on each checkout).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, TypeVar

from django.db import InterfaceError, OperationalError, connections

__all__ = [
    "RETRY_AFTER_SECONDS",
    "caused_by_database_outage",
    "database_unavailable",
    "replace_dead_connections",
    "retry_once",
    "unavailable",
]

logger = logging.getLogger("murmur_conversations.outage")

#: Seconds a client is told to wait (``Retry-After``) before retrying during an outage.
RETRY_AFTER_SECONDS: Final = 2
#: Exception class names of redis-py that mean the server cannot be reached (matched by name on
#: classes of the ``redis`` package, so the core does not import an optional dependency).
_REDIS_OUTAGES: Final = frozenset({"ConnectionError", "TimeoutError", "BusyLoadingError"})

R = TypeVar("R")


def database_unavailable(error: BaseException) -> bool:
    """Whether ``error`` is Django's ``OperationalError`` or ``InterfaceError``: the database
    could not run the statement (a connection lost to a restart, a server that refuses
    connections, a pool with none to give, a lock it timed out on), as opposed to a statement it
    refused. Such a statement may be retried once the database answers again."""
    return isinstance(error, OperationalError | InterfaceError)


def caused_by_database_outage(error: BaseException) -> bool:
    """Whether ``error`` or an exception it was raised from or during (``__cause__``,
    ``__context__``) is :func:`database_unavailable` (a ``WriteConflict`` from a lost
    connection, say)."""
    seen: BaseException | None = error
    for _depth in range(16):  # a chain is short; a cycle must not loop forever
        if seen is None:
            return False
        if database_unavailable(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def unavailable(error: BaseException) -> bool:
    """Whether ``error`` says a service is unreachable right now: :func:`database_unavailable`, a
    redis-py ``ConnectionError``/``TimeoutError``/``BusyLoadingError``, or an ``OSError`` (a
    refused or reset socket)."""
    if database_unavailable(error) or isinstance(error, OSError):
        return True
    return any(
        cls.__module__.split(".")[0] == "redis" and cls.__name__ in _REDIS_OUTAGES
        for cls in type(error).__mro__
    )


def replace_dead_connections() -> None:
    """After a database error: close this thread's connections that errored (each goes back to
    its pool, which discards a broken one), then have every connection pool test the connections
    it holds idle, replacing the dead ones (psycopg_pool's ``check``: one round trip per idle
    connection, paid only after a failure). A pool that cannot be checked is logged, never
    raised: the caller is already handling an outage."""
    for db in connections.all(initialized_only=True):
        if db.errors_occurred or db.connection is None or not db.is_usable():
            try:
                db.close()
            except Exception as error:  # a dead connection may fail to close: it is gone anyway
                logger.debug("closing %s failed: %r", db.alias, error)
            db.errors_occurred = False
    for db in connections.all():
        pool = getattr(db, "pool", None)  # Django's PostgreSQL backend with OPTIONS["pool"]
        if pool is None:
            continue
        try:
            pool.check()
        except Exception as error:
            logger.warning("checking the %s connection pool failed: %r", db.alias, error)


def retry_once(function: Callable[[], R]) -> R:
    """``function()``; when it fails with :func:`database_unavailable` and no transaction is open,
    :func:`replace_dead_connections` and call it once more (a read on a connection a restart
    killed then runs on a fresh one). The second failure is raised."""
    try:
        return function()
    except (OperationalError, InterfaceError) as error:
        if any(db.in_atomic_block for db in connections.all(initialized_only=True)):
            raise
        logger.warning("the database failed, retrying once on a fresh connection: %r", error)
        replace_dead_connections()
    return function()
