"""Helpers shared by the service modules: the tool status lifecycle, new display rows, bulk saves."""

from __future__ import annotations

from typing import Any, Final

from murmur_conversations._write import (
    Write,
)
from murmur_conversations.messages import NormalizedMessage
from murmur_conversations.models import (
    TERMINAL_TOOL_STATUSES,
    DisplayMessage,
    InterruptReason,
    ToolCall,
    ToolStatus,
)


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


def _owner_pk(owner: Any) -> Any:
    return None if owner is None else getattr(owner, "pk", owner)


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
