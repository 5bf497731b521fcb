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

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/murmur_bench"
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


def configure(pg: dict[str, Any], sqlite_path: str | None) -> None:
    """Configure Django for the bench (``bench.settings``, through the environment, so the servers
    and workers it starts see the same settings), run ``setup`` and migrate the databases.
    PostgreSQL is used without Django's pool in this process: one connection held open, as a
    pooled worker holds its connection during a request."""
    import os

    import django
    from django.core.management import call_command

    os.environ.update(bench_environment(pg, sqlite_path))
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    recreate_pg_database({**pg, "dbname": noindex_database_name(pg)})
    django.setup()
    from django.db import connections

    from murmur_conversations import search_index

    aliases = ("default", "pg_noindex", "sqlite", "sqlite_noindex")
    for alias in aliases if sqlite_path else aliases[:2]:
        use_alias(alias)  # pg_ssb is the same database as default
        call_command("migrate", database=alias, verbosity=0, interactive=False)
        if alias.endswith("_noindex"):
            search_index.uninstall(connections[alias])
    use_alias("default")


def noindex_database_name(pg: dict[str, Any]) -> str:
    """The PostgreSQL database of alias ``pg_noindex``: the schema without the search index."""
    return f"{pg['dbname']}_noindex"


def admin_database_names(pg: dict[str, Any]) -> tuple[str, str]:
    """The admin row's two databases (10k and 1.1M rows), named after the bench database."""
    return f"{pg['dbname']}_admin_small", f"{pg['dbname']}_admin_large"


def bench_environment(pg: dict[str, Any], sqlite_path: str | None = None) -> dict[str, str]:
    """The environment ``bench.settings`` reads (see its docstring)."""
    url = f"postgres://{pg['user']}:{pg['password']}@{pg['host']}:{pg['port']}/{pg['dbname']}"
    env = {
        "BENCH_DATABASE_URL": url,
        "BENCH_ADMIN_DATABASES": ",".join(admin_database_names(pg)),
        "DJANGO_SETTINGS_MODULE": "bench.settings",
    }
    if sqlite_path:
        env["BENCH_SQLITE_PATH"] = sqlite_path
    return env
