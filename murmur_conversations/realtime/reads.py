"""Database reads of the websocket consumers (sync; consumers call them through
``database_sync_to_async``). Owner scoping is not here: consumers check access with
``selectors.conversation_for`` before reading anything.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from murmur_conversations.models import Conversation, DisplayMessage
from murmur_conversations.selectors import conversations_for

#: More changed rows than this after ``since`` (or in a gap): one ``resync`` instead (docs/websocket.md).
RESYNC_ROWS: Final = 500


@dataclass(frozen=True)
class Changes:
    """Display rows changed in ``(after, upto]``, by ``(event_seq, seq)``, or ``rows=None`` when
    more than :data:`RESYNC_ROWS` did (children included). ``children`` are the children whose
    last change announced to this conversation (``parent_event_seq``) is in the range, by it.
    ``uncovered`` is True when some event_seq of the range is carried by no row and no child now
    (a status, title or owner change, a deleted child, or a row changed again later)."""

    rows: list[DisplayMessage] | None
    uncovered: bool
    children: list[Conversation] = field(default_factory=list)


def conversation(pk: uuid.UUID) -> Conversation | None:
    """The conversation row (its ``last_event_seq`` is the head), or None once deleted."""
    return Conversation.objects.filter(pk=pk).first()


def changes(pk: uuid.UUID, *, after: int, upto: int) -> Changes:
    """The rows whose current ``event_seq`` is in ``(after, upto]``; see :class:`Changes`. Rows
    changed again after ``upto`` are left to that later event, so nothing is sent twice or lost."""
    rows = list(
        DisplayMessage.objects.filter(
            conversation_id=pk, event_seq__gt=after, event_seq__lte=upto
        ).order_by("event_seq", "seq")[: RESYNC_ROWS + 1]
    )
    if len(rows) > RESYNC_ROWS:
        return Changes(rows=None, uncovered=True)
    children = list(
        Conversation.objects.filter(
            parent_id=pk, parent_event_seq__gt=after, parent_event_seq__lte=upto
        ).order_by("parent_event_seq", "pk")[: RESYNC_ROWS + 1 - len(rows)]
    )
    if len(rows) + len(children) > RESYNC_ROWS:
        return Changes(rows=None, uncovered=True)
    covered = {row.event_seq for row in rows} | {c.parent_event_seq for c in children}
    return Changes(rows=rows, uncovered=len(covered) < upto - after, children=children)


def user_state(user_model: Any, pk: Any) -> Any:
    """The user row, or None when it is gone."""
    return user_model._default_manager.filter(pk=pk).first()


def recently_saved(user: Any, *, since: datetime, limit: int = 200) -> list[Conversation]:
    """The conversations ``user`` may read saved at or after ``since``, oldest first (at most
    ``limit``): the user stream's tail on a process-local layer."""
    return list(
        conversations_for(user).filter(saved_at__gte=since).order_by("saved_at", "id")[:limit]
    )
