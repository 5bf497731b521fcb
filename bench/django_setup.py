"""Django for the bench process: its own PostgreSQL database and SQLite file, schema by ``migrate``.

The services always write through ``router.db_for_write``; :class:`ActiveDatabaseRouter` sends
every read and write to the alias of the track being measured (``use_alias``), so the same service
code runs against PostgreSQL (alias ``default``) and the embedded SQLite default (alias ``sqlite``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

_ACTIVE = {"alias": "default"}


class ActiveDatabaseRouter:
    """Routes every model to the alias set by :func:`use_alias`; migrates everywhere."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return _ACTIVE["alias"]

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return _ACTIVE["alias"]

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return True


def use_alias(alias: str) -> None:
    """Make ``alias`` the database every ORM read and write goes to."""
    _ACTIVE["alias"] = alias


def on_alias(alias: str, operation: Callable[[], object]) -> Callable[[], object]:
    """``operation`` run with every ORM query on ``alias``, then back to the previous alias."""

    def run() -> object:
        previous = _ACTIVE["alias"]
        _ACTIVE["alias"] = alias
        try:
            return operation()
        finally:
            _ACTIVE["alias"] = previous

    return run


def pg_params(url: str) -> dict[str, Any]:
    """``host, port, user, password, dbname`` of a ``postgres://`` URL (psycopg keywords)."""
    parts = urlsplit(url)
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 5432,
        "user": parts.username or "postgres",
        "password": parts.password or "",
        "dbname": parts.path.lstrip("/") or "murmur_bench",
    }


def recreate_pg_database(params: dict[str, Any]) -> None:
    """Drop and create the bench database (refuses names used by the test suite)."""
    name = params["dbname"]
    if name.startswith("test_murmur") or name in {"postgres", "template0", "template1"}:
        raise SystemExit(f"refusing to use database {name!r} for benchmarks")
    drop_pg_database(params)
    with psycopg.connect(**{**params, "dbname": "postgres"}, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_pg_database(params: dict[str, Any]) -> None:
    """Drop the bench database if it exists (its connections are ended first)."""
    with psycopg.connect(**{**params, "dbname": "postgres"}, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(params["dbname"])
            )
        )


def configure(pg: dict[str, Any], sqlite_path: str) -> None:
    """Configure Django for the bench (no settings module), run ``setup`` and migrate both
    databases. PostgreSQL is used without Django's pool: one process, one connection held open,
    as a pooled worker holds its connection during a request."""
    import django
    from django.conf import settings
    from django.core.management import call_command

    settings.configure(
        DEBUG=False,
        SECRET_KEY="bench-only",
        USE_TZ=True,
        TIME_ZONE="UTC",
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        INSTALLED_APPS=[
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "murmur_conversations",
        ],
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": pg["dbname"],
                "USER": pg["user"],
                "PASSWORD": pg["password"],
                "HOST": pg["host"],
                "PORT": str(pg["port"]),
            },
            # The same database with server-side binding (prepared statements): a prototype
            # of a configuration change, measured beside the default.
            "pg_ssb": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": pg["dbname"],
                "USER": pg["user"],
                "PASSWORD": pg["password"],
                "HOST": pg["host"],
                "PORT": str(pg["port"]),
                "OPTIONS": {"server_side_binding": True},
                "TEST": {"MIRROR": "default"},
            },
            "sqlite": {  # the embedded default of the README
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": sqlite_path,
                "OPTIONS": {
                    "transaction_mode": "IMMEDIATE",
                    "timeout": 20,
                    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                },
            },
        },
        DATABASE_ROUTERS=["bench.django_setup.ActiveDatabaseRouter"],
        MURMUR_CONVERSATIONS={},
        # The embedded default layer, so writes pay for their live-update hand-off as deployed.
        CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}},
        LOGGING_CONFIG=None,
    )
    django.setup()
    for alias in ("default", "sqlite"):  # pg_ssb is the same database as default
        use_alias(alias)
        call_command("migrate", database=alias, verbosity=0, interactive=False)
    use_alias("default")
