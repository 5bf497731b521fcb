"""Legal holds and the staff access log (docs/deployment.md "Retention and holds", docs/admin.md
"The access log"). Deleting and purging are in ``deletion``; both ask ``selectors.is_held``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from django.db import IntegrityError, router, transaction
from django.utils import timezone

from murmur_conversations.exceptions import ConversationNotFound, InvalidContent, WriteConflict
from murmur_conversations.jsonenc import clean_text
from murmur_conversations.models import AccessLogEntry, Conversation, Hold
from murmur_conversations.redaction import redact
from murmur_conversations.services.writing import (
    ConversationRef,
    conversation_pk,
    database_errors,
    lock_conversation,
    owner_pk,
)
from murmur_conversations.validation import check_short_string

#: The longest hold reason, in characters.
MAX_HOLD_REASON: Final = 10_000


def place_hold(*, conversation: ConversationRef, reason: str, placed_by: Any = None) -> Hold:
    """Put the conversation under a legal hold: until ``release_hold``, nobody deletes or purges
    it (``ConversationHeld``), its owner included, and deleting the owner's account fails
    (``Hold.conversation`` is ``PROTECT``). ``reason``: a non-blank string of at most
    ``MAX_HOLD_REASON`` characters (repaired and redacted like all stored text; else
    ``InvalidContent``); ``placed_by``: the staff user, or None. A conversation already held
    keeps its hold, with the new reason. Takes the conversation's lock (so a delete or purge in
    progress finishes first, and one that starts later sees the hold), but no event_seq: a hold
    is not a change of the conversation. Raises ``ConversationNotFound``, ``WriteConflict``."""
    if not isinstance(reason, str) or not clean_text(reason).strip():
        raise InvalidContent("a hold needs a reason: a non-blank string")
    text = redact(clean_text(reason)).value
    if len(text) > MAX_HOLD_REASON:
        raise InvalidContent(f"a hold reason may hold at most {MAX_HOLD_REASON} characters")
    pk = conversation_pk(conversation)
    using = router.db_for_write(Conversation)
    with database_errors(), transaction.atomic(using=using):
        lock_conversation(pk, using)
        hold, created = Hold.objects.using(using).get_or_create(
            conversation_id=pk,
            defaults={
                "reason": text,
                "placed_by_id": owner_pk(placed_by),
                "placed_at": timezone.now(),
            },
        )
        if not created and hold.reason != text:
            hold.reason = text
            hold.save(using=using, update_fields=["reason"])
    return hold


def release_hold(*, conversation: ConversationRef) -> bool:
    """Release the conversation's hold; returns whether there was one. Deleting and purging it
    are allowed again. Raises ``ConversationNotFound``, ``WriteConflict``."""
    pk = conversation_pk(conversation)
    using = router.db_for_write(Conversation)
    with database_errors(), transaction.atomic(using=using):
        lock_conversation(pk, using)
        deleted, _ = Hold.objects.using(using).filter(conversation_id=pk).delete()
    return bool(deleted)


def actor_name(user: Any) -> str:
    """How the access log names ``user``: the full name, else the username; never the e-mail
    (a username that is an e-mail address, as with e-mail login, becomes ``user <pk>``)."""
    full = str(getattr(user, "get_full_name", lambda: "")() or "").strip()
    if full:
        return full[:255]
    username = str(user.get_username() if hasattr(user, "get_username") else "")
    email = str(getattr(user, getattr(user, "EMAIL_FIELD", "email"), "") or "")
    if username and "@" not in username and username != email:
        return username[:255]
    return f"user {user.pk}"


def log_access(
    *, conversation: ConversationRef | Conversation, actor: Any, surface: str
) -> AccessLogEntry | None:
    """Write one access log entry when ``actor`` reads a conversation that is not theirs (staff in
    the admin, a ``SCOPE`` reader through the API, or a host's own staff view: call this once
    per view, not per row). Returns the entry, or None when ``actor`` is the owner (owners'
    views are never logged) or not a signed-in user. ``surface``: where (1-64 characters; the
    app's own are ``models.AccessSurface``). Raises ``ConversationNotFound`` (also when the
    conversation is deleted meanwhile) and ``WriteConflict``: a view that cannot be logged
    should not be shown."""
    if actor is None or not getattr(actor, "is_authenticated", False):
        return None
    surface = check_short_string(surface, what="surface", max_length=64, allow_empty=False)
    if isinstance(conversation, Conversation):
        pk, owner_id = conversation.pk, conversation.owner_id
    else:
        pk = conversation_pk(conversation)
        row = Conversation.objects.filter(pk=pk).values_list("owner_id").first()
        if row is None:
            raise ConversationNotFound(f"no conversation {pk}")
        owner_id = row[0]
    if owner_id is not None and owner_id == actor.pk:
        return None
    using = router.db_for_write(AccessLogEntry)
    try:
        with database_errors(), transaction.atomic(using=using):
            return AccessLogEntry.objects.using(using).create(
                conversation_id=pk, actor=actor, actor_name=actor_name(actor), surface=surface
            )
    except WriteConflict as error:
        if isinstance(error.__cause__, IntegrityError):  # the conversation went away
            raise ConversationNotFound(f"no conversation {pk}") from error
        raise


def log_accesses(
    *, conversations: list[tuple[Any, Any]], actor: Any, surface: str
) -> list[AccessLogEntry]:
    """:func:`log_access` for several conversations at once, ``(pk, owner_id)`` pairs (a list
    page of rows from several conversations): one entry per conversation the actor does not
    own, one insert. Raises ``WriteConflict``."""
    if actor is None or not getattr(actor, "is_authenticated", False):
        return []
    return _write_entries(
        [
            pk
            for pk, owner_id in dict(conversations).items()
            if owner_id is None or owner_id != actor.pk
        ],
        actor=actor,
        surface=surface,
    )


def log_agent_reads(
    *, conversations: Iterable[Any], actor: Any, surface: str
) -> list[AccessLogEntry]:
    """One access log entry per conversation (pks, in order, repeats written once) that an agent
    acting for ``actor`` read (the MCP server, docs/mcp.md "The access log"), the actor's own
    conversations included: unlike a person's view, an agent's read of its owner's conversation
    is logged, so owners see what their agents read. ``surface``: where (1-64 characters; the
    app's are the ``mcp-*`` members of ``models.AccessSurface``). Conversations deleted
    meanwhile get no entry; none at all for an actor who is not a signed-in user. One insert;
    raises ``WriteConflict``: a read that cannot be logged should not be answered."""
    if actor is None or not getattr(actor, "is_authenticated", False):
        return []
    surface = check_short_string(surface, what="surface", max_length=64, allow_empty=False)
    return _write_entries(list(dict.fromkeys(conversations)), actor=actor, surface=surface)


def _write_entries(pks: list[Any], *, actor: Any, surface: str) -> list[AccessLogEntry]:
    """One entry by ``actor`` at ``surface`` per conversation of ``pks`` that still exists."""
    if not pks:
        return []
    name = actor_name(actor)
    using = router.db_for_write(AccessLogEntry)
    with database_errors(), transaction.atomic(using=using):
        # Conversations deleted since they were read are left out.
        alive = set(
            Conversation.objects.using(using).filter(pk__in=pks).values_list("pk", flat=True)
        )
        entries = [
            AccessLogEntry(conversation_id=pk, actor=actor, actor_name=name, surface=surface)
            for pk in pks
            if pk in alive
        ]
        return AccessLogEntry.objects.using(using).bulk_create(entries)
