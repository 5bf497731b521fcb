"""App configuration for murmur_conversations."""

from __future__ import annotations

import importlib.util

from django.apps import AppConfig


class MurmurConversationsConfig(AppConfig):
    """Registers the system checks; live-update receivers are connected only if Channels is there."""

    name = "murmur_conversations"
    label = "murmur_conversations"
    verbose_name = "Conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from murmur_conversations import checks  # noqa: F401  (registers the checks)

        # Without Channels the app works, minus live updates (docs/websocket.md).
        if importlib.util.find_spec("channels") is not None:
            from murmur_conversations.realtime import receivers

            receivers.connect()
