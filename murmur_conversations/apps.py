"""App configuration for murmur_conversations."""

from __future__ import annotations

import importlib.util
from typing import Any

from django.apps import AppConfig


def _ensure_search_index(sender: AppConfig, using: str = "default", **kwargs: object) -> None:
    """After ``migrate``: put back SQLite search triggers that a table rebuild dropped
    (``search_index.ensure``, docs/search.md)."""
    from django.db import connections

    from murmur_conversations import search_index

    search_index.ensure(connections[using])


def enable_secure_delete(sender: object, connection: Any, **kwargs: object) -> None:
    """``connection_created``: ``PRAGMA secure_delete = ON`` on every SQLite connection, so what
    a deletion frees is overwritten with zeros instead of lingering in the file's free pages
    (docs/security.md "What deletion removes")."""
    if connection.vendor == "sqlite":
        # On the DB-API connection: no query of Django's (the debug log, execute wrappers).
        connection.connection.execute("PRAGMA secure_delete = ON")


def _register_search_function(sender: object, connection: Any, **kwargs: object) -> None:
    """When a database connection opens: on SQLite, the function the search index's triggers
    call (``search_index.register_sqlite``)."""
    if connection.vendor == "sqlite":
        from murmur_conversations import search_index

        search_index.register_sqlite(connection.connection)


class MurmurConversationsConfig(AppConfig):
    """Registers the system checks, SQLite's ``secure_delete`` and search function; live-update
    receivers are connected only if Channels is there."""

    name = "murmur_conversations"
    label = "murmur_conversations"
    verbose_name = "Conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_migrate

        from murmur_conversations import checks  # noqa: F401  (registers the checks)

        post_migrate.connect(_ensure_search_index, sender=self)
        connection_created.connect(
            enable_secure_delete, dispatch_uid="murmur_conversations.secure_delete"
        )
        connection_created.connect(_register_search_function, dispatch_uid="murmur_search")

        # Without Channels the app works, minus live updates (docs/websocket.md).
        if importlib.util.find_spec("channels") is not None:
            from murmur_conversations.realtime import receivers

            receivers.connect()
