"""Continuous authorisation of open sockets (docs/security.md, docs/websocket.md "Losing access").

A socket's access rests on an :class:`Access`: the user and the digest of the user's password
hash, the session or API token it was opened with, the conversation it reads (through
``SCOPE``), or the share link it was opened with. Access is confirmed three ways:

- **Known events close at once**: logout, a deleted session, a deleted API token, a deleted,
  deactivated or re-passworded user, a revoked share link, an owner change
  (``receivers.py`` publishes them to the socket's groups); hosts call :func:`recheck` after a
  change their ``SCOPE`` depends on (a user removed from a team).
- **Before the frames of an event go out**, :meth:`Gate.confirm` checks the access of every
  socket of the conversation in this process, in one batched read (:func:`denials`: a fixed
  number of queries, whatever the number of sockets), started after the event was published, so
  no frame written after a loss of access reaches a socket.
- **Idle sockets** are re-checked every ``ACCESS_RECHECK_INTERVAL`` seconds (2 by default, at most
  4), all of a process's sockets in one batched read, so a socket closes within 5 seconds of
  losing access however it was lost.

A denied socket closes 4401 (its user, session, token or ticket ended) or 4404 (the conversation
or share link is no longer readable by it). A check that cannot run (the database restarted or is
down) is not a denial: it is retried once on a fresh connection, and if it still cannot run, the
sockets waiting on it close 1013 (try again later) and reconnect; an idle re-check that fails
closes nothing and runs again at the next interval.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone

from murmur_conversations.conf import DEFAULTS, app_settings
from murmur_conversations.models import Conversation, Share, ShareMode
from murmur_conversations.outage import retry_once, unavailable
from murmur_conversations.realtime.broadcast import get_broadcaster
from murmur_conversations.realtime.groups import group_name
from murmur_conversations.selectors import conversations_for
from murmur_conversations.tickets import credentials_alive, sessions_alive

logger = logging.getLogger("murmur_conversations.realtime")

CLOSE_NO_USER: Final = 4401
CLOSE_NOT_FOUND: Final = 4404
#: The server failed unexpectedly; reconnect with backoff.
CLOSE_INTERNAL: Final = 1011
#: A service (the database, the channel layer's Redis) is unreachable right now; reconnect with
#: backoff (``outage``).
CLOSE_TRY_LATER: Final = 1013
#: A denial (never sent as a close code): the conversation no longer exists. Its socket says so
#: with ``conversation_deleted`` before it closes 4404, as when the deletion's own frame comes
#: first: a re-check may find the deletion before another process's frame of it arrives.
GONE: Final = -CLOSE_NOT_FOUND


@dataclass(frozen=True)
class Access:
    """What one open socket's access rests on.

    ``user_pk`` (None: an anonymous share reader) and ``digest`` (``receivers.auth_digest`` at
    connect); ``session_key`` ("" for none: a ticket without a session); ``credential``
    (``tickets.credential_ref`` of the API token its ticket was issued with); ``conversation``
    (the conversation it reads through ``SCOPE``; None for the user stream and share sockets);
    ``share_hash`` (a share socket: the sha256 of its token)."""

    user_pk: Any
    digest: str = ""
    session_key: str = ""
    credential: tuple[str, str] | None = None
    conversation: uuid.UUID | None = None
    share_hash: str | None = None


def _default_scope() -> bool:
    return bool(DEFAULTS["SCOPE"] == app_settings.SCOPE)


def _owners(accesses: Sequence[Access]) -> dict[uuid.UUID, Any]:
    """With the default ``SCOPE``: ``{conversation pk: its owner (a user instance) or None}`` of
    the conversations read, in one query that also brings each owner's row."""
    pks = {a.conversation for a in accesses if a.conversation is not None}
    if not pks:
        return {}
    return {c.pk: c.owner for c in Conversation.objects.filter(pk__in=pks).select_related("owner")}


def _users(pks: set[str]) -> dict[str, Any]:
    if not pks:
        return {}
    return {str(u.pk): u for u in get_user_model()._default_manager.filter(pk__in=pks)}


def _readable(accesses: Sequence[Access], users: dict[str, Any]) -> set[tuple[str, uuid.UUID]]:
    """``(user pk, conversation pk)`` pairs that a custom ``SCOPE`` still grants: one query per
    user."""
    wanted: dict[str, set[uuid.UUID]] = {}
    for access in accesses:
        if access.conversation is not None and access.user_pk is not None:
            wanted.setdefault(str(access.user_pk), set()).add(access.conversation)
    readable: set[tuple[str, uuid.UUID]] = set()
    for user_pk, pks in wanted.items():
        user = users.get(user_pk)
        if user is None:
            continue
        found = conversations_for(user).filter(pk__in=pks).values_list("pk", flat=True)
        readable.update((user_pk, pk) for pk in found)
    return readable


def _live_shares(accesses: Sequence[Access]) -> set[str]:
    hashes = {a.share_hash for a in accesses if a.share_hash is not None}
    if not hashes:
        return set()
    now = timezone.now()
    return set(
        Share.objects.filter(token_hash__in=hashes, revoked_at__isnull=True, mode=ShareMode.LIVE)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .values_list("token_hash", flat=True)
    )


def denials(accesses: Sequence[Access]) -> dict[int, int]:
    """Which of ``accesses`` lost access: ``{index: close code}`` (4401: the user, session, token
    or ticket ended; 4404: the conversation or share link is no longer readable by it;
    :data:`GONE`: the conversation was deleted).

    Batched, whatever the number of sockets: with the default ``SCOPE`` the sockets of a
    conversation cost ONE query (the conversation with its owner's row: the reader must be the
    owner, active, with the same password); a session, an API token, a share link or another user
    adds one query for each kind (one per token model; a custom ``SCOPE`` one per user; a session
    backend that is not the database's one load per session). Sync: call it through
    ``database_sync_to_async``."""
    from murmur_conversations.realtime.receivers import auth_digest

    codes: dict[int, int] = {}
    default_scope = _default_scope()
    owners = _owners(accesses) if default_scope else {}
    users: dict[str, Any] = {}
    for index, access in enumerate(accesses):
        if access.user_pk is None or access.conversation is None or not default_scope:
            continue
        owner = owners.get(access.conversation)
        if access.conversation not in owners:
            codes[index] = GONE
        elif owner is None or str(owner.pk) != str(access.user_pk):
            codes[index] = CLOSE_NOT_FOUND  # no longer the reader's
        else:
            users[str(owner.pk)] = owner
    users.update(
        _users(
            {
                str(a.user_pk)
                for i, a in enumerate(accesses)
                if a.user_pk is not None and i not in codes
            }
            - set(users)
        )
    )
    for index, access in enumerate(accesses):
        if access.user_pk is None or index in codes:
            continue
        user = users.get(str(access.user_pk))
        if user is None or not user.is_active or auth_digest(user) != access.digest:
            codes[index] = CLOSE_NO_USER
    rest = [a for i, a in enumerate(accesses) if i not in codes]
    sessions = sessions_alive({a.session_key for a in rest if a.session_key})
    credentials = credentials_alive({a.credential for a in rest if a.credential})
    shares = _live_shares(rest)
    readable = set() if default_scope else _readable(rest, users)
    for index, access in enumerate(accesses):
        if index in codes:
            continue
        if (access.session_key and sessions.get(access.session_key) != str(access.user_pk)) or (
            access.credential and access.credential not in credentials
        ):
            codes[index] = CLOSE_NO_USER
        elif (access.share_hash is not None and access.share_hash not in shares) or (
            not default_scope
            and access.conversation is not None
            and access.user_pk is not None
            and (str(access.user_pk), access.conversation) not in readable
        ):
            codes[index] = CLOSE_NOT_FOUND
    return codes


class Guarded(Protocol):
    """A socket the gate watches: its access, and how to close it."""

    access: Access | None

    async def deny(self, code: int) -> None: ...


class Gate:
    """The watched sockets of one event loop (one process), by topic (a conversation's group, a
    user's stream, a share link), with their checks."""

    def __init__(self) -> None:
        self.sockets: dict[str, set[Guarded]] = {}
        self.checks: dict[str, tuple[float, asyncio.Future[dict[int, int]]]] = {}
        self.recheck_task: asyncio.Task[None] | None = None
        self.rechecks = 0

    def watch(self, topic: str, socket: Guarded) -> None:
        """Watch ``socket`` (its ``access`` set) under ``topic``; starts the idle re-check."""
        self.sockets.setdefault(topic, set()).add(socket)
        if self.recheck_task is None or self.recheck_task.done():
            self.recheck_task = asyncio.ensure_future(self._recheck_loop())

    def forget(self, topic: str, socket: Guarded) -> None:
        """Stop watching ``socket`` (it closed)."""
        sockets = self.sockets.get(topic)
        if sockets is not None:
            sockets.discard(socket)
            if not sockets:
                del self.sockets[topic]
                self.checks.pop(topic, None)

    def start(self, topic: str, at: float) -> asyncio.Future[dict[int, int]]:
        """The check of ``topic``'s sockets that covers news published at ``at`` (``time.time()``
        of the publisher): the latest one if it started at or after ``at``, else a new one,
        started now. Returns at once, so the caller can prepare its frames meanwhile."""
        entry = self.checks.get(topic)
        if entry is None or entry[0] < at:
            sockets = list(self.sockets.get(topic, ()))
            entry = (time.time(), asyncio.ensure_future(self._check(sockets)))
            entry[1].add_done_callback(_consume_exception)
            self.checks[topic] = entry
        return entry[1]

    async def settle(self, socket: Guarded, check: asyncio.Future[dict[int, int]]) -> bool:
        """Whether ``check`` (of :meth:`start`) let ``socket`` pass; a denied socket is closed
        (:meth:`Guarded.deny`) and False, and so is every socket when the check failed (nothing
        goes out unconfirmed), with 1013 when the database could not answer (``outage``) and
        1011 for any other failure: never 4401, since nothing was denied. A socket watched after the check started was checked when it
        connected, after the news."""
        try:
            denied = await asyncio.shield(check)
        except Exception as error:  # a check that cannot run is not a denial: reconnect later
            logger.warning("access check failed: %r", error)
            await socket.deny(CLOSE_TRY_LATER if unavailable(error) else CLOSE_INTERNAL)
            return False
        code = denied.get(id(socket))
        if code is not None:
            await socket.deny(code)
            return False
        return True

    async def confirm(self, topic: str, socket: Guarded, at: float) -> bool:
        """:meth:`start` then :meth:`settle`: whether ``socket`` may receive news published at
        ``at``."""
        return await self.settle(socket, self.start(topic, at))

    async def _check(self, sockets: list[Guarded]) -> dict[int, int]:
        """``{id(socket): code}`` of the denied ``sockets``."""
        accesses = [s.access for s in sockets]
        checked = [(s, a) for s, a in zip(sockets, accesses, strict=True) if a is not None]
        wanted = [a for _s, a in checked]
        codes = await _off_the_sync_thread(lambda: retry_once(lambda: denials(wanted)))
        return {id(checked[index][0]): code for index, code in codes.items()}

    async def recheck_all(self) -> int:
        """Check every watched socket of this process in one batched read and close the denied
        ones; returns how many were closed. The idle re-check calls it every
        ``ACCESS_RECHECK_INTERVAL`` seconds; tests may call it to drive a re-check."""
        sockets = list({s for group in self.sockets.values() for s in group})
        if not sockets:
            return 0
        denied = await self._check(sockets)
        self.rechecks += 1
        closing = [s.deny(denied[id(s)]) for s in sockets if id(s) in denied]
        await asyncio.gather(*closing, return_exceptions=True)
        return len(closing)

    async def _recheck_loop(self) -> None:
        while self.sockets:
            await asyncio.sleep(app_settings.access_recheck_interval)
            try:
                await self.recheck_all()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a database hiccup: try again next time
                logger.warning("access re-check failed: %r", error)


def _off_the_sync_thread(function: Callable[[], dict[int, int]]) -> Any:
    """``function()`` (``denials`` retried once on a fresh connection after a lost one) through Channels' ``database_sync_to_async`` (connections closed when stale)
    on a worker thread of its own, not the one thread that runs every thread-sensitive call: a
    check must not queue behind the database tail and the writes of this process, or every event
    would wait for them."""
    return database_sync_to_async(function, thread_sensitive=False)()


def _consume_exception(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Gate] = weakref.WeakKeyDictionary()


def gate() -> Gate:
    """The :class:`Gate` of the running event loop."""
    loop = asyncio.get_running_loop()
    found = _gates.get(loop)
    if found is None:
        found = _gates[loop] = Gate()
    return found


def recheck(*, user: Any = None, conversation: Any = None) -> None:
    """Ask the sockets of ``user`` (a user or its pk) and/or of ``conversation`` (a conversation
    or its id), in every process, to confirm their access now: call it after a change that your
    ``SCOPE`` depends on (a user removed from a team, a conversation moved), so their sockets close
    at once instead of at the next re-check (docs/security.md). Never blocks: the request is
    queued for the channel layer."""
    message = {"type": "murmur.recheck", "at": time.time()}
    broadcaster = get_broadcaster()
    if user is not None:
        broadcaster.publish(group_name("user", getattr(user, "pk", user)), message)
    if conversation is not None:
        pk = getattr(conversation, "pk", conversation)
        broadcaster.publish(group_name("conversation", pk), message)


__all__ = ["Access", "Gate", "denials", "gate", "recheck"]
