"""ASGI entry point of the demo project (``project.asgi.application``).

HTTP goes to Django (static files served by Django's ASGI static handler, enough for the demo;
in production run collectstatic and let the proxy serve STATIC_ROOT); websockets go through Channels to the app's ``websocket_urlpatterns``, with
the server session (cookies honoured only from allowed origins) or a ``?ticket=`` from
``POST /api/ws-ticket/`` (docs/websocket.md). ``/mcp`` is the MCP server over streamable HTTP
for agents, authenticated by a user's API token (docs/mcp.md).
"""

from __future__ import annotations

import os
from typing import Any

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_asgi_app = get_asgi_application()  # before importing anything that touches models

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from murmur_conversations.mcp.http import MCPApp  # noqa: E402
from murmur_conversations.realtime.middleware import MurmurAuthMiddlewareStack  # noqa: E402
from murmur_conversations.realtime.routing import websocket_urlpatterns  # noqa: E402

# ASGI applications routed by path (django-stubs types path() for views only).
mcp_app: Any = MCPApp()
django_http: Any = ASGIStaticFilesHandler(django_asgi_app)

application = ProtocolTypeRouter(
    {
        "http": URLRouter([path("mcp", mcp_app), re_path(r"", django_http)]),
        "websocket": MurmurAuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
    }
)
