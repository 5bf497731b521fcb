"""Websocket tickets (docs/websocket.md "Connecting", docs/security.md): ``POST ws-ticket/`` issues
one, a websocket connection redeems it (``?ticket=`` or the ``Sec-WebSocket-Protocol`` header).

A ticket is 256 random bits (``mwt_`` and 43 URL-safe characters) that names an entry of the
server-side ticket store: Django's cache ``TICKET_CACHE`` (default ``"default"``), which must be
shared by every process that issues or redeems tickets (Redis, Memcached, the database or file
cache; the local-memory cache only serves one process). The entry holds the user, a digest of the
user's session auth hash (a password change voids the ticket), the session key the ticket was
issued under and the model instance of the API credential (a DRF ``Token``) it was issued with.

A ticket is **single-use** (the store's ``delete`` decides, atomically, which redemption wins) and
lives :data:`TICKET_MAX_AGE` seconds; it dies with its session (logout, deletion, expiry) and
its credential (a deleted token) even before it is used. The store never holds the ticket itself,
only its sha256.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any, Final

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.cache import BaseCache, caches
from django.db import models
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from murmur_conversations.conf import app_settings

TICKET_MAX_AGE: Final = 60
TICKET_PREFIX: Final = "mwt_"
_TICKET: Final = re.compile(r"mwt_[A-Za-z0-9_-]{43}")
_KEY_PREFIX: Final = "murmur:ws-ticket:"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def session_digest(session_key: str | None) -> str:
    """A digest of a session key, so group names and logs never carry the key itself."""
    return _digest(session_key) if session_key else ""


def ticket_cache() -> BaseCache:
    """The ticket store: ``caches[TICKET_CACHE]`` (docs/deployment.md "Tickets")."""
    return caches[app_settings.ticket_cache]


def credential_ref(auth: Any) -> tuple[str, str] | None:
    """``(model label, pk)`` of an API credential that is a model instance (DRF's ``Token``, or
    any model-backed token of the host), so its deletion can be noticed; None otherwise (a
    session, a signed token)."""
    if isinstance(auth, models.Model) and auth.pk is not None:
        return auth._meta.label_lower, str(auth.pk)
    return None


@dataclass(frozen=True)
class Ticket:
    """A redeemed ticket: the user, the digest and key of the session it was issued under ("" for
    none) and the credential it was issued with (:func:`credential_ref`, or None)."""

    user: Any
    session: str
    session_key: str = ""
    credential: tuple[str, str] | None = None


def issue_ticket(*, user: Any, session_key: str | None, credential: Any = None) -> str:
    """A new single-use ticket for ``user`` (an authenticated, active user), valid for
    :data:`TICKET_MAX_AGE` seconds, bound to ``session_key`` (None: no session) and to
    ``credential`` (the request's ``auth``: a model instance is remembered, anything else
    ignored). Raises what the ticket cache raises when it cannot store the entry."""
    ticket = TICKET_PREFIX + secrets.token_urlsafe(32)
    payload = {
        "u": str(user.pk),
        "h": _digest(user.get_session_auth_hash()),
        "k": session_key or "",
        "c": list(credential_ref(credential) or ()) or None,
        "t": time.time(),
    }
    ticket_cache().set(_KEY_PREFIX + _full_digest(ticket), payload, TICKET_MAX_AGE)
    return ticket


def _full_digest(ticket: str) -> str:
    return hashlib.sha256(ticket.encode("ascii")).hexdigest()


def _take(ticket: Any) -> dict[str, Any] | None:
    """The entry of ``ticket``, removed from the store; None when malformed, unknown, expired or
    already taken (only one caller's ``delete`` succeeds)."""
    if not isinstance(ticket, str) or not _TICKET.fullmatch(ticket):
        return None
    cache = ticket_cache()
    key = _KEY_PREFIX + _full_digest(ticket)
    payload = cache.get(key)
    if not isinstance(payload, dict) or not cache.delete(key):
        return None
    issued = payload.get("t")
    if not isinstance(issued, float) or not 0 <= time.time() - issued <= TICKET_MAX_AGE:
        return None
    return payload


def _session_store() -> Any:
    from importlib import import_module

    from django.conf import settings

    return import_module(settings.SESSION_ENGINE).SessionStore


def sessions_alive(session_keys: set[str]) -> dict[str, str]:
    """``{session key: the pk of its user, as text}`` of the keys whose server session still
    exists, has not expired and has a signed-in user (logout, ``clearsessions``, "log out
    everywhere" and a new login end a session). With the database session backends (``db``,
    ``cached_db``) one query for all keys, read from the database; other backends load each
    session."""
    from django.contrib.sessions.backends.db import SessionStore as DatabaseStore

    if not session_keys:
        return {}
    store_class = _session_store()
    alive: dict[str, str] = {}
    if issubclass(store_class, DatabaseStore):
        model = store_class.get_model_class()
        rows = model.objects.filter(
            session_key__in=session_keys, expire_date__gt=timezone.now()
        ).values_list("session_key", "session_data")
        decoder = store_class()
        for key, data in rows:
            user_pk = decoder.decode(data).get("_auth_user_id")
            if user_pk is not None:
                alive[key] = str(user_pk)
        return alive
    for key in session_keys:
        user_pk = store_class(key).load().get("_auth_user_id")
        if user_pk is not None:
            alive[key] = str(user_pk)
    return alive


def session_alive(session_key: str, user_pk: Any) -> bool:
    """Whether the server session ``session_key`` still exists and names ``user_pk`` as its user
    (:func:`sessions_alive` of one key)."""
    return sessions_alive({session_key}).get(session_key) == str(user_pk)


def credentials_alive(credentials: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Those of the credentials of :func:`credential_ref` that still exist: one query per model."""
    by_model: dict[str, set[str]] = {}
    for label, pk in credentials:
        by_model.setdefault(label, set()).add(pk)
    alive: set[tuple[str, str]] = set()
    for label, pks in by_model.items():
        try:
            model = apps.get_model(label)
        except (LookupError, ValueError):
            continue
        found = model._default_manager.filter(pk__in=pks).values_list("pk", flat=True)
        alive.update((label, str(pk)) for pk in found)
    return alive


def credential_alive(credential: tuple[str, str] | None) -> bool:
    """Whether the credential of :func:`credential_ref` still exists (True for None)."""
    return credential is None or credential in credentials_alive({credential})


def redeem_ticket(ticket: Any) -> Ticket | None:
    """Use ``ticket`` up: its user and session, or None when the ticket is malformed, unknown,
    expired or used already, its user is gone or inactive, the user's password changed, its
    session ended or its credential was deleted since it was issued. Queries the cache, the user
    table and the session store (call it from a sync context or ``database_sync_to_async``)."""
    payload = _take(ticket)
    if payload is None:
        return None
    user_model = get_user_model()
    user_pk = payload.get("u")
    if not isinstance(user_pk, str):
        return None
    try:
        user = user_model._default_manager.get(pk=user_pk)
    except (user_model.DoesNotExist, ValueError, TypeError):
        return None
    if not user.is_active or not constant_time_compare(
        _digest(user.get_session_auth_hash()), str(payload.get("h", ""))
    ):
        return None
    session_key = str(payload.get("k") or "")
    if session_key and not session_alive(session_key, user.pk):
        return None
    raw_credential = payload.get("c")
    credential = (
        (str(raw_credential[0]), str(raw_credential[1]))
        if isinstance(raw_credential, list) and len(raw_credential) == 2
        else None
    )
    if not credential_alive(credential):
        return None
    return Ticket(
        user=user,
        session=session_digest(session_key),
        session_key=session_key,
        credential=credential,
    )
