"""Conversations: start (write-once owner), update title, metadata and organising fields, status and
pending ask, streamed text."""

from __future__ import annotations

import threading
import uuid
from collections import Counter, OrderedDict
from datetime import datetime
from typing import Any, Final

from django.db import IntegrityError, router, transaction
from django.db.models import F
from django.utils import timezone

from murmur_conversations import signals
from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import (
    ConversationNotFound,
    InvalidContent,
    InvalidPendingAsk,
    InvalidStatus,
    OwnershipConflict,
    ParentConflict,
)
from murmur_conversations.jsonenc import clean_text
from murmur_conversations.models import (
    Conversation,
    ConversationStatus,
)
from murmur_conversations.redaction import Pieces, redact, redact_and_cut
from murmur_conversations.services import applying, plan
from murmur_conversations.services.organising import clean_flag, clean_tags, save_tag_rows
from murmur_conversations.services.writing import (
    ConversationRef,
    Write,
    announce_saved,
    conversation_pk,
    copy_state,
    database_errors,
    lock_conversation,
    owner_pk,
    retention_time,
    save_redaction_counts,
    send,
    writing,
)
from murmur_conversations.validation import (
    check_object,
    check_short_string,
    check_time,
)


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: Default of ``update_conversation`` fields: leave the field as it is.
UNSET: Final[Any] = _Unset()


def _redacted_title(title: str) -> tuple[str, dict[str, int]]:
    """A checked title with its secrets replaced, cut back to 255 characters if the markers
    made it longer (``redaction.fit``)."""
    return redact_and_cut(title, 255)


def _redacted_tags(tags: Any) -> tuple[list[str], dict[str, int]]:
    """The tags as stored (``validation.clean_tags``), each with its secrets replaced first, while
    its text is still as given (detectors know the case of what they find), and what was found."""
    found: dict[str, int] = {}
    if isinstance(tags, list | tuple):
        given: list[Any] = []
        for tag in tags:
            if isinstance(tag, str):
                tag, counts = redact(clean_text(tag))
                for detector, count in counts.items():
                    found[detector] = found.get(detector, 0) + count
            given.append(tag)
        tags = given
    return clean_tags(tags), found


def _claim(conversation: Conversation, owner_id: Any) -> Conversation:
    """agentfootprint's write-once owner rule: none + X -> X; X + none/X -> X; X + Y -> conflict.
    A child has its parent's owner: it is never claimed on its own, and claiming a conversation
    gives its descendants the same owner, in the same transaction (docs/architecture.md "Child
    conversations")."""
    if owner_id is None or conversation.owner_id == owner_id:
        return conversation
    if conversation.owner_id is not None:
        raise OwnershipConflict(f"conversation {conversation.pk} belongs to another owner")
    if conversation.parent_id is not None:
        raise OwnershipConflict(
            f"conversation {conversation.pk} is a child: it has its parent's owner"
        )
    with writing(conversation) as write:
        if write.conversation.owner_id not in (None, owner_id):
            raise OwnershipConflict(f"conversation {conversation.pk} belongs to another owner")
        write.conversation.owner_id = owner_id
        write.extra_fields.add("owner")
        write.take_event()
        _claim_descendants(write, owner_id)
    return conversation


def _claim_descendants(write: Write, owner_id: Any) -> None:
    """Give every descendant of the locked conversation its new owner (locked by the UPDATE,
    after their ancestor), one event_seq each, announced to the new owner's sidebar."""
    manager = Conversation.objects.using(write.using)
    level = [write.conversation.pk]
    while level:
        children = list(manager.filter(parent_id__in=level).values_list("pk", flat=True))
        if children:
            manager.filter(pk__in=children).update(
                owner_id=owner_id, last_event_seq=F("last_event_seq") + 1
            )
            for child in manager.filter(pk__in=children):
                announce_saved(child, write.using, child.last_event_seq)
        level = children


class _Taken(Exception):
    """Another writer created the child first (a unique key or id): look again."""


def _check_link(child: Conversation, parent: uuid.UUID, call_id: str) -> None:
    """``ParentConflict`` unless ``child`` is a child of ``parent`` launched by ``call_id`` (or
    by a call not yet known: the call id is write-once)."""
    if child.parent_id != parent:
        raise ParentConflict(
            f"conversation {child.pk} exists with another parent; a parent is set at creation"
        )
    if call_id and child.parent_call_id not in ("", call_id):
        raise ParentConflict(
            f"conversation {child.pk} was launched by call {child.parent_call_id!r}, not "
            f"{call_id!r}"
        )


def _link(child: Conversation, parent: uuid.UUID, call_id: str) -> Conversation:
    """Set the launching call id of an existing child that had none (write-once): a write to
    the parent (``child_updated``) and to the child, parent locked first."""
    with writing(parent) as write:
        locked = lock_conversation(child.pk, write.using)
        _check_link(locked, parent, call_id)
        if locked.parent_call_id != call_id:
            locked.parent_call_id = call_id
            locked.parent_event_seq = write.take_event()
            locked.last_event_seq += 1
            locked.save(
                using=write.using,
                update_fields=["parent_call_id", "parent_event_seq", "last_event_seq"],
            )
            write.children.append(locked)
            announce_saved(locked, write.using, locked.last_event_seq)
    copy_state(child, locked)
    return child


def _start_child(
    *,
    parent: ConversationRef,
    owner_id: Any,
    call_id: str,
    fields: dict[str, Any],
    pk: uuid.UUID | None,
    external_id: str,
    source: str,
) -> Conversation:
    """``start_conversation`` with a parent: find the child by id or by ``(the parent's owner,
    source, external_id)``, else create it under the parent's lock (one event_seq of the parent,
    ``child_count`` + 1, ``child_updated``)."""
    parent_id = conversation_pk(parent)
    using = router.db_for_write(Conversation)
    manager = Conversation.objects.using(using)

    def find(parent_owner: Any) -> Conversation | None:
        if pk is not None:
            return manager.filter(pk=pk).first()
        if external_id:
            return manager.filter(
                owner_id=parent_owner, source=source, external_id=external_id
            ).first()
        return None

    def adopt(existing: Conversation) -> Conversation:
        _check_link(existing, parent_id, call_id)
        if owner_id is not None and existing.owner_id != owner_id:
            raise OwnershipConflict(f"conversation {existing.pk} belongs to another owner")
        if call_id and not existing.parent_call_id:
            return _link(existing, parent_id, call_id)
        return existing

    for _attempt in range(3):
        try:
            with writing(parent_id) as write:
                above = write.conversation
                if owner_id is not None and above.owner_id != owner_id:
                    raise OwnershipConflict(
                        f"a child has its parent's owner; conversation {above.pk} belongs to "
                        "another owner"
                    )
                existing = find(above.owner_id)
                if existing is None:
                    event_seq = write.take_event()
                    try:
                        with transaction.atomic(using=using):  # a lost race rolls back only this
                            child = manager.create(
                                **({"pk": pk} if pk is not None else {}),
                                owner_id=above.owner_id,
                                parent_id=above.pk,
                                parent_call_id=call_id,
                                parent_created_event_seq=event_seq,
                                parent_event_seq=event_seq,
                                source=source,
                                external_id=external_id,
                                **fields,
                            )
                    except IntegrityError:
                        raise _Taken() from None
                    above.child_count += 1
                    write.extra_fields.add("child_count")
                    write.stamp(child.created_at if "created_at" in fields else None)
                    write.children.append(child)
                    announce_saved(child, using, 0)
                    return child
        except _Taken:
            continue
        return adopt(existing)
    with database_errors():
        existing = find(manager.filter(pk=parent_id).values_list("owner_id", flat=True).first())
    if existing is None:
        raise ConversationNotFound("the conversation could not be created or found")
    return adopt(existing)


def start_conversation(
    *,
    owner: Any,
    title: str = "",
    metadata: dict[str, Any] | None = None,
    conversation_id: uuid.UUID | str | None = None,
    source: str | None = None,
    external_id: str | None = None,
    created_at: datetime | None = None,
    parent: ConversationRef | None = None,
    parent_call_id: str | None = None,
) -> Conversation:
    """Create a conversation, or return the existing one with that id or ``(owner, source,
    external_id)`` key (agentfootprint session store).

    ``parent`` (a Conversation or its id) makes a child conversation: a subagent launched by the
    call ``parent_call_id`` of the parent (None or "" when the log does not say; at most 255
    characters). A child always has its parent's owner (``owner`` None takes it; another owner
    raises ``OwnershipConflict``), and its parent is set at creation only: an existing
    conversation found with another parent, or launched by another call, raises
    ``ParentConflict``. A call id given for an existing child that had none is set (write-once).
    Creating a child is also a write to the parent, under its lock: ``child_count`` + 1 and one
    event_seq, announced as ``child_updated`` (docs/architecture.md "Child conversations").
    ``ConversationNotFound`` when the parent does not exist; ``InvalidContent`` for a call id
    without a parent.

    ``owner`` is a user, a user pk or None. The owner is write-once: an ownerless conversation is
    claimed by the first owner given; another owner raises ``OwnershipConflict``. ``title`` at most
    255 characters, ``metadata`` a JSON object of at most ``MAX_METADATA_BYTES`` (else
    ``InvalidContent``). Concurrent calls with the same id or key return one conversation and never
    raise ``IntegrityError``. A creation sends ``conversation_saved`` with event_seq 0.
    ``created_at`` (timezone-aware; docs/write-path.md "Times") dates a new conversation, its
    ``saved_at`` too, when it began earlier than now (an import); an existing one is not changed.
    """
    new_owner = owner_pk(owner)
    title, found = _redacted_title(check_short_string(title, what="title"))
    metadata, found_in_metadata = redact(
        check_object(
            {} if metadata is None else metadata,
            what="metadata",
            limit=app_settings.max_metadata_bytes,
        )
    )
    found = dict(Counter(found) + Counter(found_in_metadata))
    source = check_short_string(source or "", what="source", max_length=64)
    external_id = check_short_string(external_id or "", what="external_id")
    pk = None if conversation_id is None else conversation_pk(conversation_id)
    created_at = check_time(created_at, what="created_at")
    times = (
        {}
        if created_at is None
        else {
            "created_at": created_at,
            "saved_at": created_at,
            "retained_at": retention_time(created_at),
        }
    )
    call_id = check_short_string(parent_call_id or "", what="parent_call_id")
    if parent is not None:
        return _start_child(
            parent=parent,
            owner_id=new_owner,
            call_id=call_id,
            fields={"title": title, "metadata": metadata, **times},
            pk=pk,
            external_id=external_id,
            source=source,
        )
    if call_id:
        raise InvalidContent("parent_call_id needs a parent")
    manager = Conversation.objects

    def find() -> Conversation | None:
        if pk is not None:
            return manager.filter(pk=pk).first()
        if external_id:
            return manager.filter(
                owner_id=new_owner, source=source, external_id=external_id
            ).first()
        return None

    using = router.db_for_write(Conversation)
    with database_errors():
        for _attempt in range(3):
            existing = find()
            if existing is not None:
                return _claim(existing, new_owner)
            try:
                with transaction.atomic(using=using):  # a lost race rolls back only this
                    conversation = manager.create(
                        **({"pk": pk} if pk is not None else {}),
                        owner_id=new_owner,
                        title=title,
                        metadata=metadata,
                        source=source,
                        external_id=external_id,
                        **times,
                    )
                    save_redaction_counts(using, conversation.pk, found)
                    announce_saved(conversation, using, 0)
                return conversation
            except IntegrityError:
                continue  # another writer created it first: read theirs
    existing = find()
    if existing is None:
        raise ConversationNotFound("the conversation could not be created or found")
    return _claim(existing, new_owner)


def update_conversation(
    *,
    conversation: ConversationRef,
    title: Any = UNSET,
    metadata: Any = UNSET,
    pinned: Any = UNSET,
    archived: Any = UNSET,
    tags: Any = UNSET,
    at: datetime | None = None,
) -> Conversation:
    """Replace ``title`` (a string of at most 255 characters), ``metadata`` (a JSON object of at
    most ``MAX_METADATA_BYTES``), ``pinned`` and ``archived`` (booleans) and/or ``tags`` (a list of
    at most ``MAX_TAGS`` strings, each trimmed, lower-cased, 1 to ``MAX_TAG_CHARS`` characters;
    duplicates dropped, order kept); ``InvalidContent`` otherwise, before anything is written.
    Title, metadata and tags are redacted like all stored text. Fields left ``UNSET`` keep their
    value. A change takes one event_seq and sends ``conversation_updated`` (then
    ``conversation_saved``, whose summary carries the new values); no change, no event
    (docs/write-path.md, docs/api.md "Organising"). Organising dates nothing: ``saved_at`` (the
    time people see and sort by) and ``retained_at`` (the time retention counts from) stay as they
    are; ``organised_at`` becomes the wall-clock time; ``at`` is checked like every write's time
    (``InvalidContent``) and otherwise unused."""
    found: dict[str, dict[str, int]] = {}
    if title is not UNSET:
        title, found["title"] = _redacted_title(check_short_string(title, what="title"))
    if metadata is not UNSET:
        metadata, found["metadata"] = redact(
            check_object(metadata, what="metadata", limit=app_settings.max_metadata_bytes)
        )
    if pinned is not UNSET:
        pinned = clean_flag(pinned, what="pinned")
    if archived is not UNSET:
        archived = clean_flag(archived, what="archived")
    if tags is not UNSET:
        tags, found["tags"] = _redacted_tags(tags)
    at = check_time(at, what="at")
    with writing(conversation, at) as write:
        write.keep_times = True
        locked = write.conversation
        old_tags = list(locked.tags or [])
        for name, value in (
            ("title", title),
            ("metadata", metadata),
            ("pinned", pinned),
            ("archived", archived),
            ("tags", tags),
        ):
            if value is not UNSET and getattr(locked, name) != value:
                setattr(locked, name, value)
                write.extra_fields.add(name)
                write.redactions.update(found.get(name, {}))
        if "tags" in write.extra_fields:
            save_tag_rows(write, old_tags, list(locked.tags))
        if write.extra_fields:
            locked.organised_at = write.clock
            write.extra_fields.add("organised_at")
            write.take_event()
            write.conversation_updated = True
    return write.conversation


def _check_pending_ask(ask: Any) -> dict[str, Any]:
    """agentfootprint ``PendingAsk``: ``question``/``tool`` strings, ``component`` an object with a
    string ``id``, ``pauseData`` anything; all optional."""
    if not isinstance(ask, dict):
        raise InvalidPendingAsk("a pending ask must be a JSON object")
    for key in ("question", "tool"):
        if key in ask and not isinstance(ask[key], str):
            raise InvalidPendingAsk(f"pending ask {key!r} must be a string")
    if "component" in ask and (
        not isinstance(ask["component"], dict) or not isinstance(ask["component"].get("id"), str)
    ):
        raise InvalidPendingAsk("pending ask 'component' must be an object with a string 'id'")
    try:
        return check_object(ask, what="pending ask", limit=app_settings.max_metadata_bytes)
    except InvalidContent as error:
        raise InvalidPendingAsk(str(error)) from error


def set_status(
    *,
    conversation: ConversationRef,
    status: str,
    pending_ask: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> Conversation:
    """Set the conversation status and always write ``pending_ask`` (omitting it clears it).

    ``status`` one of ``ConversationStatus`` (else ``InvalidStatus``); an ask only with ``paused``
    or ``interrupted`` (else ``InvalidPendingAsk``). The same status and ask again is a no-op.
    A new, changed or cleared ask records this call's event_seq in ``pending_ask_event_seq``.
    ``at``: when it happened (docs/write-path.md "Times"; default now).
    """
    if status not in ConversationStatus.values:
        raise InvalidStatus(f"unknown status {status!r}; one of {', '.join(ConversationStatus)}")
    found: dict[str, int] = {}
    if pending_ask is not None:
        pending_ask, found = redact(_check_pending_ask(pending_ask))
        if status not in (ConversationStatus.PAUSED, ConversationStatus.INTERRUPTED):
            raise InvalidPendingAsk("a pending ask needs status 'paused' or 'interrupted'")
    at = check_time(at, what="at")
    using = router.db_for_write(Conversation)
    if not any(found.values()):  # counts take the general path (counted when the ask changes)
        planned = plan.plan_status(
            conversation_pk(conversation),
            status=status,
            pending_ask=pending_ask,
            at=at or timezone.now(),
        )
        saved = applying.status(conversation=conversation, using=using, planned=planned)
        if saved is not None:
            return saved
    with writing(conversation, at, parent=True) as write:
        locked = write.conversation
        if locked.status != status or locked.pending_ask != pending_ask:
            if locked.pending_ask != pending_ask:
                locked.pending_ask_event_seq = write.take_event()
                write.extra_fields.add("pending_ask_event_seq")
                write.redactions.update(found)
            locked.status, locked.pending_ask = status, pending_ask
            write.extra_fields |= {"status", "pending_ask"}
            write.take_event()
            write.status_changed = True
    return write.conversation


def broadcast_delta(*, conversation: ConversationRef, stream_id: str, text: str) -> None:
    """Announce streamed text (``text`` is the increment to append) to live clients at once.
    Ephemeral: never stored, takes no event_seq; the final text arrives through ``save_message``.
    Redacted with the stream's text before it (``redaction.Pieces``): a run that may begin a
    secret waits for the next increment, so the frame may carry less than ``text`` (or nothing).
    Raises ``ConversationNotFound`` or ``InvalidContent`` (non-string ``stream_id``/``text``)."""
    if not isinstance(stream_id, str) or not isinstance(text, str):
        raise InvalidContent("stream_id and text must be strings")
    if isinstance(conversation, Conversation):
        conv = conversation
    else:
        found = Conversation.objects.filter(pk=conversation_pk(conversation)).first()
        if found is None:
            raise ConversationNotFound(f"no conversation {conversation!r}")
        conv = found
    stream_id = clean_text(stream_id)
    text = _stream_pieces(conv.pk, stream_id).add(clean_text(text))
    if text:  # a run that may begin a secret is held back until the next increment
        send(signals.delta, conversation=conv, stream_id=stream_id, text=text)


#: The text so far of the streams this process announced (``redaction.Pieces``), newest last.
_streams: OrderedDict[tuple[Any, str], Pieces] = OrderedDict()
_streams_lock = threading.Lock()
_MAX_STREAMS = 1024


def _stream_pieces(pk: Any, stream_id: str) -> Pieces:
    """The ``Pieces`` of one stream, the least recently used forgotten beyond ``_MAX_STREAMS``."""
    with _streams_lock:
        pieces = _streams.pop((pk, stream_id), None) or Pieces()
        _streams[(pk, stream_id)] = pieces
        while len(_streams) > _MAX_STREAMS:
            _streams.popitem(last=False)
        return pieces
