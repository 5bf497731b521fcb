"""App configuration for murmur_conversations."""

from __future__ import annotations

import importlib.util

from django.apps import AppConfig


def _ensure_search_index(sender: AppConfig, using: str = "default", **kwargs: object) -> None:
    """After ``migrate``: put back SQLite search triggers that a table rebuild dropped
    (``search_index.ensure``, docs/search.md)."""
    from django.db import connections

    from murmur_conversations import search_index

    search_index.ensure(connections[using])


class MurmurConversationsConfig(AppConfig):
    """Registers the system checks; live-update receivers are connected only if Channels is there."""

    name = "murmur_conversations"
    label = "murmur_conversations"
    verbose_name = "Conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from murmur_conversations import checks  # noqa: F401  (registers the checks)

        post_migrate.connect(_ensure_search_index, sender=self)

        # Without Channels the app works, minus live updates (docs/websocket.md).
        if importlib.util.find_spec("channels") is not None:
            from murmur_conversations.realtime import receivers

            receivers.connect()
