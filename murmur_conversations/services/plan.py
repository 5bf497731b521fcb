"""One plan per write: what a write changes, decided once, in Python (docs/write-path.md "One
plan per write").

A :class:`Plan` lists the rows a write inserts per table, the deltas it adds to the
conversation's counters, its token usage and redaction counts, and the guard under which it
applies. Every number the database allocates under the conversation's lock is written as an
offset from the counters as they stand before the write: a record row at offset ``k`` gets
``position = record_length + k``, a display row at offset ``k`` gets ``seq = last_seq + k``, and
every row of the write carries ``last_event_seq + 1``. A backend (``services/backends/``) turns
a plan into statements for its database and never decides anything the plan does not say.

The planner holds the rules of what a message becomes (``messages.display_parts``), its
transcript count, its token usage (priced as it is written: ``usage.row_cost``) and its times
(docs/write-path.md "Times"). Private to ``murmur_conversations.services``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from murmur_conversations.conf import app_settings
from murmur_conversations.messages import DisplayPart, NormalizedMessage, display_parts
from murmur_conversations.models import ToolStatus
from murmur_conversations.services.writing import retention_time
from murmur_conversations.usage import ByModel, Usage, add_by_model, row_cost


@dataclass(frozen=True, slots=True)
class RecordRow:
    """One ``Message`` row: ``position`` is the conversation's ``record_length`` + ``offset``;
    ``content`` None is stored as SQL NULL (a message given without content)."""

    offset: int
    message_id: str
    role: str
    content: Any
    tool_call_id: str
    is_error: bool
    source_id: str
    extra: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class DisplayRow:
    """One ``DisplayMessage`` row: ``seq`` is the conversation's ``last_seq`` + ``offset``, its
    record row the one at offset ``record``, its event_seq (created and changed) the write's."""

    offset: int
    record: int
    message_type: str
    content_type: str
    content: dict[str, Any]
    status: str
    metadata: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One ``MessageUsage`` row of the record row at offset ``record``: the counts (by
    ``usage.COUNTERS`` name) and the price at the message's time."""

    record: int
    model: str
    counts: dict[str, int]
    cost_nanocents: int | None
    priced_with: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class StatusChange:
    """The conversation's ``status`` and ``pending_ask`` set by a write (``set_status``; None:
    SQL NULL, no ask). ``status_event_seq`` takes the write's event_seq, and so does
    ``pending_ask_event_seq`` when the stored ask differs from this one (the database's equality
    of JSON values). Its guard: the conversation is top-level (no parent to tell) and its stored
    status or ask differs (a no-op writes nothing)."""

    status: str
    pending_ask: dict[str, Any] | None


@dataclass(slots=True)
class Plan:
    """Everything one write changes in one conversation.

    The counter deltas (``records``: ``record_length``; ``transcript``: ``transcript_count``;
    ``displays``: ``last_seq``; one ``last_event_seq``; ``tokens``: each token counter;
    ``by_model``: what ``usage_by_model`` gains per model, added counter by counter) are added to
    the stored values; ``saved_at`` and ``retained_at`` become the later of the stored value and
    the planned one. ``redactions`` (detector -> count) are added to the conversation's
    ``RedactionCount`` rows. The write applies only while none of ``unknown_ids`` names a stored
    record row of the conversation (its guard; empty: none needed); otherwise the backend writes
    nothing and says so. ``status`` (when not None) is set as :class:`StatusChange` says, under
    its guard too."""

    conversation: uuid.UUID
    records: list[RecordRow]
    displays: list[DisplayRow]
    usage: list[UsageRow]
    transcript: int
    tokens: dict[str, int]
    by_model: ByModel
    saved_at: datetime
    retained_at: datetime
    redactions: dict[str, int] = field(default_factory=dict)
    unknown_ids: list[str] = field(default_factory=list)
    #: The display parts of each record row, for the instances the caller returns.
    parts: list[list[DisplayPart]] = field(default_factory=list)
    status: StatusChange | None = None


def plannable(messages: list[NormalizedMessage], has_records: bool) -> bool:
    """Whether :func:`plan_append` plans this batch: messages that need no state of the
    conversation besides its counters (no tool calls or results, except on injected messages,
    which carry them as text), no source records, no id twice in the batch."""
    return (
        bool(messages)
        and not has_records
        and all(m.injected or (not m.is_tool_result and not m.calls) for m in messages)
        and len({m.message_id for m in messages}) == len(messages)
    )


def plan_append(
    conversation: uuid.UUID, messages: list[NormalizedMessage], stamps: list[datetime]
) -> Plan:
    """The plan of appending ``messages`` (:func:`plannable`; ``stamps``: each message's time) to
    ``conversation``: one record row each, their display parts, their usage rows and counters,
    their redaction counts, ``saved_at`` moved to the latest stamp; guarded by the ids the
    writer gave (a known id makes the write apply nothing)."""
    records: list[RecordRow] = []
    displays: list[DisplayRow] = []
    parts_by_record: list[list[DisplayPart]] = []
    redactions: dict[str, int] = {}
    for offset, (message, stamp) in enumerate(zip(messages, stamps, strict=True), start=1):
        records.append(
            RecordRow(
                offset=offset,
                message_id=message.message_id,
                role=message.role,
                content=message.record_content,
                tool_call_id=message.tool_call_id,
                is_error=message.is_error,
                source_id=message.source_id,
                extra=message.extra,
                created_at=stamp,
            )
        )
        parts = display_parts(message)
        parts_by_record.append(parts)
        for part in parts:
            displays.append(_display_row(len(displays) + 1, offset, part, stamp))
        for name, count in message.redactions.items():
            redactions[name] = redactions.get(name, 0) + count
    usage, tokens, by_model = _usage(messages, stamps)
    latest = max(stamps)
    return Plan(
        conversation=conversation,
        records=records,
        displays=displays,
        usage=usage,
        transcript=sum(message.in_transcript for message in messages),
        tokens=tokens,
        by_model=by_model,
        saved_at=latest,
        retained_at=retention_time(latest),
        redactions={name: n for name, n in redactions.items() if n > 0},
        unknown_ids=[m.message_id for m in messages] if any(m.id_given for m in messages) else [],
        parts=parts_by_record,
    )


def _display_row(offset: int, record: int, part: DisplayPart, stamp: datetime) -> DisplayRow:
    return DisplayRow(
        offset=offset,
        record=record,
        message_type=part.message_type,
        content_type=part.content_type,
        content=part.content,
        status=ToolStatus.COMPLETED,
        metadata=dict(part.metadata),
        created_at=stamp,
    )


def _usage(
    messages: list[NormalizedMessage], stamps: list[datetime]
) -> tuple[list[UsageRow], dict[str, int], ByModel]:
    """The usage rows of the messages that carry usage (docs/usage.md), the token counters'
    deltas and what ``usage_by_model`` gains."""
    rows: list[UsageRow] = []
    total = Usage()
    by_model: ByModel = {}
    book = app_settings.prices
    for offset, (message, stamp) in enumerate(zip(messages, stamps, strict=True), start=1):
        if message.usage is None:
            continue
        cost, priced_with = row_cost(message.model, message.usage, book, at=stamp)
        rows.append(
            UsageRow(
                record=offset,
                model=message.model,
                counts=message.usage.as_dict(),
                cost_nanocents=cost,
                priced_with=priced_with,
                created_at=stamp,
            )
        )
        total = total + message.usage
        by_model = add_by_model(by_model, message.model, message.usage)
    return rows, (total.as_dict() if rows else {}), by_model


def plan_synthetic(
    conversation: uuid.UUID,
    *,
    message_type: str,
    content_type: str,
    content: dict[str, Any],
    metadata: dict[str, Any],
    at: datetime,
    redactions: dict[str, int],
) -> Plan:
    """The plan of a display row that is not in the record (``save_synthetic_message``, its
    arguments checked and redacted by the caller): one ``completed`` row stamped ``at``, one
    event_seq, ``saved_at`` moved to ``at``, and the counts of the secrets replaced in it."""
    part = DisplayPart(message_type, content_type, content, metadata)
    planned = _outside_record(conversation, at)
    planned.displays.append(_display_row(1, 0, part, at))
    planned.redactions = {name: n for name, n in redactions.items() if n > 0}
    return planned


def plan_status(
    conversation: uuid.UUID, *, status: str, pending_ask: dict[str, Any] | None, at: datetime
) -> Plan:
    """The plan of ``set_status`` (its arguments checked and redacted by the caller, no secret
    found in the ask): no rows, one event_seq, ``saved_at`` moved to ``at``, the status and ask
    set (:class:`StatusChange`). Its guard declines a no-op and a child conversation (whose
    parent must hear of it): the caller takes the general path for those."""
    planned = _outside_record(conversation, at)
    planned.status = StatusChange(status, pending_ask)
    return planned


def _outside_record(conversation: uuid.UUID, at: datetime) -> Plan:
    """A plan that adds nothing to the record: no rows yet, one event_seq, ``saved_at`` moved to
    ``at``."""
    return Plan(
        conversation=conversation,
        records=[],
        displays=[],
        usage=[],
        transcript=0,
        tokens={},
        by_model={},
        saved_at=at,
        retained_at=retention_time(at),
    )
