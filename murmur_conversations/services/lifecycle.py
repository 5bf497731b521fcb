"""The tool status lifecycle shared by the service modules (docs/write-path.md "Tool status
lifecycle"): allowed moves, applying a move to a call and its card, bulk saves of calls.

Private to ``murmur_conversations.services``; ``ALLOWED_MOVES`` is public as
``services.ALLOWED_MOVES``.
"""

from __future__ import annotations

from typing import Any, Final

from murmur_conversations.models import (
    TERMINAL_TOOL_STATUSES,
    DisplayMessage,
    InterruptReason,
    ToolCall,
    ToolStatus,
)
from murmur_conversations.services.writing import Write, save_fields

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

#: The ToolCall fields a status move changes.
CALL_FIELDS: Final = (
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


def update_card(row: DisplayMessage, call: ToolCall) -> None:
    """Copy ``call``'s status onto its ``tool_call`` card: the status, and in ``metadata`` the
    ``display_text`` (executing, completed, interrupted), ``result`` (completed; failed, when the
    call has one) and ``error`` (failed: the short reason). No save."""
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
        if call.result is not None:
            row.metadata["result"] = call.result


def move_call(
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
    """Apply a status move the caller has checked to ``call`` (fields, timestamps, this call's
    event_seq) and record it in ``write.calls_changed``; no save. ``result`` is kept by a move
    to completed, and by a move to failed when given (a failed call keeps its output beside the
    ``error``, its short reason)."""
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
        if result is not None:
            call.result = result
    call.interrupt_reason = interrupt_reason if status == ToolStatus.INTERRUPTED else ""
    if status in TERMINAL_TOOL_STATUSES:
        call.finished_at = write.now
    write.calls_changed[call.pk or id(call)] = call


def save_calls(write: Write, calls: list[ToolCall]) -> None:
    """Bulk-save the :data:`CALL_FIELDS` of existing tool calls."""
    save_fields(write.using, ToolCall, calls, CALL_FIELDS)
