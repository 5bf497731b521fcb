"""Deleting conversations in batches, with their children, and purging by owner or age
(docs/deployment.md "Retention and holds"). A held conversation (``selectors.is_held``: a hold on
it or on one of its descendants) is never deleted or purged.

A deletion forgets completely (docs/security.md "What deletion removes"): in its transaction it
removes every row of the conversations (the frame log's included, and the parent's logged frames
that showed a deleted child), takes them out of the import memory (``ImportedSource``), leaves a
``DeletedSource`` of each one that came from a source with an identity and of each one's own id
(so an import does not bring it back), and on SQLite merges the search index's segments; after commit, on SQLite, the
write-ahead log is checkpointed and truncated. ``PRAGMA secure_delete`` (set on every SQLite
connection, ``apps.py``) zeroes the freed space."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Final

from django.db import connections, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F, Model, QuerySet
from django.utils import timezone

from murmur_conversations import frames as framing
from murmur_conversations import jsonenc, search_index
from murmur_conversations.exceptions import ConversationHeld
from murmur_conversations.models import (
    CONTENT_KEYED_SOURCES,
    CONVERSATION_ID_SOURCE,
    AccessLogEntry,
    Conversation,
    ConversationTag,
    DeletedSource,
    DisplayMessage,
    Feedback,
    FrameLogEntry,
    ImportedSource,
    Message,
    MessageUsage,
    RedactionCount,
    Share,
    ShareRow,
    SourceRecord,
    ToolCall,
)
from murmur_conversations.selectors import held_condition, is_held, purge_candidates
from murmur_conversations.services.writing import (
    ConversationRef,
    announce,
    announce_deleted,
    conversation_pk,
    database_errors,
    lock_conversation,
    move_times,
    parent_pk,
)

_DELETE_BATCH: Final = 2000
#: Top-level conversations (each with its children) deleted per transaction by
#: ``purge_conversations``.
PURGE_BATCH: Final = 50
#: Conversations whose leaf rows one batch of deletes covers.
_CONVERSATIONS_PER_BATCH: Final = 200
#: Leaf tables first (display rows point at messages and calls). Tables of the app not listed
#: here are removed by the cascade of the final conversation delete.
_ROW_MODELS: Final[tuple[tuple[type[Model], str], ...]] = (
    (Feedback, "conversation_id__in"),
    (ShareRow, "share__conversation_id__in"),
    (Share, "conversation_id__in"),
    (ConversationTag, "conversation_id__in"),
    (DisplayMessage, "conversation_id__in"),
    (ToolCall, "conversation_id__in"),
    (MessageUsage, "conversation_id__in"),
    (Message, "conversation_id__in"),
    (SourceRecord, "conversation_id__in"),
    (RedactionCount, "conversation_id__in"),
    (AccessLogEntry, "conversation_id__in"),
    (FrameLogEntry, "conversation_id__in"),
)

Owned = tuple[uuid.UUID, Any]


def _descendants(root: uuid.UUID, using: str) -> list[list[Owned]]:
    """The descendants of ``root`` as ``(pk, owner_id)`` pairs, one list per generation (children,
    grandchildren...), each locked after its parents (docs/architecture.md "Child conversations":
    locks go parent before child)."""
    manager = Conversation.objects.using(using)
    generations: list[list[Owned]] = []
    level = [root]
    while level:
        found: list[Owned] = []
        for start in range(0, len(level), _CONVERSATIONS_PER_BATCH):
            chunk = level[start : start + _CONVERSATIONS_PER_BATCH]
            found.extend(
                manager.select_for_update()
                .filter(parent_id__in=chunk)
                .order_by("pk")
                .values_list("pk", "owner_id")
            )
        if found:
            generations.append(found)
        level = [pk for pk, _owner in found]
    return generations


def _delete_rows(pks: list[uuid.UUID], using: str) -> None:
    """The rows of the conversations ``pks`` in every table of the app, in batches, leaf tables
    first; their ``DeletedSource`` rows written and the import memory told."""
    for start in range(0, len(pks), _CONVERSATIONS_PER_BATCH):
        chunk = pks[start : start + _CONVERSATIONS_PER_BATCH]
        _remember_deleted(chunk, using)
        for model, lookup in _ROW_MODELS:
            manager = model._default_manager.using(using)
            while True:
                ids: list[Any] = list(
                    manager.filter(**{lookup: chunk})
                    .order_by()
                    .values_list("pk", flat=True)[:_DELETE_BATCH]
                )
                if not ids:
                    break
                manager.filter(pk__in=ids).delete()


def _remember_deleted(pks: list[uuid.UUID], using: str) -> None:
    """For the conversations ``pks`` (about to be deleted): a ``DeletedSource`` of each owned one
    with a source identity (``external_id``, a source not in ``CONTENT_KEYED_SOURCES``) and one
    of each owned one's id (``CONVERSATION_ID_SOURCE``), and
    their ids and titles taken out of their owners' ``ImportedSource`` rows; a row left with no
    conversation is deleted (its path with it)."""
    rows = list(
        Conversation.objects.using(using)
        .filter(pk__in=pks)
        .values_list("owner_id", "source", "external_id", "pk")
    )
    now = timezone.now()
    identities = [
        (owner, source, key)
        for owner, source, key, _pk in rows
        if owner is not None and key and source not in CONTENT_KEYED_SOURCES
    ]
    identities += [
        (owner, CONVERSATION_ID_SOURCE, str(pk)) for owner, _s, _k, pk in rows if owner is not None
    ]
    tombstones = [
        DeletedSource(
            owner_id=owner, source=source, key_hash=DeletedSource.key_of(key), deleted_at=now
        )
        for owner, source, key in identities
    ]
    if tombstones:
        DeletedSource.objects.using(using).bulk_create(
            tombstones,
            update_conflicts=True,
            unique_fields=["owner", "source", "key_hash"],
            update_fields=["deleted_at"],
        )
    owners = {owner for owner, _source, _key, _pk in rows if owner is not None}
    if owners:
        _forget_imports(owners, {str(pk) for pk in pks}, using)


def _forget_imports(owners: set[Any], deleted: set[str] | None, using: str) -> None:
    """Take the conversation ids ``deleted`` out of the ``ImportedSource`` rows of ``owners`` that
    name them, with their titles, and delete the rows left with none. ``deleted`` None (an
    owner's erasure) sweeps every row of ``owners`` that names no conversation that exists."""
    manager = ImportedSource.objects.using(using)
    found = list(manager.filter(owner_id__in=owners).values_list("pk", "conversations", "titles"))
    sweep = deleted is None
    if deleted is None:
        named = [str(c) for _pk, ids, _titles in found for c in ids or []]
        alive = Conversation.objects.using(using).filter(pk__in=named).values_list("pk", flat=True)
        deleted = set(named) - {str(pk) for pk in alive}
    gone: list[Any] = []
    for pk, ids, titles in found:
        ids = [str(c) for c in ids or []]
        kept = [c for c in ids if c not in deleted]
        if not kept and (ids or sweep):
            gone.append(pk)
        elif len(kept) < len(ids):
            manager.filter(pk=pk).update(
                conversations=kept,
                titles={k: v for k, v in (titles or {}).items() if k not in deleted},
            )
    if gone:
        manager.filter(pk__in=gone).delete()


def _forget_words(using: str) -> None:
    """The end of a deletion's transaction: the search index's segments merged (SQLite,
    ``search_index.forget_deleted``) and, after commit, the write-ahead log checkpointed."""
    connection = connections[using]
    search_index.forget_deleted(connection)
    if connection.vendor == "sqlite":
        transaction.on_commit(lambda: _checkpoint(connection), using=using, robust=True)


def _checkpoint(connection: BaseDatabaseWrapper) -> None:
    """Copy SQLite's write-ahead log into the database and truncate it, so the log file keeps no
    page of the deleted rows (a no-op when the database is not in WAL mode). A reader in the
    middle of a read keeps the log from being truncated; the next checkpoint does it."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _delete_tree(pk: uuid.UUID, owner_id: Any, using: str) -> int:
    """Delete the locked conversation ``pk`` with its descendants and all their rows (inside the
    caller's transaction); ``conversation_deleted`` for each after commit, children first.
    Returns how many conversations were deleted."""
    generations = _descendants(pk, using)
    ordered: list[Owned] = [(pk, owner_id)]
    for generation in generations:
        ordered.extend(generation)
    _delete_rows([p for p, _owner in ordered], using)
    manager = Conversation.objects.using(using)
    for generation in reversed(generations):  # children before their parents
        manager.filter(pk__in=[p for p, _owner in generation]).delete()
    manager.filter(pk=pk).delete()
    announce_deleted(using, list(reversed(ordered)))
    return len(ordered)


def delete_conversation(*, conversation: ConversationRef) -> int:
    """Delete a conversation, its children (and theirs) and all their rows in batches, leaf
    tables first, in one transaction; sends ``conversation_deleted(conversation_id, owner_id)``
    for each after commit, children first. Deleting a child on its own is also a write to its
    parent (``child_count`` - 1, one event_seq, ``child_deleted``). Locks go parent before child:
    the parent of a child first, then the conversation, then its descendants generation by
    generation. Everything is forgotten as the module says before this returns. Returns how many
    conversations were deleted. Raises ``ConversationHeld`` when the
    conversation or one of its descendants is under a legal hold (nothing is deleted),
    ``ConversationNotFound`` or ``WriteConflict``."""
    pk = conversation_pk(conversation)
    using = router.db_for_write(Conversation)
    with database_errors(), transaction.atomic(using=using):
        above = parent_pk(conversation, using)
        parent = lock_conversation(above, using) if above is not None else None
        locked = lock_conversation(pk, using)
        if is_held(pk):
            raise ConversationHeld(f"conversation {pk} is under a legal hold")
        deleted = _delete_tree(pk, locked.owner_id, using)
        if parent is not None:
            _drop_child_frames(parent.pk, pk, using)
            parent.child_count = max(parent.child_count - 1, 0)
            parent.last_event_seq += 1
            move_times(parent, timezone.now())
            parent.save(
                using=using,
                update_fields=["child_count", "last_event_seq", "saved_at", "retained_at"],
            )
            announce(parent, using, parent.last_event_seq, children_deleted=[pk])
        _forget_words(using)
    return deleted


def purge_conversations(
    *,
    owner: Any = None,
    older_than: timedelta | None = None,
    limit: int = 1000,
    batch_size: int = PURGE_BATCH,
    progress: Callable[[int], object] | None = None,
) -> tuple[int, bool]:
    """Erase conversations for erasure requests and retention: the top-level conversations of
    ``owner`` and/or whose ``retained_at`` (the later of the last write's time and its wall-clock
    time: an import counts from when it ran) is more than ``older_than`` ago, oldest first, each
    with its children (a child's write moves its parent's ``retained_at``, so a parent is never
    older than its children),
    held ones never; at most ``limit`` top-level conversations per call, ``batch_size`` per
    transaction (``progress(n)`` after each batch, ``n`` conversations deleted, children
    included). Returns ``(deleted, more)``: how many conversations were deleted, children
    included, and whether matching conversations that are not held remain. Needs ``owner`` or
    ``older_than`` (else ``ValueError``). Each batch forgets its conversations as the module
    says; the search index's segments are merged once, after the last batch, and with ``owner``
    (an erasure) every ``ImportedSource`` of the owner that names no existing conversation goes.

    Safe to run concurrently (cron, several workers): on PostgreSQL a batch is chosen with
    ``SELECT ... FOR UPDATE SKIP LOCKED``, so concurrent purges take different conversations and
    skip one being written to; on SQLite a batch takes the write lock first, so purges run one
    after another. Holds are checked again after the batch is locked, so a hold placed while a
    purge runs is honoured. Raises ``WriteConflict`` (what was deleted stays deleted).
    """
    if owner is None and older_than is None:
        raise ValueError("purge_conversations needs owner or older_than")
    for name, value in (("limit", limit), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer")
    matching = (
        purge_candidates(owner=owner, older_than=older_than)
        .filter(parent__isnull=True)
        .exclude(held_condition())
    )
    deleted = taken = 0
    while taken < limit:
        done = _purge_batch(matching, min(batch_size, limit - taken))
        if done is None:
            break
        taken += done[0]
        deleted += done[1]
        if progress is not None and done[1]:
            progress(done[1])
    if deleted or owner is not None:
        using = router.db_for_write(Conversation)
        with database_errors(), transaction.atomic(using=using):
            if owner is not None:  # an erasure: the owner's import memory of what is gone
                _forget_imports({getattr(owner, "pk", owner)}, None, using)
            _forget_words(using)
    return deleted, matching.exists()


def _purge_batch(matching: QuerySet[Conversation], size: int) -> tuple[int, int] | None:
    """Delete up to ``size`` of ``matching`` (with their children) in one transaction: ``(top-level
    conversations taken, conversations deleted)``, or None when none is left to take."""
    using = router.db_for_write(Conversation)
    with database_errors(), transaction.atomic(using=using):
        manager = Conversation.objects.using(using)
        if connections[using].vendor == "sqlite":  # the write lock before reading
            manager.filter(last_event_seq__lt=0).update(last_event_seq=F("last_event_seq"))
        chosen = matching.using(using).order_by("retained_at", "pk")
        if connections[using].features.has_select_for_update_skip_locked:
            chosen = chosen.select_for_update(skip_locked=True)
        rows = list(chosen.values_list("pk", "owner_id")[:size])
        if not rows:
            return None
        ids = [pk for pk, _owner in rows]
        held = set(manager.filter(pk__in=ids).filter(held_condition()).values_list("pk", flat=True))
        deleted = sum(_delete_tree(pk, owner_id, using) for pk, owner_id in rows if pk not in held)
    return len(rows), deleted


def _drop_child_frames(parent_pk: Any, child_pk: Any, using: str) -> None:
    """Take a deleted child's summary (its title) out of the ``child_updated`` frames of its
    parent's frame-log rows: each such frame keeps only the child's id. The frames stay, so a
    process still reading the log delivers the parent's events without a gap (and then
    ``child_deleted``), and the parent's other frames of those events stay as they were."""
    child = str(child_pk)
    rows = FrameLogEntry.objects.using(using).filter(
        conversation_id=parent_pk, frames__contains=child
    )
    for row in rows.only("id", "frames"):
        texts = framing.logged_texts(row.frames)
        scrubbed = [_without_child(text, child) for text in texts]
        if scrubbed != texts:
            row.frames = framing.log_text(scrubbed)
            row.save(using=using, update_fields=["frames"])


def _without_child(text: str, child: str) -> str:
    """A logged frame's text, a ``child_updated`` of ``child`` with the child's id alone."""
    if framing.kind_of(text) != "child_updated":
        return text
    frame = jsonenc.loads(text)
    if str((frame.get("child") or {}).get("id")) != child:
        return text
    return framing.encode({**frame, "child": {"id": child}})
