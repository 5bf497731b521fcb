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
from murmur_conversations.tickets import redeem_ticket

__all__ = [
    "CookieOriginMiddleware",
    "MurmurAuthMiddlewareStack",
    "TicketMiddleware",
    "allowed_origins",
    "origin_allowed",
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
    """With a ``ticket`` query parameter, set ``scope["user"]`` from ``tickets.redeem_ticket``
    (AnonymousUser when it is malformed, forged, expired, repeated or voided) and
    ``scope["murmur_session"]`` to the digest of the session it was issued under."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        values = query_values(scope, "ticket")
        if values is not None:
            ticket = None
            if len(values) == 1:
                ticket = await database_sync_to_async(redeem_ticket)(values[0])
            scope = {
                **scope,
                "user": ticket.user if ticket is not None else AnonymousUser(),
                "murmur_session": ticket.session if ticket is not None else "",
            }
        return await self.inner(scope, receive, send)


def MurmurAuthMiddlewareStack(inner: ASGIApp) -> ASGIApp:
    """Cookie session (allowed origins only) and ``?ticket=`` authentication around ``inner``."""
    return CookieOriginMiddleware(AuthMiddlewareStack(TicketMiddleware(inner)))
