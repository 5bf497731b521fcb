"""The admin of what the app keeps about its own keeping (docs/admin.md): redaction counts, legal
holds and the staff access log, all read-only (the logging of staff views is in ``.access``).
Their pages name a conversation by its id, never its title: they show no owner's content, so
reading them is not logged."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from murmur_conversations.admin.base import ReadOnlyAdmin
from murmur_conversations.models import AccessLogEntry, Hold, RedactionCount


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
    fields = ("conversation_link", "detector", "count")

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
    fields = ("conversation_link", "reason", "placed_by", "placed_at")
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
    fields = ("conversation_link", "actor", "actor_name", "surface", "at")
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
