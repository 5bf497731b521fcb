"""``websocket_urlpatterns`` of the app (docs/websocket.md): mount them under the host's
``URLRouter`` inside ``middleware.MurmurAuthMiddlewareStack``."""

from __future__ import annotations

from typing import Any

from django.urls import path, re_path

from murmur_conversations.realtime.consumers import ConversationConsumer, UserStreamConsumer
from murmur_conversations.realtime.share_stream import SharedConsumer

__all__ = [
    "websocket_urlpatterns",
]

websocket_urlpatterns: list[Any] = [
    path("ws/conversations/", UserStreamConsumer.as_asgi()),
    path("ws/conversations/<str:id>/", ConversationConsumer.as_asgi()),
    # Anything else below ws/conversations/ names no conversation: it is closed 4404 (after the
    # 4401 check), exactly like a malformed id, instead of failing the handshake.
    re_path(r"^ws/conversations/(?P<id>.*)$", ConversationConsumer.as_asgi()),
    # A live share link's read-only stream; any other spelling below ws/shared/ is closed 4404.
    re_path(r"^ws/shared/(?P<token>[^/]*)/?$", SharedConsumer.as_asgi()),
    re_path(r"^ws/shared/(?P<token>.*)$", SharedConsumer.as_asgi()),
]
