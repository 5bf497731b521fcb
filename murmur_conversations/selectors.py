"""Reads. Owner scoping lives here, once, for every owner-facing surface (REST and websockets).

Somebody else's conversation is exactly as absent as one that never existed (agentfootprint's
non-disclosing session wire): every lookup of a foreign, missing or malformed id returns None.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any, Final, cast

from django.core.exceptions import EmptyResultSet
from django.db.models import Count, Exists, Min, OuterRef, Q, QuerySet
from django.utils import timezone
from django.utils.module_loading import import_string

from murmur_conversations.conf import app_settings
from murmur_conversations.models import (
    CONVERSATION_ID_SOURCE,
    AccessLogEntry,
    ContentType,
    Conversation,
    ConversationTag,
    DeletedSource,
    Feedback,
    Hold,
    Message,
    Rating,
    Share,
    ToolCall,
)
from murmur_conversations.projection import transcript_entry
from murmur_conversations.usage import COUNTERS, ByModel, Usage, merge_by_model
from murmur_conversations.validation import source_key

#: Every share token starts with this (so secret scanners can spot one).
SHARE_TOKEN_PREFIX: Final = "msh_"
#: A well-formed share token: the prefix and 43 characters of ``secrets.token_urlsafe(32)``.
_SHARE_TOKEN: Final = re.compile(r"msh_[A-Za-z0-9_-]{43}")

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


#: An SQL condition on a conversation row aliased ``c`` and its parameters (:func:`scope_condition`).
ScopeCondition = tuple[str, tuple[Any, ...]]
_OWNER_SCOPE: Final = "murmur_conversations.selectors.owner_scope"


def scope_condition(user: Any, *, using: str = "default") -> ScopeCondition | None:
    """:func:`conversations_for` as an SQL condition on a conversation row aliased ``c``, for a
    read that joins the scope check to its page (``reading.scoped_page``): with the default
    ``SCOPE``, ``c.owner_id = <user's pk>`` (no query compiled); with a host's, ``c.id IN (<its
    queryset>)`` compiled for the database ``using``. None when the scope holds nothing (an
    anonymous or inactive user, ``.none()``)."""
    if app_settings.SCOPE == _OWNER_SCOPE:
        if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
            return None
        return f'c."{Conversation._meta.get_field("owner").column}" = %s', (user.pk,)
    scoped = conversations_for(user).order_by().values("pk")
    try:
        sql, params = scoped.query.get_compiler(using).as_sql()
    except EmptyResultSet:
        return None
    return f'c."{Conversation._meta.pk.column}" IN ({sql})', tuple(params)


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


def top_level(conversations: QuerySet[Conversation]) -> QuerySet[Conversation]:
    """Only the conversations that are no one's child (the sidebar, ``GET conversations/``)."""
    return conversations.filter(parent__isnull=True)


def children_for(user: Any, parent_id: Any) -> QuerySet[Conversation]:
    """The children of conversation ``parent_id`` that ``user`` may read, newest first; none when
    the parent is foreign, missing or malformed, alike (docs/api.md ``?parent=``)."""
    parent = conversation_for(user, parent_id)
    if parent is None:
        return Conversation.objects.none()
    return conversations_for(user).filter(parent=parent)


def launching_calls(
    parent: Conversation, children: list[tuple[uuid.UUID, str, int]]
) -> dict[uuid.UUID, int]:
    """Which tool call of ``parent`` launched each child: ``children`` are ``(child pk,
    parent_call_id, parent_created_event_seq)``; the answer maps each child that names a call of
    the parent to that ToolCall's pk.

    The one place this is decided (docs/architecture.md "Child conversations"). A call id may
    name several calls of a conversation over time (one per round, when an agent reuses ids): a
    child was launched by the latest call of its id created at or before the child (the card's
    ``created_event_seq`` against the child's ``parent_created_event_seq``), else, for a child
    recorded before its call, by the first call of that id. One query."""
    wanted = {call_id for _pk, call_id, _seq in children if call_id}
    if not wanted:
        return {}
    rounds: dict[str, list[tuple[int, int]]] = {}
    calls = (
        ToolCall.objects.filter(conversation=parent, call_id__in=wanted)
        .annotate(
            created_seq=Min(
                "display_messages__created_event_seq",
                filter=Q(display_messages__content_type=ContentType.TOOL_CALL),
            )
        )
        .values_list("pk", "call_id", "created_seq")
    )
    for pk, call_id, created_seq in calls:
        rounds.setdefault(call_id, []).append((created_seq or 0, pk))
    launched: dict[uuid.UUID, int] = {}
    for child, call_id, created in children:
        call = launching_round(rounds.get(call_id, []), created)
        if call is not None:
            launched[child] = call
    return launched


def launching_round(rounds: list[tuple[int, int]], created: int) -> int | None:
    """Of the calls sharing one call id, ``rounds`` as ``(created_event_seq, pk)``, the pk of
    the one that launched a child created at the parent's event ``created``: the latest created
    at or before it, else the first (a child recorded before its call); None without calls."""
    ordered = sorted(rounds)
    if not ordered:
        return None
    before = [pk for seq, pk in ordered if seq <= created]
    return before[-1] if before else ordered[0][1]


def children_by_call(parent: Conversation, calls: list[ToolCall]) -> dict[int, list[str]]:
    """The ids of the children each of ``parent``'s tool ``calls`` launched (see
    :func:`launching_calls`), by the call's pk, oldest child first; two queries, none when the
    parent has no children (its ``child_count``)."""
    if not calls or parent.child_count == 0:
        return {}
    children = list(
        Conversation.objects.filter(parent=parent, parent_call_id__in={c.call_id for c in calls})
        .order_by("parent_created_event_seq", "pk")
        .values_list("pk", "parent_call_id", "parent_created_event_seq")
    )
    out: dict[int, list[str]] = {}
    wanted = {c.pk for c in calls}
    for child, call in launching_calls(parent, children).items():
        if call in wanted:
            out.setdefault(call, []).append(str(child))
    return out


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


def family_usage(conversation: Conversation) -> tuple[Usage, ByModel]:
    """The token counters of ``conversation`` and all its descendants (children, theirs...),
    each conversation once: ``(totals, {model: {counter: int}})``, from the counters the write
    path keeps (docs/usage.md ``usage_with_children``). No query when it has no children; else one
    query per generation."""
    totals = Usage(*(getattr(conversation, name) for name in COUNTERS))
    by_model = merge_by_model([conversation.usage_by_model or {}])
    if not conversation.child_count:
        return totals, by_model
    manager = Conversation.objects.using(conversation._state.db or "default")
    seen = {conversation.pk}
    level = [conversation.pk]
    while level:
        found: list[tuple[Any, ...]] = []
        for start in range(0, len(level), _FAMILY_CHUNK):
            found.extend(
                manager.filter(parent_id__in=level[start : start + _FAMILY_CHUNK])
                .order_by()
                .values_list("pk", "usage_by_model", *COUNTERS)
            )
        level = []
        for pk, child_by_model, *counts in found:
            if pk in seen:  # a tree never repeats one, but a total must not count one twice
                continue
            seen.add(pk)
            level.append(pk)
            totals = totals + Usage(*counts)
            by_model = merge_by_model([by_model, child_by_model or {}])
    return totals, by_model


_FAMILY_CHUNK: Final = 500


#: How many generations of children a hold reaches up from (subagents of subagents of ...). Deeper
#: trees are not written by any agent we know of; a hold deeper than this still protects its own
#: conversation (the database refuses to delete a held row).
HOLD_DEPTH: Final = 4


def share_token_hash(token: str) -> str:
    """The stored form of a share token: the sha256 hex of its UTF-8 bytes."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def share_for_token(token: Any) -> Share | None:
    """The share link ``token`` opens, with its conversation; None for a malformed, unknown,
    revoked or expired token alike (docs/api.md "Share links"). One query, none for a malformed
    token. Read it again on every use: a live reader calls this on each re-check, so revocation
    and expiry take effect at once. Whether the reader must be signed in (``require_login``) is the
    caller's check."""
    if not isinstance(token, str) or not _SHARE_TOKEN.fullmatch(token):
        return None
    share = (
        Share.objects.select_related("conversation")
        .filter(token_hash=share_token_hash(token))
        .first()
    )
    if share is None or share.revoked_at is not None:
        return None
    if share.expires_at is not None and share.expires_at <= timezone.now():
        return None
    return share


def organised(
    conversations: QuerySet[Conversation], *, archived: str = "0", tag: str | None = None
) -> QuerySet[Conversation]:
    """``conversations`` as ``GET conversations/`` lists them (docs/api.md "Organising"): pinned
    first, then ``saved_at`` desc, then ``id`` desc. ``archived``: ``"0"`` (not archived, the
    default), ``"1"`` (only archived) or ``"all"``; ``tag``: only those with this (already
    normalised) tag, through the tag index."""
    if archived == "0":
        conversations = conversations.filter(archived=False)
    elif archived == "1":
        conversations = conversations.filter(archived=True)
    if tag is not None:
        conversations = conversations.filter(
            pk__in=ConversationTag.objects.filter(name=tag).values("conversation_id")
        )
    return conversations.order_by("-pinned", "-saved_at", "-id")


def feedback_for(user: Any, row_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """``{display row id: {"rating", "comment"}}`` of ``user``'s own feedback on those rows (one
    query, none for no rows or no user): what the ``feedback`` key of each display row shows."""
    ids = list(row_ids)
    if not ids or user is None or not getattr(user, "is_authenticated", False):
        return {}
    return {
        row_id: {"rating": rating, "comment": comment}
        for row_id, rating, comment in Feedback.objects.filter(
            user_id=user.pk, display_message_id__in=ids
        ).values_list("display_message_id", "rating", "comment")
    }


def feedback_counts(conversation: Conversation | uuid.UUID) -> dict[str, int]:
    """``{"up", "down", "total"}``: the feedback of every user on the conversation's display
    rows, for evaluation (one query on the ``(conversation, rating)`` index)."""
    pk = conversation.pk if isinstance(conversation, Conversation) else conversation
    counts = Feedback.objects.filter(conversation_id=pk).aggregate(
        up=Count("pk", filter=Q(rating=Rating.UP)), down=Count("pk", filter=Q(rating=Rating.DOWN))
    )
    up, down = int(counts["up"] or 0), int(counts["down"] or 0)
    return {"up": up, "down": down, "total": up + down}


def held_condition() -> Q:
    """THE definition of "held", as a filter on conversations (docs/deployment.md "Retention and
    holds"): the conversation, or one of its descendants down to :data:`HOLD_DEPTH` generations,
    has a ``Hold`` (a conversation with a held child counts as held: deleting it would delete the
    child). Every check goes through here (:func:`is_held`, ``services.delete_conversation``,
    ``services.purge_conversations``, the admin)."""
    condition = Q(Exists(Hold.objects.filter(conversation_id=OuterRef("pk"))))
    path = "conversation"
    for _generation in range(HOLD_DEPTH):
        path += "__parent"
        condition |= Q(Exists(Hold.objects.filter(**{f"{path}_id": OuterRef("pk")})))
    return condition


def is_held(conversation: Conversation | uuid.UUID | str) -> bool:
    """Whether the conversation (an instance or its id) is held (:func:`held_condition`); one
    query. A missing conversation is not held."""
    pk = conversation.pk if isinstance(conversation, Conversation) else conversation
    return Conversation.objects.filter(pk=pk).filter(held_condition()).exists()


def owned_conversation(user: Any, conversation_id: Any) -> Conversation | None:
    """The conversation ``conversation_id`` if ``user`` owns it (not merely reads it through
    ``SCOPE``); None for foreign, missing and malformed ids alike. The access log is the owner's
    only (docs/api.md "Access log")."""
    pk = parse_conversation_id(conversation_id)
    if pk is None:
        return None
    return Conversation.objects.owned_by(user).filter(pk=pk).first()


def access_log(conversation: Conversation) -> QuerySet[AccessLogEntry]:
    """The access log entries of ``conversation``, newest first (``id`` desc)."""
    return AccessLogEntry.objects.filter(conversation=conversation).order_by("-id")


def purge_candidates(
    *, owner: Any = None, older_than: timedelta | None = None
) -> QuerySet[Conversation]:
    """The conversations ``services.purge_conversations`` erases with these arguments (the
    owner's, and/or those whose ``retained_at`` is more than ``older_than`` ago: see
    :func:`retention_cutoff`), held ones included: those matching :func:`held_condition` are the
    ones it keeps."""
    matching = Conversation.objects.all()
    if owner is not None:
        matching = matching.filter(owner_id=getattr(owner, "pk", owner))
    if older_than is not None:
        cutoff = retention_cutoff(older_than)
        if cutoff is None:
            return matching.none()
        matching = matching.filter(retained_at__lt=cutoff)
    return matching


def retention_cutoff(older_than: timedelta) -> datetime | None:
    """The time before which a conversation's ``retained_at`` makes it ``older_than`` (now minus
    ``older_than``), or None when that is before the calendar begins (nothing is that old)."""
    try:
        return timezone.now() - older_than
    except OverflowError:
        return None


def deleted_source(*, owner: Any, source: str, external_id: str) -> datetime | None:
    """When ``owner``'s conversation of ``source`` keyed ``external_id`` was deleted (its
    ``DeletedSource``), or, when ``external_id`` is the canonical text of a conversation id, when
    the owner's conversation with that id was (``CONVERSATION_ID_SOURCE``: a frontend list or
    export names the conversation it came from); None when neither was, or when a conversation
    with that identity exists again (restored on purpose). ``owner``: a user or its pk.
    ``external_id`` is taken as a source gives it (``validation.source_key`` makes it the stored
    key: any ``str``)."""
    owner_pk = getattr(owner, "pk", owner)
    external_id = source_key(external_id)
    if Conversation.objects.filter(
        owner_id=owner_pk, source=source, external_id=external_id
    ).exists():
        return None
    matches = Q(source=source, key_hash=DeletedSource.key_of(external_id))
    if parse_conversation_id(external_id) is not None:
        matches |= Q(source=CONVERSATION_ID_SOURCE, key_hash=DeletedSource.key_of(external_id))
    return (
        DeletedSource.objects.filter(matches, owner_id=owner_pk)
        .order_by("deleted_at")
        .values_list("deleted_at", flat=True)
        .first()
    )
