"""The page reads of display rows and of the record: one fixed statement each, run on a raw cursor.

Every reader of a page goes through here: the REST routes (``display-messages/`` with and without
``since``, ``record/``), the plug-in read (``hooks.read_messages``) and the benchmark's page row,
so what is measured is what users get (docs/api.md "Pages", docs/benchmarks.md).

Why not the ORM: a page is the same query every time, on a conversation already found in the
caller's scope. The ORM compiles it again on every call and turns each value through the field
converters; that costs more than the query itself (the ``page of 50`` row). Here:

- the SQL text of each read is built once from the models' ``_meta`` (table and column names)
  and cached per database vendor;
- on PostgreSQL it runs through a psycopg cursor with **server-side binding**, so psycopg
  prepares it on the server once it has run ``prepare_threshold`` times on the connection (as the
  single-statement writes do, ``services/statements.py``; ``OPTIONS={"prepare_threshold":
  None}`` turns preparing off). On SQLite it runs on Django's plain cursor;
- the cursor is wrapped as Django wraps its own (query logging, ``execute_wrapper``, error
  translation), so a read is one ordinary query to everything that counts queries;
- JSON columns are decoded once with :func:`jsonenc.loads` (Django's PostgreSQL connection leaves
  ``jsonb`` as text for the fields to decode; SQLite stores text), booleans and times are turned
  as the ORM turns them, and the rows become the dicts of ``representations`` directly.

The dicts are byte for byte those of ``representations.display_row`` and
``representations.record_row`` of the model instances (tests/test_page_reads.py proves it).
Owner scoping is the caller's: these functions take the id of a conversation the caller has
already found in its scope (``selectors``) and read nothing else.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from django.db import connections, router
from django.db.models import DateTimeField, Model
from django.db.models.base import ModelState
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from murmur_conversations import jsonenc
from murmur_conversations.models import DisplayMessage, Message
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

#: Feedback of the reader: ``{display row id: {"rating", "comment"}}`` for a list of row ids
#: (``selectors.feedback_for`` bound to a user).
FeedbackOf = Callable[[list[int]], Mapping[int, Any]]


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
        if isinstance(field, DateTimeField):
            column = times.format(column)
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


@functools.cache
def _statements(vendor: str, utc: bool) -> dict[str, str]:
    """The SQL text of every read for the database ``vendor`` (and whether its connection reads
    in UTC), built once (``%s`` placeholders: Django's SQLite cursor turns them into ``?``)."""
    display_times, record_times = _TIMES.get((vendor, utc), ("{}", "{}"))
    display, display_table = _select(DisplayMessage, DISPLAY_COLUMNS, display_times)
    record, record_table = _select(Message, RECORD_COLUMNS, record_times)
    return {
        # newest first, below a seq: the (conversation, seq) unique index, read backwards
        "display": (
            f"SELECT {display} FROM {display_table} "
            'WHERE "conversation_id" = %s AND "seq" < %s ORDER BY "seq" DESC LIMIT %s'
        ),
        # oldest change first, after (event_seq, seq) and above ``since``: murmur_display_event_idx
        "changes": (
            f"SELECT {display} FROM {display_table} "
            'WHERE "conversation_id" = %s AND "event_seq" > %s '
            'AND ("event_seq" > %s OR ("event_seq" = %s AND "seq" > %s)) '
            'ORDER BY "event_seq", "seq" LIMIT %s'
        ),
        # newest first, positions in (above, below): the (conversation, position) unique index
        "record": (
            f"SELECT {record} FROM {record_table} "
            'WHERE "conversation_id" = %s AND "position" < %s AND "position" > %s '
            'ORDER BY "position" DESC LIMIT %s'
        ),
    }


@functools.cache
def _qmark(sql: str) -> str:
    """``sql`` with ``?`` placeholders, as Django's SQLite cursor rewrites ``%s`` (these
    statements hold no other ``%``)."""
    return sql.replace("%s", "?")


def _fetch(
    model: type[Model], using: str | None, name: str, params: tuple[Any, ...]
) -> tuple[Any, list[Any]]:
    """The connection of ``using`` (None: the database routers' read alias of ``model``, as the
    ORM picks it) and the rows of statement ``name`` run on it with ``params`` (the conversation
    id first). Raises Django's database errors."""
    connection = connections[using or router.db_for_read(model)]
    sql = _statements(connection.vendor, _in_utc(connection))[name]
    if connection.vendor == "postgresql":
        cursor = server_side_cursor(connection)
    else:
        # Django stores a UUID as its 32 hex digits on every other backend
        params = (params[0].hex, *params[1:])
        if connection.vendor == "sqlite" and not (
            connection.queries_logged or connection.execute_wrappers
        ):
            # nothing logs or wraps queries: the checks and error translation of Django's
            # cursor, without building its two wrappers and rewriting ``%s`` on every call
            connection.close_if_health_check_failed()
            connection.ensure_connection()
            connection.validate_thread_sharing()
            connection.validate_no_broken_transaction()
            with connection.wrap_database_errors:
                return connection, connection.connection.execute(_qmark(sql), params).fetchall()
        cursor = connection.cursor()
    try:
        cursor.execute(sql, params)
        return connection, cursor.fetchall()
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


def _display_dicts(
    connection: Any, rows: list[Any], feedback: FeedbackOf | None
) -> list[dict[str, Any]]:
    when = _iso_writer(connection)
    # the JSON columns arrive as text from both drivers (``owner_feedback`` may be NULL, which
    # ``display_row_of_values`` leaves as None)
    loads = jsonenc.loads
    shape = display_row_of_values
    if feedback is None:
        return [shape(r, when=when, loads=loads) for r in rows]
    mine = feedback([r[0] for r in rows])
    return [shape(r, mine.get(r[0]), when=when, loads=loads) for r in rows]


def display_page(
    conversation_id: uuid.UUID,
    *,
    limit: int,
    before_seq: int | None = None,
    feedback: FeedbackOf | None = None,
    using: str | None = None,
) -> list[dict[str, Any]]:
    """Display rows of the conversation, newest first: at most ``limit`` rows with
    ``seq < before_seq`` (every row when None), each ``representations.display_row`` of the row.
    ``feedback`` gives the reader's own feedback for the row ids (REST: the caller's); None shows
    the owner's copy (``owner_feedback``), as websocket frames do. One query (and ``feedback``'s).
    """
    before = _ABOVE_ALL if before_seq is None else before_seq
    connection, rows = _fetch(DisplayMessage, using, "display", (conversation_id, before, limit))
    return _display_dicts(connection, rows, feedback)


def display_changes(
    conversation_id: uuid.UUID,
    *,
    since: int,
    limit: int,
    after: tuple[int, int] | None = None,
    feedback: FeedbackOf | None = None,
    using: str | None = None,
) -> list[dict[str, Any]]:
    """Display rows of the conversation changed after event_seq ``since``, oldest change first
    (``(event_seq, seq)``): at most ``limit`` rows after the keyset ``after`` (``(event_seq,
    seq)`` of the last row served, None for the first page), as :func:`display_page` shapes them.
    """
    event_seq, seq = (since, 0) if after is None else after
    connection, rows = _fetch(
        DisplayMessage, using, "changes", (conversation_id, since, event_seq, event_seq, seq, limit)
    )
    return _display_dicts(connection, rows, feedback)


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
    connection, rows = _fetch(Message, using, "record", (conversation_id, upper, above, limit))
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
