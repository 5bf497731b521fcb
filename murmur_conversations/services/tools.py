"""The tool-call lifecycle: status moves and resolving an interrupted result (sagents)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import router
from django.utils import timezone

from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import (
    InvalidContent,
    InvalidToolTransition,
    ToolCallNotFound,
)
from murmur_conversations.models import (
    TERMINAL_TOOL_STATUSES,
    ContentType,
    Conversation,
    DisplayMessage,
    InterruptReason,
    ToolCall,
    ToolStatus,
)
from murmur_conversations.redaction import fit, redact
from murmur_conversations.services import singles
from murmur_conversations.services.lifecycle import (
    ALLOWED_MOVES,
    CALL_FIELDS,
    move_call,
    update_card,
)
from murmur_conversations.services.writing import ConversationRef, Write, writing
from murmur_conversations.validation import (
    check_short_string,
    check_size,
    check_time,
    clean_json,
)


def _locked_call(write: Write, call_id: str) -> tuple[ToolCall, DisplayMessage | None]:
    """The latest call of ``call_id`` (a reused id names the newest call) and its card."""
    call = (
        ToolCall.objects.using(write.using)
        .filter(conversation=write.conversation, call_id=call_id)
        .order_by("-pk")
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
    *,
    conversation: ConversationRef,
    status: str,
    tool_info: dict[str, Any],
    at: datetime | None = None,
) -> DisplayMessage:
    """Move a tool call along its lifecycle (sagents ``update_tool_status``) and return its card.
    A call id that several calls have used names the latest of them (docs/write-path.md "Call
    ids").

    ``tool_info``: ``call_id`` and, per status, ``name``, ``display_text``, ``result``, ``error``,
    ``interrupt_reason`` (``awaiting_input`` by default, ``worker_lost``, ``log_ended``). Allowed:
    pending->executing; pending|executing|interrupted -> completed|failed|cancelled;
    pending|executing -> interrupted. The same status again is a no-op. Raises ``ToolCallNotFound``
    for an unknown call, ``InvalidToolTransition`` for an unknown status or reason or a disallowed
    move; nothing changes then. ``at``: when the move happened (docs/write-path.md "Times"; default
    now), for ``started_at``/``finished_at`` and ``saved_at``.
    """
    if status not in ToolStatus.values:
        raise InvalidToolTransition(f"unknown tool status {status!r}")
    if not isinstance(tool_info, dict) or not isinstance(tool_info.get("call_id"), str):
        raise ToolCallNotFound("tool_info needs a string 'call_id'")
    info = clean_json(tool_info)
    if info.get("name") is not None:
        check_short_string(info["name"], what="tool_info 'name'")
    info, found = redact(info, record=True)  # result, error, display text, name: redacted
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
        name = fit(name, 255)
    at = check_time(at, what="at")
    using = router.db_for_write(Conversation)
    if not any(found.values()) and singles.available(using):  # counts take the general path
        card = singles.update_tool_status(
            conversation=conversation,
            using=using,
            call_id=info["call_id"],
            status=status,
            name=name,
            display_text=display_text,
            result=info.get("result"),
            error=info.get("error"),
            reason=reason,
            now=at or timezone.now(),
        )
        if card is not None:
            return card
    with writing(conversation, at) as write:
        call, row = _locked_call(write, info["call_id"])
        if call.status == status:
            if row is None:
                raise ToolCallNotFound(f"tool call {call.call_id!r} has no display row")
            return row
        write.redactions.update(found)
        if status not in ALLOWED_MOVES[call.status]:
            raise InvalidToolTransition(
                f"tool call {call.call_id!r} cannot move from {call.status} to {status}"
            )
        move_call(
            write,
            call,
            status,
            name=name,
            display_text=display_text,
            result=info.get("result"),
            error=info.get("error"),
            interrupt_reason=reason,
        )
        call.save(using=write.using, update_fields=CALL_FIELDS)
        if row is None:  # a call without a card (cannot happen through these services)
            raise ToolCallNotFound(f"tool call {call.call_id!r} has no display row")
        if name:
            row.content = {**row.content, "name": name}
        update_card(row, call)
        write.mark_updated(row)
        write.save_rows([row])
    return row


def resolve_tool_result(
    *, conversation: ConversationRef, tool_call_id: str, result_content: Any
) -> DisplayMessage:
    """Answer an interrupted tool call (sagents ``resolve_tool_result``): replace
    ``content["content"]`` of its ``tool_result`` row whose ``is_interrupt`` is true, set that flag
    false (the record is not touched) and complete the call (the latest call of that id). Returns
    the result row. Raises ``ToolCallNotFound`` when there is no such call or row."""
    result_content, found = redact(clean_json(result_content), record=True)
    check_size(result_content, limit=app_settings.max_content_bytes, what="result content")
    using = router.db_for_write(Conversation)
    if (
        isinstance(tool_call_id, str) and not any(found.values()) and singles.available(using)
    ):  # redaction counts take the general path
        answered = singles.resolve_tool_result(
            conversation=conversation,
            using=using,
            call_id=tool_call_id,
            result=result_content,
            now=timezone.now(),
        )
        if answered is not None:
            return answered
    with writing(conversation) as write:
        call, card = _locked_call(write, tool_call_id)
        row = next(
            (
                r
                # By the call alone: its pk implies the conversation (SQLite would otherwise
                # walk the conversation's rows by its (conversation, seq) key).
                for r in DisplayMessage.objects.using(write.using)
                .filter(tool_call=call, content_type=ContentType.TOOL_RESULT)
                .order_by("-seq")
                if r.content.get("is_interrupt") is True
            ),
            None,
        )
        if row is None:
            raise ToolCallNotFound(f"tool call {tool_call_id!r} has no interrupted result")
        row.content = {**row.content, "content": result_content, "is_interrupt": False}
        write.redactions.update(found)
        write.mark_updated(row)
        changed = [row]
        if call.status not in TERMINAL_TOOL_STATUSES:
            move_call(write, call, ToolStatus.COMPLETED, result=result_content)
            call.save(using=write.using, update_fields=CALL_FIELDS)
            if card is not None:
                update_card(card, call)
                write.mark_updated(card)
                changed.append(card)
        write.save_rows(changed)
    return row
