"""Applying a plan: the backend writes it, then the write is announced and its instances built.

One function per kind of planned write: plan it (``services/plan.py``), hand it to the backend
of the database (``services/backends/``), and inside the same transaction build what the caller
gets back (through the models' public ``from_db``) and announce it (``writing.announce``: the
frame log's row, then the signals after commit). Private to ``murmur_conversations.services``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from murmur_conversations.messages import NormalizedMessage
from murmur_conversations.models import Conversation, DisplayMessage
from murmur_conversations.services import backends
from murmur_conversations.services.backends import Applied
from murmur_conversations.services.plan import Plan, plan_append
from murmur_conversations.services.writing import (
    ConversationRef,
    announce,
    conversation_pk,
    copy_state,
)

_CONVERSATION = [f.attname for f in Conversation._meta.concrete_fields]
_DISPLAY = [f.attname for f in DisplayMessage._meta.concrete_fields]


def append(
    *,
    conversation: ConversationRef,
    using: str,
    messages: list[NormalizedMessage],
    stamps: list[datetime],
) -> list[DisplayMessage] | None:
    """Append ``messages`` (``plan.plannable``; ``stamps``: each one's time) through the plan and
    return their display rows by ``seq``; a Conversation instance passed in is refreshed. None
    when the database has no backend or the plan did not apply (a known id, no such
    conversation): nothing was written, and the caller takes the general path."""
    store = backends.backend(using)
    if store is None:
        return None
    planned = plan_append(conversation_pk(conversation), messages, stamps)

    def finish(applied: Applied) -> tuple[Conversation, list[DisplayMessage]]:
        saved = conversation_instance(using, applied.conversation)
        rows = display_instances(using, saved, planned, applied)
        announce(saved, using, saved.last_event_seq, created=rows)
        return saved, rows

    done = store.apply(using, planned, finish)
    if done is None:
        return None
    if isinstance(conversation, Conversation):
        copy_state(conversation, done[0])
    rows: list[DisplayMessage] = done[1]
    return rows


def conversation_instance(using: str, values: dict[str, Any]) -> Conversation:
    """The Conversation loaded from ``using`` with these column values (``attname`` -> value)."""
    return Conversation.from_db(using, _CONVERSATION, [values[name] for name in _CONVERSATION])


def display_instances(
    using: str, saved: Conversation, planned: Plan, applied: Applied
) -> list[DisplayMessage]:
    """The new display rows of ``planned`` as loaded from ``using``: the plan's values, the
    numbers its offsets became on ``saved`` (the conversation after the write) and the primary
    keys ``applied`` returned; each related to ``saved``."""
    before_seq = saved.last_seq - len(planned.displays)
    rows: list[DisplayMessage] = []
    for row, pk in zip(planned.displays, applied.display_pks, strict=True):
        values = {
            "id": pk,
            "conversation_id": saved.pk,
            "message_id": applied.record_pks[row.record - 1] if row.record else None,
            "seq": before_seq + row.offset,
            "message_type": row.message_type,
            "content_type": row.content_type,
            "content": row.content,
            "status": row.status,
            "tool_call_id": None,
            "metadata": row.metadata,
            "created_event_seq": saved.last_event_seq,
            "event_seq": saved.last_event_seq,
            "created_at": row.created_at,
            "updated_at": row.created_at,
            "owner_feedback": None,
        }
        display = DisplayMessage.from_db(using, _DISPLAY, [values[name] for name in _DISPLAY])
        display.conversation = saved
        rows.append(display)
    return rows
