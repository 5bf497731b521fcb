"""The conversation routes (docs/api.md): list, detail, PATCH, DELETE, display rows,
record, transcript, pending ask and tool calls, all owner-scoped through ``selectors``. (Share
links, forks and feedback have their own modules: ``api.shares``, ``api.forks``,
``api.feedback``.)

Views are thin: they read parameters, ask selectors and services, and shape rows with
``representations``. Each route makes a fixed number of queries whatever the conversation's length
(authentication, the scoped lookup, the page, and a count where ``total`` is not a counter).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from django.db import router
from django.db.models import Q
from django.utils import timezone
from rest_framework import status
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response

from murmur_conversations import reading, services
from murmur_conversations.api import serializers as docs
from murmur_conversations.api.base import ConversationScopedViewSet
from murmur_conversations.api.exceptions import (
    ConversationGone,
    ConversationIsHeld,
    InvalidCursor,
    InvalidField,
    PendingAskGone,
    Unavailable,
)
from murmur_conversations.api.hook_auth import (
    IsActiveUserOrHook,
    MurmurHookAuthentication,
    NotGranted,
    hook_token,
)
from murmur_conversations.api.pagination import (
    CursorBinding,
    body,
    keyset_page,
    page_limit,
    transcript_limit,
)
from murmur_conversations.api.params import (
    ARCHIVED_VALUES,
    query_value,
    read_answer,
    read_archived,
    read_json_object,
    read_patch,
    read_search,
    read_since,
    read_status_filter,
    read_tag,
)
from murmur_conversations.api.schema import (
    CURSOR_PARAM,
    ID_PARAM,
    LIMIT_PARAM,
    QUERY_PATTERN,
    Param,
    choice,
    document,
)
from murmur_conversations.exceptions import (
    ConversationHeld,
    ConversationNotFound,
    InvalidContent,
    NoPendingAsk,
    WriteConflict,
)
from murmur_conversations.hooks import is_granted
from murmur_conversations.models import AccessSurface, Conversation, ToolCall, ToolStatus
from murmur_conversations.reading import ScopedPage
from murmur_conversations.representations import (
    detail_row,
    display_row,
    iso,
    summary_row,
    tool_call_row,
)
from murmur_conversations.search import MAX_QUERY_CHARS, SearchQuery, matching_conversations
from murmur_conversations.selectors import (
    access_log,
    children_by_call,
    children_for,
    conversation_for,
    conversation_for_hook,
    conversations_for,
    family_usage,
    organised,
    owned_conversation,
    parse_conversation_id,
    scope_condition,
    top_level,
    transcript,
)
from murmur_conversations.validation import MAX_TAG_CHARS, TAG_PATTERN

Params = TypeVar("Params")
PAGE_PARAMS = [LIMIT_PARAM, CURSOR_PARAM]
ERROR_RESPONSES: dict[int, Any] = dict.fromkeys((400, 401, 403, 404, 429), docs.ErrorSerializer)
WRITE_ERRORS: dict[int, Any] = {**ERROR_RESPONSES, 503: docs.ErrorSerializer}
SINCE_PARAM = Param(
    "since",
    {"type": "string", "pattern": "^[0-9]*$"},
    "query",
    "Only rows changed after this event_seq (an integer >= 0).",
)
STATUS_PARAM = Param(
    "status", choice(*ToolStatus.values), "query", "Only tool calls with this status."
)
ARCHIVED_PARAM = Param(
    "archived",
    choice(*ARCHIVED_VALUES),
    "query",
    "0 (default): archived conversations hidden; 1: only archived ones; all: both.",
)
TAG_PARAM = Param(
    "tag",
    {"type": "string", "maxLength": MAX_TAG_CHARS, "pattern": f"^$|{TAG_PATTERN}"},
    "query",
    "Only conversations with this tag (as stored: trimmed, lower case).",
)
PARENT_PARAM = Param(
    "parent",
    str,
    "query",
    "List this conversation's children instead (another user's id lists nothing, like a missing "
    "one).",
)
Q_PARAM = Param(
    "q",
    {"type": "string", "maxLength": MAX_QUERY_CHARS, "pattern": f"^$|{QUERY_PATTERN}"},
    "query",
    "Only conversations whose title or a message matches these words (docs/search.md).",
)


def _int_key(key: list[Any] | None, size: int) -> list[int] | None:
    """A keyset of ``size`` integers from a signed cursor (signed by us; checked all the same)."""
    if key is None:
        return None
    if len(key) != size or not all(type(part) is int for part in key):
        raise InvalidCursor("cursor is not valid for this listing; start again without it")
    return key


def conversation_page(
    user: Any,
    *,
    parent: str | None,
    archived: str,
    tag: str | None,
    query: SearchQuery | None,
    cursor: str | None,
    limit: int,
) -> dict[str, Any]:
    """One page of ``user``'s conversations as ``GET conversations/`` and the MCP server's
    ``list_conversations`` answer it: ``{"results": [<summary row>], "next_cursor", "total"}``,
    the top-level conversations (the sidebar: ``selectors.top_level`` of
    ``selectors.conversations_for``), or ``parent``'s children (none for a foreign, missing or
    malformed id, alike), ordered by ``selectors.organised`` (pinned first, ``archived``: ``"0"``,
    ``"1"`` or ``"all"``, maybe one ``tag``); with ``query`` only those whose title or a display
    row matches it. ``cursor``: one this listing gave for the same user and filters, or None;
    ``InvalidCursor`` otherwise. ``limit``: rows per page.

    The cursor holds the keyset ``(pinned, saved_at, id)`` of the last row served and the time
    the walk began: later pages leave out conversations saved or organised after it (written
    to, pinned, unpinned, archived or renamed during the walk: ``saved_at``, ``organised_at``),
    which the sidebar stream announces, so a walk returns every other row exactly once and none
    twice (docs/api.md "Organising")."""
    params: tuple[tuple[str, str], ...] = (("archived", archived), ("tag", tag or ""))
    if parent is not None:
        params += (("parent", parent),)
    if query is not None:
        params += (("q", query.raw),)
    binding = CursorBinding("conversations", str(user.pk), params)
    key = binding.read(cursor)
    scoped = top_level(conversations_for(user)) if parent is None else children_for(user, parent)
    if query is not None:
        scoped = matching_conversations(scoped, query)
    listed = organised(scoped, archived=archived, tag=tag)
    rows = listed
    if key is None:
        walk_start = timezone.now()
    else:
        pinned, saved_at, pk, walk_start = _conversation_key(key)
        after = Q(saved_at__lt=saved_at) | Q(saved_at=saved_at, pk__lt=pk)
        rows = rows.filter(saved_at__lte=walk_start).exclude(organised_at__gt=walk_start)
        rows = rows.filter(
            (Q(pinned=True) & after) | Q(pinned=False) if pinned else Q(pinned=False) & after
        )
    fetched = list(rows[: limit + 1])
    started = iso(walk_start)
    page = keyset_page(
        fetched,
        limit=limit,
        binding=binding,
        key_of=lambda c: [int(c.pinned), iso(c.saved_at), str(c.pk), started],
    )
    return body([summary_row(c) for c in page.rows], page, listed.count())


def transcript_after(conversation: Conversation, cursor: str | None) -> int:
    """The record position a transcript page of ``conversation`` starts after: 0 for no cursor,
    else the one ``cursor`` (given by :func:`transcript_page` for this conversation) holds;
    ``InvalidCursor`` for any other cursor."""
    after = _int_key(CursorBinding("transcript", str(conversation.pk)).read(cursor), 1)
    return after[0] if after else 0


def transcript_page(conversation: Conversation, *, after: int, limit: int) -> dict[str, Any]:
    """One transcript page (``selectors.transcript``, oldest first) as ``GET
    conversations/{id}/transcript/`` and the MCP server's ``read_transcript`` answer it:
    ``{"conversation_id", "messages": [{"role", "content"}], "next_cursor"}``, at most ``limit``
    messages after record position ``after`` (:func:`transcript_after`)."""
    binding = CursorBinding("transcript", str(conversation.pk))
    entries = list(transcript(conversation, after_position=after, limit=limit + 1))
    page = keyset_page(entries, limit=limit, binding=binding, key_of=lambda e: [e[0]])
    return {
        "conversation_id": str(conversation.pk),
        "messages": [entry for _position, entry in page.rows],
        "next_cursor": page.next_cursor,
    }


class ConversationViewSet(ConversationScopedViewSet):
    """The caller's conversations and everything inside one of them."""

    scoped_reads = frozenset({"display_messages", "record"})

    def _scope(self) -> str:
        """The conversation id a cursor is bound to (the URL's, canonical once it was found)."""
        return str(self.kwargs[self.lookup_url_kwarg])

    def _log_view(self, surface: str) -> None:
        """:meth:`_log_read` of ``self.conversation``."""
        self._log_read(surface, self.conversation, self.conversation.owner_id)

    def _log_read(
        self, surface: str, conversation: Conversation | uuid.UUID, owner_id: Any
    ) -> None:
        """One access log entry for this view when the caller reads a conversation that is not
        theirs (through ``SCOPE``); none for the owner, and no query then. A view that cannot be
        logged is not shown (404 if the conversation went away, 503 if the database is busy)."""
        user = self.request.user
        if user is None or not user.is_authenticated or owner_id == user.pk:
            return
        try:
            services.log_access(conversation=conversation, actor=user, surface=surface)
        except ConversationNotFound:
            raise ConversationGone() from None
        except WriteConflict:
            raise Unavailable() from None

    def _found(self) -> bool:
        """Whether ``initial`` already found the conversation (a hook token's, on the record
        route)."""
        return "conversation" in self.__dict__

    def _params(self, read: Callable[[], Params]) -> Params:
        """``read()``, the route's query parameters. A bad one answers 400 only for a
        conversation in the caller's scope; for any other id the same 404 as a missing one, as
        every route answers before it reads a parameter (one lookup, on this error path only)."""
        try:
            return read()
        except APIException:
            if not self._found() and conversation_for(self.request.user, self._scope()) is None:
                raise ConversationGone() from None
            raise

    def _scoped_page(self, listing: reading.Listing, surface: str, **page: Any) -> ScopedPage:
        """The page of ``listing`` in ONE statement that is also the scoped lookup
        (``reading.scoped_page`` with ``selectors.scope_condition``): 404 for a foreign, missing
        or malformed id alike; then the access log entry of a reader who is not the owner."""
        pk = parse_conversation_id(self.kwargs[self.lookup_url_kwarg])
        using = router.db_for_read(Conversation)
        found = None
        if self._found():  # the hook's conversation: found, no scope to check
            found = reading.scoped_page(listing, self.conversation.pk, scope=None, **page)
        elif pk is not None:
            scope = scope_condition(self.request.user, using=using)
            if scope is not None:
                reader = self.request.user
                found = reading.scoped_page(
                    listing, pk, scope=scope, reader=reader, using=using, **page
                )
        if found is None or pk is None:
            raise ConversationGone()
        self._log_read(surface, pk, found.head.owner_id)
        return found

    # ------------------------------------------------------------------ conversations

    @document(
        summary=(
            "The caller's top-level conversations, or one's children; pinned first, then "
            "saved_at desc, then id desc; q filters them"
        ),
        params=[*PAGE_PARAMS, PARENT_PARAM, ARCHIVED_PARAM, TAG_PARAM, Q_PARAM],
        responses={200: docs.ConversationPageSerializer, **ERROR_RESPONSES},
    )
    def page(self, request: Request) -> Response:
        """:func:`conversation_page` of the caller with ``?parent=``, ``?archived=``, ``?tag=``,
        ``?q=``, ``?cursor=`` and ``?limit=``. (Not named ``list``: the body is one page object,
        and schema tools read ``list`` as an array.)"""
        page = conversation_page(
            request.user,
            parent=query_value(request.query_params, "parent"),
            archived=read_archived(request.query_params),
            tag=read_tag(request.query_params),
            query=read_search(request.query_params, required=False),
            cursor=request.query_params.get("cursor"),
            limit=page_limit(request.query_params),
        )
        return Response(page)

    @document(
        summary="One conversation: the summary row plus metadata",
        params=[ID_PARAM],
        responses={200: docs.DetailSerializer, **ERROR_RESPONSES},
    )
    def retrieve(self, request: Request, id: str) -> Response:
        """``detail_row`` of the conversation."""
        self._log_view(AccessSurface.API_DETAIL)
        return Response(detail_row(self.conversation, family_usage(self.conversation)))

    @document(
        summary="Replace the title, metadata, pinned, archived and/or tags",
        params=[ID_PARAM],
        request=docs.PatchSerializer,
        responses={200: docs.DetailSerializer, **WRITE_ERRORS},
    )
    def partial_update(self, request: Request, id: str) -> Response:
        """Through ``services.update_conversation``; every key is optional (an empty body changes
        nothing); 400 ``invalid_field`` for a body that is not a JSON object, another key or a
        bad value."""
        data = read_json_object(
            request,
            expected="'title', 'metadata', 'pinned', 'archived' and/or 'tags'",
            allow_empty=True,
        )
        fields = read_patch(data)
        try:
            updated = services.update_conversation(conversation=self.conversation, **fields)
        except InvalidContent as error:
            raise InvalidField(str(error)) from None
        except ConversationNotFound:
            raise ConversationGone() from None
        except WriteConflict:
            raise Unavailable() from None
        return Response(detail_row(updated, family_usage(updated)))

    @document(
        summary="Delete the conversation and everything in it",
        params=[ID_PARAM],
        responses={204: None, **WRITE_ERRORS},
    )
    def destroy(self, request: Request, id: str) -> Response:
        """Through ``services.delete_conversation``; 204. 409 ``conversation_held`` for a
        conversation under a legal hold (nothing deleted)."""
        try:
            services.delete_conversation(conversation=self.conversation)
        except ConversationHeld:
            raise ConversationIsHeld() from None
        except ConversationNotFound:
            raise ConversationGone() from None
        except WriteConflict:
            raise Unavailable() from None
        return Response(status=status.HTTP_204_NO_CONTENT)

    # ------------------------------------------------------------------ inside one

    @document(
        summary="Display rows, seq desc; with since, rows changed after it by (event_seq, seq)",
        params=[ID_PARAM, *PAGE_PARAMS, SINCE_PARAM],
        responses={200: docs.DisplayPageSerializer, **ERROR_RESPONSES},
    )
    def display_messages(self, request: Request, id: str) -> Response:
        """Newest first; ``total`` is ``last_seq`` (seqs are gapless). With ``since``: every row
        whose ``event_seq > since`` oldest change first, ``total`` counts them. One statement
        after authentication (``_scoped_page``)."""
        since = self._params(lambda: read_since(request.query_params))
        if since is None:
            binding = CursorBinding("display", self._scope())
            key, limit = self._params(lambda: self._page_key(binding, 1))
            found = self._scoped_page(
                "display",
                AccessSurface.API_DISPLAY,
                limit=limit + 1,
                before=key[0] if key else None,
            )
            page = keyset_page(
                found.rows, limit=limit, binding=binding, key_of=lambda r: [r["seq"]]
            )
            return Response(body(list(page.rows), page, found.head.last_seq))
        binding = CursorBinding("since", self._scope(), (("since", str(since)),))
        key, limit = self._params(lambda: self._page_key(binding, 2))
        found = self._scoped_page(
            "changes",
            AccessSurface.API_DISPLAY,
            limit=limit + 1,
            since=since,
            after=(key[0], key[1]) if key else None,
        )
        page = keyset_page(
            found.rows, limit=limit, binding=binding, key_of=lambda r: [r["event_seq"], r["seq"]]
        )
        return Response(body(list(page.rows), page, found.head.changed))

    def _page_key(self, binding: CursorBinding, size: int) -> tuple[list[int] | None, int]:
        """The keyset of ``?cursor=`` (``size`` integers, None for the first page) and ``limit``."""
        key = _int_key(binding.read(self.request.query_params.get("cursor")), size)
        return key, page_limit(self.request.query_params)

    @document(
        summary="The durable record, position desc",
        params=[ID_PARAM, *PAGE_PARAMS],
        responses={200: docs.RecordPageSerializer, **ERROR_RESPONSES},
    )
    def record(self, request: Request, id: str) -> Response:
        """Newest first; ``total`` is ``record_length``. One statement after authentication."""
        binding = CursorBinding("record", self._scope())
        key, limit = self._params(lambda: self._page_key(binding, 1))
        found = self._scoped_page(
            "record", AccessSurface.API_RECORD, limit=limit + 1, before=key[0] if key else None
        )
        page = keyset_page(
            found.rows, limit=limit, binding=binding, key_of=lambda m: [m["position"]]
        )
        return Response(body(list(page.rows), page, found.head.record_length))

    @document(
        summary="The transcript (agentfootprint projection), oldest first",
        params=[
            ID_PARAM,
            Param("limit", str, "query", "Messages per page; default and maximum 1000."),
            CURSOR_PARAM,
        ],
        responses={200: docs.TranscriptSerializer, **ERROR_RESPONSES},
    )
    def transcript(self, request: Request, id: str) -> Response:
        """``{"conversation_id", "messages", "next_cursor"}``; ``limit`` 1..1,000 (default 1,000)."""
        after = transcript_after(self.conversation, request.query_params.get("cursor"))
        limit = transcript_limit(request.query_params)
        self._log_view(AccessSurface.API_TRANSCRIPT)
        return Response(transcript_page(self.conversation, after=after, limit=limit))

    @document(
        summary="The pending ask (agentfootprint PendingAsk) or null",
        params=[ID_PARAM],
        responses={200: docs.PendingSerializer, **ERROR_RESPONSES},
    )
    def pending(self, request: Request, id: str) -> Response:
        """``{"pending": <PendingAsk> or null}``."""
        return Response({"pending": self.conversation.pending_ask})

    @document(
        summary="Answer the pending ask: save it as a user message and clear the ask",
        params=[ID_PARAM],
        request=docs.AnswerRequestSerializer,
        responses={200: docs.AnswerResponseSerializer, 409: docs.ErrorSerializer, **WRITE_ERRORS},
    )
    def answer_pending(self, request: Request, id: str) -> Response:
        """Through ``services.answer_pending_ask``: ``{"conversation": <detail>, "messages":
        [<display rows of the saved user message>]}``. 400 ``invalid_field`` for a bad body,
        409 ``no_pending_ask`` when no ask is pending or ``event_seq`` is stale (nothing written).
        """
        data = read_json_object(request, expected="'answer' and maybe 'event_seq'")
        answer, event_seq = read_answer(data)
        try:
            rows = services.answer_pending_ask(
                conversation=self.conversation, answer=answer, expected_event_seq=event_seq
            )
        except InvalidContent as error:
            raise InvalidField(str(error)) from None
        except NoPendingAsk:
            raise PendingAskGone() from None
        except ConversationNotFound:
            raise ConversationGone() from None
        except WriteConflict:
            raise Unavailable() from None
        return Response(
            {
                "conversation": detail_row(self.conversation, family_usage(self.conversation)),
                "messages": [display_row(row) for row in rows],
            }
        )

    @document(
        summary="Tool calls, newest created first; optionally one status",
        params=[ID_PARAM, *PAGE_PARAMS, STATUS_PARAM],
        responses={200: docs.ToolCallPageSerializer, **ERROR_RESPONSES},
    )
    def tool_calls(self, request: Request, id: str) -> Response:
        """Newest first (``id`` desc); ``total`` counts the matching calls."""
        wanted = read_status_filter(request.query_params)
        binding = CursorBinding("tool-calls", self._scope(), (("status", wanted or ""),))
        after = _int_key(binding.read(request.query_params.get("cursor")), 1)
        limit = page_limit(request.query_params)
        self._log_view(AccessSurface.API_TOOL_CALLS)
        calls = ToolCall.objects.filter(conversation=self.conversation)
        if wanted is not None:
            calls = calls.filter(status=wanted)
        total = calls.count()
        if after is not None:
            calls = calls.filter(pk__lt=after[0])
        fetched = list(calls.order_by("-pk")[: limit + 1])
        page = keyset_page(fetched, limit=limit, binding=binding, key_of=lambda c: [c.pk])
        launched = children_by_call(self.conversation, list(page.rows))
        results = [tool_call_row(c, launched.get(c.pk)) for c in page.rows]
        return Response(body(results, page, total))


class AccessLogViewSet(ConversationScopedViewSet):
    """``GET conversations/{id}/access-log/``: who read the conversation who is not its owner
    (docs/api.md "Access log"). The owner's only: a ``SCOPE`` reader who is not the owner gets
    the same 404 as for a missing conversation."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """The scoped lookup of every route, then the owner check (the same 404)."""
        super().initial(request, *args, **kwargs)
        owned = owned_conversation(request.user, kwargs.get(self.lookup_url_kwarg))
        if owned is None:
            raise ConversationGone()
        self.conversation = owned

    @document(
        summary="Who read the conversation who is not its owner, newest first (owner only)",
        params=[ID_PARAM, *PAGE_PARAMS],
        responses={200: docs.AccessLogPageSerializer, **ERROR_RESPONSES},
    )
    def entries(self, request: Request, id: str) -> Response:
        """``{actor, at, surface}`` rows, newest first (keyset on the entry id); ``actor`` is
        the full name, else the username, never the e-mail; ``total`` counts the entries."""
        binding = CursorBinding("access-log", str(self.conversation.pk))
        after = _int_key(binding.read(request.query_params.get("cursor")), 1)
        limit = page_limit(request.query_params)
        entries = access_log(self.conversation)
        total = entries.count()
        if after is not None:
            entries = entries.filter(pk__lt=after[0])
        fetched = list(entries[: limit + 1])
        page = keyset_page(fetched, limit=limit, binding=binding, key_of=lambda e: [e.pk])
        results = [
            {"actor": e.actor_name, "at": iso(e.at), "surface": e.surface} for e in page.rows
        ]
        return Response(body(results, page, total))


def _conversation_key(key: list[Any]) -> tuple[bool, datetime, uuid.UUID, datetime]:
    """``(pinned, saved_at, id, walk start)`` of a conversation-list cursor."""
    try:
        pinned, saved_at, pk, started = key
        if pinned not in (0, 1) or isinstance(pinned, bool):
            raise ValueError("pinned")
        return (
            bool(pinned),
            datetime.fromisoformat(saved_at.replace("Z", "+00:00")),
            uuid.UUID(pk),
            datetime.fromisoformat(started.replace("Z", "+00:00")),
        )
    except (TypeError, ValueError, AttributeError):
        raise InvalidCursor(
            "cursor is not valid for this listing; start again without it"
        ) from None


class RecordViewSet(ConversationViewSet):
    """``GET conversations/{id}/record/`` for users and plug-in hooks (docs/hooks.md).

    Authenticates with ``[MurmurHookAuthentication, *host classes]``. For a hook request the
    conversation must be the token's (else the same 404 as a missing one), then the hook needs its
    grant (else 403 ``not_granted``), re-checked on every request; the page itself is
    ``ConversationViewSet.record``.
    """

    permission_classes = (IsActiveUserOrHook,)

    def get_authentication_classes(self) -> list[type[BaseAuthentication]]:
        """The hook scheme first, then the host's classes."""
        return [MurmurHookAuthentication, *super().get_authentication_classes()]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        token = hook_token(request)  # authenticates the request
        if token is None:
            super().initial(request, *args, **kwargs)
            return
        super(ConversationScopedViewSet, self).initial(request, *args, **kwargs)
        self.check_method_allowed(request)
        conversation = conversation_for_hook(
            token.conversation_id, kwargs.get(self.lookup_url_kwarg)
        )
        if conversation is None:
            raise ConversationGone()
        if not is_granted(token.hook):
            raise NotGranted()
        self.conversation = conversation

    def _scope(self) -> str:
        token = hook_token(self.request)
        base = super()._scope()
        return base if token is None else f"{base}:hook:{token.hook}"
