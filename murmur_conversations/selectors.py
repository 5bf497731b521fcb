"""Reads. Owner scoping lives here, once, for every owner-facing surface (REST and websockets).

Somebody else's conversation is exactly as absent as one that never existed (agentfootprint's
non-disclosing session wire): every lookup of a foreign, missing or malformed id returns None.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any, cast

from django.db.models import QuerySet
from django.utils.module_loading import import_string

from murmur_conversations.conf import app_settings
from murmur_conversations.models import Conversation, Message
from murmur_conversations.projection import transcript_entry

Scope = Callable[[Any], QuerySet[Conversation]]


def owner_scope(user: Any) -> QuerySet[Conversation]:
    """The default ``SCOPE``: the conversations owned by ``user`` (none for anonymous or inactive
    users). Returns an unordered QuerySet of Conversation."""
    return Conversation.objects.owned_by(user)


def conversations_for(user: Any) -> QuerySet[Conversation]:
    """The conversations ``user`` may read, through the ``SCOPE`` setting (default
    :func:`owner_scope`), newest first (``saved_at`` desc, then ``id`` desc)."""
    scope = cast(Scope, import_string(app_settings.SCOPE))
    return scope(user).order_by("-saved_at", "-id")


def parse_conversation_id(value: Any) -> uuid.UUID | None:
    """The UUID named by ``value`` if it is the canonical lowercase hyphenated 36-character form,
    else None (docs/api.md: any other spelling is malformed)."""
    if not isinstance(value, str) or len(value) != 36:
        return None
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        return None
    return parsed if str(parsed) == value else None


def conversation_for(user: Any, conversation_id: Any) -> Conversation | None:
    """The conversation ``conversation_id`` if ``user`` may read it; None for foreign, missing and
    malformed ids alike (one query, or none for a malformed id)."""
    pk = parse_conversation_id(conversation_id)
    if pk is None:
        return None
    return conversations_for(user).filter(pk=pk).first()


def conversation_for_hook(
    token_conversation_id: uuid.UUID, conversation_id: Any
) -> Conversation | None:
    """The conversation a plug-in hook token may read: ``conversation_id`` (canonical form) must be
    the token's conversation and exist; None otherwise, like a missing one (docs/hooks.md)."""
    pk = parse_conversation_id(conversation_id)
    if pk is None or pk != token_conversation_id:
        return None
    return Conversation.objects.filter(pk=pk).first()


def transcript(
    conversation: Conversation, *, after_position: int = 0, limit: int | None = None
) -> Iterator[tuple[int, dict[str, str]]]:
    """The transcript (agentfootprint ``session-transcript``), oldest first, as
    ``(position, {"role", "content"})`` pairs of record messages after ``after_position``; at most
    ``limit`` entries. Uses ``projection.transcript_entry``, as the ``transcript_count`` counter does.
    """
    rows = (
        Message.objects.filter(
            conversation=conversation,
            position__gt=after_position,
            role__in=("user", "assistant"),
            tool_call_id="",
        )
        .order_by("position")
        .values_list("position", "role", "content", "extra")
    )
    count = 0
    for position, role, content, extra in rows.iterator(chunk_size=500):
        entry = transcript_entry(role=role, content=content, extra=extra)
        if entry is None:
            continue
        yield position, entry
        count += 1
        if limit is not None and count >= limit:
            return
