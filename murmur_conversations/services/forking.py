"""Forking a conversation from one of its display rows (docs/api.md "Forking").

One transaction holds the original's lock (so only committed rows are copied, and none changes
meanwhile) and copies each table with one ``INSERT ... SELECT``: the record up to and including
the cut message, the tool calls and display rows of that prefix, and the source records of the
copied messages. Nothing of the original is written.

The cut: ``at_seq`` names a display row; its record message (for a notice outside the record, the
last record message shown at or before it) is the last message kept, at position ``P``. Display rows
are kept up to the last row of that message (``S``, at least ``at_seq``). ``E``, the cut event, is
the latest ``created_event_seq`` among them: everything that changed after ``E`` happened after
the cut. A copied tool call keeps its state if it last changed at or before ``E``, was not still
``pending`` or ``executing`` then (nothing runs it in the fork) and no result for it comes after
the cut; any other call is ``interrupted`` with ``interrupt_reason`` ``forked`` (``awaiting_input``
when the copy ends on the call's interrupt result), without display text, result, error or times,
and its card says the same. A tool result changed after the cut
(``resolve_tool_result``) shows its record message again. Rows and calls the fork changed carry the
fork's one event, ``E + 1``, which is its ``last_event_seq``; the others keep theirs.
"""

from __future__ import annotations

from typing import Any

from django.db import router, transaction
from django.db.models import Max
from django.utils import timezone

from murmur_conversations.exceptions import (
    ConversationNotFound,
    InvalidContent,
    OwnershipConflict,
)
from murmur_conversations.models import (
    ContentType,
    Conversation,
    ConversationStatus,
    DisplayMessage,
    InterruptReason,
    Message,
    SourceRecord,
    ToolCall,
    ToolStatus,
)
from murmur_conversations.projection import transcript_entry
from murmur_conversations.services.copying import column, db_value, insert_select, table
from murmur_conversations.services.writing import (
    ConversationRef,
    announce_saved,
    conversation_pk,
    database_errors,
    lock_conversation,
    owner_pk,
    writing,
)
from murmur_conversations.validation import check_short_string

#: Card metadata that only a call's later state puts there.
_LATER_KEYS = ("result", "error", "display_text")


def _transcript_count(using: str, original: Conversation, position: int) -> int:
    """The transcript length of the record's first ``position`` messages, reading whichever side
    of the cut is shorter."""
    head = position * 2 <= original.record_length
    messages = Message.objects.using(using).filter(
        conversation=original, role__in=("user", "assistant"), tool_call_id=""
    )
    messages = (
        messages.filter(position__lte=position) if head else messages.filter(position__gt=position)
    )
    count = sum(
        transcript_entry(role=role, content=content, extra=extra) is not None
        for role, content, extra in messages.values_list("role", "content", "extra").iterator(
            chunk_size=500
        )
    )
    return count if head else original.transcript_count - count


def _cut(using: str, original: Conversation, at_seq: int) -> tuple[int, int, int]:
    """``(P, S, E)`` of the module docstring."""
    rows = DisplayMessage.objects.using(using).filter(conversation=original)
    position = (
        rows.filter(seq__lte=at_seq, message__isnull=False).aggregate(p=Max("message__position"))[
            "p"
        ]
        or 0
    )
    last_seq = at_seq
    if position:
        last_of_message = rows.filter(message__position=position).aggregate(s=Max("seq"))["s"]
        last_seq = max(at_seq, last_of_message or 0)
    cut_event = rows.filter(seq__lte=last_seq).aggregate(e=Max("created_event_seq"))["e"] or 0
    return position, last_seq, cut_event


def _copy(using: str, original: Conversation, fork: Conversation, cut: tuple[int, int, int]) -> int:
    """The ``INSERT ... SELECT`` statements (one per table); returns how many tool calls were
    copied."""
    position, last_seq, cut_event = cut
    display, message, call = (table(using, m) for m in (DisplayMessage, Message, ToolCall))
    conv = column(using, DisplayMessage, "conversation")
    params: dict[str, Any] = {
        "original": db_value(using, Message, "conversation", original.pk),
        "fork": db_value(using, Message, "conversation", fork.pk),
        "position": position,
        "last_seq": last_seq,
        "cut_event": cut_event,
        "fork_event": fork.last_event_seq,
        "now": db_value(using, DisplayMessage, "updated_at", fork.saved_at),
        "interrupted": ToolStatus.INTERRUPTED,
        "pending": ToolStatus.PENDING,
        "executing": ToolStatus.EXECUTING,
        "forked": InterruptReason.FORKED,
        "tool_call": ContentType.TOOL_CALL,
        "tool_result": ContentType.TOOL_RESULT,
        "source": original.source,
    }
    insert_select(
        using=using,
        target=Message,
        source_alias="m",
        from_sql=f"{message} m",
        where_sql=f"m.{conv} = %(original)s AND m.position <= %(position)s",
        values={"conversation_id": "%(fork)s"},
        params=params,
    )
    # Whether a call goes back to "interrupted (forked)"; its later results come from one
    # uncorrelated subquery, which both databases evaluate once.
    later = (
        f"SELECT r.tool_call_id FROM {display} r WHERE r.{conv} = %(original)s "
        "AND r.seq > %(last_seq)s AND r.content_type = %(tool_result)s "
        "AND r.tool_call_id IS NOT NULL"
    )

    def reset(alias: str) -> str:
        return (
            f"({alias}.event_seq > %(cut_event)s OR {alias}.status IN (%(pending)s, "
            f"%(executing)s) OR {alias}.id IN ({later}))"
        )

    # Every statement is driven by the original's rows through their indexes (a range of seq,
    # primary keys), and finds the fork's new rows by a lookup on a unique index, so its plan does
    # not depend on statistics of rows this transaction just wrote.
    calls = insert_select(
        using=using,
        target=ToolCall,
        source_alias="t",
        from_sql=(
            f"(SELECT c.*, CASE WHEN {reset('c')} THEN 1 ELSE 0 END AS fork_reset "
            f"FROM {display} k JOIN {call} c ON c.id = k.tool_call_id "
            f"WHERE k.{conv} = %(original)s AND k.seq <= %(last_seq)s "
            "AND k.content_type = %(tool_call)s) t"
        ),
        where_sql="1 = 1",
        values={
            "conversation_id": "%(fork)s",
            "status": "CASE WHEN t.fork_reset = 1 THEN %(interrupted)s ELSE t.status END",
            "interrupt_reason": (
                "CASE WHEN t.fork_reset = 1 THEN %(forked)s ELSE t.interrupt_reason END"
            ),
            "display_text": "CASE WHEN t.fork_reset = 1 THEN '' ELSE t.display_text END",
            "result": "CASE WHEN t.fork_reset = 1 THEN NULL ELSE t.result END",
            "error": "CASE WHEN t.fork_reset = 1 THEN NULL ELSE t.error END",
            "started_at": "CASE WHEN t.fork_reset = 1 THEN NULL ELSE t.started_at END",
            "finished_at": "CASE WHEN t.fork_reset = 1 THEN NULL ELSE t.finished_at END",
            "event_seq": "CASE WHEN t.fork_reset = 1 THEN %(fork_event)s ELSE t.event_seq END",
        },
        params=params,
    )
    card_reset = f"(d.content_type = %(tool_call)s AND ot.id IS NOT NULL AND {reset('ot')})"
    insert_select(
        using=using,
        target=DisplayMessage,
        source_alias="d",
        from_sql=(
            f"(SELECT d.*, om.position AS fork_position, ot.call_id AS fork_call_id, "
            "ot.created_at AS fork_call_created, "
            f"CASE WHEN {card_reset} THEN 1 ELSE 0 END AS fork_reset, "
            f"CASE WHEN d.event_seq > %(cut_event)s OR {card_reset} THEN 1 ELSE 0 END "
            "AS fork_changed "
            f"FROM {display} d LEFT JOIN {message} om ON om.id = d.message_id "
            f"LEFT JOIN {call} ot ON ot.id = d.tool_call_id "
            f"WHERE d.{conv} = %(original)s AND d.seq <= %(last_seq)s) d"
        ),
        where_sql="1 = 1",
        values={
            "conversation_id": "%(fork)s",
            "message_id": (
                f"(SELECT nm.id FROM {message} nm WHERE nm.{conv} = %(fork)s "
                "AND nm.position = d.fork_position)"
            ),
            # A reused call id names several calls: the copy of the same call is the one of that
            # id created at the same time (MAX: one row, whatever two calls of one write share).
            "tool_call_id": (
                f"(SELECT MAX(nt.id) FROM {call} nt WHERE nt.{conv} = %(fork)s "
                "AND nt.call_id = d.fork_call_id AND nt.created_at = d.fork_call_created)"
            ),
            "status": "CASE WHEN d.fork_reset = 1 THEN %(interrupted)s ELSE d.status END",
            "event_seq": "CASE WHEN d.fork_changed = 1 THEN %(fork_event)s ELSE d.event_seq END",
            "updated_at": "CASE WHEN d.fork_changed = 1 THEN %(now)s ELSE d.updated_at END",
            "owner_feedback": "NULL",
        },
        params=params,
    )
    if original.source:
        insert_select(
            using=using,
            target=SourceRecord,
            source_alias="s",
            from_sql=f"{table(using, SourceRecord)} s",
            where_sql=(
                f"s.{conv} = %(original)s AND s.source = %(source)s AND s.source_key IN "
                f"(SELECT c.message_id FROM {message} c WHERE c.{conv} = %(fork)s)"
            ),
            values={"conversation_id": "%(fork)s"},
            params=params,
        )
    return calls


def _settle(using: str, fork: Conversation) -> None:
    """Give the rows the fork changed their state at the cut (see the module docstring)."""
    rows = list(
        DisplayMessage.objects.using(using)
        .filter(conversation=fork, event_seq=fork.last_event_seq)
        .select_related("tool_call", "message")
    )
    waiting: list[str] = []
    for row in rows:
        if row.content_type == ContentType.TOOL_CALL and row.tool_call is not None:
            if row.tool_call.interrupt_reason == InterruptReason.FORKED:
                row.metadata = {k: v for k, v in row.metadata.items() if k not in _LATER_KEYS}
        elif row.content_type == ContentType.TOOL_RESULT and row.tool_call is None:
            # held for a call the original made after the cut: held again in the fork
            row.metadata = {
                **{k: v for k, v in row.metadata.items() if k != "late"},
                "orphan": True,
            }
        elif (
            row.content_type == ContentType.TOOL_RESULT
            and row.message is not None
            and row.message.extra.get("is_interrupt") is True
        ):
            row.content = {**row.content, "content": row.message.content, "is_interrupt": True}
            if row.tool_call is not None:
                waiting.append(row.tool_call.call_id)
    if rows:
        DisplayMessage.objects.using(using).bulk_update(rows, ["metadata", "content"])
    if waiting:
        ToolCall.objects.using(using).filter(
            conversation=fork, call_id__in=waiting, interrupt_reason=InterruptReason.FORKED
        ).update(interrupt_reason=InterruptReason.AWAITING_INPUT)


def fork_conversation(
    *, conversation: ConversationRef, at_seq: int, owner: Any, title: str | None = None
) -> Conversation:
    """Copy ``conversation`` up to the display row ``at_seq`` (its record message and everything
    before it) into a new conversation owned by ``owner`` (a user or pk); returns the new one,
    with ``forked_from`` and ``forked_at_seq`` set. The original is not written.

    The fork is ``idle`` without a pending ask, top-level (no parent, no children: a subagent's
    child conversations are not copied), has the original's title (or ``title``), metadata and
    source, no external id, no feedback, shares or organising fields; counters equal its rows.
    Tool calls are in their state at the cut (see the module docstring). One transaction under the
    original's lock; on commit ``conversation_saved`` announces the fork (with its
    ``last_event_seq``). ``at_seq`` must be an integer from 1 to the original's ``last_seq``
    (``InvalidContent``); access is the caller's business (the REST route checks the scope).
    Raises ``InvalidContent``, ``ConversationNotFound``, ``WriteConflict``; nothing is written
    when it raises.
    """
    if isinstance(at_seq, bool) or not isinstance(at_seq, int) or at_seq < 1:
        raise InvalidContent(f"at_seq must be a display seq (an integer >= 1), not {at_seq!r}")
    if title is not None:
        title = check_short_string(title, what="title")
    pk = conversation_pk(conversation)
    using = router.db_for_write(Conversation)
    now = timezone.now()
    with database_errors(), transaction.atomic(using=using):
        original = lock_conversation(pk, using)
        if at_seq > original.last_seq:
            raise InvalidContent(
                f"at_seq {at_seq} is not a display seq of this conversation "
                f"(1 to {original.last_seq})"
            )
        cut = _cut(using, original, at_seq)
        position, last_seq, cut_event = cut
        fork = Conversation.objects.using(using).create(
            owner_id=owner_pk(owner),
            title=original.title if title is None else title,
            metadata=original.metadata,
            source=original.source,
            status=ConversationStatus.IDLE,
            record_length=position,
            transcript_count=_transcript_count(using, original, position),
            last_seq=last_seq,
            last_event_seq=cut_event + 1,
            created_at=now,
            saved_at=now,
            forked_from=original,
            forked_at_seq=at_seq,
        )
        fork.tool_call_count = _copy(using, original, fork, cut)
        _settle(using, fork)
        fork.held_results = (
            DisplayMessage.objects.using(using)
            .filter(
                conversation=fork,
                content_type=ContentType.TOOL_RESULT,
                tool_call__isnull=True,
                metadata__orphan=True,
            )
            .count()
        )
        fork.save(using=using, update_fields=["tool_call_count", "held_results"])
        announce_saved(fork, using, fork.last_event_seq)
    return fork


def link_fork(*, conversation: ConversationRef, original: ConversationRef) -> Conversation:
    """Name ``original`` (a Conversation or its id) as the conversation ``conversation`` was
    forked from (``forked_from``), as an imported fork learns it from its log (a Codex rollout's
    ``forked_from_id``); ``forked_at_seq`` stays null (the log names no display row). Write-once:
    a conversation that names an original already, or names itself, is returned unchanged;
    otherwise one event_seq and ``conversation_updated``. Raises ``ConversationNotFound`` when
    either does not exist, ``OwnershipConflict`` when their owners differ, ``WriteConflict``."""
    original_pk = conversation_pk(original)
    with writing(conversation) as write:
        write.keep_times = True
        locked = write.conversation
        if locked.forked_from_id is not None or locked.pk == original_pk:
            return locked
        owners = list(
            Conversation.objects.using(write.using)
            .filter(pk=original_pk)
            .values_list("owner_id", flat=True)
        )
        if not owners:
            raise ConversationNotFound(f"conversation {original_pk} does not exist")
        if owners[0] != locked.owner_id:
            raise OwnershipConflict("a fork and its original must have the same owner")
        locked.forked_from_id = original_pk
        write.extra_fields.add("forked_from")
        write.take_event()
        write.conversation_updated = True
    return write.conversation
