"""Inserting many new rows of one model: PostgreSQL's ``COPY`` for large batches, ``bulk_create``
otherwise (docs/write-path.md "Large batches: COPY").

Private to ``murmur_conversations.services``. The general path decides every row (numbers,
de-duplication under the lock, calls, results, redaction) exactly as before; this module only
changes how the decided rows reach the table, so a batch written through ``COPY`` leaves the same
rows as one written through ``INSERT`` (``tests/test_bulkcopy.py``).

On PostgreSQL a batch of at least :data:`MIN_ROWS` rows takes:

1. one statement that takes the primary keys from the table's sequence (``nextval`` over
   ``generate_series``), in increasing order, so the rows keep the order ``bulk_create`` gives them
   (the latest call of an id is the one with the highest key);
2. one ``COPY ... FROM STDIN`` (text format) streaming every row, in the caller's transaction.

Row triggers (the search index) fire on ``COPY`` as on ``INSERT``. The instances end as
``bulk_create`` leaves them: primary key set, related ids taken from their saved related objects,
``_state`` saved on ``using``. Memory is the caller's batch: rows are written as they are
converted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.db import connections, models

from murmur_conversations import jsonenc

M = TypeVar("M", bound=models.Model)

#: Rows from which a batch of one table goes through COPY on PostgreSQL (fewer: one INSERT, which
#: costs one round trip where COPY costs three). Measured on display rows of 2.6 KB of text each:
#: COPY takes 0.75-0.85x the time of ``bulk_create`` from 3 rows on (the search index's trigger,
#: the same either way, is most of the rest). Tests set it to 1 to compare both on every batch.
MIN_ROWS = 3


def insert(using: str, model: type[M], objs: Sequence[M]) -> None:
    """Insert the unsaved instances ``objs`` of ``model`` on ``using``, as
    ``bulk_create(objs, batch_size=1000)`` does (primary keys set on the instances); through
    ``COPY`` on PostgreSQL when there are at least :data:`MIN_ROWS`. Raises Django's database
    errors (``IntegrityError``...), in the caller's transaction."""
    if not objs:
        return
    connection = connections[using]
    if connection.vendor != "postgresql" or len(objs) < MIN_ROWS:
        model._default_manager.using(using).bulk_create(objs, batch_size=1000)
        return
    _copy(using, model, objs)


def _converter(field: models.Field[Any, Any]) -> Callable[[Any], Any] | None:
    """How a field's attribute value is written in ``COPY``'s text format: JSON as the app's
    JSON text (SQL NULL for None, as ``JSONField`` stores it), anything else as psycopg adapts
    it (None: no conversion)."""
    if isinstance(field, models.JSONField):
        return lambda value: None if value is None else jsonenc.dumps(value)
    return None


def _copy(using: str, model: type[M], objs: Sequence[M]) -> None:
    connection = connections[using]
    meta = model._meta
    quote = connection.ops.quote_name
    pk = meta.pk
    assert pk is not None
    fields = [
        f for f in meta.concrete_fields if not getattr(f, "generated", False)
    ]  # every column, as bulk_create names them
    for obj in objs:
        # Related objects saved earlier in this write (a display row's message, its call) give
        # their keys, as bulk_create takes them.
        obj._prepare_related_fields_for_save(operation_name="bulk_create")  # type: ignore[attr-defined]
    missing = [obj for obj in objs if obj.pk is None]
    with connection.cursor() as cursor:
        if missing:
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                [meta.db_table, str(pk.column), len(missing)],
            )
            keys = sorted(row[0] for row in cursor.fetchall())
            for obj, key in zip(missing, keys, strict=True):
                obj.pk = key
        columns = ", ".join(quote(str(f.column)) for f in fields)
        plan = [(f.attname, _converter(f)) for f in fields]
        raw = cursor.cursor  # the psycopg cursor under Django's wrapper
        sql = f"COPY {quote(meta.db_table)} ({columns}) FROM STDIN"
        with connection.wrap_database_errors, raw.copy(sql) as copy:
            for obj in objs:
                values = obj.__dict__
                copy.write_row(
                    [
                        values[name] if convert is None else convert(values[name])
                        for name, convert in plan
                    ]
                )
    for obj in objs:
        obj._state.adding = False
        obj._state.db = using
