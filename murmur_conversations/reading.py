"""The page reads of display rows and of the record: one fixed statement each, run on a raw cursor.

Every reader of a page goes through here: the REST routes (``display-messages/`` with and without
``since``, ``record/``), the plug-in read (``hooks.read_messages``) and the benchmark's page row,
so what is measured is what users get (docs/api.md "Pages", docs/benchmarks.md).

Each statement reads the conversation's row too, joined to the page (its counters, for ``total``,
and its owner): given a :data:`~murmur_conversations.selectors.ScopeCondition` (the caller's
``SCOPE``, from ``selectors.scope_condition``) it is also the scoped lookup, so a REST page is this
statement plus authentication, and a conversation outside the scope is exactly as absent as a
missing one (no row: :func:`scoped_page` answers None). The reader's own feedback is joined in
the same statement.

Why not the ORM: a page is the same query every time, on a conversation already found in the
caller's scope. The ORM compiles it again on every call and turns each value through the field
converters; that costs more than the query itself (the ``page of 50`` row). Here:

- the SQL text of each read is built once from the models' ``_meta`` (table and column names)
  and cached per database vendor;
- on PostgreSQL it runs through a psycopg cursor with **server-side binding**, prepared on the
  server at its first execution on the connection, as the write path's statements are
  (``rawcursor.server_side_cursor``; the ``PREPARE_STATEMENTS`` setting off prepares nothing, as a
  transaction-mode PgBouncer needs). On SQLite it runs on Django's plain cursor;
- the cursor is wrapped as Django wraps its own (query logging, ``execute_wrapper``, error
  translation), so a read is one ordinary query to everything that counts queries;
- JSON columns are decoded once with :func:`jsonenc.loads` (Django's PostgreSQL connection leaves
  ``jsonb`` as text for the fields to decode; SQLite stores text), booleans and times are turned
  as the ORM turns them, and the rows become the dicts of ``representations`` directly.

The dicts are byte for byte those of ``representations.display_row`` and
``representations.record_row`` of the model instances (tests/test_page_reads.py proves it).
:func:`display_page`, :func:`display_changes` and :func:`record_messages` take the id of a
conversation the caller has already found in its scope and check none; :func:`scoped_page`
checks it.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from django.db import connections, router
from django.db.models import DateTimeField, Model
from django.db.models.base import ModelState
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from murmur_conversations import jsonenc
from murmur_conversations.conf import app_settings
from murmur_conversations.models import Conversation, DisplayMessage, Feedback, Message
from murmur_conversations.rawcursor import server_side_cursor
from murmur_conversations.representations import (
    DISPLAY_COLUMNS,
    display_row_of_values,
    iso,
    record_row,
)

#: No upper bound: above every seq and position (both are 64-bit integers).
_ABOVE_ALL: Final = 2**63 - 1

#: The record columns a record page reads, in order (every field ``record_row`` and
#: ``hooks.hook_message`` use).
RECORD_COLUMNS: Final = (
    "id",
    "message_id",
    "position",
    "role",
    "content",
    "tool_call_id",
    "is_error",
    "source_id",
    "extra",
    "created_at",
)

#: A listing :func:`scoped_page` reads.
Listing = Literal["display", "changes", "record"]
#: An SQL condition on the conversation row (alias ``c``) and its parameters: the reader's scope
#: (``selectors.scope_condition``).
Condition = tuple[str, tuple[Any, ...]]


@dataclass(frozen=True)
class Head:
    """What a page statement read of the conversation's row: ``owner_id`` (None: ownerless),
    ``last_seq`` and ``record_length`` (the counters), and ``changed``: the display rows changed
    after ``since`` (the ``changes`` listing's ``total``; 0 for the others)."""

    owner_id: Any
    last_seq: int
    record_length: int
    changed: int


def _in_utc(connection: Any) -> bool:
    """The connection reads times in UTC (``TIME_ZONE`` of the database unset or UTC)."""
    return bool(connection.timezone_name == "UTC")


def _select(model: type[Model], names: Sequence[str], times: str) -> tuple[str, str]:
    """``("col", "col", ..., table)`` of ``model``'s fields ``names``, from its ``_meta``, with
    each time column read as ``times`` spells it (``{}``: the column): the stored text on SQLite
    (``CAST(... AS TEXT)``, not what the ``sqlite3`` converter Django registers would parse), UTC
    text on PostgreSQL (``to_char``: no datetime parsed in Python), see :func:`_iso_writer`."""
    meta = model._meta
    columns = []
    for name in names:
        field = meta.get_field(name)
        column = f'"{field.column}"'  # type: ignore[union-attr]
        if isinstance(field, DateTimeField) and times != "{}":
            column = f"{times.format(column)} AS {column}"
        columns.append(column)
    return ", ".join(columns), f'"{meta.db_table}"'


#: How each vendor's reads spell a time column: (display rows, record messages). PostgreSQL's
#: display rows read UTC text when the connection is in UTC (``(vendor, True)``), else datetimes.
_TIMES: Final = {
    ("sqlite", True): ("CAST({} AS TEXT)", "CAST({} AS TEXT)"),
    ("sqlite", False): ("CAST({} AS TEXT)", "CAST({} AS TEXT)"),
    ("postgresql", True): ("to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')", "{}"),
    ("postgresql", False): ("{}", "{}"),
}


def _column(model: type[Model], name: str) -> str:
    return f'"{model._meta.get_field(name).column}"'  # type: ignore[union-attr]


@functools.lru_cache(maxsize=64)
def _statement(vendor: str, utc: bool, listing: Listing, feedback: bool, scope: str | None) -> str:
    """The SQL text of one page read for the database ``vendor`` (and whether its connection
    reads in UTC), built once (``%s`` placeholders: Django's SQLite cursor turns them into ``?``).

    The page is a CTE (``p``) on its unique index; the conversation row ``c`` is joined to it
    (``LEFT JOIN ... ON 1 = 1``: an empty page still reads the conversation, as one row of
    NULLs), then the reader's feedback (``feedback``), and ``c`` must satisfy ``scope`` (an SQL
    condition, None for none). Parameters, in order: those of the CTE (the conversation id
    first), for ``changes`` the id and ``since`` of the count, the reader's pk (``feedback``),
    the id, the scope's."""
    display_times, record_times = _TIMES.get((vendor, utc), ("{}", "{}"))
    display, display_table = _select(DisplayMessage, DISPLAY_COLUMNS, display_times)
    record, record_table = _select(Message, RECORD_COLUMNS, record_times)
    conversation = f'"{Conversation._meta.db_table}"'
    pk = _column(Conversation, "id")
    head = ", ".join(
        f"c.{_column(Conversation, name)}" for name in ("owner", "last_seq", "record_length")
    )
    if listing == "display":
        # newest first, below a seq: the (conversation, seq) unique index, read backwards
        page = (
            f"SELECT {display} FROM {display_table} "
            'WHERE "conversation_id" = %s AND "seq" < %s ORDER BY "seq" DESC LIMIT %s'
        )
        order = 'p."seq" DESC'
    elif listing == "changes":
        # oldest change first, after (event_seq, seq) and above ``since``: murmur_display_event_idx
        page = (
            f"SELECT {display} FROM {display_table} "
            'WHERE "conversation_id" = %s AND "event_seq" > %s '
            'AND ("event_seq" > %s OR ("event_seq" = %s AND "seq" > %s)) '
            'ORDER BY "event_seq", "seq" LIMIT %s'
        )
        order = 'p."event_seq", p."seq"'
    else:
        # newest first, positions in (above, below): the (conversation, position) unique index
        page = (
            f"SELECT {record} FROM {record_table} "
            'WHERE "conversation_id" = %s AND "position" < %s AND "position" > %s '
            'ORDER BY "position" DESC LIMIT %s'
        )
        order = 'p."position" DESC'
    changed = (
        # uncorrelated (the id is a parameter): run once, not per row
        f'(SELECT COUNT(*) FROM {display_table} WHERE "conversation_id" = %s AND "event_seq" > %s)'
        if listing == "changes"
        else "0"
    )
    columns = f"{head}, {changed}, p.*"
    joins = ""
    if feedback:
        rating, comment = _column(Feedback, "rating"), _column(Feedback, "comment")
        columns += f", f.{rating}, f.{comment}"
        joins = (
            f' LEFT JOIN "{Feedback._meta.db_table}" f ON f.{_column(Feedback, "display_message")}'
            f' = p."id" AND f.{_column(Feedback, "user")} = %s'
        )
    where = f"c.{pk} = %s" + ("" if scope is None else f" AND {scope}")
    return (
        f"WITH p AS ({page}) SELECT {columns} FROM {conversation} c "
        f"LEFT JOIN p ON 1 = 1{joins} WHERE {where} ORDER BY {order}"
    )


@functools.lru_cache(maxsize=64)
def _qmark(sql: str) -> str | None:
    """``sql`` with ``?`` placeholders, as Django's SQLite cursor rewrites ``%s``; None when it
    holds an escaped ``%%`` (a host's ``SCOPE`` may), which only Django's cursor rewrites."""
    return None if "%%" in sql else sql.replace("%s", "?")


def _run(
    model: type[Model],
    using: str | None,
    listing: Listing,
    page: tuple[Any, ...],
    *,
    conversation_id: uuid.UUID,
    since: int = 0,
    reader: Any = None,
    feedback: bool = False,
    scope: Condition | None = None,
) -> tuple[Any, Head | None, list[Any]]:
    """The connection of ``using`` (None: the database routers' read alias of ``model``, as the
    ORM picks it), the conversation's :class:`Head` (None when it is missing or outside
    ``scope``) and the page's rows (each without the head's columns) of one :func:`_statement`
    run with ``page`` (the CTE's parameters after the id). Raises Django's database errors."""
    connection = connections[using or router.db_for_read(model)]
    sql = _statement(
        connection.vendor,
        _in_utc(connection),
        listing,
        feedback,
        None if scope is None else scope[0],
    )
    params: tuple[Any, ...] = (conversation_id, *page)
    if listing == "changes":
        params += (conversation_id, since)
    if feedback:
        params += (reader,)
    params += (conversation_id, *(() if scope is None else scope[1]))
    rows = _execute(connection, sql, params)
    if not rows:
        return connection, None, []
    first = rows[0]
    head = Head(owner_id=first[0], last_seq=first[1], record_length=first[2], changed=first[3])
    if first[4] is None:  # the LEFT JOIN's row of NULLs: an empty page
        return connection, head, []
    return connection, head, [row[4:] for row in rows]


def _execute(connection: Any, sql: str, params: tuple[Any, ...]) -> list[Any]:
    """The rows of ``sql`` run on ``connection``. On PostgreSQL a server-side-binding cursor;
    elsewhere UUIDs are bound as Django stores them (32 hex digits), and on SQLite with nothing
    logging or wrapping queries the statement runs on the driver's connection directly."""
    if connection.vendor == "postgresql":
        cursor = server_side_cursor(connection, prepare=app_settings.prepare_statements)
    else:
        params = tuple(p.hex if isinstance(p, uuid.UUID) else p for p in params)
        qmark = _qmark(sql) if connection.vendor == "sqlite" else None
        if qmark is not None and not (connection.queries_logged or connection.execute_wrappers):
            # nothing logs or wraps queries: the checks and error translation of Django's
            # cursor, without building its two wrappers and rewriting ``%s`` on every call
            connection.close_if_health_check_failed()
            connection.ensure_connection()
            connection.validate_thread_sharing()
            connection.validate_no_broken_transaction()
            with connection.wrap_database_errors:
                rows: list[Any] = connection.connection.execute(qmark, params).fetchall()
                return rows
        cursor = connection.cursor()
    try:
        cursor.execute(sql, params)
        fetched: list[Any] = cursor.fetchall()
        return fetched
    finally:
        cursor.close()


def _loads(value: Any) -> Any:
    """A JSON column as ``JSONField.from_db_value`` gives it: NULL is None, text is decoded."""
    return jsonenc.loads(value) if isinstance(value, str | bytes) else value


def _time_reader(connection: Any) -> Callable[[Any], datetime | None]:
    """Time as read -> datetime, as the ORM reads a ``DateTimeField`` on ``connection``: a
    datetime as the driver gives it; text (SQLite's stored text, PostgreSQL's UTC text) parsed as
    Django's SQLite backend parses it, then aware in the connection's time zone."""
    zone = connection.timezone

    def read(value: Any) -> datetime | None:
        if value is None:
            return None
        parsed = value if isinstance(value, datetime) else parse_datetime(value)
        if parsed is not None and timezone.is_naive(parsed):
            parsed = timezone.make_aware(parsed, zone)
        return parsed

    return read


def _iso_writer(connection: Any) -> Callable[[Any], str | None]:
    """Time as read by the display statements -> ``representations.iso`` of the datetime the ORM
    would read. In UTC, text ``YYYY-MM-DD HH:MM:SS[.f...]`` (what Django writes on SQLite,
    SQLite's ``strftime('%Y-%m-%d %H:%M:%f')`` as ``Now()`` writes it, PostgreSQL's ``to_char``)
    is turned straight into its ISO spelling; anything else goes the ORM's way (parse, then
    :func:`iso`)."""
    read = _time_reader(connection)
    if not _in_utc(connection):

        def slow(value: Any) -> str | None:
            return iso(read(value))

        return slow

    def fast(value: Any) -> str | None:
        if (
            type(value) is str
            and value[10:11] == " "
            and value[4:5] == value[7:8] == "-"
            and value[13:14] == value[16:17] == ":"
        ):
            if len(value) == 19:
                return f"{value[:10]}T{value[11:]}Z"
            fraction = value[20:]
            if (
                value[19] == "."
                and len(fraction) <= 6
                and fraction.isascii()
                and fraction.isdigit()
            ):
                # microseconds, as ``datetime.isoformat`` spells them: six digits, none when 0
                if fraction.strip("0"):
                    return f"{value[:10]}T{value[11:19]}.{fraction.ljust(6, '0')}Z"
                return f"{value[:10]}T{value[11:19]}Z"
        return iso(read(value))

    return fast


def _display_rows(connection: Any, rows: list[Any], feedback: bool) -> list[dict[str, Any]]:
    """The display dicts of page rows (with the reader's ``rating, comment`` after the
    :data:`DISPLAY_COLUMNS` when ``feedback``)."""
    when = _iso_writer(connection)
    # the JSON columns arrive as text from both drivers (``owner_feedback`` may be NULL, which
    # ``display_row_of_values`` leaves as None)
    loads = jsonenc.loads
    shape = display_row_of_values
    if not feedback:
        return [shape(r, when=when, loads=loads) for r in rows]
    width = len(DISPLAY_COLUMNS)
    return [
        shape(
            r[:width],
            None if r[width] is None else {"rating": r[width], "comment": r[width + 1]},
            when=when,
            loads=loads,
        )
        for r in rows
    ]


def _display(
    listing: Listing,
    conversation_id: uuid.UUID,
    page: tuple[Any, ...],
    *,
    since: int = 0,
    reader: Any,
    scope: Condition | None,
    using: str | None,
) -> tuple[Head | None, list[dict[str, Any]]]:
    feedback = reader is not None
    connection, head, rows = _run(
        DisplayMessage,
        using,
        listing,
        page,
        conversation_id=conversation_id,
        since=since,
        reader=getattr(reader, "pk", reader) if feedback else None,
        feedback=feedback,
        scope=scope,
    )
    return head, _display_rows(connection, rows, feedback)


def _page_of_changes(since: int, limit: int, after: tuple[int, int] | None) -> tuple[int, ...]:
    event_seq, seq = (since, 0) if after is None else after
    return (since, event_seq, event_seq, seq, limit)


def display_page(
    conversation_id: uuid.UUID,
    *,
    limit: int,
    before_seq: int | None = None,
    reader: Any = None,
    using: str | None = None,
) -> list[dict[str, Any]]:
    """Display rows of the conversation, newest first: at most ``limit`` rows with
    ``seq < before_seq`` (every row when None), each ``representations.display_row`` of the row.
    ``feedback`` is ``reader``'s own (a user: REST shows the caller's), joined in; with no
    ``reader`` the owner's copy (``owner_feedback``), as websocket frames show it. One query.
    """
    before = _ABOVE_ALL if before_seq is None else before_seq
    return _display(
        "display", conversation_id, (before, limit), reader=reader, scope=None, using=using
    )[1]


def display_changes(
    conversation_id: uuid.UUID,
    *,
    since: int,
    limit: int,
    after: tuple[int, int] | None = None,
    reader: Any = None,
    using: str | None = None,
) -> list[dict[str, Any]]:
    """Display rows of the conversation changed after event_seq ``since``, oldest change first
    (``(event_seq, seq)``): at most ``limit`` rows after the keyset ``after`` (``(event_seq,
    seq)`` of the last row served, None for the first page), as :func:`display_page` shapes them.
    One query."""
    page = _page_of_changes(since, limit, after)
    return _display(
        "changes", conversation_id, page, since=since, reader=reader, scope=None, using=using
    )[1]


@dataclass(frozen=True)
class ScopedPage:
    """A page read with its scope check (:func:`scoped_page`): the conversation's :class:`Head`
    and the page's rows (display dicts, or record dicts)."""

    head: Head
    rows: list[dict[str, Any]]


def scoped_page(
    listing: Listing,
    conversation_id: uuid.UUID,
    *,
    scope: Condition | None,
    limit: int,
    reader: Any = None,
    before: int | None = None,
    since: int = 0,
    after: tuple[int, int] | None = None,
    using: str | None = None,
) -> ScopedPage | None:
    """One page of ``listing`` and the conversation's head in ONE statement, with the
    conversation row checked against ``scope`` (None: no check, the caller found it already):
    None when the conversation is missing or outside the scope, alike.

    ``display``: as :func:`display_page` (``before`` the keyset); ``changes``: as
    :func:`display_changes` (``since``, ``after``), ``head.changed`` counting every row changed
    after ``since``; ``record``: as :func:`record_page` (``before`` the position). ``reader``:
    whose feedback the display rows show (None: the owner's copy)."""
    if listing == "record":
        connection, head, rows = _run(
            Message,
            using,
            "record",
            (_ABOVE_ALL if before is None else before, 0, limit),
            conversation_id=conversation_id,
            scope=scope,
        )
        messages = _messages(connection, conversation_id, rows)
        return None if head is None else ScopedPage(head, [record_row(m) for m in messages])
    if listing == "changes":
        page = _page_of_changes(since, limit, after)
    else:
        page = (_ABOVE_ALL if before is None else before, limit)
    found, shaped = _display(
        listing, conversation_id, page, since=since, reader=reader, scope=scope, using=using
    )
    return None if found is None else ScopedPage(found, shaped)


def record_messages(
    conversation_id: uuid.UUID,
    *,
    limit: int,
    below: int | None = None,
    above: int = 0,
    using: str | None = None,
) -> list[Message]:
    """Record messages of the conversation, newest first: at most ``limit`` with ``above <
    position < below`` (``below`` None: no upper bound), as ``Message`` instances loaded from
    ``using`` with the fields of :data:`RECORD_COLUMNS` (plus ``conversation_id``), built without
    ``Model.__init__``: what ``representations.record_row``, ``record_message`` and
    ``hooks.hook_message`` read. One query."""
    upper = _ABOVE_ALL if below is None else below
    connection, _head, rows = _run(
        Message, using, "record", (upper, above, limit), conversation_id=conversation_id
    )
    return _messages(connection, conversation_id, rows)


def _messages(connection: Any, conversation_id: uuid.UUID, rows: list[Any]) -> list[Message]:
    """``Message`` instances of record rows read as :data:`RECORD_COLUMNS`."""
    read = _time_reader(connection)
    loads = _loads
    state_db = connection.alias
    messages = []
    for pk, message_id, position, role, content, call_id, is_error, source_id, extra, at in rows:
        message = Message.__new__(Message)
        state = ModelState()
        state.adding = False
        state.db = state_db
        message.__dict__.update(
            _state=state,
            id=pk,
            conversation_id=conversation_id,
            message_id=message_id,
            position=position,
            role=role,
            content=loads(content),
            tool_call_id=call_id,
            is_error=bool(is_error),
            source_id=source_id,
            extra=loads(extra),
            created_at=read(at),
        )
        messages.append(message)
    return messages


def record_page(
    conversation_id: uuid.UUID,
    *,
    limit: int,
    before_position: int | None = None,
    using: str | None = None,
) -> list[dict[str, Any]]:
    """Record rows of the conversation, newest first: at most ``limit`` with ``position <
    before_position`` (every one when None), each ``representations.record_row``. One query."""
    messages = record_messages(conversation_id, limit=limit, below=before_position, using=using)
    return [record_row(message) for message in messages]
