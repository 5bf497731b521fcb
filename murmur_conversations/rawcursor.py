"""A psycopg cursor with server-side binding, wrapped as Django wraps its own cursors.

The single-statement writes (``services/statements.py``) and the page reads (``reading.py``) run
fixed statements through it: with server-side binding psycopg prepares a statement on the server
once it has run ``prepare_threshold`` times on the connection (psycopg's default 5;
``OPTIONS={"prepare_threshold": None}`` in ``DATABASES`` turns preparing off, as a
transaction-mode pgbouncer needs), whatever Django's ``server_side_binding`` option says. The
wrapper is Django's (query logging, ``execute_wrapper``, error translation), so a statement is
one ordinary query to everything that counts queries (docs/write-path.md "Python out of the
way").
"""

from __future__ import annotations

from typing import Any

__all__ = ["server_side_cursor"]


def server_side_cursor(connection: Any) -> Any:
    """A Django cursor wrapper around a new server-side-binding ``psycopg.Cursor`` of the
    PostgreSQL ``connection`` (a Django database wrapper), connecting it first when needed.
    Raises Django's database errors; close it after use."""
    import psycopg  # PostgreSQL only: not needed by an SQLite install

    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        raw: psycopg.Cursor[Any] = psycopg.Cursor(connection.connection)
        connection.validate_thread_sharing()
        if connection.queries_logged:
            return connection.make_debug_cursor(raw)
        return connection.make_cursor(raw)
