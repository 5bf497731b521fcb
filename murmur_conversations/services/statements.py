"""Running the fixed statements of the single-statement paths, with as little Python as possible.

Private to ``murmur_conversations.services`` (docs/write-path.md "Python out of the way"):

- :func:`run` executes one statement on PostgreSQL through a psycopg cursor with **server-side
  binding** (``psycopg.Cursor``), whatever Django's ``server_side_binding`` option says, and
  prepared on the server at its first execution on the connection, then reused
  (``PREPARE_STATEMENTS``, default True; False behind a transaction-mode PgBouncer, which cannot
  keep prepared statements). The cursor is wrapped as Django wraps its own (query logging,
  ``execute_wrapper``, error translation), so it is one ordinary query to everything that counts.
- :func:`instance` builds a model instance from column values without running ``Model.__init__``
  (which costs tens of microseconds per instance for its per-field defaults and descriptors).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from django.db import connections, transaction
from django.db.models import JSONField, Model
from django.db.models.base import ModelState

from murmur_conversations import jsonenc
from murmur_conversations.conf import app_settings
from murmur_conversations.rawcursor import server_side_cursor

M = TypeVar("M", bound=Model)
T = TypeVar("T")


#: The aliases whose open transaction :func:`logged` began (per thread).
_own = threading.local()


class _Declined(Exception):
    """The work of :func:`logged` declined: its transaction rolls back."""


def logged(using: str, work: Callable[[], T | None]) -> T | None:
    """Run ``work`` (one single statement, then ``writing.announce``) so that the frame log's row
    commits with the change (docs/websocket.md "The frame log"): in one transaction of its own
    when the frame log is on and no transaction is open, as is (inside the caller's) otherwise.
    ``work`` returning None means it declined: its transaction rolls back, None is returned."""
    if connections[using].in_atomic_block or not app_settings.frame_log:
        return work()
    aliases: set[str] = _own.__dict__.setdefault("aliases", set())
    try:
        with transaction.atomic(using=using):
            # The transaction is this write's own: a failed statement rolls all of it back, so
            # :func:`run` needs no savepoint inside it.
            aliases.add(using)
            try:
                result = work()
            finally:
                aliases.discard(using)
            if result is None:
                raise _Declined
            return result
    except _Declined:
        return None


def run(using: str, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Execute ``sql`` (``%(name)s`` placeholders; a statement that returns rows) on the PostgreSQL
    alias ``using`` and return its rows. Inside the caller's transaction it runs in a savepoint (a failure then leaves that
    transaction usable); in autocommit it is its own transaction: one round trip. Raises
    Django's database errors (``IntegrityError``...)."""
    connection = connections[using]
    if connection.in_atomic_block and using not in getattr(_own, "aliases", ()):
        with transaction.atomic(using=using):
            return _fetch(connection, sql, params)
    return _fetch(connection, sql, params)


def _fetch(connection: Any, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    cursor = server_side_cursor(connection, prepare=app_settings.prepare_statements)
    try:
        cursor.execute(sql, params)
        # Every statement here returns rows; ``cursor.description`` (a Column object per result
        # column, built on each access) is not needed and costs more than the rest of the call.
        return [tuple(row) for row in cursor.fetchall()]
    finally:
        cursor.close()


def instance(model: type[M], using: str, values: Mapping[str, Any]) -> M:
    """An instance of ``model`` as loaded from ``using`` with these attribute values (``attname``
    -> value, every concrete field), built without ``Model.__init__``. ``related`` objects are
    set by the caller with :func:`relate`."""
    obj = model.__new__(model)
    obj.__dict__.update(values)
    state = ModelState()
    state.adding = False
    state.db = using
    obj._state = state
    return obj


def columns(model: type[Model]) -> list[str]:
    """The attribute names of ``model``'s concrete fields, in the order of its table's columns
    (what ``RETURNING *`` of a data-modifying CTE gives, see :func:`returning`)."""
    return [field.attname for field in model._meta.concrete_fields]


def returning(model: type[Model], alias: str = "") -> str:
    """``"col", "col", ...`` (qualified by ``alias`` when given) of ``model``'s concrete fields,
    in the order of :func:`columns`."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(f'{prefix}"{field.column}"' for field in model._meta.concrete_fields)


def load(model: type[M], using: str, row: tuple[Any, ...] | list[Any]) -> M:
    """An instance of ``model`` from the values of :func:`returning` (jsonb arrives as text:
    Django's connection leaves its decoding to the fields, so JSON fields are decoded here)."""
    values = dict(zip(columns(model), row, strict=True))
    for field in model._meta.concrete_fields:
        if isinstance(field, JSONField) and isinstance(values[field.attname], str):
            values[field.attname] = jsonenc.loads(values[field.attname])
    return instance(model, using, values)


def relate(obj: Model, name: str, related: Model | None) -> None:
    """Cache ``related`` as the forward relation ``name`` of ``obj`` (as ``Model.__init__`` does
    for a related instance given as a keyword)."""
    obj._state.fields_cache[name] = related
