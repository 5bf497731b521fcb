"""Websocket tickets (docs/api.md and docs/websocket.md): ``POST ws-ticket/`` issues one, the websocket
consumer redeems it with ``?ticket=``.

A ticket is signed with ``django.core.signing`` and binds the user, a digest of the user's session
auth hash (a password change voids it) and a digest of the session key it was issued under (logout
closes the sockets opened with it). Reusable until it expires (60 seconds).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final

from django.contrib.auth import get_user_model
from django.core import signing
from django.utils.crypto import constant_time_compare

TICKET_MAX_AGE: Final = 60
_SALT: Final = "murmur_conversations.ws-ticket"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:32]


def session_digest(session_key: str | None) -> str:
    """A digest of a session key, so tickets and consumers never carry the key itself."""
    return _digest(session_key) if session_key else ""


@dataclass(frozen=True)
class Ticket:
    """A redeemed ticket: the user and the digest of the session it was issued under."""

    user: Any
    session: str


def issue_ticket(*, user: Any, session_key: str | None) -> str:
    """A signed ticket for ``user`` (an authenticated, active user), valid for
    :data:`TICKET_MAX_AGE` seconds."""
    payload = {
        "u": str(user.pk),
        "h": _digest(user.get_session_auth_hash()),
        "s": session_digest(session_key),
    }
    return signing.dumps(payload, salt=_SALT, compress=False)


def redeem_ticket(ticket: Any, *, max_age: int = TICKET_MAX_AGE) -> Ticket | None:
    """The ticket's user and session digest, or None when the ticket is malformed, forged, expired,
    its user is gone or inactive, or the user's password changed since it was issued. Queries the
    user table (call it from a sync context or through ``database_sync_to_async``)."""
    if not isinstance(ticket, str) or not ticket or len(ticket) > 1024:
        return None
    try:
        payload = signing.loads(ticket, salt=_SALT, max_age=max_age)
    except signing.BadSignature:  # includes SignatureExpired
        return None
    if not isinstance(payload, dict):
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
    return Ticket(user=user, session=str(payload.get("s", "")))
