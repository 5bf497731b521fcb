"""Agent runs: answering the pending ask, cancelling a run, recovering runs whose worker went away."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any, Final

from django.db.models import Q
from django.utils import timezone

from murmur_conversations import signals
from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import InvalidContent, NoPendingAsk
from murmur_conversations.jsonenc import clean_text
from murmur_conversations.messages import normalize_message
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
from murmur_conversations.services.appending import append_in_write
from murmur_conversations.services.lifecycle import move_call, save_calls, update_card
from murmur_conversations.services.writing import (
    ConversationRef,
    Write,
    conversation_pk,
    send_on_commit,
    writing,
)

#: The longest answer to a pending ask, in characters (docs/write-path.md).
MAX_ANSWER_CHARS: Final = 10_000


def _check_answer(answer: Any) -> str:
    """The answer as it will be saved: a string, repaired like all text, not blank, at most
    ``MAX_ANSWER_CHARS`` characters; ``InvalidContent`` otherwise."""
    if not isinstance(answer, str):
        raise InvalidContent(f"the answer must be a string, not {type(answer).__name__}")
    text = clean_text(answer)
    if not text.strip():
        raise InvalidContent("the answer must not be empty or blank")
    if len(text) > MAX_ANSWER_CHARS:
        raise InvalidContent(f"the answer may hold at most {MAX_ANSWER_CHARS} characters")
    return text


def answer_pending_ask(
    *, conversation: ConversationRef, answer: str, expected_event_seq: int | None = None
) -> list[DisplayMessage]:
    """Answer the conversation's pending ask (agentfootprint ``PendingAsk``) on behalf of its
    owner: save ``{"role": "user", "content": answer}`` to the record, clear the pending ask and
    set the status to ``idle``, all under the lock with one event_seq. The host's agent runtime
    resumes the run on ``signals.pending_answered`` (sent after commit, after the usual
    ``display_messages_saved``, ``status_changed`` and ``conversation_saved``) and sets
    ``running`` itself. Returns the display rows of the saved message.

    ``answer``: a non-blank string of at most ``MAX_ANSWER_CHARS`` characters, NULs and lone
    surrogates repaired (else ``InvalidContent``). ``expected_event_seq``: the conversation's
    event_seq at which the caller saw the ask; when the ask was set or changed after it the answer
    is stale. Raises ``NoPendingAsk`` (no ask, or a stale answer), ``InvalidContent``,
    ``ConversationNotFound``, ``WriteConflict``; nothing is written when it raises
    (docs/write-path.md "Pausing on a question and resuming").
    """
    text = _check_answer(answer)
    if expected_event_seq is not None and (
        isinstance(expected_event_seq, bool)
        or not isinstance(expected_event_seq, int)
        or expected_event_seq < 0
    ):
        raise InvalidContent("expected_event_seq must be an integer >= 0 or None")
    message = normalize_message(
        {"role": "user", "content": text}, max_content_bytes=app_settings.max_content_bytes
    )
    with writing(conversation, parent=True) as write:
        conv = write.conversation
        ask = conv.pending_ask
        if ask is None:
            raise NoPendingAsk(f"conversation {conv.pk} has no pending ask to answer")
        if expected_event_seq is not None and conv.pending_ask_event_seq > expected_event_seq:
            raise NoPendingAsk(
                f"the pending ask of conversation {conv.pk} was set or changed at event_seq "
                f"{conv.pending_ask_event_seq}, after {expected_event_seq}"
            )
        rows = append_in_write(write, [message])
        conv.status, conv.pending_ask = ConversationStatus.IDLE, None
        conv.pending_ask_event_seq = write.take_event()
        write.extra_fields |= {"status", "pending_ask", "pending_ask_event_seq"}
        write.status_changed = True
    # Queued after the with block, so after the call's own signals: at once when no outer
    # transaction is open (this one has committed), else when the outer one commits.
    send_on_commit(
        signals.pending_answered,
        write.using,
        conversation=write.conversation,
        ask=ask,
        answer=message.content,  # as stored: redacted (docs/write-path.md "Redaction")
        rows=rows,
        event_seq=write.event_seq,
    )
    return rows


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
    with writing(conversation, parent=True) as write:
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
        if conv.pending_ask is not None:
            conv.pending_ask_event_seq = write.take_event()
            write.extra_fields.add("pending_ask_event_seq")
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
        with writing(pk, parent=True) as write:
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
