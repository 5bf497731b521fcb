"""Appending to the record: messages split into display rows, tool results, source records, synthetic rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import router, transaction
from django.utils import timezone

import murmur_conversations.services.plan as plan  # a module, so tests can swap plannable()
from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import (
    InvalidContent,
)
from murmur_conversations.exits import failure_reason
from murmur_conversations.ids import new_call_id
from murmur_conversations.jsonenc import clean_text
from murmur_conversations.messages import NormalizedMessage, display_parts, normalize_message
from murmur_conversations.models import (
    TERMINAL_TOOL_STATUSES,
    ContentType,
    Conversation,
    DisplayMessage,
    Message,
    MessageType,
    SourceRecord,
    ToolCall,
    ToolStatus,
)
from murmur_conversations.redaction import redact, redact_and_cut
from murmur_conversations.services import applying, bulkcopy, fasttools, singles
from murmur_conversations.services.accounting import count_usage
from murmur_conversations.services.lifecycle import move_call, save_calls, update_card
from murmur_conversations.services.writing import (
    ConversationRef,
    Write,
    conversation_pk,
    copy_state,
    database_errors,
    lock_conversation,
    writing,
)
from murmur_conversations.validation import (
    check_display_content,
    check_items,
    check_object,
    check_short_string,
    check_size,
    check_time,
    clean_json,
)


@dataclass
class _Held:
    """A tool result stored before its call (``metadata.orphan``), waiting for it."""

    row: DisplayMessage
    is_error: bool
    is_interrupt: bool
    content: Any
    #: The result message's other keys (an exit status, for the reason of a failed call).
    extra: dict[str, Any]


@dataclass
class _Batch:
    """Loaded state for a batch of messages: the latest call of each id they reference, its card,
    and the results held for calls not made yet."""

    calls: dict[str, ToolCall]
    call_rows: dict[str, DisplayMessage]
    new_calls: list[ToolCall]
    new_rows: list[tuple[NormalizedMessage | None, DisplayMessage]]
    held: dict[str, list[_Held]] = field(default_factory=dict)
    #: Held rows stored earlier that found their call in this batch (their ``tool_call`` changes).
    adopted: list[DisplayMessage] = field(default_factory=list)


def _load_batch(write: Write, messages: Sequence[NormalizedMessage]) -> _Batch:
    wanted = {m.tool_call_id for m in messages if m.is_tool_result and not m.injected}
    asked = {c.call_id for m in messages if not m.injected for c in m.calls if c.call_id}
    wanted |= asked
    calls: dict[str, ToolCall] = {}
    rows: dict[str, DisplayMessage] = {}
    batch = _Batch(calls=calls, call_rows=rows, new_calls=[], new_rows=[])
    if wanted:
        conversation = write.conversation
        # A call id may name several calls over time: the latest (by pk) is the one that counts.
        for call in (
            ToolCall.objects.using(write.using)
            .filter(conversation=conversation, call_id__in=wanted)
            .order_by("pk")
        ):
            calls[call.call_id] = call
        result_ids = {m.tool_call_id for m in messages if m.is_tool_result}
        touched = [call.pk for call_id, call in calls.items() if call_id in result_ids]
        if touched:
            # By the call alone (its pk implies the conversation): with the conversation in the
            # filter, SQLite walked every row of the conversation by its (conversation, seq) key.
            for row in (
                DisplayMessage.objects.using(write.using)
                .filter(tool_call_id__in=touched, content_type=ContentType.TOOL_CALL)
                .order_by()  # the default ordering joins the conversation and sorts by it
                .select_related("tool_call")
            ):
                rows[row.tool_call.call_id] = row  # type: ignore[union-attr]
        if asked and conversation.held_results:
            for row in (
                DisplayMessage.objects.using(write.using)
                .filter(
                    conversation=conversation,
                    content_type=ContentType.TOOL_RESULT,
                    tool_call__isnull=True,
                    metadata__orphan=True,
                    content__tool_call_id__in=sorted(asked),
                )
                .select_related("message")
                .order_by("seq")
            ):
                content = row.content
                batch.held.setdefault(str(content.get("tool_call_id")), []).append(
                    _Held(
                        row=row,
                        is_error=content.get("is_error") is True,
                        is_interrupt=content.get("is_interrupt") is True,
                        content=content.get("content"),
                        extra=row.message.extra if row.message is not None else {},
                    )
                )
    return batch


def _result_status(is_error: bool, is_interrupt: bool) -> str:
    """The status a result moves its call to."""
    if is_interrupt:
        return ToolStatus.INTERRUPTED
    return ToolStatus.FAILED if is_error else ToolStatus.COMPLETED


def _plan_message(write: Write, batch: _Batch, message: NormalizedMessage) -> None:
    """Add the display rows, calls and call changes of one new message to ``batch``."""
    for part in display_parts(message):
        row = write.new_row(
            message_type=part.message_type,
            content_type=part.content_type,
            content=part.content,
            metadata=dict(part.metadata),
            status=ToolStatus.COMPLETED,
        )
        batch.new_rows.append((message, row))
    if message.injected:
        return
    for request in message.calls:
        call_id = request.call_id or new_call_id()
        known = batch.calls.get(call_id)
        if known is not None and known.status not in TERMINAL_TOOL_STATUSES:
            continue  # a call id of an open call adds no row and changes nothing
        call = ToolCall(
            conversation=write.conversation,
            call_id=call_id,
            name=request.name,
            arguments=request.arguments,
            status=ToolStatus.PENDING,
            event_seq=write.take_event(),
            created_at=write.now,
        )
        batch.calls[call_id] = call
        batch.new_calls.append(call)
        row = write.new_row(
            message_type=MessageType.ASSISTANT,
            content_type=ContentType.TOOL_CALL,
            status=ToolStatus.PENDING,
            content={"call_id": call_id, "name": request.name, "arguments": request.arguments},
            metadata={},
            tool_call=call,
        )
        batch.call_rows[call_id] = row
        batch.new_rows.append((message, row))
        if batch.held.get(call_id):
            _adopt(write, batch, call, row)
    if message.is_tool_result:
        _plan_result(write, batch, message)


def _adopt(write: Write, batch: _Batch, call: ToolCall, card: DisplayMessage) -> None:
    """Results held for ``call``'s id answer it now: the first moves it (completed, failed or
    interrupted, as a result on time would), later ones are late; each loses its orphan mark."""
    held = batch.held.pop(call.call_id)
    for index, item in enumerate(held):
        row = item.row
        metadata = {k: v for k, v in row.metadata.items() if k != "orphan"}
        if index == 0:
            status = _result_status(item.is_error, item.is_interrupt)
            _move_by_result(write, call, status, item.content, item.extra)
            update_card(card, call)
        else:
            metadata["late"] = True
        row.metadata = metadata
        row.tool_call = call
        row.content = {**row.content, "name": call.name}
        if row.pk is not None:
            write.mark_updated(row)
            batch.adopted.append(row)
    write.conversation.held_results -= len(held)
    write.extra_fields.add("held_results")


def _move_by_result(
    write: Write, call: ToolCall, status: str, content: Any, extra: dict[str, Any]
) -> None:
    """Move ``call`` as its result says: the result is kept whatever the status, and a failed
    call carries a short reason (``exits.failure_reason``)."""
    error = failure_reason(content, extra) if status == ToolStatus.FAILED else None
    move_call(write, call, status, result=content, error=error)


def _plan_result(write: Write, batch: _Batch, message: NormalizedMessage) -> None:
    """A tool result never raises: held (orphan) and late results are stored and marked."""
    call = batch.calls.get(message.tool_call_id)
    metadata: dict[str, Any] = {}
    if call is None:
        metadata["orphan"] = True  # held until its call arrives
    elif call.status in TERMINAL_TOOL_STATUSES:
        metadata["late"] = True
    else:
        status = _result_status(message.is_error, message.is_interrupt)
        if status != call.status:
            _move_by_result(write, call, status, message.content, message.extra)
            row = batch.call_rows.get(call.call_id)
            if row is not None:
                update_card(row, call)
                if row.pk is not None:
                    write.mark_updated(row)
    row = write.new_row(
        message_type=MessageType.TOOL,
        content_type=ContentType.TOOL_RESULT,
        status=ToolStatus.COMPLETED,
        content={
            "tool_call_id": message.tool_call_id,
            "name": call.name if call is not None else "",
            "content": message.content,
            "is_error": message.is_error,
            "is_interrupt": message.is_interrupt,
        },
        metadata=metadata,
        tool_call=call,
    )
    batch.new_rows.append((message, row))
    if call is None:
        batch.held.setdefault(message.tool_call_id, []).append(
            _Held(
                row=row,
                is_error=message.is_error,
                is_interrupt=message.is_interrupt,
                content=message.content,
                extra=message.extra,
            )
        )
        write.conversation.held_results += 1
        write.extra_fields.add("held_results")


def _source_record_objects(
    conversation: Conversation, source: str, records: Iterable[dict[str, Any]]
) -> tuple[list[SourceRecord], dict[str, dict[str, int]]]:
    """The records as unsaved rows, their raw lines redacted (``redact(source_line=True)``),
    and the redaction counts per source key."""
    source = check_short_string(source, what="source", max_length=32, allow_empty=False)
    objects: dict[str, SourceRecord] = {}
    redactions: dict[str, dict[str, int]] = {}
    for record in records:
        if not isinstance(record, dict) or not isinstance(record.get("raw"), str):
            raise InvalidContent(
                "a source record is an object with 'source_key', 'line_number', "
                "'raw' (text) and 'record_type'"
            )
        key = check_short_string(
            str(record.get("source_key", "")), what="source_key", allow_empty=False
        )
        line = record.get("line_number")
        if line is not None and (isinstance(line, bool) or not isinstance(line, int) or line < 0):
            raise InvalidContent("source record 'line_number' must be a non-negative integer")
        if key in objects:
            continue
        raw, redactions[key] = redact(
            clean_text(record["raw"]), source_line=True, cut=record.get("cut") is True
        )
        objects[key] = SourceRecord(
            conversation=conversation,
            source=source,
            source_key=key,
            line_number=line,
            raw=raw,
            record_type=redact_and_cut(  # the line's own type: a writer's text like the rest
                check_short_string(
                    record.get("record_type") or "", what="record_type", max_length=64
                ),
                64,
            ).value,
        )
    return list(objects.values()), redactions


def _insert_source_records(
    write: Write, objects: list[SourceRecord], redactions: dict[str, dict[str, int]]
) -> int:
    if not objects:
        return 0
    manager = SourceRecord.objects.using(write.using)
    existing = set(
        manager.filter(
            conversation=write.conversation,
            source=objects[0].source,
            source_key__in=[o.source_key for o in objects],
        ).values_list("source_key", flat=True)
    )
    fresh = [o for o in objects if o.source_key not in existing]
    bulkcopy.insert(write.using, SourceRecord, fresh)
    for record in fresh:
        write.redactions.update(redactions[record.source_key])
    return len(fresh)


def save_messages(
    *,
    conversation: ConversationRef,
    messages: Iterable[dict[str, Any] | NormalizedMessage],
    source: str | None = None,
    source_records: Iterable[dict[str, Any]] | None = None,
    times: Sequence[datetime | None] | None = None,
) -> list[DisplayMessage]:
    """Append messages to the record and create their display rows: one transaction, one lock, one
    event_seq, bulk inserts (the import path).

    ``times`` (docs/write-path.md "Times"), one per message, timezone-aware or None: when each
    message happened (an importer replaying a log). A message's record row, display rows and new
    tool calls are stamped with its time (None: now), a result's call move too, and ``saved_at``
    becomes the latest of them unless the stored one is later. Positions, seqs and event_seq still
    come from the locked counters, never from times.

    Each message is the dict described in docs/write-path.md (see ``messages.normalize_message``),
    or what ``messages.normalize_message`` returned for it with this app's ``MAX_CONTENT_BYTES``
    (an importer that validated it first), taken as it is rather than normalized a second time; any
    other ``NormalizedMessage`` (built by hand, or checked against another limit) raises
    ``InvalidContent``, since it was never validated, cleaned or redacted.
    A message whose ``id`` is already in the conversation (or earlier in the batch) adds nothing.
    Returns the display rows of every given message in ``seq`` order, existing ones included.
    ``source_records`` (with ``source``, the format name) are saved as ``save_source_records`` does.
    Raises ``InvalidContent`` (with the message index) before writing anything,
    ``ConversationNotFound``, ``WriteConflict``.
    """
    normalized = _normalized(messages)
    stamps = _message_times(normalized, times)
    records = [] if source_records is None else check_items(source_records, what="source_records")
    using = router.db_for_write(Conversation)
    if plan.plannable(normalized, bool(records)):
        now = timezone.now()
        appended = applying.append(
            conversation=conversation,
            using=using,
            messages=normalized,
            stamps=[stamps.get(id(m)) or now for m in normalized],
        )
        if appended is not None:
            return appended
    elif singles.available(using) and fasttools.eligible(normalized, bool(records)):
        done = fasttools.try_append(
            conversation_pk=conversation_pk(conversation),
            using=using,
            messages=normalized,
            now=timezone.now(),
            times=[stamps.get(id(m)) for m in normalized],
        )
        if done is not None:
            if isinstance(conversation, Conversation):
                copy_state(conversation, done[0])
            return done[1]
    return _append_generally(conversation, normalized, source, records, stamps)


def _append_generally(
    conversation: ConversationRef,
    normalized: list[NormalizedMessage],
    source: str | None,
    records: list[dict[str, Any]],
    stamps: dict[int, datetime | None],
) -> list[DisplayMessage]:
    """The general path of :func:`save_messages`: lock, read the state the batch needs (known
    ids, calls, held results), write it, and return the rows of every given message."""
    # Tool calls change a child's steps, which its parent shows: lock the parent first then.
    calls = any(m.calls for m in normalized if not m.injected)
    with writing(conversation, parent=calls) as write:
        conv = write.conversation
        given = {m.message_id for m in normalized if m.id_given}
        existing: dict[str, int] = (
            dict(
                Message.objects.using(write.using)
                .filter(conversation=conv, message_id__in=given)
                .values_list("message_id", "pk")
            )
            if given
            else {}
        )
        fresh: list[NormalizedMessage] = []
        seen = set(existing)
        for item in normalized:
            if item.message_id not in seen:
                seen.add(item.message_id)
                fresh.append(item)
        if records:
            if not source:
                raise InvalidContent("source_records need the 'source' format name")
            _insert_source_records(write, *_source_record_objects(conv, source, records))
        write.times = stamps
        rows = _write_messages(write, _load_batch(write, fresh), fresh) if fresh else []
        if existing:  # the rows of the known messages, which this call returns too
            rows = sorted(
                [
                    *rows,
                    *DisplayMessage.objects.using(write.using)
                    .filter(message_id__in=existing.values())
                    .select_related("tool_call"),
                ],
                key=lambda row: row.seq,
            )
    return rows


def _normalized(messages: Iterable[dict[str, Any] | NormalizedMessage]) -> list[NormalizedMessage]:
    """Each message normalized (``messages.normalize_message``), or taken as it is when it is what
    ``normalize_message`` returned with ``MAX_CONTENT_BYTES``; ``InvalidContent`` (with the
    message's index) otherwise."""
    limit = app_settings.max_content_bytes
    normalized: list[NormalizedMessage] = []
    for index, message in enumerate(check_items(messages, what="messages")):
        if isinstance(message, NormalizedMessage):
            if message.checked_limit != limit:  # built by hand, or checked against another limit
                raise InvalidContent(
                    f"message {index}: a NormalizedMessage is taken only as "
                    "messages.normalize_message returned it with MAX_CONTENT_BYTES; "
                    "pass the message dict instead"
                )
            normalized.append(message)
            continue
        try:
            normalized.append(normalize_message(message, max_content_bytes=limit))
        except InvalidContent as error:
            raise InvalidContent(f"message {index}: {error}") from error
    return normalized


def _message_times(
    messages: list[NormalizedMessage], times: Sequence[datetime | None] | None
) -> dict[int, datetime | None]:
    """``times`` checked (one aware datetime or None per message), keyed by ``id()`` of each
    normalized message; empty when no times were given."""
    if times is None:
        return {}
    times = check_items(times, what="times")
    if len(times) != len(messages):
        raise InvalidContent(f"times has {len(times)} entries for {len(messages)} messages")
    return {
        id(message): check_time(when, what=f"times[{index}]")
        for index, (message, when) in enumerate(zip(messages, times, strict=True))
    }


def _write_messages(
    write: Write, batch: _Batch, fresh: list[NormalizedMessage]
) -> list[DisplayMessage]:
    conv = write.conversation
    write.take_event()
    record: dict[int, Message] = {}
    for message in fresh:
        if write.times:
            write.stamp(write.times.get(id(message)))
        write.redactions.update(message.redactions)
        conv.record_length += 1
        conv.transcript_count += message.in_transcript
        record[id(message)] = Message(
            conversation=conv,
            position=conv.record_length,
            message_id=message.message_id,
            role=message.role,
            content=message.record_content,
            tool_call_id=message.tool_call_id,
            is_error=message.is_error,
            source_id=message.source_id,
            extra=message.extra,
            created_at=write.now,
        )
        _plan_message(write, batch, message)
    bulkcopy.insert(write.using, Message, list(record.values()))
    count_usage(write, fresh, record)
    # Existing calls that ended are saved first: a new call may reuse the id of one of them, and
    # a call id is unique among open calls (murmur_toolcall_open_call_id_uniq).
    new_calls = {id(call) for call in batch.new_calls}
    save_calls(write, [c for c in write.calls_changed.values() if id(c) not in new_calls])
    bulkcopy.insert(write.using, ToolCall, batch.new_calls)
    if batch.new_calls:
        conv.tool_call_count += len(batch.new_calls)
        write.parent_news = True  # a child's steps grew
    new_rows: list[DisplayMessage] = []
    for source_message, row in batch.new_rows:
        if source_message is not None:
            row.message = record[id(source_message)]
        new_rows.append(row)
    bulkcopy.insert(write.using, DisplayMessage, new_rows)
    if batch.adopted:  # held results stored earlier now belong to their new call
        DisplayMessage.objects.using(write.using).bulk_update(batch.adopted, ["tool_call"])
    write.save_rows(list(write.updated.values()))
    write.created.extend(new_rows)
    # Every call whose status moved is announced, including new calls already finished here.
    write.calls_changed = {call.pk: call for call in write.calls_changed.values()}
    return new_rows


def append_in_write(write: Write, messages: list[NormalizedMessage]) -> list[DisplayMessage]:
    """Inside another service's ``writing`` block: append ``messages`` (normalized, with fresh
    ids) to the record with their display rows, under that call's lock and event_seq, as
    ``save_messages`` does. Returns the new display rows; the caller's ``Write`` announces them."""
    return _write_messages(write, _load_batch(write, messages), messages)


def save_message(*, conversation: ConversationRef, message: dict[str, Any]) -> list[DisplayMessage]:
    """Append one message to the record and return its display rows (sagents ``save_message``).

    Rows, in order: text and thinking parts (empty ones dropped), one ``tool_call`` card per new call
    (status ``pending``), or exactly one ``tool_result`` row for a message with a ``tool_call_id``.
    A known message ``id`` is a no-op returning the existing rows, also under concurrent duplicates.
    A tool result never raises: it completes (``is_error``: fails; ``is_interrupt``: interrupts)
    its call, or is stored with ``metadata.orphan`` / ``metadata.late``. Raises ``InvalidContent``,
    ``ConversationNotFound``, ``WriteConflict``; nothing is written when it raises.
    """
    return save_messages(conversation=conversation, messages=[message])


def save_source_records(
    *, conversation: ConversationRef, source: str, records: Iterable[dict[str, Any]]
) -> int:
    """Keep imported lines verbatim: ``records`` yields ``{source_key, line_number, raw,
    record_type}``; an existing ``(conversation, source, source_key)`` is skipped. Returns the
    number added. Takes no event_seq and sends no signal."""
    pk = conversation_pk(conversation)
    using = router.db_for_write(Conversation)
    with database_errors(), transaction.atomic(using=using):
        locked = lock_conversation(pk, using)
        write = Write(locked, using)
        added = _insert_source_records(write, *_source_record_objects(locked, source, records))
        write.finish()  # the redaction counts; no event_seq, so nothing else
        return added


def save_synthetic_message(
    *,
    conversation: ConversationRef,
    message_type: str,
    content_type: str,
    content: dict[str, Any],
    metadata: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> DisplayMessage:
    """Save a display row that is not in the record: a notice, an error, a todo snapshot
    (sagents ``save_synthetic_message``). ``content`` must have the keys its ``content_type``
    requires; ``InvalidContent`` otherwise, or for an unknown ``message_type``. ``at``: when it
    happened (docs/write-path.md "Times"; default now)."""
    if message_type not in MessageType.values:
        raise InvalidContent(
            f"unknown message_type {message_type!r}; one of {', '.join(MessageType.values)}"
        )
    content, found = redact(clean_json(content), record=True)
    check_display_content(content_type, content)
    check_size(content, limit=app_settings.max_content_bytes, what="content")
    metadata, found_in_metadata = redact(
        check_object(
            {} if metadata is None else metadata,
            what="metadata",
            limit=app_settings.max_metadata_bytes,
        )
    )
    at = check_time(at, what="at")
    using = router.db_for_write(Conversation)
    counts = Counter(found) + Counter(found_in_metadata)
    planned = plan.plan_synthetic(
        conversation_pk(conversation),
        message_type=message_type,
        content_type=content_type,
        content=content,
        metadata=metadata or {},
        at=at or timezone.now(),
        redactions=dict(counts),
    )
    saved = applying.synthetic(conversation=conversation, using=using, planned=planned)
    if saved is not None:
        return saved
    with writing(conversation, at) as write:
        write.redactions.update(found)
        write.redactions.update(found_in_metadata)
        row = write.new_row(
            message_type=message_type,
            content_type=content_type,
            content=content,
            metadata=metadata,
            status=ToolStatus.COMPLETED,
        )
        row.save(using=write.using, force_insert=True)
        write.created.append(row)
    return row
