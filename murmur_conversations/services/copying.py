"""``INSERT ... SELECT``: copying many rows in one statement (share snapshots, forks).

Private to ``murmur_conversations.services``. The column list comes from the target model's
concrete fields, so a column another release adds is copied too (from the source column of the
same name) unless the caller gives its value.
"""

from __future__ import annotations

from typing import Any

from django.db import connections, models


def quote(using: str, name: str) -> str:
    """``name`` quoted as an identifier for the database ``using``."""
    return connections[using].ops.quote_name(name)


def table(using: str, model: type[models.Model]) -> str:
    """The quoted table name of ``model``."""
    return quote(using, model._meta.db_table)


def column(using: str, model: type[models.Model], name: str) -> str:
    """The quoted column of field ``name`` of ``model``."""
    field = model._meta.get_field(name)
    return quote(using, str(getattr(field, "column", name)))


def db_value(using: str, model: type[models.Model], name: str, value: Any) -> Any:
    """``value`` as the database ``using`` stores field ``name`` of ``model`` (a UUID is 32 hex
    digits on SQLite, a ``uuid`` on PostgreSQL)."""
    field = model._meta.get_field(name)
    return field.get_db_prep_value(value, connections[using])  # type: ignore[union-attr]


def insert_select(
    *,
    using: str,
    target: type[models.Model],
    source_alias: str,
    from_sql: str,
    where_sql: str,
    values: dict[str, str],
    params: dict[str, Any],
) -> int:
    """Run ``INSERT INTO <target> (<every concrete column but an auto primary key>) SELECT ...
    FROM <from_sql> WHERE <where_sql>``: each column takes ``values[<attname>]`` (an SQL
    expression) when given, else ``<source_alias>.<the same column>``. ``params`` are named
    (``%(name)s``). Returns the number of rows inserted."""
    names: list[str] = []
    expressions: list[str] = []
    for field in target._meta.concrete_fields:
        if field.primary_key and isinstance(field, models.AutoField | models.BigAutoField):
            continue
        name = quote(using, str(field.column))
        names.append(name)
        expressions.append(values.get(field.attname, f"{source_alias}.{name}"))
    sql = (
        f"INSERT INTO {table(using, target)} ({', '.join(names)}) "
        f"SELECT {', '.join(expressions)} FROM {from_sql} WHERE {where_sql}"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)
