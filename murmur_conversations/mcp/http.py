"""The MCP server over streamable HTTP (docs/mcp.md "Over HTTP"), an ASGI application a host
mounts beside Django: every request must carry a user's API token (``Authorization: Token
<key>``, or ``Bearer <key>``; DRF's ``rest_framework.authtoken`` tokens, as ``POST /api/token/``
hands them out) and acts for that user, or is refused with 401 before anything reaches MCP (503
with ``Retry-After`` when an outage keeps the token from being checked).

Stateless and JSON-answering (the SDK's ``stateless=True, json_response=True``): each request is
served on its own, authenticated on its own, with no session kept in the process, so any worker
of any process can answer any request and nothing outlives it. The SDK's session manager is
made and run per request for the same reason, so the app needs no ASGI lifespan (Channels'
``ProtocolTypeRouter`` and ``uvicorn --lifespan off`` give none)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from channels.db import database_sync_to_async
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from mcp.server import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed
from starlette.types import Receive, Scope, Send

from murmur_conversations.mcp.server import build_server
from murmur_conversations.middleware import OUTAGE_BODY
from murmur_conversations.outage import RETRY_AFTER_SECONDS, retry_once, unavailable

__all__ = ["MCPApp"]

#: The scope key holding the authenticated user of a request, as Channels' middleware names it.
USER_KEY: Final = "user"
_SCHEMES: Final = ("token", "bearer")
_OUTAGE: Final = json.dumps(OUTAGE_BODY).encode()
_REFUSAL: Final = json.dumps(
    {
        "error": "not_authenticated",
        "detail": "send a user's API token: Authorization: Token <key> (POST /api/token/ gives one)",
    }
).encode()

_POST_ONLY: Final = json.dumps(
    {
        "error": "method_not_allowed",
        "detail": "this MCP server is stateless: it answers POST only (no GET stream, no sessions)",
    }
).encode()


def _token(scope: Scope) -> str | None:
    """The key of the ``Authorization: Token <key>`` (or ``Bearer``) header, or None."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            scheme, _, key = bytes(value).decode("latin-1").strip().partition(" ")
            key = key.strip()
            if scheme.lower() in _SCHEMES and key and " " not in key:
                return key
            return None
    return None


def _user_of_token(key: str) -> Any:
    """The active user whose DRF token ``key`` is, or None (DRF's own check)."""
    try:
        user, _token = TokenAuthentication().authenticate_credentials(key)
    except AuthenticationFailed:
        return None
    return user


def _request_user(ctx: ServerRequestContext[Any]) -> Any:
    request = ctx.request
    scope = getattr(request, "scope", None)
    return scope.get(USER_KEY) if isinstance(scope, Mapping) else None


async def _respond(send: Send, status: int, body: bytes, header: tuple[bytes, bytes]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                header,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _authenticated(scope: Scope, send: Send) -> Any:
    """The user of the request's token, or None after answering it: 401 without a valid token,
    503 with ``Retry-After`` when the database cannot say (an outage, docs/deployment.md)."""
    key = _token(scope)
    if key is not None:
        try:
            user = await database_sync_to_async(retry_once)(lambda: _user_of_token(key))
        except Exception as error:
            if not unavailable(error):
                raise
            retry = str(RETRY_AFTER_SECONDS).encode()
            await _respond(send, 503, _OUTAGE, (b"retry-after", retry))
            return None
        if user is not None:
            return user
    await _respond(send, 401, _REFUSAL, (b"www-authenticate", b'Token realm="mcp"'))
    return None


class MCPApp:
    """The ASGI application of the MCP server over streamable HTTP (module docstring). Mount it
    at one path of the host's HTTP router (the demo: ``path("mcp", MCPApp())`` in a Channels
    ``URLRouter``, project/asgi.py). ``ImproperlyConfigured`` when ``rest_framework.authtoken``
    is not installed: its tokens are how requests authenticate."""

    def __init__(self) -> None:
        if not apps.is_installed("rest_framework.authtoken"):
            raise ImproperlyConfigured(
                "The MCP server's HTTP transport authenticates with DRF tokens: add "
                '"rest_framework.authtoken" to INSTALLED_APPS (then manage.py migrate).'
            )
        self.server = build_server(_request_user)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            raise ValueError(f"the MCP app serves HTTP only, not {scope['type']!r}")
        user = await _authenticated(scope, send)
        if user is None:
            return
        if scope.get("method") != "POST":  # a GET would open a stream that nothing ever ends
            await _respond(send, 405, _POST_ONLY, (b"allow", b"POST"))
            return
        manager = StreamableHTTPSessionManager(app=self.server, json_response=True, stateless=True)
        async with manager.run():
            await manager.handle_request({**scope, USER_KEY: user}, receive, send)
