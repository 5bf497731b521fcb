"""Websocket authentication (docs/websocket.md, docs/security.md): the server session from a
cookie, only from an allowed origin (exactly, as Django's CSRF origin check), or a ticket from
``POST ws-ticket/`` from any origin.

``MurmurAuthMiddlewareStack(inner)`` = :class:`OutageMiddleware` (a failure before or after the
handshake closes 1013/1011 instead of an HTTP 500) around :class:`CookieOriginMiddleware` (drops the Cookie header of
a connection from a disallowed origin, so it has no user) around Channels' ``AuthMiddlewareStack``
around :class:`TicketMiddleware` (a ``ticket`` parameter decides the user alone: a bad one means no
user, whatever the cookie says).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

from murmur_conversations.outage import unavailable
from murmur_conversations.realtime.access import CLOSE_INTERNAL, CLOSE_TRY_LATER
from murmur_conversations.realtime.scope import SUBPROTOCOL, query_values
from murmur_conversations.tickets import TICKET_PREFIX, redeem_ticket

__all__ = [
    "CookieOriginMiddleware",
    "MurmurAuthMiddlewareStack",
    "OutageMiddleware",
    "TicketMiddleware",
    "origin_allowed",
    "ticket_candidates",
]

ASGIApp = Any
logger = logging.getLogger("murmur_conversations.realtime")


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    """The (last) value of header ``name``, decoded as Latin-1 (as Django's WSGI/ASGI handlers
    do); None when absent."""
    found = None
    for key, value in scope.get("headers", []):
        if key == name:
            found = value.decode("latin1")
    return found


def _own_origin(scope: dict[str, Any]) -> str | None:
    """``<scheme>://<host>`` of the connection itself, when its ``Host`` is one of
    ``ALLOWED_HOSTS`` (``localhost`` and the loopback addresses when DEBUG leaves it empty, as
    Django's ``get_host``): ``https`` for a ``wss`` connection, else ``http``."""
    host = _header(scope, b"host")
    if not host:
        return None
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, allowed):
        return None
    return f"{'https' if scope.get('scheme') == 'wss' else 'http'}://{host}"


def origin_allowed(scope: dict[str, Any]) -> bool:
    """Whether the connection's ``Origin`` may bring the session cookie: exactly, scheme, host
    and port, as Django's CSRF origin check does (docs/security.md "Origins"): the connection's
    own origin (its ``Host``, which must be allowed, with ``https`` for ``wss``), or an entry of
    ``CSRF_TRUSTED_ORIGINS`` (``https://*.example.com`` matches the subdomains of
    ``example.com`` on that scheme). A missing, ``null`` or unreadable header is not allowed."""
    origin = _header(scope, b"origin")
    if not origin or origin == "null":
        return False
    if origin == _own_origin(scope):
        return True
    trusted = list(getattr(settings, "CSRF_TRUSTED_ORIGINS", []))
    if origin in trusted:
        return True
    try:
        parsed = urlsplit(origin)
    except ValueError:
        return False
    if not parsed.scheme or not parsed.netloc:
        return False
    return any(
        is_same_domain(parsed.netloc, urlsplit(entry).netloc[1:])
        for entry in trusted
        if "://*." in entry and urlsplit(entry).scheme == parsed.scheme
    )


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


class OutageMiddleware:
    """A websocket connection that fails with an exception (the channel layer's Redis is down
    when the consumer subscribes, the database or the ticket cache cannot be read while
    authenticating) is accepted, then closed with 1013 (a service is unreachable:
    ``outage.unavailable``, logged in one line) or 1011 (anything else, logged with its
    traceback), instead of the server answering the handshake with HTTP 500. Both codes tell
    the client to reconnect with backoff (docs/websocket.md)."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope.get("type") != "websocket":
            return await self.inner(scope, receive, send)
        sent: set[str] = set()
        received: set[str] = set()

        async def tracked_receive() -> dict[str, Any]:
            message: dict[str, Any] = await receive()
            received.add(message.get("type", ""))
            return message

        async def tracked_send(message: dict[str, Any]) -> None:
            await send(message)
            sent.add(message.get("type", ""))

        try:
            return await self.inner(scope, tracked_receive, tracked_send)
        except Exception as error:
            if "websocket.close" in sent or "websocket.disconnect" in received:
                raise  # the socket already ended: nothing to tell the client
            code = CLOSE_TRY_LATER if unavailable(error) else CLOSE_INTERNAL
            if code == CLOSE_TRY_LATER:
                logger.warning(
                    "websocket %s: a service is unavailable: %r", scope.get("path"), error
                )
            else:
                logger.exception("websocket %s failed", scope.get("path"))
            await _close(scope, receive, send, code, accepted="websocket.accept" in sent,
                         connected="websocket.connect" in received)  # fmt: skip
            return None


async def _close(
    scope: dict[str, Any], receive: Any, send: Any, code: int, *, accepted: bool, connected: bool
) -> None:
    """Accept the handshake (unless done; with the ``murmur`` subprotocol when offered), then
    close with ``code``; nothing when the client left before its handshake was read."""
    if not accepted:
        if not connected and (await receive()).get("type") != "websocket.connect":
            return
        offered = scope.get("subprotocols") or []
        await send(
            {
                "type": "websocket.accept",
                "subprotocol": SUBPROTOCOL if SUBPROTOCOL in offered else None,
            }
        )
    await send({"type": "websocket.close", "code": code})


def MurmurAuthMiddlewareStack(inner: ASGIApp) -> ASGIApp:
    """Cookie session (allowed origins only) and ``?ticket=`` authentication around ``inner``,
    inside :class:`OutageMiddleware`."""
    return OutageMiddleware(CookieOriginMiddleware(AuthMiddlewareStack(TicketMiddleware(inner))))
