"""The write path (DESIGN.md section 4): the only code that writes rows.

Every function is atomic, locks the conversation row while it assigns numbers, takes keyword-only
arguments, accepts a ``Conversation`` or its id, takes exactly one new ``event_seq`` when it changes
the conversation, and sends its signals only after commit. Async callers use the ``a``-prefixed
wrappers at the bottom (``sync_to_async``). Behaviour follows the sagents
``DisplayMessagePersistence`` (display rows, tool status lifecycle, synthetic messages), the murmur
conversation record (append-only, de-duplicated by id) and agentfootprint's session store (owner
rule, pending ask).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from asgiref.sync import sync_to_async
from django.db import IntegrityError, connections, router, transaction
from django.db.models import Q
from django.utils import timezone

from murmur_conversations import _fastpath, signals
from murmur_conversations._write import (
    ConversationRef,
    Write,
    conversation_pk,
    copy_state,
    database_errors,
    lock_conversation,
    send,
    send_on_commit,
    writing,
)
from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import (
    ConversationNotFound,
    InvalidContent,
    InvalidPendingAsk,
    InvalidStatus,
    InvalidToolTransition,
    OwnershipConflict,
    ToolCallNotFound,
)
from murmur_conversations.ids import new_call_id
from murmur_conversations.messages import NormalizedMessage, display_parts, normalize_message
from murmur_conversations.models import (
    OPEN_TOOL_STATUSES,
    TERMINAL_TOOL_STATUSES,
    ContentType,
    Conversation,
    ConversationStatus,
    DisplayMessage,
    InterruptReason,
    Message,
    MessageType,
    SourceRecord,
    ToolCall,
    ToolStatus,
)
from murmur_conversations.validation import (
    check_display_content,
    check_object,
    check_short_string,
    check_size,
    clean_json,
    clean_text,
)

__all__ = [
    "UNSET",
    "cancel_run",
    "delete_conversation",
    "purge_conversations",
    "recover_interrupted",
    "resolve_tool_result",
    "save_message",
    "save_messages",
    "save_source_records",
    "save_synthetic_message",
    "set_status",
    "start_conversation",
    "update_conversation",
    "update_tool_status",
]


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: Default of ``update_conversation`` fields: leave the field as it is.
UNSET: Final[Any] = _Unset()

#: Allowed tool status moves (sagents ``update_tool_status``). Terminal states never move back.
ALLOWED_MOVES: Final[dict[str, frozenset[str]]] = {
    ToolStatus.PENDING: frozenset(
        {
            ToolStatus.EXECUTING,
            ToolStatus.COMPLETED,
            ToolStatus.FAILED,
            ToolStatus.CANCELLED,
            ToolStatus.INTERRUPTED,
        }
    ),
    ToolStatus.EXECUTING: frozenset(
        {ToolStatus.COMPLETED, ToolStatus.FAILED, ToolStatus.CANCELLED, ToolStatus.INTERRUPTED}
    ),
    ToolStatus.INTERRUPTED: frozenset(
        {ToolStatus.COMPLETED, ToolStatus.FAILED, ToolStatus.CANCELLED}
    ),
    ToolStatus.COMPLETED: frozenset(),
    ToolStatus.FAILED: frozenset(),
    ToolStatus.CANCELLED: frozenset(),
}
_DELETE_BATCH: Final = 2000


# --------------------------------------------------------------------------- conversations


def _owner_pk(owner: Any) -> Any:
    return None if owner is None else getattr(owner, "pk", owner)


def _claim(conversation: Conversation, owner_pk: Any) -> Conversation:
    """agentfootprint's write-once owner rule: none + X -> X; X + none/X -> X; X + Y -> conflict."""
    if owner_pk is None or conversation.owner_id == owner_pk:
        return conversation
    if conversation.owner_id is not None:
        raise OwnershipConflict(f"conversation {conversation.pk} belongs to another owner")
    with writing(conversation) as write:
        if write.conversation.owner_id not in (None, owner_pk):
            raise OwnershipConflict(f"conversation {conversation.pk} belongs to another owner")
        write.conversation.owner_id = owner_pk
        write.extra_fields.add("owner")
        write.take_event()
    return conversation


def start_conversation(
    *,
    owner: Any,
    title: str = "",
    metadata: dict[str, Any] | None = None,
    conversation_id: uuid.UUID | str | None = None,
    source: str | None = None,
    external_id: str | None = None,
) -> Conversation:
    """Create a conversation, or return the existing one with that id or ``(owner, source,
    external_id)`` key (agentfootprint session store).

    ``owner`` is a user, a user pk or None. The owner is write-once: an ownerless conversation is
    claimed by the first owner given; another owner raises ``OwnershipConflict``. ``title`` at most
    255 characters, ``metadata`` a JSON object of at most ``MAX_METADATA_BYTES`` (else
    ``InvalidContent``). Concurrent calls with the same id or key return one conversation and never
    raise ``IntegrityError``. A creation sends ``conversation_saved`` with event_seq 0.
    """
    owner_pk = _owner_pk(owner)
    title = check_short_string(title, what="title")
    metadata = check_object(
        {} if metadata is None else metadata, what="metadata", limit=app_settings.max_metadata_bytes
    )
    source = check_short_string(source or "", what="source", max_length=64)
    external_id = check_short_string(external_id or "", what="external_id")
    pk = None if conversation_id is None else conversation_pk(conversation_id)
    manager = Conversation.objects

    def find() -> Conversation | None:
        if pk is not None:
            return manager.filter(pk=pk).first()
        if external_id:
            return manager.filter(owner_id=owner_pk, source=source, external_id=external_id).first()
        return None

    using = router.db_for_write(Conversation)
    with database_errors():
        for _attempt in range(3):
            existing = find()
            if existing is not None:
                return _claim(existing, owner_pk)
            try:
                with transaction.atomic(using=using):  # a lost race rolls back only this
                    conversation = manager.create(
                        **({"pk": pk} if pk is not None else {}),
                        owner_id=owner_pk,
                        title=title,
                        metadata=metadata,
                        source=source,
                        external_id=external_id,
                    )
                    send_on_commit(
                        signals.conversation_saved, using, conversation=conversation, event_seq=0
                    )
                return conversation
            except IntegrityError:
                continue  # another writer created it first: read theirs
    existing = find()
    if existing is None:
        raise ConversationNotFound("the conversation could not be created or found")
    return _claim(existing, owner_pk)


def update_conversation(
    *, conversation: ConversationRef, title: Any = UNSET, metadata: Any = UNSET
) -> Conversation:
    """Replace ``title`` (a string of at most 255 characters) and/or ``metadata`` (a JSON object of
    at most ``MAX_METADATA_BYTES``); ``InvalidContent`` otherwise. A change takes one event_seq, sets
    ``saved_at`` and sends ``conversation_updated``; no change, no event."""
    if title is not UNSET:
        title = check_short_string(title, what="title")
    if metadata is not UNSET:
        metadata = check_object(metadata, what="metadata", limit=app_settings.max_metadata_bytes)
    with writing(conversation) as write:
        locked = write.conversation
        for name, value in (("title", title), ("metadata", metadata)):
            if value is not UNSET and getattr(locked, name) != value:
                setattr(locked, name, value)
                write.extra_fields.add(name)
        if write.extra_fields:
            write.take_event()
            write.conversation_updated = True
    return write.conversation


def _check_pending_ask(ask: Any) -> dict[str, Any]:
    """agentfootprint ``PendingAsk``: ``question``/``tool`` strings, ``component`` an object with a
    string ``id``, ``pauseData`` anything; all optional."""
    if not isinstance(ask, dict):
        raise InvalidPendingAsk("a pending ask must be a JSON object")
    for key in ("question", "tool"):
        if key in ask and not isinstance(ask[key], str):
            raise InvalidPendingAsk(f"pending ask {key!r} must be a string")
    if "component" in ask and (
        not isinstance(ask["component"], dict) or not isinstance(ask["component"].get("id"), str)
    ):
        raise InvalidPendingAsk("pending ask 'component' must be an object with a string 'id'")
    try:
        return check_object(ask, what="pending ask", limit=app_settings.max_metadata_bytes)
    except InvalidContent as error:
        raise InvalidPendingAsk(str(error)) from error


def set_status(
    *, conversation: ConversationRef, status: str, pending_ask: dict[str, Any] | None = None
) -> Conversation:
    """Set the conversation status and always write ``pending_ask`` (omitting it clears it).

    ``status`` one of ``ConversationStatus`` (else ``InvalidStatus``); an ask only with ``paused``
    or ``interrupted`` (else ``InvalidPendingAsk``). The same status and ask again is a no-op.
    """
    if status not in ConversationStatus.values:
        raise InvalidStatus(f"unknown status {status!r}; one of {', '.join(ConversationStatus)}")
    if pending_ask is not None:
        pending_ask = _check_pending_ask(pending_ask)
        if status not in (ConversationStatus.PAUSED, ConversationStatus.INTERRUPTED):
            raise InvalidPendingAsk("a pending ask needs status 'paused' or 'interrupted'")
    with writing(conversation) as write:
        locked = write.conversation
        if locked.status != status or locked.pending_ask != pending_ask:
            locked.status, locked.pending_ask = status, pending_ask
            write.extra_fields |= {"status", "pending_ask"}
            write.take_event()
            write.status_changed = True
    return write.conversation


# --------------------------------------------------------------------------- messages


def _call_row_metadata(row: DisplayMessage, call: ToolCall) -> None:
    row.status = call.status
    if call.display_text and call.status in (
        ToolStatus.EXECUTING,
        ToolStatus.COMPLETED,
        ToolStatus.INTERRUPTED,
    ):
        row.metadata["display_text"] = call.display_text
    if call.status == ToolStatus.COMPLETED:
        row.metadata["result"] = call.result
    if call.status == ToolStatus.FAILED:
        row.metadata["error"] = call.error


def _move_call(
    write: Write,
    call: ToolCall,
    status: str,
    *,
    name: str | None = None,
    display_text: str | None = None,
    result: Any = None,
    error: Any = None,
    interrupt_reason: str = InterruptReason.AWAITING_INPUT,
) -> None:
    """Apply a checked status move to ``call`` (fields and timestamps); no save."""
    call.status = status
    call.event_seq = write.take_event()
    if name:
        call.name = name
    if display_text is not None:
        call.display_text = display_text
    if status == ToolStatus.EXECUTING:
        call.started_at = call.started_at or write.now
    if status == ToolStatus.COMPLETED:
        call.result = result
    if status == ToolStatus.FAILED:
        call.error = error
    call.interrupt_reason = interrupt_reason if status == ToolStatus.INTERRUPTED else ""
    if status in TERMINAL_TOOL_STATUSES:
        call.finished_at = write.now
    write.calls_changed[call.pk or id(call)] = call


@dataclass
class _Batch:
    """Loaded state for a batch of messages: the calls they reference and their display rows."""

    calls: dict[str, ToolCall]
    call_rows: dict[str, DisplayMessage]
    new_calls: list[ToolCall]
    new_rows: list[tuple[NormalizedMessage | None, DisplayMessage]]


def _load_batch(write: Write, messages: Sequence[NormalizedMessage]) -> _Batch:
    wanted = {m.tool_call_id for m in messages if m.is_tool_result and not m.injected}
    wanted |= {c.call_id for m in messages if not m.injected for c in m.calls if c.call_id}
    calls: dict[str, ToolCall] = {}
    rows: dict[str, DisplayMessage] = {}
    if wanted:
        conversation = write.conversation
        calls = {
            call.call_id: call
            for call in ToolCall.objects.using(write.using).filter(
                conversation=conversation, call_id__in=wanted
            )
        }
        result_ids = {m.tool_call_id for m in messages if m.is_tool_result}
        touched = [call.pk for call_id, call in calls.items() if call_id in result_ids]
        if touched:
            for row in (
                DisplayMessage.objects.using(write.using)
                .filter(
                    conversation=conversation,
                    tool_call_id__in=touched,
                    content_type=ContentType.TOOL_CALL,
                )
                .select_related("tool_call")
            ):
                rows[row.tool_call.call_id] = row  # type: ignore[union-attr]
    return _Batch(calls=calls, call_rows=rows, new_calls=[], new_rows=[])


def _new_row(write: Write, message: NormalizedMessage | None, **fields: Any) -> DisplayMessage:
    event_seq = write.take_event()
    return DisplayMessage(
        conversation=write.conversation,
        seq=write.next_seq(),
        created_event_seq=event_seq,
        event_seq=event_seq,
        created_at=write.now,
        updated_at=write.now,
        **fields,
    )


def _plan_message(write: Write, batch: _Batch, message: NormalizedMessage) -> None:
    """Add the display rows, calls and call changes of one new message to ``batch``."""
    for part in display_parts(message):
        row = _new_row(
            write,
            message,
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
        if call_id in batch.calls:
            continue  # a known call id adds no row and changes nothing
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
        row = _new_row(
            write,
            message,
            message_type=MessageType.ASSISTANT,
            content_type=ContentType.TOOL_CALL,
            status=ToolStatus.PENDING,
            content={"call_id": call_id, "name": request.name, "arguments": request.arguments},
            metadata={},
            tool_call=call,
        )
        batch.call_rows[call_id] = row
        batch.new_rows.append((message, row))
    if message.is_tool_result:
        _plan_result(write, batch, message)


def _plan_result(write: Write, batch: _Batch, message: NormalizedMessage) -> None:
    """A tool result never raises: orphan and late results are stored and marked."""
    call = batch.calls.get(message.tool_call_id)
    metadata: dict[str, Any] = {}
    if call is None:
        metadata["orphan"] = True
    elif call.status in TERMINAL_TOOL_STATUSES:
        metadata["late"] = True
    else:
        if message.is_interrupt:
            status = ToolStatus.INTERRUPTED
        elif message.is_error:
            status = ToolStatus.FAILED
        else:
            status = ToolStatus.COMPLETED
        if status != call.status:
            _move_call(write, call, status, result=message.content, error=message.content)
            row = batch.call_rows.get(call.call_id)
            if row is not None:
                _call_row_metadata(row, call)
                if row.pk is not None:
                    write.mark_updated(row)
    row = _new_row(
        write,
        message,
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


def _source_record_objects(
    conversation: Conversation, source: str, records: Iterable[dict[str, Any]]
) -> list[SourceRecord]:
    source = check_short_string(source, what="source", max_length=32, allow_empty=False)
    objects: dict[str, SourceRecord] = {}
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
        objects.setdefault(
            key,
            SourceRecord(
                conversation=conversation,
                source=source,
                source_key=key,
                line_number=line,
                raw=clean_text(record["raw"]),
                record_type=check_short_string(
                    record.get("record_type") or "", what="record_type", max_length=64
                ),
            ),
        )
    return list(objects.values())


def _insert_source_records(write: Write, objects: list[SourceRecord]) -> int:
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
    manager.bulk_create(fresh, batch_size=1000)
    return len(fresh)


def save_messages(
    *,
    conversation: ConversationRef,
    messages: Iterable[dict[str, Any]],
    source: str | None = None,
    source_records: Iterable[dict[str, Any]] | None = None,
) -> list[DisplayMessage]:
    """Append messages to the record and create their display rows: one transaction, one lock, one
    event_seq, bulk inserts (the import path).

    Each message is the dict described in DESIGN.md section 4 (see ``messages.normalize_message``).
    A message whose ``id`` is already in the conversation (or earlier in the batch) adds nothing.
    Returns the display rows of every given message in ``seq`` order, existing ones included.
    ``source_records`` (with ``source``, the format name) are saved as ``save_source_records`` does.
    Raises ``InvalidContent`` (with the message index) before writing anything,
    ``ConversationNotFound``, ``WriteConflict``.
    """
    limit = app_settings.max_content_bytes
    normalized: list[NormalizedMessage] = []
    for index, message in enumerate(messages):
        try:
            normalized.append(normalize_message(message, max_content_bytes=limit))
        except InvalidContent as error:
            raise InvalidContent(f"message {index}: {error}") from error
    records = list(source_records or ())
    using = router.db_for_write(Conversation)
    if _fastpath.eligible(connections[using].vendor, normalized, bool(records)):
        appended = _fastpath.try_append(
            conversation_pk=conversation_pk(conversation),
            using=using,
            messages=normalized,
            now=timezone.now(),
        )
        if appended is not None:
            if isinstance(conversation, Conversation):
                copy_state(conversation, appended[0])
            return appended[1]
    with writing(conversation) as write:
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
            _insert_source_records(write, _source_record_objects(conv, source, records))
        if not fresh:
            return list(
                DisplayMessage.objects.using(write.using)
                .filter(message_id__in=existing.values())
                .select_related("tool_call")
                .order_by("seq")
            )
        batch = _load_batch(write, fresh)
        rows = _write_messages(write, batch, fresh)
        if existing:
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


def _write_messages(
    write: Write, batch: _Batch, fresh: list[NormalizedMessage]
) -> list[DisplayMessage]:
    conv = write.conversation
    event_seq = write.take_event()
    record: dict[int, Message] = {}
    for message in fresh:
        conv.record_length += 1
        conv.transcript_count += message.in_transcript
        record[id(message)] = Message(
            conversation=conv,
            position=conv.record_length,
            message_id=message.message_id,
            role=message.role,
            content=message.content,
            tool_call_id=message.tool_call_id,
            is_error=message.is_error,
            source_id=message.source_id,
            extra=message.extra,
            created_at=write.now,
        )
        _plan_message(write, batch, message)
    assert write.event_seq == event_seq
    Message.objects.using(write.using).bulk_create(record.values(), batch_size=1000)
    ToolCall.objects.using(write.using).bulk_create(batch.new_calls, batch_size=1000)
    new_rows: list[DisplayMessage] = []
    for source_message, row in batch.new_rows:
        if source_message is not None:
            row.message = record[id(source_message)]
        new_rows.append(row)
    DisplayMessage.objects.using(write.using).bulk_create(new_rows, batch_size=1000)
    new_calls = {id(call) for call in batch.new_calls}
    _save_calls(write, [c for c in write.calls_changed.values() if id(c) not in new_calls])
    _save_rows(write, list(write.updated.values()))
    write.created.extend(new_rows)
    # Every call whose status moved is announced, including new calls already finished here.
    write.calls_changed = {call.pk: call for call in write.calls_changed.values()}
    return new_rows


_CALL_FIELDS = (
    "name",
    "status",
    "interrupt_reason",
    "display_text",
    "result",
    "error",
    "started_at",
    "finished_at",
    "event_seq",
)
_ROW_FIELDS = ("status", "content", "metadata", "event_seq", "updated_at")


def _save_calls(write: Write, calls: list[ToolCall]) -> None:
    if calls:
        ToolCall.objects.using(write.using).bulk_update(calls, _CALL_FIELDS, batch_size=500)


def _save_rows(write: Write, rows: list[DisplayMessage]) -> None:
    if rows:
        DisplayMessage.objects.using(write.using).bulk_update(rows, _ROW_FIELDS, batch_size=500)


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
        return _insert_source_records(write, _source_record_objects(locked, source, records))


def save_synthetic_message(
    *,
    conversation: ConversationRef,
    message_type: str,
    content_type: str,
    content: dict[str, Any],
    metadata: dict[str, Any] | None = None,
) -> DisplayMessage:
    """Save a display row that is not in the record: a notice, an error, a todo snapshot
    (sagents ``save_synthetic_message``). ``content`` must have the keys its ``content_type``
    requires; ``InvalidContent`` otherwise, or for an unknown ``message_type``."""
    if message_type not in MessageType.values:
        raise InvalidContent(
            f"unknown message_type {message_type!r}; one of {', '.join(MessageType.values)}"
        )
    content = clean_json(content)
    check_display_content(content_type, content)
    check_size(content, limit=app_settings.max_content_bytes, what="content")
    metadata = check_object(
        {} if metadata is None else metadata, what="metadata", limit=app_settings.max_metadata_bytes
    )
    with writing(conversation) as write:
        row = _new_row(
            write,
            None,
            message_type=message_type,
            content_type=content_type,
            content=content,
            metadata=metadata,
            status=ToolStatus.COMPLETED,
        )
        row.save(using=write.using, force_insert=True)
        write.created.append(row)
    return row


# --------------------------------------------------------------------------- tool calls


def _locked_call(write: Write, call_id: str) -> tuple[ToolCall, DisplayMessage | None]:
    call = (
        ToolCall.objects.using(write.using)
        .filter(conversation=write.conversation, call_id=call_id)
        .first()
    )
    if call is None:
        raise ToolCallNotFound(f"no tool call {call_id!r} in conversation {write.conversation.pk}")
    row = (
        DisplayMessage.objects.using(write.using)
        .filter(tool_call=call, content_type=ContentType.TOOL_CALL)
        .order_by("seq")
        .first()
    )
    return call, row


def update_tool_status(
    *, conversation: ConversationRef, status: str, tool_info: dict[str, Any]
) -> DisplayMessage:
    """Move a tool call along its lifecycle (sagents ``update_tool_status``) and return its card.

    ``tool_info``: ``call_id`` and, per status, ``name``, ``display_text``, ``result``, ``error``,
    ``interrupt_reason`` (``awaiting_input`` by default, ``worker_lost``, ``log_ended``). Allowed:
    pending->executing; pending|executing|interrupted -> completed|failed|cancelled;
    pending|executing -> interrupted. The same status again is a no-op. Raises ``ToolCallNotFound``
    for an unknown call, ``InvalidToolTransition`` for an unknown status or reason or a disallowed
    move; nothing changes then.
    """
    if status not in ToolStatus.values:
        raise InvalidToolTransition(f"unknown tool status {status!r}")
    if not isinstance(tool_info, dict) or not isinstance(tool_info.get("call_id"), str):
        raise ToolCallNotFound("tool_info needs a string 'call_id'")
    info = clean_json(tool_info)
    reason = info.get("interrupt_reason") or InterruptReason.AWAITING_INPUT
    if reason not in InterruptReason.values:
        raise InvalidToolTransition(f"unknown interrupt_reason {reason!r}")
    display_text = info.get("display_text")
    if display_text is not None and not isinstance(display_text, str):
        raise InvalidContent("tool_info 'display_text' must be a string")
    for key in ("result", "error"):
        if key in info:
            check_size(info[key], limit=app_settings.max_content_bytes, what=f"tool {key}")
    name = info.get("name")
    if name is not None:
        name = check_short_string(name, what="tool_info 'name'")
    with writing(conversation) as write:
        call, row = _locked_call(write, info["call_id"])
        if call.status == status:
            if row is None:
                raise ToolCallNotFound(f"tool call {call.call_id!r} has no display row")
            return row
        if status not in ALLOWED_MOVES[call.status]:
            raise InvalidToolTransition(
                f"tool call {call.call_id!r} cannot move from {call.status} to {status}"
            )
        _move_call(
            write,
            call,
            status,
            name=name,
            display_text=display_text,
            result=info.get("result"),
            error=info.get("error"),
            interrupt_reason=reason,
        )
        call.save(using=write.using, update_fields=_CALL_FIELDS)
        if row is None:  # a call without a card (cannot happen through these services)
            raise ToolCallNotFound(f"tool call {call.call_id!r} has no display row")
        if name:
            row.content = {**row.content, "name": name}
        _call_row_metadata(row, call)
        write.mark_updated(row)
        _save_rows(write, [row])
    return row


def resolve_tool_result(
    *, conversation: ConversationRef, tool_call_id: str, result_content: Any
) -> DisplayMessage:
    """Answer an interrupted tool call (sagents ``resolve_tool_result``): replace
    ``content["content"]`` of its ``tool_result`` row whose ``is_interrupt`` is true, set that flag
    false (the record is not touched) and complete the call. Returns the result row. Raises
    ``ToolCallNotFound`` when there is no such call or row."""
    result_content = clean_json(result_content)
    check_size(result_content, limit=app_settings.max_content_bytes, what="result content")
    with writing(conversation) as write:
        call, card = _locked_call(write, tool_call_id)
        row = next(
            (
                r
                for r in DisplayMessage.objects.using(write.using)
                .filter(
                    conversation=write.conversation,
                    tool_call=call,
                    content_type=ContentType.TOOL_RESULT,
                )
                .order_by("-seq")
                if r.content.get("is_interrupt") is True
            ),
            None,
        )
        if row is None:
            raise ToolCallNotFound(f"tool call {tool_call_id!r} has no interrupted result")
        row.content = {**row.content, "content": result_content, "is_interrupt": False}
        write.mark_updated(row)
        changed = [row]
        if call.status not in TERMINAL_TOOL_STATUSES:
            _move_call(write, call, ToolStatus.COMPLETED, result=result_content)
            call.save(using=write.using, update_fields=_CALL_FIELDS)
            if card is not None:
                _call_row_metadata(card, call)
                write.mark_updated(card)
                changed.append(card)
        _save_rows(write, changed)
    return row


# --------------------------------------------------------------------------- runs


def _close_calls(write: Write, status: str, reason: str, statuses: Iterable[str]) -> None:
    calls = list(
        ToolCall.objects.using(write.using).filter(
            conversation=write.conversation, status__in=list(statuses)
        )
    )
    if not calls:
        return
    for call in calls:
        _move_call(write, call, status, interrupt_reason=reason)
    _save_calls(write, calls)
    rows = list(
        DisplayMessage.objects.using(write.using)
        .filter(tool_call__in=calls, content_type=ContentType.TOOL_CALL)
        .select_related("tool_call")
    )
    for row in rows:
        assert row.tool_call is not None
        row.tool_call = write.calls_changed[row.tool_call.pk]
        _call_row_metadata(row, row.tool_call)
        write.mark_updated(row)
    _save_rows(write, rows)


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
        row = _new_row(
            write,
            None,
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


# --------------------------------------------------------------------------- deletion


def delete_conversation(*, conversation: ConversationRef) -> None:
    """Delete a conversation and all its rows in batches, leaf tables first, in one transaction;
    sends ``conversation_deleted(conversation_id, owner_id)`` after commit. Raises
    ``ConversationNotFound`` or ``WriteConflict``."""
    pk = conversation_pk(conversation)
    using = router.db_for_write(Conversation)
    with database_errors(), transaction.atomic(using=using):
        locked = lock_conversation(pk, using)
        for model in (DisplayMessage, ToolCall, Message, SourceRecord):
            manager = model._default_manager.using(using)
            while True:
                ids = list(
                    manager.filter(conversation_id=pk)
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
        matching = matching.filter(owner_id=_owner_pk(owner))
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


# --------------------------------------------------------------------------- ephemeral


def broadcast_delta(*, conversation: ConversationRef, stream_id: str, text: str) -> None:
    """Announce streamed text (``text`` is the increment to append) to live clients at once.
    Ephemeral: never stored, takes no event_seq; the final text arrives through ``save_message``.
    Raises ``ConversationNotFound`` or ``InvalidContent`` (non-string ``stream_id``/``text``)."""
    if not isinstance(stream_id, str) or not isinstance(text, str):
        raise InvalidContent("stream_id and text must be strings")
    if isinstance(conversation, Conversation):
        conv = conversation
    else:
        found = Conversation.objects.filter(pk=conversation_pk(conversation)).first()
        if found is None:
            raise ConversationNotFound(f"no conversation {conversation!r}")
        conv = found
    send(signals.delta, conversation=conv, stream_id=clean_text(stream_id), text=clean_text(text))


# --------------------------------------------------------------------------- async wrappers

astart_conversation = sync_to_async(start_conversation)
asave_message = sync_to_async(save_message)
asave_messages = sync_to_async(save_messages)
aupdate_tool_status = sync_to_async(update_tool_status)
aresolve_tool_result = sync_to_async(resolve_tool_result)
asave_synthetic_message = sync_to_async(save_synthetic_message)
aupdate_conversation = sync_to_async(update_conversation)
aset_status = sync_to_async(set_status)
acancel_run = sync_to_async(cancel_run)
adelete_conversation = sync_to_async(delete_conversation)
abroadcast_delta = sync_to_async(broadcast_delta)
