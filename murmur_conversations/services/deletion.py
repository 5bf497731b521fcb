"""Deleting conversations in batches, and purging by owner or age (docs/deployment.md "Retention
and holds"). A held conversation (``selectors.is_held``) is never deleted or purged."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any, Final

from django.db import connections, router, transaction
from django.db.models import F, Model, QuerySet

from murmur_conversations import signals
from murmur_conversations.exceptions import ConversationHeld
from murmur_conversations.models import (
    AccessLogEntry,
    Conversation,
    ConversationTag,
    DisplayMessage,
    Feedback,
    Message,
    RedactionCount,
    Share,
    ShareRow,
    SourceRecord,
    ToolCall,
)
from murmur_conversations.selectors import held_condition, is_held, purge_candidates
from murmur_conversations.services.writing import (
    ConversationRef,
    conversation_pk,
    database_errors,
    lock_conversation,
    send_on_commit,
)

_DELETE_BATCH: Final = 2000
#: Conversations deleted per transaction by ``purge_conversations``.
PURGE_BATCH: Final = 50
#: Leaf tables first (display rows point at messages and calls). Tables of the app not listed
#: here are removed by the cascade of the final conversation delete.
_ROW_MODELS: Final[tuple[tuple[type[Model], str], ...]] = (
    (Feedback, "conversation_id__in"),
    (ShareRow, "share__conversation_id__in"),
    (Share, "conversation_id__in"),
    (ConversationTag, "conversation_id__in"),
    (DisplayMessage, "conversation_id__in"),
    (ToolCall, "conversation_id__in"),
    (Message, "conversation_id__in"),
    (SourceRecord, "conversation_id__in"),
    (RedactionCount, "conversation_id__in"),
    (AccessLogEntry, "conversation_id__in"),
)


def _delete_rows(using: str, ids: list[uuid.UUID]) -> None:
    """Delete the rows of the conversations ``ids`` in batches, then the conversations."""
    for model, lookup in _ROW_MODELS:
        manager = model._default_manager.using(using)
        while True:
            batch: list[Any] = list(
                manager.filter(**{lookup: ids})
                .order_by()
                .values_list("pk", flat=True)[:_DELETE_BATCH]
            )
            if not batch:
                break
            manager.filter(pk__in=batch).delete()
    Conversation.objects.using(using).filter(pk__in=ids).delete()


def delete_conversation(*, conversation: ConversationRef) -> None:
    """Delete a conversation and all its rows in batches, leaf tables first, in one transaction;
    sends ``conversation_deleted(conversation_id, owner_id)`` after commit. Raises
    ``ConversationHeld`` for a held conversation (nothing is deleted), ``ConversationNotFound``
    or ``WriteConflict``."""
    pk = conversation_pk(conversation)
    using = router.db_for_write(Conversation)
    with database_errors(), transaction.atomic(using=using):
        locked = lock_conversation(pk, using)
        if is_held(pk):
            raise ConversationHeld(f"conversation {pk} is under a legal hold")
        _delete_rows(using, [pk])
        send_on_commit(
            signals.conversation_deleted, using, conversation_id=pk, owner_id=locked.owner_id
        )


def purge_conversations(
    *,
    owner: Any = None,
    older_than: timedelta | None = None,
    limit: int = 1000,
    batch_size: int = PURGE_BATCH,
    progress: Callable[[int], object] | None = None,
) -> tuple[int, bool]:
    """Erase conversations for erasure requests and retention: those of ``owner`` and/or not saved
    for ``older_than``, oldest first, held ones never; at most ``limit`` per call, ``batch_size``
    per transaction (each batch: its rows leaf tables first, then ``conversation_deleted`` per
    conversation after commit; ``progress(n)`` after each). Returns ``(deleted, more)`` where
    ``more`` says whether matching conversations that are not held remain. Needs ``owner`` or
    ``older_than`` (else ``ValueError``).

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
    matching = purge_candidates(owner=owner, older_than=older_than).exclude(held_condition())
    deleted = 0
    while deleted < limit:
        done = _purge_batch(matching, min(batch_size, limit - deleted))
        if done is None:
            break
        deleted += done
        if progress is not None and done:
            progress(done)
    return deleted, matching.exists()


def _purge_batch(matching: QuerySet[Conversation], size: int) -> int | None:
    """Delete up to ``size`` of ``matching`` in one transaction; None when none is left to take."""
    using = router.db_for_write(Conversation)
    vendor = connections[using].vendor
    with database_errors(), transaction.atomic(using=using):
        manager = Conversation.objects.using(using)
        if vendor == "sqlite":  # take the write lock before reading (see lock_conversation)
            manager.filter(last_event_seq__lt=0).update(last_event_seq=F("last_event_seq"))
        chosen = matching.using(using).order_by("saved_at", "pk")
        if connections[using].features.has_select_for_update_skip_locked:
            chosen = chosen.select_for_update(skip_locked=True)
        rows = list(chosen.values_list("pk", "owner_id")[:size])
        if not rows:
            return None
        ids = [pk for pk, _owner in rows]
        held = set(manager.filter(pk__in=ids).filter(held_condition()).values_list("pk", flat=True))
        rows = [(pk, owner_id) for pk, owner_id in rows if pk not in held]
        _delete_rows(using, [pk for pk, _owner in rows])
        _announce(using, rows)
    return len(rows)


def _announce(using: str, rows: Iterable[tuple[uuid.UUID, Any]]) -> None:
    for pk, owner_id in rows:
        send_on_commit(signals.conversation_deleted, using, conversation_id=pk, owner_id=owner_id)
