"""The short fixed append for SQLite: plain messages in as few statements as SQLite allows.

SQLite has ``RETURNING`` (3.35+) but no data-modifying CTEs, so the PostgreSQL single statement
(``fastpath``) becomes a short fixed sequence in one transaction (``BEGIN IMMEDIATE`` with the
``transaction_mode`` the settings recommend; a savepoint inside a caller's transaction):

1. ``UPDATE`` the conversation ``RETURNING`` its columns: the first statement of the transaction
   writes, so it takes the write lock before anything is read (as ``writing.lock_conversation``
   does on SQLite), and it reserves the positions, seqs and one event_seq, adds the token counters
   and merges ``usage_by_model`` (``json_patch``, the rule of ``usage.add_by_model``). When some
   id was given by the writer, a known one makes it update nothing: the path declines.
2. one multi-row ``INSERT`` of the record rows ``RETURNING`` their ids;
3. one multi-row ``INSERT`` of the display rows ``RETURNING`` their ids;
4. for messages that carry usage, one multi-row ``INSERT`` of their usage rows;
5. ``writing.announce``: the frame log's ``INSERT`` (docs/websocket.md "The frame log") in the
   same transaction, and the signals after commit.

The same messages take it as take ``fastpath`` on PostgreSQL (:func:`fastpath.plain`). Values are
bound as the ORM binds them (JSON as ``json.dumps`` text, datetimes as UTC text, ids as hex), so
the rows are byte for byte what the general path stores, except ``usage_by_model``, whose JSON
SQLite writes compactly (the same value). Returned instances are built without
``Model.__init__`` (``statements.instance``), the conversation's columns through the backend's
own converters. Declining (no such conversation, a known id, a unique constraint) rolls the
transaction back; the caller then takes the general path, which is the reference.
``tests/test_fastlite.py`` proves the two write the same. Private to
``murmur_conversations.services``.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.models import Model

from murmur_conversations.conf import app_settings
from murmur_conversations.messages import DisplayPart, NormalizedMessage, display_parts
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    MessageUsage,
    ToolStatus,
)
from murmur_conversations.services import fastpath, statements
from murmur_conversations.services.writing import announce, database_errors, retention_time
from murmur_conversations.usage import COUNTERS, Usage, row_cost

#: SQLite's first release with ``RETURNING``.
RETURNING_SINCE = (3, 35, 0)

_MESSAGE_COLUMNS = (
    "conversation_id",
    "position",
    "message_id",
    "role",
    "content",
    "tool_call_id",
    "is_error",
    "source_id",
    "extra",
    "created_at",
)
_DISPLAY_COLUMNS = (
    "conversation_id",
    "message_id",
    "seq",
    "message_type",
    "content_type",
    "content",
    "status",
    "tool_call_id",
    "metadata",
    "created_event_seq",
    "event_seq",
    "created_at",
    "updated_at",
    "owner_feedback",
)
_USAGE_COLUMNS = (
    "conversation_id",
    "message_id",
    "model",
    *COUNTERS,
    "cost_nanocents",
    "priced_with",
    "created_at",
)
Converter = Callable[[Any, Any, Any], Any]


class _Declined(Exception):
    """The sequence declined: its transaction (or savepoint) rolls back."""


def eligible(connection_vendor: str, messages: list[NormalizedMessage], has_records: bool) -> bool:
    """Whether a batch can take this path: SQLite with ``RETURNING`` and the plain messages
    ``fastpath`` takes on PostgreSQL (:func:`fastpath.plain`)."""
    return (
        connection_vendor == "sqlite"
        and sqlite3.sqlite_version_info >= RETURNING_SINCE
        and fastpath.plain(messages, has_records)
    )


def _q(name: str) -> str:
    return f'"{name}"'


@functools.lru_cache(maxsize=64)
def update_sql(models: int, check_ids: bool) -> str:
    """The conversation's ``UPDATE ... RETURNING``, for ``models`` distinct models with usage in
    the batch (0: no usage); ``check_ids``: some id was given, so a known one updates nothing.
    ``%s`` placeholders, in the order :func:`_update_params` gives."""
    conv = Conversation._meta.db_table
    msg = Message._meta.db_table
    usage = ""
    if models:
        usage = "".join(f"\n  {_q(name)} = {_q(name)} + %s," for name in COUNTERS)
        # One model's stored entry (None: no entry), as json_each sees it (no path quoting).
        entry = f'(SELECT value FROM json_each({_q(conv)}."usage_by_model") WHERE key = %s)'
        counts = ", ".join(
            f"'{name}', COALESCE(json_extract({entry}, '$.{name}'), 0) + %s" for name in COUNTERS
        )
        patch = ", ".join([f"%s, json_object({counts})"] * models)
        usage += f'\n  "usage_by_model" = json_patch("usage_by_model", json_object({patch})),'
    known = (
        f'\n  AND NOT EXISTS (SELECT 1 FROM {_q(msg)} WHERE "conversation_id" = %s'
        ' AND "message_id" IN (SELECT value FROM json_each(%s)))'
    )
    return (
        f"UPDATE {_q(conv)} SET\n"
        '  "record_length" = "record_length" + %s,\n'
        '  "transcript_count" = "transcript_count" + %s,\n'
        '  "last_seq" = "last_seq" + %s,\n'
        f'  "last_event_seq" = "last_event_seq" + 1,{usage}\n'
        '  "saved_at" = MAX("saved_at", %s),\n'
        '  "retained_at" = MAX("retained_at", %s)\n'
        f'WHERE "id" = %s{known if check_ids else ""}\n'
        f"RETURNING {statements.returning(Conversation)}"
    )


@functools.lru_cache(maxsize=128)
def insert_sql(model: type[Model], columns: tuple[str, ...], rows: int, returning: str) -> str:
    """A multi-row ``INSERT`` of ``rows`` rows into ``model``'s table ``RETURNING returning``."""
    one = f"({', '.join(['%s'] * len(columns))})"
    names = ", ".join(_q(c) for c in columns)
    tail = f" RETURNING {returning}" if returning else ""
    return (
        f"INSERT INTO {_q(model._meta.db_table)} ({names}) VALUES {', '.join([one] * rows)}{tail}"
    )


def _converters(using: str) -> tuple[list[str], list[tuple[int, list[Converter], Any]]]:
    """The attribute names of Conversation's concrete fields, and for each field whose column a
    query of ``using`` converts (the backend's converters, then the field's, as Django's compiler
    applies them): its index, the converters and the column expression they are given."""
    connection = connections[using]
    cached = getattr(connection, "_murmur_fastlite_converters", None)
    if cached is None:
        names: list[str] = []
        converting: list[tuple[int, list[Converter], Any]] = []
        for index, field in enumerate(Conversation._meta.concrete_fields):
            names.append(field.attname)
            column = field.get_col(Conversation._meta.db_table)
            found = [
                *connection.ops.get_db_converters(column),
                *column.get_db_converters(connection),
            ]
            if found:
                converting.append((index, found, column))
        cached = (names, converting)
        connection._murmur_fastlite_converters = cached  # type: ignore[attr-defined]
    return cached


def _conversation(using: str, row: tuple[Any, ...]) -> Conversation:
    """The Conversation of the ``UPDATE``'s returned row, converted as the ORM converts a read."""
    connection = connections[using]
    names, converting = _converters(using)
    values = list(row)
    for index, converters, column in converting:
        value = values[index]
        for convert in converters:
            value = convert(value, column, connection)
        values[index] = value
    return statements.instance(Conversation, using, dict(zip(names, values, strict=True)))


def _chunks(connection: Any, columns: int, rows: list[list[Any]]) -> list[list[list[Any]]]:
    """``rows`` cut so that no statement binds more variables than SQLite allows."""
    raw = connection.connection
    limit = 999
    if hasattr(raw, "getlimit"):  # Python 3.11+
        limit = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    size = max(1, limit // columns)
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def _insert(
    cursor: Any,
    connection: Any,
    model: type[Model],
    columns: tuple[str, ...],
    rows: list[list[Any]],
    returning: str = "",
) -> list[tuple[Any, ...]]:
    """Insert ``rows`` (values in ``columns`` order) in as few statements as the variable limit
    allows; the returned rows of every statement."""
    result: list[tuple[Any, ...]] = []
    for chunk in _chunks(connection, len(columns), rows):
        params = [value for row in chunk for value in row]
        cursor.execute(insert_sql(model, columns, len(chunk), returning), params)
        if returning:
            result.extend(cursor.fetchall())
    return result


def _json(value: Any) -> str:
    """JSON text as the ORM binds a JSONField's value on SQLite (``json.dumps``, no encoder)."""
    return json.dumps(value)


def try_append(
    *,
    conversation_pk: Any,
    using: str,
    messages: list[NormalizedMessage],
    now: datetime,
    times: list[datetime | None] | None = None,
) -> tuple[Conversation, list[DisplayMessage]] | None:
    """Append ``messages`` in the fixed sequence of the module docstring and return the saved
    conversation and the new display rows (by ``seq``); None when it declines (then nothing was
    written and the caller takes the general path). Sends the same signals as the general path.
    Raises ``WriteConflict`` or ``InvalidContent`` as the general path does
    (``writing.database_errors``). ``times`` (one aware datetime or None per message;
    docs/write-path.md "Times") stamps each message's rows; ``saved_at`` becomes the latest of
    them (None: ``now``), never earlier than the stored one."""
    stamps = [t or now for t in (times or [None] * len(messages))]
    try:
        with database_errors(), transaction.atomic(using=using):
            done = _append(using, conversation_pk, messages, stamps)
            if done is None:
                raise _Declined
            return done
    except _Declined:
        return None


def _update_params(
    connection: Any, pk: Any, messages: list[NormalizedMessage], displays: int, saved: datetime
) -> tuple[int, bool, list[Any]]:
    """The parameters of :func:`update_sql`, with its ``models`` and ``check_ids``."""
    pk_db = Conversation._meta.pk.get_db_prep_value(pk, connection)
    params: list[Any] = [
        len(messages),
        sum(message.in_transcript for message in messages),
        displays,
    ]
    by_model: dict[str, Usage] = {}
    total = Usage()
    for message in messages:
        if message.usage is not None:
            total = total + message.usage
            by_model[message.model] = by_model.get(message.model, Usage()) + message.usage
    if by_model:
        params += list(total.as_dict().values())
        for model, usage in by_model.items():
            params.append(model)
            for value in usage.as_dict().values():
                params += [model, value]
    params += [
        connection.ops.adapt_datetimefield_value(saved),
        connection.ops.adapt_datetimefield_value(retention_time(saved)),
        pk_db,
    ]
    check_ids = any(message.id_given for message in messages)
    if check_ids:
        params += [pk_db, json.dumps([message.message_id for message in messages])]
    return len(by_model), check_ids, params


def _append(
    using: str, pk: Any, messages: list[NormalizedMessage], stamps: list[datetime]
) -> tuple[Conversation, list[DisplayMessage]] | None:
    connection = connections[using]
    ops = connection.ops
    parts_by_message: list[list[DisplayPart]] = [display_parts(m) for m in messages]
    displays = sum(len(parts) for parts in parts_by_message)
    models, check_ids, params = _update_params(connection, pk, messages, displays, max(stamps))
    with connection.cursor() as cursor:
        try:
            cursor.execute(update_sql(models, check_ids), params)
            row = cursor.fetchone()
            if row is None:  # no such conversation, or a known id: the general path decides
                return None
            conversation = _conversation(using, row)
            pk_db = row[0]
            first_position = conversation.record_length - len(messages) + 1
            when = [ops.adapt_datetimefield_value(stamp) for stamp in stamps]
            records = [
                [
                    pk_db,
                    first_position + index,
                    message.message_id,
                    message.role,
                    None if message.record_content is None else _json(message.record_content),
                    message.tool_call_id,
                    message.is_error,
                    message.source_id,
                    _json(message.extra),
                    when[index],
                ]
                for index, message in enumerate(messages)
            ]
            returned = _insert(
                cursor, connection, Message, _MESSAGE_COLUMNS, records, '"id", "position"'
            )
            message_pks = [pk for pk, _ in sorted(returned, key=lambda item: item[1])]
            event_seq = conversation.last_event_seq
            first_seq = conversation.last_seq - displays + 1
            rows: list[list[Any]] = []
            for index, parts in enumerate(parts_by_message):
                for part in parts:
                    rows.append(
                        [
                            pk_db,
                            message_pks[index],
                            first_seq + len(rows),
                            part.message_type,
                            part.content_type,
                            _json(part.content),
                            ToolStatus.COMPLETED,
                            None,
                            _json(dict(part.metadata)),
                            event_seq,
                            event_seq,
                            when[index],
                            when[index],
                            None,
                        ]
                    )
            display_pks = [
                pk
                for pk, _ in sorted(
                    _insert(
                        cursor, connection, DisplayMessage, _DISPLAY_COLUMNS, rows, '"id", "seq"'
                    ),
                    key=lambda item: item[1],
                )
            ]
            if models:
                book = app_settings.prices
                usage_rows = [
                    [
                        pk_db,
                        message_pks[index],
                        message.model,
                        *message.usage.as_dict().values(),
                        *row_cost(message.model, message.usage, book, at=stamps[index]),
                        when[index],
                    ]
                    for index, message in enumerate(messages)
                    if message.usage is not None
                ]
                _insert(cursor, connection, MessageUsage, _USAGE_COLUMNS, usage_rows)
        except IntegrityError:  # a generated id taken after all: the general path decides
            return None
    created = fastpath.display_rows(
        using, conversation, parts_by_message, message_pks, display_pks, stamps
    )
    announce(conversation, using, event_seq, created=created)
    return conversation, created
