"""Applying a plan: the backend writes it, then the write is announced and its instances built.

One function per kind of planned write: plan it (``services/plan.py``), hand it to the backend
of the database (``services/backends/``), and inside the same transaction build what the caller
gets back (through the models' public ``from_db``) and announce it (``writing.announce``: the
frame log's row, then the signals after commit). Private to ``murmur_conversations.services``.
"""

from __future__ import annotations

import functools
import uuid
from datetime import datetime
from typing import Any, Final

from murmur_conversations.exceptions import ConversationNotFound, WriteConflict
from murmur_conversations.messages import NormalizedMessage
from murmur_conversations.models import Conversation, DisplayMessage, Message
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
    return the display rows of every given message by ``seq``, those of messages already stored
    included; a Conversation instance passed in is refreshed. None when the database has no
    backend (the caller takes the general path).

    The plan is made without reading anything; when its guard fails (a given id is stored
    already, or a concurrent writer stored one first) the ids stored are read (one query) and the
    rest is planned again by the same planner, at most :data:`ATTEMPTS` times. Raises
    ``ConversationNotFound``, ``WriteConflict`` (also when every attempt lost a race)."""
    store = backends.backend(using)
    if store is None:
        return None
    pk = conversation_pk(conversation)
    known: dict[str, int] = {}
    for _attempt in range(ATTEMPTS):
        fresh = [(m, s) for m, s in zip(messages, stamps, strict=True) if m.message_id not in known]
        if not fresh:
            return _known_only(conversation, using, pk, known)
        planned = plan_append(pk, [m for m, _ in fresh], [s for _, s in fresh])
        done = store.apply(using, planned, functools.partial(_finish, using, planned))
        if done is not None:
            saved, rows = done
            if isinstance(conversation, Conversation):
                copy_state(conversation, saved)
            return _with_known(using, rows, known)
        known = _stored_ids(using, pk, messages)
    raise WriteConflict("other writers kept storing these message ids first; retry the write")


#: How many times :func:`append` plans a batch before it gives up (each lost race re-plans).
ATTEMPTS: Final = 3


def _finish(
    using: str, planned: Plan, applied: Applied
) -> tuple[Conversation, list[DisplayMessage]]:
    """Inside the write's transaction: the instances and the announcement (frame log, signals)."""
    saved = conversation_instance(using, applied.conversation)
    rows = display_instances(using, saved, planned, applied)
    announce(saved, using, saved.last_event_seq, created=rows)
    return saved, rows


def _stored_ids(using: str, pk: uuid.UUID, messages: list[NormalizedMessage]) -> dict[str, int]:
    """The ids of ``messages`` stored in the conversation (-> record row pk), read once a plan's
    guard failed; ``ConversationNotFound`` when there is no such conversation."""
    ids = [m.message_id for m in messages]
    stored = dict(
        Message.objects.using(using)
        .filter(conversation_id=pk, message_id__in=ids)
        .values_list("message_id", "pk")
    )
    if not stored and not Conversation.objects.using(using).filter(pk=pk).exists():
        raise ConversationNotFound(f"no conversation {pk}")
    return stored


def _with_known(
    using: str, rows: list[DisplayMessage], known: dict[str, int]
) -> list[DisplayMessage]:
    """``rows`` with the display rows of the already stored messages ``known``, by ``seq``."""
    if not known:
        return rows
    existing = (
        DisplayMessage.objects.using(using)
        .filter(message_id__in=known.values())
        .select_related("tool_call")
    )
    return sorted([*rows, *existing], key=lambda row: row.seq)


def _known_only(
    conversation: ConversationRef, using: str, pk: uuid.UUID, known: dict[str, int]
) -> list[DisplayMessage]:
    """Every message of the batch was stored already: nothing is written; their rows, and a
    Conversation instance passed in refreshed."""
    if isinstance(conversation, Conversation):
        conversation.refresh_from_db(using=using)
    return _with_known(using, [], known)


def synthetic(*, conversation: ConversationRef, using: str, planned: Plan) -> DisplayMessage | None:
    """Write the synthetic row of ``planned`` (``plan.plan_synthetic``) and return it; a
    Conversation instance passed in is refreshed. None when the database has no backend.
    Raises ``ConversationNotFound``, ``WriteConflict``."""
    store = backends.backend(using)
    if store is None:
        return None
    done = store.apply(using, planned, functools.partial(_finish, using, planned))
    if done is None:  # no guard: only a missing conversation declines
        raise ConversationNotFound(f"no conversation {planned.conversation}")
    saved, rows = done
    if isinstance(conversation, Conversation):
        copy_state(conversation, saved)
    row: DisplayMessage = rows[0]
    return row


def status(*, conversation: ConversationRef, using: str, planned: Plan) -> Conversation | None:
    """Write the status change of ``planned`` (``plan.plan_status``) and return the saved
    conversation; a Conversation instance passed in is refreshed. None when nothing was written:
    the database has no backend, or the plan's guard declined (no such conversation, a child, a
    no-op); the caller's general path then runs."""
    store = backends.backend(using)
    if store is None:
        return None

    def finish(applied: Applied) -> Conversation:
        saved = conversation_instance(using, applied.conversation)
        announce(saved, using, saved.last_event_seq, status_changed=True)
        return saved

    saved: Conversation | None = store.apply(using, planned, finish)
    if saved is not None and isinstance(conversation, Conversation):
        copy_state(conversation, saved)
    return saved


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
