"""Websocket authentication (docs/websocket.md): the server session from a cookie, only from an
allowed origin, or a ``?ticket=`` from ``POST ws-ticket/`` from any origin.

``MurmurAuthMiddlewareStack(inner)`` = :class:`CookieOriginMiddleware` (drops the Cookie header of
a connection from a disallowed origin, so it has no user) around Channels' ``AuthMiddlewareStack``
around :class:`TicketMiddleware` (a ``ticket`` parameter decides the user alone: a bad one means no
user, whatever the cookie says).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.security.websocket import OriginValidator
from django.conf import settings
from django.contrib.auth.models import AnonymousUser

from murmur_conversations.realtime.scope import query_values
from murmur_conversations.tickets import TICKET_PREFIX, redeem_ticket

__all__ = [
    "CookieOriginMiddleware",
    "MurmurAuthMiddlewareStack",
    "TicketMiddleware",
    "allowed_origins",
    "origin_allowed",
    "ticket_candidates",
]

ASGIApp = Any


def allowed_origins() -> list[str]:
    """Origins whose cookies are honoured: the hosts of ``ALLOWED_HOSTS`` (any scheme and port, as
    Channels' ``AllowedHostsOriginValidator``; localhost when DEBUG leaves it empty) and
    ``CSRF_TRUSTED_ORIGINS``."""
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = ["localhost", "127.0.0.1", "[::1]"]
    return hosts + list(getattr(settings, "CSRF_TRUSTED_ORIGINS", []))


def origin_allowed(scope: dict[str, Any]) -> bool:
    """True if the connection's ``Origin`` header names an allowed origin; a missing or unreadable
    header is not allowed (browsers always send one)."""
    parsed = None
    for name, value in scope.get("headers", []):
        if name == b"origin":
            try:
                parsed = urlparse(value.decode("latin1"))
            except ValueError:
                return False
    if parsed is None:
        return False
    validator = OriginValidator(None, allowed_origins())
    try:
        return bool(validator.valid_origin(parsed))
    except ValueError:  # e.g. a malformed IPv6 host
        return False


class CookieOriginMiddleware:
    """Remove the Cookie header of websocket connections from disallowed origins (the cookie is
    ignored, the connection is not refused: a ticket still works)."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope.get("type") == "websocket" and not origin_allowed(scope):
            headers = [(k, v) for k, v in scope.get("headers", []) if k != b"cookie"]
            scope = {**scope, "headers": headers}
        return await self.inner(scope, receive, send)


class TicketMiddleware:
    """With a ticket (a ``ticket`` query parameter, or an ``mwt_...`` entry of the
    ``Sec-WebSocket-Protocol`` header), set ``scope["user"]`` from ``tickets.redeem_ticket``
    (AnonymousUser when it is malformed, unknown, expired, used, voided, or given more than once)
    and ``scope["murmur_ticket"]`` to the redeemed ticket (its session and credential), so the
    socket ends with them. A ticket decides alone, whatever cookie comes with it."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        offered = ticket_candidates(scope)
        if offered is not None:
            ticket = None
            if len(offered) == 1:
                ticket = await database_sync_to_async(redeem_ticket)(offered[0])
            scope = {
                **scope,
                "user": ticket.user if ticket is not None else AnonymousUser(),
                "murmur_session": ticket.session if ticket is not None else "",
                "murmur_ticket": ticket,
            }
        return await self.inner(scope, receive, send)


def ticket_candidates(scope: dict[str, Any]) -> list[str] | None:
    """Every ticket the connection offers: the ``ticket`` query values and the subprotocols that
    start with ``mwt_``; None when it offers none (docs/websocket.md "Connecting")."""
    values = list(query_values(scope, "ticket") or ())
    protocols = scope.get("subprotocols") or []
    values += [p for p in protocols if isinstance(p, str) and p.startswith(TICKET_PREFIX)]
    if values or query_values(scope, "ticket") is not None:
        return values
    return None


def MurmurAuthMiddlewareStack(inner: ASGIApp) -> ASGIApp:
    """Cookie session (allowed origins only) and ``?ticket=`` authentication around ``inner``."""
    return CookieOriginMiddleware(AuthMiddlewareStack(TicketMiddleware(inner)))
