"""What ``import_conversations`` remembers of each file it read (docs/formats.md "Whole folders")."""

from __future__ import annotations

from typing import Any

from django.db import router, transaction
from django.utils import timezone

from murmur_conversations.models import ImportedSource
from murmur_conversations.redaction import redact
from murmur_conversations.services.writing import database_errors
from murmur_conversations.validation import clean_json


def remember_imported_source(*, owner: Any, path: str, **fields: Any) -> ImportedSource:
    """Create or replace the ``ImportedSource`` of ``owner`` (a user or its pk) and ``path`` (a
    resolved path) with ``fields`` (the model's: ``format``, ``options``, ``size``, ``mtime_ns``,
    ``head_size``, ``head_hash``, ``offset``, ``line``, ``state``, ``conversations``, ``titles``);
    ``imported_at`` is now. ``titles`` and ``state`` are redacted like all stored text (the
    importers' titles are redacted already; a parser's state may hold what a line said), and
    every string of the JSON fields takes the bad-text rule (``validation.clean_json``: NUL and
    lone surrogates become U+FFFD, as in the messages they came from; PostgreSQL's ``jsonb``
    refuses a NUL). Raises ``InvalidContent`` for a JSON field nested too deep, ``WriteConflict``
    (retryable) on a database failure."""
    owner_pk = getattr(owner, "pk", owner)
    for name in ("titles", "state"):
        if fields.get(name) is not None:
            fields[name] = redact(fields[name], record=True).value
    for name in ("options", "state", "conversations", "titles"):
        if fields.get(name) is not None:
            fields[name] = clean_json(fields[name])
    using = router.db_for_write(ImportedSource)
    with database_errors(), transaction.atomic(using=using):
        source, _ = ImportedSource.objects.using(using).update_or_create(
            owner_id=owner_pk,
            path_key=ImportedSource.key_of(path),
            defaults={"path": path, "imported_at": timezone.now(), **fields},
        )
    return source


def forget_imported_source(*, owner: Any, path: str) -> None:
    """Drop what was remembered of ``path`` for ``owner`` (its next import reads it whole)."""
    owner_pk = getattr(owner, "pk", owner)
    ImportedSource.objects.filter(owner_id=owner_pk, path_key=ImportedSource.key_of(path)).delete()
