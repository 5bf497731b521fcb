"""The admin of what the app keeps about its own keeping (docs/admin.md): redaction counts, legal
holds and the staff access log, all read-only; and the access logging of every admin page that
shows a conversation's content to someone who does not own it."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from murmur_conversations import services
from murmur_conversations.admin.base import ReadOnlyAdmin
from murmur_conversations.exceptions import ConversationNotFound, WriteConflict
from murmur_conversations.models import AccessLogEntry, Conversation, Hold, RedactionCount

#: What an admin page answers when its view cannot be written to the access log.
UNLOGGED = "The access log could not be written (the database is busy); try again."


def log_views(
    request: HttpRequest, conversation_ids: Iterable[Any], surface: str
) -> HttpResponse | None:
    """One access log entry per conversation in ``conversation_ids`` that the staff member does
    not own (``services.log_access``); None when done, a 503 page when the log could not be
    written (a view that cannot be logged is not shown)."""
    ids = list(dict.fromkeys(conversation_ids))
    if not ids:
        return None
    owners = list(Conversation.objects.filter(pk__in=ids).values_list("pk", "owner_id"))
    try:
        if len(owners) == 1:
            pk, owner_id = owners[0]
            if owner_id != request.user.pk:
                services.log_access(conversation=pk, actor=request.user, surface=surface)
        elif owners:
            services.log_accesses(conversations=owners, actor=request.user, surface=surface)
    except ConversationNotFound:
        return None  # deleted meanwhile: the page will say so
    except WriteConflict:
        return HttpResponse(UNLOGGED, status=503, content_type="text/plain; charset=utf-8")
    return None


@admin.register(RedactionCount)
class RedactionCountAdmin(ReadOnlyAdmin):
    """Secrets replaced at write time, per conversation and detector; filter by detector for one
    detector's conversations (docs/write-path.md "Redaction")."""

    list_display = ("detector", "count", "conversation_link")
    list_filter = ("detector",)
    link_lookups = frozenset({"conversation__id__exact"})
    search_fields = ("=conversation__id",)
    search_help_text = "Exact conversation id."
    ordering = ("detector", "-count")
    fields = ("conversation", "detector", "count")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        """Counts of the conversation whose id is ``search_term``; none for anything else."""
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            return queryset.filter(conversation_id=uuid.UUID(term)), False
        except ValueError:
            return queryset.none(), False


@admin.register(Hold)
class HoldAdmin(ReadOnlyAdmin):
    """Conversations under a legal hold. Holds are placed and released on the conversation's
    page (``services.place_hold`` / ``release_hold``), by staff with ``manage_holds``."""

    list_display = ("conversation_link", "reason_short", "placed_by", "placed_at")
    list_select_related = ("placed_by",)
    fields = ("conversation", "reason", "placed_by", "placed_at")
    raw_id_fields = ("placed_by",)

    @admin.display(description="reason")
    def reason_short(self, obj: Hold) -> str:
        """The reason, cut to 80 characters."""
        return obj.reason if len(obj.reason) <= 80 else obj.reason[:80] + "…"


@admin.register(AccessLogEntry)
class AccessLogEntryAdmin(ReadOnlyAdmin):
    """Who read which conversation they do not own, where and when; per conversation
    (``?conversation__id__exact=``) and per staff member (``?actor__id__exact=``, the actor
    links). Nobody can add, change or delete an entry here."""

    list_display = ("at", "actor_link", "surface", "conversation_link")
    list_filter = ("surface",)
    link_lookups = frozenset({"conversation__id__exact", "actor__id__exact"})
    search_fields = ("=conversation__id",)
    search_help_text = "Exact conversation id, or the exact username of a staff member."
    fields = ("conversation", "actor", "actor_name", "surface", "at")
    raw_id_fields = ("actor",)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        """Entries of the conversation whose id is ``search_term``, else of the staff member
        whose username it is."""
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            return queryset.filter(conversation_id=uuid.UUID(term)), False
        except ValueError:
            model = get_user_model()
            users = model._default_manager.filter(**{model.USERNAME_FIELD: term}).values("pk")
            return queryset.filter(actor__in=users), False

    @admin.display(description="actor", ordering="actor_name")
    def actor_link(self, obj: AccessLogEntry) -> SafeString | str:
        """The actor's name as logged, linked to all of that staff member's entries."""
        if obj.actor_id is None:
            return obj.actor_name
        query = urlencode({"actor__id__exact": obj.actor_id})
        return format_html('<a href="?{}">{}</a>', query, obj.actor_name)
