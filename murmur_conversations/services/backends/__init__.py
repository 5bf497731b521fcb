"""The database backends of the write path: each turns a ``plan.Plan`` into statements for one
database (``postgres``, ``sqlite``); they decide how, never what (docs/write-path.md "One plan
per write"). Private to ``murmur_conversations.services``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from django.db import connections

T = TypeVar("T")
#: What runs inside the write's transaction once its rows are written (the frame log, signals).
Finish = Callable[["Applied"], T]


@dataclass(frozen=True, slots=True)
class Applied:
    """What the database allocated for a plan: the conversation's columns after the write
    (``attname`` -> value, as the ORM reads them), and the primary keys of the new record rows
    and display rows, in the plan's order."""

    conversation: dict[str, Any]
    record_pks: list[int]
    display_pks: list[int]


def backend(using: str) -> ModuleType | None:
    """The backend module of the database alias ``using``: ``postgres``, ``sqlite`` (3.35+, for
    ``RETURNING``), or None (another database: the ORM's general path writes)."""
    vendor = connections[using].vendor
    if vendor == "postgresql":
        from murmur_conversations.services.backends import postgres

        return postgres
    if vendor == "sqlite":
        from murmur_conversations.services.backends import sqlite

        return sqlite if sqlite.available() else None
    return None
