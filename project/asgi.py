"""ASGI entry point of the demo project (``project.asgi.application``).

HTTP goes to Django (static files served by Django's ASGI static handler, enough for the demo;
in production run collectstatic and let the proxy serve STATIC_ROOT); websockets go through Channels to the app's ``websocket_urlpatterns``, with
the server session (cookies honoured only from allowed origins) or a ``?ticket=`` from
``POST /api/ws-ticket/`` (docs/websocket.md).
"""

from __future__ import annotations

import os

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_asgi_app = get_asgi_application()  # before importing anything that touches models

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from murmur_conversations.realtime.middleware import MurmurAuthMiddlewareStack  # noqa: E402
from murmur_conversations.realtime.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": ASGIStaticFilesHandler(django_asgi_app),
        "websocket": MurmurAuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
    }
)
