"""ASGI application of the library's test suite (``tests.asgi.application``): HTTP to Django,
websockets through Channels to the app's ``websocket_urlpatterns`` with its session-or-ticket
authentication (docs/websocket.md). Server processes started by tests serve it."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django_asgi_app = get_asgi_application()  # before importing anything that touches models

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from murmur_conversations.realtime.middleware import MurmurAuthMiddlewareStack  # noqa: E402
from murmur_conversations.realtime.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": MurmurAuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
    }
)
