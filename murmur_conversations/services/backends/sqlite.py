"""The SQLite backend: a plan (``services/plan.py``) becomes the fewest statements SQLite allows.

SQLite has ``RETURNING`` (3.35+) but no data-modifying CTEs, so a plan is a short sequence in one
transaction (``BEGIN IMMEDIATE`` with the ``transaction_mode`` the settings recommend; a
savepoint inside a caller's transaction):

1. ``UPDATE`` the conversation by the plan's deltas ``RETURNING`` its columns: the first
   statement of the transaction writes, so it takes the write lock before anything is read, and
   the plan's guard (no given id already stored; a status change's) is its condition: when it fails nothing is
   updated and nothing else runs;
2. one multi-row ``INSERT`` per table with rows in the plan (record rows, display rows, usage
   rows) and one upsert of the redaction counts, cut below SQLite's variable limit.

Values are bound as the ORM binds them (JSON as ``json.dumps`` text, datetimes through the
backend's adapter), and the conversation's returned columns are converted by the backend's and
the fields' converters, as a query of the ORM converts them. Private to
``murmur_conversations.services``.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import IntegrityError, connections, transaction
from django.db.models import Model

from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    MessageUsage,
    RedactionCount,
)
from murmur_conversations.services.backends import Applied, Finish
from murmur_conversations.services.plan import Plan
from murmur_conversations.services.writing import database_errors
from murmur_conversations.usage import COUNTERS

T = TypeVar("T")
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
    """The plan did not apply: its transaction (or savepoint) rolls back."""


def available() -> bool:
    """Whether this SQLite has ``RETURNING``."""
    return sqlite3.sqlite_version_info >= RETURNING_SINCE


def _q(name: str) -> str:
    return f'"{name}"'


#: A status change's assignments (``plan.StatusChange``; SQLite reads every right-hand side
#: from the row as it stood) and its guard; JSON compared as the text the ORM stores.
_STATUS_SET = """
  "status" = %s,
  "status_event_seq" = "last_event_seq" + 1,
  "pending_ask_event_seq" = CASE WHEN "pending_ask" IS NOT %s
                            THEN "last_event_seq" + 1 ELSE "pending_ask_event_seq" END,
  "pending_ask" = %s,"""
_STATUS_GUARD = '\n  AND "parent_id" IS NULL AND ("status" <> %s OR "pending_ask" IS NOT %s)'


@functools.lru_cache(maxsize=64)
def update_sql(models: int, guard: bool, status: bool = False) -> str:
    """The conversation's ``UPDATE ... RETURNING``, for ``models`` models gaining usage (0:
    none); ``guard``: only while no given id is stored; ``status``: with a status change.
    ``%s`` placeholders, in the order of :func:`_update_params`."""
    conv, msg = Conversation._meta.db_table, Message._meta.db_table
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
    returning = ", ".join(_q(str(f.column)) for f in Conversation._meta.concrete_fields)
    return (
        f"UPDATE {_q(conv)} SET\n"
        '  "record_length" = "record_length" + %s,\n'
        '  "transcript_count" = "transcript_count" + %s,\n'
        '  "last_seq" = "last_seq" + %s,\n'
        f'  "last_event_seq" = "last_event_seq" + 1,{_STATUS_SET if status else ""}{usage}\n'
        '  "saved_at" = MAX("saved_at", %s),\n'
        '  "retained_at" = MAX("retained_at", %s)\n'
        f'WHERE "id" = %s{known if guard else ""}{_STATUS_GUARD if status else ""}\n'
        f"RETURNING {returning}"
    )


@functools.lru_cache(maxsize=128)
def insert_sql(model: type[Model], columns: tuple[str, ...], rows: int, tail: str) -> str:
    """A multi-row ``INSERT`` of ``rows`` rows into ``model``'s table, then ``tail``."""
    one = f"({', '.join(['%s'] * len(columns))})"
    names = ", ".join(_q(c) for c in columns)
    return (
        f"INSERT INTO {_q(model._meta.db_table)} ({names}) VALUES {', '.join([one] * rows)}{tail}"
    )


@functools.lru_cache(maxsize=16)
def _converters(using: str) -> tuple[list[str], list[tuple[int, list[Converter], Any]]]:
    """The attribute names of Conversation's concrete fields, and for each field whose column a
    query of ``using`` converts (the backend's converters, then the field's, as Django's compiler
    applies them): its index, the converters and the column expression they are given. The same
    for every connection of an alias, so found once per alias (about 100 us a write otherwise)."""
    connection = connections[using]
    names: list[str] = []
    converting: list[tuple[int, list[Converter], Any]] = []
    for index, model_field in enumerate(Conversation._meta.concrete_fields):
        names.append(model_field.attname)
        column = model_field.get_col(Conversation._meta.db_table)
        found = [*connection.ops.get_db_converters(column), *column.get_db_converters(connection)]
        if found:
            converting.append((index, found, column))
    return names, converting


def _conversation(using: str, row: tuple[Any, ...]) -> dict[str, Any]:
    """The conversation's values of the ``UPDATE``'s returned row, converted as a read is."""
    connection = connections[using]
    names, converting = _converters(using)
    values = list(row)
    for index, converters, column in converting:
        value = values[index]
        for convert in converters:
            value = convert(value, column, connection)
        values[index] = value
    return dict(zip(names, values, strict=True))


def _insert(
    cursor: Any, model: type[Model], columns: tuple[str, ...], rows: list[list[Any]], tail: str = ""
) -> list[tuple[Any, ...]]:
    """Insert ``rows`` (values in ``columns`` order) in as few statements as SQLite's variable
    limit allows; the returned rows of every statement (``tail``: ``RETURNING ...``)."""
    raw = cursor.connection
    limit = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) if hasattr(raw, "getlimit") else 999
    size = max(1, limit // len(columns))
    result: list[tuple[Any, ...]] = []
    for start in range(0, len(rows), size):
        chunk = rows[start : start + size]
        params = [value for row in chunk for value in row]
        cursor.execute(insert_sql(model, columns, len(chunk), tail), params)
        if tail:
            result.extend(cursor.fetchall())
    return result


def _update_params(connection: Any, plan: Plan) -> tuple[int, list[Any]]:
    """The parameters of :func:`update_sql`, with its number of models."""
    adapt = connection.ops.adapt_datetimefield_value
    pk = Conversation._meta.pk.get_db_prep_value(plan.conversation, connection)
    params: list[Any] = [len(plan.records), plan.transcript, len(plan.displays)]
    change = plan.status
    ask = None if change is None or change.pending_ask is None else json.dumps(change.pending_ask)
    if change is not None:
        params += [change.status, ask, ask]
    if plan.usage:
        params += [plan.tokens.get(name, 0) for name in COUNTERS]
        for model, counts in plan.by_model.items():
            params.append(model)
            for name in COUNTERS:
                params += [model, counts.get(name, 0)]
    params += [adapt(plan.saved_at), adapt(plan.retained_at), pk]
    if plan.unknown_ids:
        params += [pk, json.dumps(plan.unknown_ids)]
    if change is not None:
        params += [change.status, ask]
    return (len(plan.by_model) if plan.usage else 0), params


def _write_rows(connection: Any, cursor: Any, plan: Plan, conv: dict[str, Any]) -> Applied:
    """Steps 2 of the module docstring, once the conversation's row is updated (``conv``)."""
    adapt = connection.ops.adapt_datetimefield_value
    pk = Conversation._meta.pk.get_db_prep_value(plan.conversation, connection)
    before_position = conv["record_length"] - len(plan.records)
    records = [
        [
            pk,
            before_position + r.offset,
            r.message_id,
            r.role,
            None if r.content is None else json.dumps(r.content),
            r.tool_call_id,
            r.is_error,
            r.source_id,
            json.dumps(r.extra),
            adapt(r.created_at),
        ]
        for r in plan.records
    ]
    returned = _insert(cursor, Message, _MESSAGE_COLUMNS, records, ' RETURNING "id", "position"')
    record_pks = [found for found, _ in sorted(returned, key=lambda item: item[1])]
    event_seq, before_seq = conv["last_event_seq"], conv["last_seq"] - len(plan.displays)
    displays = [
        [
            pk,
            record_pks[d.record - 1] if d.record else None,
            before_seq + d.offset,
            d.message_type,
            d.content_type,
            json.dumps(d.content),
            d.status,
            None,
            json.dumps(d.metadata),
            event_seq,
            event_seq,
            adapt(d.created_at),
            adapt(d.created_at),
            None,
        ]
        for d in plan.displays
    ]
    returned = _insert(cursor, DisplayMessage, _DISPLAY_COLUMNS, displays, ' RETURNING "id", "seq"')
    display_pks = [found for found, _ in sorted(returned, key=lambda item: item[1])]
    usage = [
        [
            pk,
            record_pks[u.record - 1],
            u.model,
            *(u.counts.get(name, 0) for name in COUNTERS),
            u.cost_nanocents,
            u.priced_with,
            adapt(u.created_at),
        ]
        for u in plan.usage
    ]
    if usage:
        _insert(cursor, MessageUsage, _USAGE_COLUMNS, usage)
    if plan.redactions:
        table = _q(RedactionCount._meta.db_table)
        tail = (
            ' ON CONFLICT ("conversation_id", "detector") DO UPDATE SET'
            f' "count" = {table}."count" + excluded."count"'
        )
        counts = [[pk, name, n] for name, n in sorted(plan.redactions.items())]
        _insert(cursor, RedactionCount, ("conversation_id", "detector", "count"), counts, tail)
    return Applied(conversation=conv, record_pks=record_pks, display_pks=display_pks)


def apply(using: str, plan: Plan, finish: Finish[T]) -> T | None:
    """Write ``plan`` as the module docstring says and run ``finish`` with what it allocated, in
    the same transaction. None when the plan does not apply (no such conversation, its guard
    failed, a unique constraint refused a row): nothing was written. Raises ``WriteConflict`` or
    ``InvalidContent`` (``writing.database_errors``)."""
    connection = connections[using]
    models, params = _update_params(connection, plan)
    try:
        with database_errors(), transaction.atomic(using=using):
            with connection.cursor() as cursor:
                sql = update_sql(models, bool(plan.unknown_ids), plan.status is not None)
                cursor.execute(sql, params)
                row = cursor.fetchone()
                if row is None:
                    raise _Declined
                try:
                    applied = _write_rows(connection, cursor, plan, _conversation(using, row))
                except IntegrityError:  # a generated id taken after all
                    raise _Declined from None
            return finish(applied)
    except _Declined:
        return None
