"""Conversations: start (write-once owner), update title, metadata and organising fields, status and
pending ask, streamed text."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import datetime
from typing import Any, Final

from django.db import IntegrityError, router, transaction

from murmur_conversations import signals
from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import (
    ConversationNotFound,
    InvalidContent,
    InvalidPendingAsk,
    InvalidStatus,
    OwnershipConflict,
)
from murmur_conversations.models import (
    Conversation,
    ConversationStatus,
)
from murmur_conversations.redaction import fit, redact
from murmur_conversations.services.organising import clean_flag, clean_tags, save_tag_rows
from murmur_conversations.services.writing import (
    ConversationRef,
    conversation_pk,
    database_errors,
    owner_pk,
    save_redaction_counts,
    send,
    send_on_commit,
    writing,
)
from murmur_conversations.validation import (
    check_object,
    check_short_string,
    check_time,
    clean_text,
)


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: Default of ``update_conversation`` fields: leave the field as it is.
UNSET: Final[Any] = _Unset()


def _redacted_title(title: str) -> tuple[str, dict[str, int]]:
    """A checked title with its secrets replaced, cut back to 255 characters if the markers
    made it longer (``redaction.fit``)."""
    redacted, found = redact(title)
    return fit(redacted, 255), found


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
    """agentfootprint's write-once owner rule: none + X -> X; X + none/X -> X; X + Y -> conflict."""
    if owner_id is None or conversation.owner_id == owner_id:
        return conversation
    if conversation.owner_id is not None:
        raise OwnershipConflict(f"conversation {conversation.pk} belongs to another owner")
    with writing(conversation) as write:
        if write.conversation.owner_id not in (None, owner_id):
            raise OwnershipConflict(f"conversation {conversation.pk} belongs to another owner")
        write.conversation.owner_id = owner_id
        write.extra_fields.add("owner")
        write.take_event()
    return conversation


def start_conversation(
    *,
    owner: Any,
    title: str = "",
    metadata: dict[str, Any] | None = None,
    conversation_id: uuid.UUID | str | None = None,
    source: str | None = None,
    external_id: str | None = None,
    created_at: datetime | None = None,
) -> Conversation:
    """Create a conversation, or return the existing one with that id or ``(owner, source,
    external_id)`` key (agentfootprint session store).

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
    times = {} if created_at is None else {"created_at": created_at, "saved_at": created_at}
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
                    send_on_commit(
                        signals.conversation_saved, using, conversation=conversation, event_seq=0
                    )
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
    value. A change takes one event_seq, sets ``saved_at`` (to ``at`` when given,
    docs/write-path.md "Times"; never backwards) and sends ``conversation_updated`` (then
    ``conversation_saved``, whose summary carries the new values); no change, no event
    (docs/write-path.md, docs/api.md "Organising")."""
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
    with writing(conversation, at) as write:
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
    # Redacted like stored text; a secret split across two increments cannot be recognised in
    # either (the stored message, redacted whole, replaces the preview).
    text = redact(clean_text(text)).value
    send(signals.delta, conversation=conv, stream_id=clean_text(stream_id), text=text)
