"""Deleting conversations in batches, with their children, and purging by owner or age."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, Final

from django.db import router, transaction
from django.utils import timezone

from murmur_conversations import signals
from murmur_conversations.exceptions import (
    ConversationNotFound,
)
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    SourceRecord,
    ToolCall,
)
from murmur_conversations.services.writing import (
    ConversationRef,
    announce,
    conversation_pk,
    database_errors,
    lock_conversation,
    owner_pk,
    parent_pk,
    send_on_commit,
)

_DELETE_BATCH: Final = 2000
#: Conversations whose leaf rows one batch of deletes covers.
_CONVERSATIONS_PER_BATCH: Final = 200


def _descendants(root: uuid.UUID, using: str) -> list[list[tuple[uuid.UUID, Any]]]:
    """The descendants of ``root`` as ``(pk, owner_id)`` pairs, one list per generation (children,
    grandchildren...), each locked after its parents (docs/architecture.md "Child conversations":
    locks go parent before child)."""
    manager = Conversation.objects.using(using)
    generations: list[list[tuple[uuid.UUID, Any]]] = []
    level = [root]
    while level:
        found: list[tuple[uuid.UUID, Any]] = []
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
    """The leaf rows of the conversations ``pks``, in batches, leaf tables first."""
    for start in range(0, len(pks), _CONVERSATIONS_PER_BATCH):
        chunk = pks[start : start + _CONVERSATIONS_PER_BATCH]
        for model in (DisplayMessage, ToolCall, Message, SourceRecord):
            manager = model._default_manager.using(using)
            while True:
                ids = list(
                    manager.filter(conversation_id__in=chunk)
                    .order_by()
                    .values_list("pk", flat=True)[:_DELETE_BATCH]
                )
                if not ids:
                    break
                manager.filter(pk__in=ids).delete()


def delete_conversation(*, conversation: ConversationRef) -> int:
    """Delete a conversation, its children (and theirs) and all their rows in batches, leaf
    tables first, in one transaction; sends ``conversation_deleted(conversation_id, owner_id)``
    for each after commit, children first. Deleting a child on its own is also a write to its
    parent (``child_count`` - 1, one event_seq, ``child_deleted``). Locks go parent before child:
    the parent of a child first, then the conversation, then its descendants generation by
    generation. Returns how many conversations were deleted. Raises ``ConversationNotFound`` or
    ``WriteConflict``."""
    pk = conversation_pk(conversation)
    using = router.db_for_write(Conversation)
    with database_errors(), transaction.atomic(using=using):
        above = parent_pk(conversation, using)
        parent = lock_conversation(above, using) if above is not None else None
        locked = lock_conversation(pk, using)
        generations = _descendants(pk, using)
        ordered = [(pk, locked.owner_id)]
        for generation in generations:
            ordered.extend(generation)
        _delete_rows([p for p, _owner in ordered], using)
        manager = Conversation.objects.using(using)
        for generation in reversed(generations):  # children before their parents
            manager.filter(pk__in=[p for p, _owner in generation]).delete()
        manager.filter(pk=pk).delete()
        for child, owner_id in reversed(ordered):
            send_on_commit(
                signals.conversation_deleted, using, conversation_id=child, owner_id=owner_id
            )
        if parent is not None:
            parent.child_count = max(parent.child_count - 1, 0)
            parent.last_event_seq += 1
            parent.saved_at = max(parent.saved_at, timezone.now())
            parent.save(using=using, update_fields=["child_count", "last_event_seq", "saved_at"])
            announce(parent, using, parent.last_event_seq, children_deleted=[pk])
    return len(ordered)


def purge_conversations(
    *, owner: Any = None, older_than: timedelta | None = None, limit: int = 1000
) -> tuple[int, bool]:
    """Erase conversations for erasure requests and retention: the top-level conversations of
    ``owner`` and/or not saved for ``older_than``, each with its children (a child's write moves
    its parent's ``saved_at``, so a parent is never older than its children); at most ``limit``
    top-level conversations per call. Returns ``(deleted, more)``: how many conversations were
    deleted, children included, and whether matching conversations remain. Needs ``owner`` or
    ``older_than`` (else ``ValueError``).
    """
    if owner is None and older_than is None:
        raise ValueError("purge_conversations needs owner or older_than")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError("limit must be a positive integer")
    matching = Conversation.objects.filter(parent__isnull=True)
    if owner is not None:
        matching = matching.filter(owner_id=owner_pk(owner))
    if older_than is not None:
        matching = matching.filter(saved_at__lt=timezone.now() - older_than)
    ids = list(matching.order_by("saved_at", "pk").values_list("pk", flat=True)[: limit + 1])
    deleted = 0
    for pk in ids[:limit]:
        try:
            deleted += delete_conversation(conversation=pk)
        except ConversationNotFound:
            continue  # deleted meanwhile
    return deleted, len(ids) > limit
