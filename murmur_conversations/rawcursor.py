"""A psycopg cursor with server-side binding, wrapped as Django wraps its own cursors.

The single-statement writes (``services/statements.py``) and the page reads (``reading.py``) run
fixed statements through it, with server-side binding whatever Django's ``server_side_binding``
option says. Django's psycopg backend connects with ``prepare_threshold=None`` unless
``OPTIONS`` gives one, so psycopg prepares nothing by itself, and ignores ``prepare=True`` too;
a cursor made with ``prepare=True`` gives such a connection a threshold no count reaches
(:data:`NEVER_BY_COUNT`, so Django's own queries are still never prepared) and prepares each of
its statements at its first execution on the connection. The
wrapper is Django's (query logging, ``execute_wrapper``, error translation; the logged text is
the statement as written, placeholders and all), so a statement is one ordinary query to
everything that counts queries (docs/write-path.md "Python out of the
way").
"""

from __future__ import annotations

import functools
from typing import Any, Final

__all__ = ["server_side_cursor"]

#: The ``prepare_threshold`` given to a connection that had none: no count of executions reaches it.
NEVER_BY_COUNT: Final = 2**31 - 1


@functools.cache
def _debug_cursor() -> type[Any]:
    """Django's ``CursorDebugWrapper`` logging each statement as written (``%(name)s``
    placeholders, no values): Django reads the text it logs from the psycopg cursor's last query,
    which psycopg 3.3 keeps for no statement executed with ``prepare=`` (it logged None)."""
    from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

    class StatementDebugWrapper(CursorDebugWrapper):
        def execute(self, sql: Any, params: Any = None) -> Any:
            with self.debug_sql(sql, params):  # logs ``sql`` itself
                return CursorWrapper.execute(self, sql, params)

    return StatementDebugWrapper


@functools.cache
def _preparing_cursor(prepare: bool) -> type[Any]:
    """A ``psycopg.Cursor`` whose ``execute`` passes ``prepare`` (Django's cursor wrapper passes
    no ``prepare`` argument)."""
    import psycopg

    class PreparingCursor(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            return super().execute(query, params, prepare=prepare, **kwargs)

    return PreparingCursor


def server_side_cursor(connection: Any, *, prepare: bool | None = None) -> Any:
    """A Django cursor wrapper around a new server-side-binding ``psycopg.Cursor`` of the
    PostgreSQL ``connection`` (a Django database wrapper), connecting it first when needed.
    ``prepare`` True: every statement it executes is prepared on the server at its first
    execution on the connection and reused after, whatever ``prepare_threshold`` says; False:
    never prepared, nor a prepared copy used (behind a transaction-mode PgBouncer); None: as
    the connection's ``prepare_threshold`` says. Raises Django's database errors; close it
    after use."""
    import psycopg  # PostgreSQL only: not needed by an SQLite install

    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        kind: type[Any] = psycopg.Cursor
        if prepare is not None:
            kind = _preparing_cursor(prepare)
        if prepare and connection.connection.prepare_threshold is None:
            # psycopg ignores ``prepare=True`` on a connection with no threshold (Django's
            # default); one no count reaches prepares only what asks for it.
            connection.connection.prepare_threshold = NEVER_BY_COUNT
        raw: psycopg.Cursor[Any] = kind(connection.connection)
        connection.validate_thread_sharing()
        if connection.queries_logged:
            return _debug_cursor()(raw, connection)
        return connection.make_cursor(raw)
