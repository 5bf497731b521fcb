"""Agent runs: cancelling one, and recovering runs whose worker went away."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from murmur_conversations.models import (
    OPEN_TOOL_STATUSES,
    ContentType,
    Conversation,
    ConversationStatus,
    DisplayMessage,
    InterruptReason,
    MessageType,
    ToolCall,
    ToolStatus,
)
from murmur_conversations.services.lifecycle import move_call, save_calls, update_card
from murmur_conversations.services.writing import ConversationRef, Write, conversation_pk, writing


def _close_calls(write: Write, status: str, reason: str, statuses: Iterable[str]) -> None:
    calls = list(
        ToolCall.objects.using(write.using).filter(
            conversation=write.conversation, status__in=list(statuses)
        )
    )
    if not calls:
        return
    for call in calls:
        move_call(write, call, status, interrupt_reason=reason)
    save_calls(write, calls)
    by_pk: dict[int | None, ToolCall] = {call.pk: call for call in calls}
    rows = list(
        DisplayMessage.objects.using(write.using).filter(
            tool_call__in=calls, content_type=ContentType.TOOL_CALL
        )
    )
    for row in rows:
        row.tool_call = call = by_pk[row.tool_call_id]  # the moved instance, not a second read
        update_card(row, call)
        write.mark_updated(row)
    write.save_rows(rows)


def cancel_run(*, conversation: ConversationRef) -> Conversation:
    """Cancel the agent run: pending, executing and interrupted calls become ``cancelled``, the
    pending ask is cleared, a ``system``/``notification`` row "Agent execution cancelled." is saved
    and the status becomes ``cancelled``; one event_seq. Already cancelled with nothing open: no-op.
    """
    with writing(conversation) as write:
        conv = write.conversation
        open_calls = (
            ToolCall.objects.using(write.using)
            .filter(conversation=conv, status__in=list(OPEN_TOOL_STATUSES))
            .exists()
        )
        if conv.status == ConversationStatus.CANCELLED and not open_calls:
            return conv
        _close_calls(write, ToolStatus.CANCELLED, "", OPEN_TOOL_STATUSES)
        row = write.new_row(
            message_type=MessageType.SYSTEM,
            content_type=ContentType.NOTIFICATION,
            status=ToolStatus.COMPLETED,
            content={"text": "Agent execution cancelled.", "stop_reason": "cancelled"},
            metadata={},
        )
        row.save(using=write.using, force_insert=True)
        write.created.append(row)
        conv.status, conv.pending_ask = ConversationStatus.CANCELLED, None
        write.extra_fields |= {"status", "pending_ask"}
        write.status_changed = True
    return write.conversation


def recover_interrupted(
    *, stale_after: timedelta = timedelta(minutes=10), conversation: ConversationRef | None = None
) -> int:
    """Mark runs whose worker went away: in conversations not saved for ``stale_after``, calls
    left ``pending``/``executing`` become ``interrupted`` (``worker_lost``) and a ``running`` status
    becomes ``interrupted``; one event_seq per conversation. Returns how many changed."""
    cutoff = timezone.now() - stale_after
    open_now = (ToolStatus.PENDING, ToolStatus.EXECUTING)
    candidates = Conversation.objects.filter(saved_at__lt=cutoff).filter(
        Q(status=ConversationStatus.RUNNING) | Q(tool_calls__status__in=open_now)
    )
    if conversation is not None:
        candidates = candidates.filter(pk=conversation_pk(conversation))
    changed = 0
    for pk in candidates.values_list("pk", flat=True).distinct().iterator():
        with writing(pk) as write:
            conv = write.conversation
            if conv.saved_at >= cutoff:
                continue  # written to since we looked
            _close_calls(write, ToolStatus.INTERRUPTED, InterruptReason.WORKER_LOST, open_now)
            if conv.status == ConversationStatus.RUNNING:
                conv.status = ConversationStatus.INTERRUPTED
                write.extra_fields.add("status")
                write.take_event()
                write.status_changed = True
            changed += write.event_seq is not None
    return changed
