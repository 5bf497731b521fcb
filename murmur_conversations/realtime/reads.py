"""Database reads of the websocket consumers (sync; consumers call them through
``database_sync_to_async``). Owner scoping is not here: consumers check access with
``selectors.conversation_for`` before reading anything.
"""

from __future__ import annotations

import functools
import operator
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

from django.db.models import Case, F, Q, When

from murmur_conversations.frames import logged_texts
from murmur_conversations.models import Conversation, DisplayMessage, FrameKind, FrameLogEntry

#: More changed rows than this after ``since`` (or in a gap): one ``resync`` instead (docs/websocket.md).
RESYNC_ROWS: Final = 500
#: Frame-log rows one poll reads at most; a full page is followed by another read at once.
LOG_PAGE: Final = 1000
#: Above this many watched keys a poll reads the frames of every other process's row (and the
#: poller drops those nobody watches) rather than list the keys in the query.
MAX_LISTED: Final = 5000
#: How many of the newest frame-log ids a starting poller looks at for rows still uncommitted.
START_WINDOW: Final = 256


@dataclass(frozen=True)
class Logged:
    """One frame-log row as the poller reads it (docs/websocket.md "The frame log"). ``frames``
    and ``sidebar`` are the JSON texts ("" for none), None for a row nobody here watches or this
    process wrote (those are not read); ``owner`` is "" for none."""

    id: int
    kind: int
    conversation_id: uuid.UUID
    event_seq: int
    owner: str
    frames: str | None
    sidebar: str | None

    @property
    def deleted(self) -> bool:
        """The row announces a deletion."""
        return self.kind == FrameKind.DELETED


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


def frame_log_start() -> tuple[int, list[int]]:
    """Where a new poller starts: the newest frame-log id (0 for an empty log) and the ids missing
    among the :data:`START_WINDOW` newest, which may belong to writes not committed yet."""
    ids = list(FrameLogEntry.objects.order_by("-id").values_list("id", flat=True)[:START_WINDOW])
    if not ids:
        return 0, []
    present = set(ids)
    return ids[0], [i for i in range(ids[-1], ids[0]) if i not in present]


def frame_log_after(
    cursor: int,
    holes: list[int],
    *,
    conversations: list[uuid.UUID],
    owners: list[str],
    origin: str,
) -> list[Logged]:
    """ONE query: the frame-log rows after ``cursor`` and those of ``holes`` (ids skipped earlier,
    maybe committed since), by id, at most :data:`LOG_PAGE`. Every row's id is read, so skipped
    ids can be told apart from rows nobody here watches; the frames only of rows that one of
    ``conversations`` or ``owners`` watches and that another process than ``origin`` wrote."""
    wanted = ~Q(origin=origin)
    if len(conversations) + len(owners) <= MAX_LISTED:
        watched = [Q(conversation_id__in=conversations)] if conversations else []
        watched += [Q(owner__in=owners)] if owners else []
        if not watched:
            return []
        wanted &= functools.reduce(operator.or_, watched)
    found = Q(id__gt=cursor)
    if holes:
        found |= Q(id__in=holes)
    rows = (
        FrameLogEntry.objects.filter(found)
        .order_by("id")
        .values_list(
            "id",
            "kind",
            "conversation_id",
            "event_seq",
            "owner",
            Case(When(wanted, then=F("frames"))),
            Case(When(wanted, then=F("sidebar"))),
        )[:LOG_PAGE]
    )
    return [Logged(*row) for row in rows]


def logged_events(pk: uuid.UUID, *, after: int, upto: int) -> list[tuple[int, list[str]]] | None:
    """The logged frame texts (``frames.logged_texts``) of the conversation's events ``(after,
    upto]``, by event_seq, or None when the log no longer holds every one of them (pruned, or
    written with the log off)."""
    if upto - after > RESYNC_ROWS:
        return None
    rows = list(
        FrameLogEntry.objects.filter(
            conversation_id=pk,
            kind=FrameKind.EVENT,
            event_seq__gt=after,
            event_seq__lte=upto,
        )
        .exclude(frames="")
        .order_by("event_seq", "id")
        .values_list("event_seq", "frames")
    )
    events: dict[int, list[str]] = {}
    for event_seq, text in rows:
        if event_seq not in events:
            events[event_seq] = logged_texts(text)
    if len(events) != upto - after:
        return None
    return sorted(events.items())
