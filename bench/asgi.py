"""ASGI application of the bench servers (``uvicorn bench.asgi:application``): HTTP to
``bench.urls``, websockets to the app's ``websocket_urlpatterns`` behind its auth stack, as the
demo project mounts them."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
django_asgi_app = get_asgi_application()  # before anything that imports models

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.db.backends.signals import connection_created  # noqa: E402

from bench.views import count_queries  # noqa: E402
from murmur_conversations.realtime.middleware import MurmurAuthMiddlewareStack  # noqa: E402
from murmur_conversations.realtime.routing import websocket_urlpatterns  # noqa: E402

connection_created.connect(count_queries, dispatch_uid="bench.count_queries")

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": MurmurAuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
    }
)
