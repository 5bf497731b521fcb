"""Deleting conversations in batches, and purging by owner or age."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from django.db import router, transaction
from django.db.models import Model
from django.utils import timezone

from murmur_conversations import signals
from murmur_conversations.exceptions import (
    ConversationNotFound,
)
from murmur_conversations.models import (
    Conversation,
    ConversationTag,
    DisplayMessage,
    Feedback,
    Message,
    Share,
    ShareRow,
    SourceRecord,
    ToolCall,
)
from murmur_conversations.services.writing import (
    ConversationRef,
    conversation_pk,
    database_errors,
    lock_conversation,
    owner_pk,
    send_on_commit,
)

_DELETE_BATCH: Final = 2000


def delete_conversation(*, conversation: ConversationRef) -> None:
    """Delete a conversation and all its rows in batches, leaf tables first, in one transaction;
    sends ``conversation_deleted(conversation_id, owner_id)`` after commit. Raises
    ``ConversationNotFound`` or ``WriteConflict``."""
    pk = conversation_pk(conversation)
    using = router.db_for_write(Conversation)
    with database_errors(), transaction.atomic(using=using):
        locked = lock_conversation(pk, using)
        leaves: tuple[tuple[type[Model], str], ...] = (
            (Feedback, "conversation_id"),
            (ShareRow, "share__conversation_id"),
            (Share, "conversation_id"),
            (ConversationTag, "conversation_id"),
            (DisplayMessage, "conversation_id"),
            (ToolCall, "conversation_id"),
            (Message, "conversation_id"),
            (SourceRecord, "conversation_id"),
        )
        for model, lookup in leaves:
            manager = model._default_manager.using(using)
            while True:
                ids: list[Any] = list(
                    manager.filter(**{lookup: pk})
                    .order_by()
                    .values_list("pk", flat=True)[:_DELETE_BATCH]
                )
                if not ids:
                    break
                manager.filter(pk__in=ids).delete()
        Conversation.objects.using(using).filter(pk=pk).delete()
        send_on_commit(
            signals.conversation_deleted, using, conversation_id=pk, owner_id=locked.owner_id
        )


def purge_conversations(
    *, owner: Any = None, older_than: timedelta | None = None, limit: int = 1000
) -> tuple[int, bool]:
    """Erase conversations for erasure requests and retention: those of ``owner`` and/or not saved
    for ``older_than``; at most ``limit`` per call. Returns ``(deleted, more)`` where ``more`` says
    whether matching conversations remain. Needs ``owner`` or ``older_than`` (else ``ValueError``).
    """
    if owner is None and older_than is None:
        raise ValueError("purge_conversations needs owner or older_than")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError("limit must be a positive integer")
    matching = Conversation.objects.all()
    if owner is not None:
        matching = matching.filter(owner_id=owner_pk(owner))
    if older_than is not None:
        matching = matching.filter(saved_at__lt=timezone.now() - older_than)
    ids = list(matching.order_by("saved_at", "pk").values_list("pk", flat=True)[: limit + 1])
    deleted = 0
    for pk in ids[:limit]:
        try:
            delete_conversation(conversation=pk)
        except ConversationNotFound:
            continue  # deleted meanwhile
        deleted += 1
    return deleted, len(ids) > limit
