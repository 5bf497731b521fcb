"""The machinery every service shares: resolve, lock, number, finish, announce after commit.

Private to ``murmur_conversations.services`` (hosts import the services from the package). One
``Write`` is one atomic service call on one conversation. It locks the conversation row, takes at
most one new ``event_seq`` (docs/write-path.md "Numbers you can rely on"), keeps the counters equal
to the rows, and queues the signals of ``signals.py`` for ``on_commit(..., robust=True)`` in the
order of :func:`announce`.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, Final

from django.db import (
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    connections,
    router,
    transaction,
)
from django.db.models import BigIntegerField, F, Subquery, Value
from django.db.models.functions import Coalesce
from django.dispatch import Signal
from django.utils import timezone

from murmur_conversations import frames, signals
from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import ConversationNotFound, InvalidContent, WriteConflict
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    FrameKind,
    FrameLogEntry,
    RedactionCount,
    ToolCall,
)

logger = logging.getLogger("murmur_conversations.signals")

ConversationRef = Conversation | uuid.UUID | str
#: The display-row fields a service changes on an existing row.
ROW_FIELDS: Final = ("status", "content", "metadata", "event_seq", "updated_at")
#: The frame log is pruned after every this many logged writes of a process.
FRAME_LOG_PRUNE_EVERY: Final = 256
#: One frame-log row: conversation id, event_seq, kind, owner pk, the frames' texts, the sidebar
#: frame's text (``frames.encode``: each frame encoded once, here, for the log and every socket).
LogEntry = tuple[uuid.UUID, int, int, Any, list[str] | None, str | None]


def conversation_pk(conversation: ConversationRef) -> uuid.UUID:
    """The primary key of a Conversation, a UUID or a UUID string; ``ConversationNotFound`` for
    anything else."""
    if isinstance(conversation, Conversation):
        return conversation.pk
    if isinstance(conversation, uuid.UUID):
        return conversation
    if isinstance(conversation, str):
        try:
            return uuid.UUID(conversation)
        except ValueError:
            pass
    raise ConversationNotFound(f"no conversation {conversation!r}")


def owner_pk(owner: Any) -> Any:
    """The primary key of an owner given as a user or a user pk; None stays None."""
    return None if owner is None else getattr(owner, "pk", owner)


def send(signal: Signal, **kwargs: Any) -> None:
    """Send ``signal`` robustly, logging (never raising) receiver errors."""
    for receiver, result in signal.send_robust(sender=Conversation, **kwargs):
        if isinstance(result, Exception):
            logger.error("receiver %r of %s failed", receiver, signal, exc_info=result)


def send_on_commit(signal: Signal, using: str, **kwargs: Any) -> None:
    """Send ``signal`` once the current transaction commits; never for a rollback."""
    transaction.on_commit(lambda: send(signal, **kwargs), using=using, robust=True)


def retention_time(when: datetime) -> datetime:
    """The ``retained_at`` a write stamped ``when`` gives its conversation: the later of ``when``
    and the wall clock, so an import of an old log counts as written now for retention
    (docs/deployment.md "Retention and holds"). Every write path takes it from here."""
    return max(when, timezone.now())


def move_times(conversation: Conversation, when: datetime) -> None:
    """Move ``saved_at`` to ``when`` and ``retained_at`` to :func:`retention_time`, never
    backwards (the caller saves both fields)."""
    conversation.saved_at = max(conversation.saved_at, when)
    conversation.retained_at = max(conversation.retained_at, retention_time(when))


def tell_parent(parent: Conversation, child: Conversation, using: str, when: datetime) -> int:
    """A write to ``parent`` (locked by the caller, before the child) saying that its child
    changed (its status or steps; docs/architecture.md "Child conversations"): one new event_seq
    of the parent, recorded on the child as ``parent_event_seq`` (the caller saves the child),
    ``saved_at`` moved to ``when`` (never backwards), and ``child_updated`` then the parent's
    ``conversation_saved`` queued. Returns the parent's event_seq."""
    parent.last_event_seq += 1
    move_times(parent, when)
    parent.save(using=using, update_fields=["last_event_seq", "saved_at", "retained_at"])
    child.parent_event_seq = parent.last_event_seq
    announce(parent, using, parent.last_event_seq, children=[child])
    return parent.last_event_seq


def announce(
    conversation: Conversation,
    using: str,
    event_seq: int,
    *,
    created: Iterable[DisplayMessage] = (),
    updated: Iterable[DisplayMessage] = (),
    calls: Iterable[ToolCall] = (),
    status_changed: bool = False,
    conversation_updated: bool = False,
    children: Iterable[Conversation] = (),
    children_deleted: Iterable[uuid.UUID] = (),
) -> None:
    """Queue the signals of one write that took ``event_seq``, for after commit, in the order of
    docs/websocket.md ("The frames of one write come in this order"): ``display_messages_saved``
    (the created rows, by ``seq``), ``display_message_updated`` per changed row (by ``seq``),
    ``tool_call_updated`` per call, ``status_changed``, ``conversation_updated``,
    ``child_updated`` per child that changed, ``child_deleted`` per child deleted, and always
    ``conversation_saved`` last. The general path (:meth:`Write.finish`), the planned writes
    (``applying``) and the single statements announce through here, so their order cannot drift.

    With ``FRAME_LOG`` on (the default) the event's frames are built here, once, inside the
    transaction, and encoded once (``frames.encode``): those texts are written to the frame log
    (one INSERT) and handed to the realtime receivers with ``conversation_saved`` (``frames``,
    ``sidebar``, and their texts ``frame_texts``, ``sidebar_text``), whose other signals then
    carry ``logged=True`` (docs/websocket.md "The frame log")."""
    rows = sorted(created, key=lambda row: row.seq)
    changed = sorted(updated, key=lambda row: row.seq)
    calls, children, children_deleted = list(calls), list(children), list(children_deleted)
    logged: dict[str, Any] = {}
    saved: dict[str, Any] = {}
    if app_settings.frame_log:
        built = frames.event_frames(
            conversation,
            event_seq,
            created=rows,
            updated=changed,
            calls=calls,
            status_changed=status_changed,
            conversation_updated=conversation_updated,
            children=children,
            children_deleted=children_deleted,
        )
        texts = [frames.encode(frame) for frame in built]
        sidebar, sidebar_text = _log_saved(conversation, using, event_seq, texts)
        logged = {"logged": True}
        saved = {"frames": built, "sidebar": sidebar}
        saved.update(frame_texts=texts, sidebar_text=sidebar_text)
    if rows:
        send_on_commit(
            signals.display_messages_saved,
            using,
            conversation=conversation,
            rows=rows,
            event_seq=event_seq,
            **logged,
        )
    for row in changed:
        send_on_commit(
            signals.display_message_updated,
            using,
            conversation=conversation,
            row=row,
            event_seq=event_seq,
            **logged,
        )
    for call in calls:
        send_on_commit(
            signals.tool_call_updated,
            using,
            conversation=conversation,
            tool_call=call,
            event_seq=event_seq,
            **logged,
        )
    if status_changed:
        send_on_commit(
            signals.status_changed, using, conversation=conversation, event_seq=event_seq, **logged
        )
    if conversation_updated:
        send_on_commit(
            signals.conversation_updated,
            using,
            conversation=conversation,
            event_seq=event_seq,
            **logged,
        )
    for child in children:
        send_on_commit(
            signals.child_updated,
            using,
            conversation=conversation,
            child=child,
            event_seq=event_seq,
            **logged,
        )
    for child_id in children_deleted:
        send_on_commit(
            signals.child_deleted,
            using,
            conversation=conversation,
            child_id=child_id,
            event_seq=event_seq,
            **logged,
        )
    send_on_commit(
        signals.conversation_saved, using, conversation=conversation, event_seq=event_seq, **saved
    )


def announce_saved(conversation: Conversation, using: str, event_seq: int) -> None:
    """Queue ``conversation_saved`` alone (a creation with event_seq 0, a fork, an owner change
    that left no frame on the conversation stream), logging it first when ``FRAME_LOG`` is on:
    the sidebar learns of it in every process (docs/websocket.md "The frame log")."""
    saved: dict[str, Any] = {}
    if app_settings.frame_log:
        sidebar, text = _log_saved(conversation, using, event_seq, [] if event_seq > 0 else None)
        saved = {"frames": [], "sidebar": sidebar, "frame_texts": [], "sidebar_text": text}
    send_on_commit(
        signals.conversation_saved, using, conversation=conversation, event_seq=event_seq, **saved
    )


def announce_deleted(using: str, deleted: list[tuple[uuid.UUID, Any]]) -> None:
    """Queue ``conversation_deleted`` for each ``(conversation_id, owner_id)``, in order, logging
    them first (one INSERT) when ``FRAME_LOG`` is on."""
    if app_settings.frame_log and deleted:
        _insert_frame_log(
            using,
            [
                (pk, 0, FrameKind.DELETED, owner, None, frames.encode(frames.deleted_frame(pk)))
                for pk, owner in deleted
            ],
        )
    for pk, owner in deleted:
        send_on_commit(signals.conversation_deleted, using, conversation_id=pk, owner_id=owner)


def _log_saved(
    conversation: Conversation, using: str, event_seq: int, texts: list[str] | None
) -> tuple[frames.Frame, str]:
    """Log one event of ``conversation`` (its stream's frame texts, None for none, and the
    owner's ``conversation_saved``); returns that sidebar frame and its text."""
    sidebar = frames.saved_frame(conversation, event_seq)
    text = frames.encode(sidebar)
    _insert_frame_log(
        using,
        [(conversation.pk, event_seq, FrameKind.EVENT, conversation.owner_id, texts, text)],
    )
    return sidebar, text


_logged_writes = itertools.count(1)
#: Above every id: with no row to keep, every row goes.
_NO_ID: Final = 2**62


def _insert_frame_log(using: str, entries: list[LogEntry]) -> None:
    """Write ``entries`` to the frame log: ONE multi-row INSERT in the caller's transaction (the
    single place that writes it, docs/websocket.md "The frame log"). Every
    :data:`FRAME_LOG_PRUNE_EVERY` calls of this process, rows older than ``FRAME_LOG_RETENTION``
    are pruned after commit."""
    connection = connections[using]
    quote = connection.ops.quote_name
    meta = FrameLogEntry._meta
    uuid_field = meta.get_field("conversation_id")
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    origin = frames.process_origin()
    params: list[Any] = []
    for pk, event_seq, kind, owner, built, sidebar in entries:
        params += [
            uuid_field.get_db_prep_value(pk, connection),
            event_seq,
            int(kind),
            "" if owner is None else str(owner),
            "" if built is None else frames.log_text(built),
            "" if sidebar is None else sidebar,
            origin,
            now,
        ]
    columns = ("conversation_id", "event_seq", "kind", "owner", "frames", "sidebar", "origin")
    values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s)"] * len(entries))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(meta.db_table)} "
            f"({', '.join(quote(c) for c in (*columns, 'created_at'))}) VALUES {values}",
            params,
        )
    if next(_logged_writes) % FRAME_LOG_PRUNE_EVERY == 0:
        transaction.on_commit(lambda: prune_frame_log(using=using), using=using, robust=True)


def prune_frame_log(*, using: str | None = None, older_than: float | None = None) -> int:
    """Delete the frame-log rows written more than ``older_than`` seconds ago (default
    ``FRAME_LOG_RETENTION``); returns how many. One statement that walks the primary key from the
    oldest row, so it costs what it deletes (docs/websocket.md "The frame log")."""
    using = using or router.db_for_write(FrameLogEntry)
    seconds = app_settings.frame_log_retention if older_than is None else older_than
    try:
        cutoff = timezone.now() - timedelta(seconds=seconds)
    except OverflowError:  # longer than the calendar: nothing is that old
        return 0
    manager = FrameLogEntry.objects.using(using)
    first_kept = manager.filter(created_at__gte=cutoff).order_by("id").values("id")[:1]
    with database_errors():
        deleted, _ = manager.filter(
            id__lt=Coalesce(Subquery(first_kept), Value(_NO_ID), output_field=BigIntegerField())
        ).delete()
    return deleted


@contextmanager
def database_errors() -> Iterator[None]:
    """Turn database failures into this app's errors: lock timeouts, deadlocks, serialization
    failures, lost connections, pool timeouts and unforeseen races become ``WriteConflict``;
    a value the database refuses becomes ``InvalidContent``."""
    try:
        yield
    except (OperationalError, InterfaceError, IntegrityError) as error:
        raise WriteConflict(f"the write did not happen and can be retried: {error}") from error
    except DataError as error:
        raise InvalidContent(f"the database refused a value: {error}") from error
    except DatabaseError as error:
        raise WriteConflict(f"the write did not happen and can be retried: {error}") from error


class Write:
    """State of one locked service call; see the module docstring.

    ``now`` is the time rows are stamped with: the wall clock, or the time the writer gave
    (``at``; docs/write-path.md "Times"). ``stamp`` switches it per message. ``finish`` sets
    ``saved_at`` to the latest time stamped, never earlier than the stored one.

    ``parent`` is the locked parent of a child conversation, when the service may change what the
    parent shows of it (its status, its steps): ``finish`` then also writes to the parent
    (:func:`tell_parent`) when the status changed or tool calls were created (``parent_news``).

    ``keep_times`` (organising, feedback): the write takes an event_seq and is announced, but
    moves neither ``saved_at`` nor ``retained_at``.
    """

    def __init__(
        self,
        conversation: Conversation,
        using: str,
        at: datetime | None = None,
        parent: Conversation | None = None,
    ) -> None:
        self.conversation = conversation
        self.parent = parent
        #: Something the parent's stream shows of this child changed besides the status.
        self.parent_news = False
        self.using = using
        self.clock: datetime = timezone.now()
        self.now: datetime = at or self.clock
        self.latest: datetime | None = None
        #: Times given per message by ``save_messages`` (keyed by ``id()`` of each message).
        self.times: dict[int, datetime | None] = {}
        self.event_seq: int | None = None
        self.created: list[DisplayMessage] = []
        self.updated: dict[int, DisplayMessage] = {}
        self.calls_changed: dict[int, ToolCall] = {}
        self.status_changed = False
        self.conversation_updated = False
        self.extra_fields: set[str] = set()
        #: Secrets replaced in what this call stores, per detector (docs/write-path.md).
        self.redactions: Counter[str] = Counter()
        #: Children of this conversation whose summary changed in this call (created, linked).
        self.children: list[Conversation] = []
        #: Organising or feedback: ``saved_at`` and ``retained_at`` stay as they are.
        self.keep_times = False

    def take_event(self) -> int:
        """This call's event_seq, taken on first use (one per changing call)."""
        if self.event_seq is None:
            self.conversation.last_event_seq += 1
            self.event_seq = self.conversation.last_event_seq
        return self.event_seq

    def next_seq(self) -> int:
        """The next display ``seq`` of the conversation (gapless, never reused)."""
        self.conversation.last_seq += 1
        return self.conversation.last_seq

    def stamp(self, at: datetime | None) -> None:
        """Stamp what follows with ``at`` (None: the call's own time); ``saved_at`` becomes the
        latest time stamped."""
        self.now = at or self.clock
        self.latest = self.now if self.latest is None else max(self.latest, self.now)

    def mark_updated(self, row: DisplayMessage) -> None:
        """Record that an existing display row changed in this call (stamped with its event_seq)."""
        row.event_seq = self.take_event()
        row.updated_at = self.now
        self.updated[row.pk] = row

    def finish(self) -> None:
        """Save the redaction counts and the counters, and queue the signals, if anything
        changed."""
        if self.redactions:
            save_redaction_counts(self.using, self.conversation.pk, self.redactions)
            self.redactions = Counter()
        if self.event_seq is None:
            return
        conversation = self.conversation
        fields = {
            "record_length",
            "transcript_count",
            "last_seq",
            "last_event_seq",
            "tool_call_count",
        }
        if not self.keep_times:
            # saved_at never moves backwards: an import replaying an old log keeps a newer time.
            move_times(conversation, self.now if self.latest is None else self.latest)
            fields |= {"saved_at", "retained_at"}
        if self.status_changed:  # exact status replay (docs/websocket.md)
            conversation.status_event_seq = self.event_seq
            fields.add("status_event_seq")
        if self.parent is not None and (self.parent_news or self.status_changed):
            tell_parent(self.parent, conversation, self.using, conversation.saved_at)
            fields.add("parent_event_seq")
        conversation.save(using=self.using, update_fields=sorted(fields | self.extra_fields))
        announce(
            conversation,
            self.using,
            self.event_seq,
            created=self.created,
            updated=self.updated.values(),
            calls=self.calls_changed.values(),
            status_changed=self.status_changed,
            conversation_updated=self.conversation_updated,
            children=self.children,
        )

    def new_row(self, **fields: Any) -> DisplayMessage:
        """An unsaved display row of this conversation with the next ``seq``, created and stamped
        in this call's event_seq; ``fields`` are the other DisplayMessage fields (type, content,
        ...). The caller links its record message once that row exists, and saves it."""
        event_seq = self.take_event()
        return DisplayMessage(
            conversation=self.conversation,
            seq=self.next_seq(),
            created_event_seq=event_seq,
            event_seq=event_seq,
            created_at=self.now,
            updated_at=self.now,
            **fields,
        )

    def save_rows(self, rows: list[DisplayMessage]) -> None:
        """Bulk-save the changed fields (:data:`ROW_FIELDS`) of existing display rows."""
        save_fields(self.using, DisplayMessage, rows, ROW_FIELDS)


def save_fields(using: str, model: Any, objects: list[Any], fields: Iterable[str]) -> None:
    """Save ``fields`` of existing ``objects`` (instances of ``model``) as ``bulk_update`` does
    (no ``pre_save``, no signals): one row by a plain ``UPDATE ... WHERE id = %s``, several by
    ``bulk_update``, whose ``CASE WHEN`` per field cost about 2 ms of Python for a single row (half
    of a tool result's time on SQLite's general path)."""
    if len(objects) == 1:
        (only,) = objects
        columns = [model._meta.get_field(name).attname for name in fields]
        values = {column: getattr(only, column) for column in columns}
        model._base_manager.using(using).filter(pk=only.pk).update(**values)
    elif objects:
        model._base_manager.using(using).bulk_update(objects, list(fields), batch_size=500)


def save_redaction_counts(using: str, pk: uuid.UUID, counts: dict[str, int]) -> None:
    """Add ``counts`` (detector -> secrets replaced) to the conversation's ``RedactionCount``
    rows: one upsert statement, inside the caller's transaction (docs/write-path.md)."""
    rows = sorted((name, n) for name, n in counts.items() if n > 0)
    if not rows:
        return
    connection = connections[using]
    quote = connection.ops.quote_name
    table = quote(RedactionCount._meta.db_table)
    conversation_id = Conversation._meta.pk.get_db_prep_value(pk, connection)
    values = ", ".join(["(%s, %s, %s)"] * len(rows))
    params: list[Any] = []
    for name, n in rows:
        params += [conversation_id, name, n]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({quote('conversation_id')}, {quote('detector')}, "
            f"{quote('count')}) VALUES {values} ON CONFLICT ({quote('conversation_id')}, "
            f"{quote('detector')}) DO UPDATE SET {quote('count')} = "
            f"{table}.{quote('count')} + EXCLUDED.{quote('count')}",
            params,
        )


def lock_conversation(pk: uuid.UUID, using: str) -> Conversation:
    """Lock and return the conversation row inside the current transaction.

    On SQLite a no-op UPDATE comes first, so the write lock is taken before any read even without
    ``transaction_mode: IMMEDIATE`` (a read lock upgraded later fails instead of waiting).
    """
    manager = Conversation.objects.db_manager(using)
    if connections[using].vendor == "sqlite" and not manager.filter(pk=pk).update(
        last_event_seq=F("last_event_seq")
    ):
        raise ConversationNotFound(f"no conversation {pk}")
    try:
        return manager.select_for_update().get(pk=pk)
    except Conversation.DoesNotExist:
        raise ConversationNotFound(f"no conversation {pk}") from None


def copy_state(target: Conversation, source: Conversation) -> None:
    """Copy every concrete field of ``source`` onto ``target`` (refresh a caller's instance)."""
    for model_field in Conversation._meta.concrete_fields:
        setattr(target, model_field.attname, getattr(source, model_field.attname))


def parent_pk(conversation: ConversationRef, using: str) -> uuid.UUID | None:
    """The parent's primary key of a conversation (None for a top-level one): from the instance,
    else one read. ``parent`` is set at creation and never changes, so an unlocked read is
    exact; ``ConversationNotFound`` when there is no such conversation."""
    if isinstance(conversation, Conversation):
        value: uuid.UUID | None = conversation.parent_id
        return value
    pk = conversation_pk(conversation)
    found = list(
        Conversation.objects.using(using).filter(pk=pk).values_list("parent_id", flat=True)[:1]
    )
    if not found:
        raise ConversationNotFound(f"no conversation {pk}")
    return found[0]


@contextmanager
def writing(
    conversation: ConversationRef, at: datetime | None = None, *, parent: bool = False
) -> Iterator[Write]:
    """Run a service body atomically on the locked conversation; see :class:`Write`. ``at`` is
    the time of the change when the writer gives one (docs/write-path.md "Times").

    ``parent``: the body may change what a parent shows of this conversation (its status, its
    steps). The parent of a child is then locked first, so locks are always taken parent before
    child (docs/architecture.md "Child conversations"), and :meth:`Write.finish` writes to it.

    Raises ``ConversationNotFound``, ``WriteConflict`` (retryable), or whatever the body raises;
    in every error case nothing was written. A Conversation instance passed in is refreshed with the
    saved state.
    """
    pk = conversation_pk(conversation)
    using = router.db_for_write(Conversation)
    with database_errors(), transaction.atomic(using=using):
        above = parent_pk(conversation, using) if parent else None
        locked_parent = lock_conversation(above, using) if above is not None else None
        write = Write(lock_conversation(pk, using), using, at, locked_parent)
        yield write
        write.finish()
    if isinstance(conversation, Conversation) and conversation is not write.conversation:
        copy_state(conversation, write.conversation)
