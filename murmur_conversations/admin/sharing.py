"""Admins of share links, feedback and tags (docs/admin.md): read-only like the rest; share links
can be revoked (``services.revoke_share``) by staff with ``murmur_conversations.revoke_share``."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from murmur_conversations import services
from murmur_conversations.admin.base import ReadOnlyAdmin, badge, pre
from murmur_conversations.admin.rows import ConversationRowAdmin
from murmur_conversations.exceptions import InvalidContent, ShareNotFound
from murmur_conversations.models import AccessSurface, ConversationTag, Feedback, Share
from murmur_conversations.validation import clean_tag


class ShareStateFilter(admin.SimpleListFilter):
    """Share links that are active, expired or revoked (``?state=``)."""

    title = _("state")
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        """The three states."""
        return [("active", _("active")), ("expired", _("expired")), ("revoked", _("revoked"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """Keep the links in the chosen state; an unknown value is the admin's ``?e=1``."""
        value, now = self.value(), timezone.now()
        if value is None:
            return queryset
        if value == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        if value == "expired":
            return queryset.filter(revoked_at__isnull=True, expires_at__lte=now)
        if value == "active":
            return queryset.filter(revoked_at__isnull=True).filter(
                Q(expires_at__isnull=True) | Q(expires_at__gt=now)
            )
        raise IncorrectLookupParameters(f"unknown state {value!r}")


@admin.register(Share)
class ShareAdmin(ConversationRowAdmin):
    """Share links, newest first: their state, mode and expiry (never their token, which is not
    stored); the action revokes the selected links at once."""

    list_display = (
        "id",
        "state_badge",
        "mode",
        "require_login",
        "conversation_link",
        "created_by",
        "created_at",
        "expires_at",
        "revoked_at",
    )
    list_display_links = ("id",)
    list_filter = ("mode", "require_login", ShareStateFilter)
    list_select_related = ("created_by",)
    list_defer = ("snapshot",)
    ordering = ("-created_at", "-id")
    raw_id_fields = ("created_by",)
    fields = (
        "id",
        "conversation",
        "mode",
        "require_login",
        "created_by",
        "snapshot_event_seq",
        "frozen_rows",
        "created_at",
        "expires_at",
        "revoked_at",
        "snapshot_pretty",
    )
    actions = ("revoke_selected",)

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        """Staff with ``murmur_conversations.revoke_share``."""
        return bool(request.user.has_perm("murmur_conversations.revoke_share"))

    @admin.action(description="Revoke selected share links", permissions=["revoke"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[Share]) -> None:
        """Each selected link through ``services.revoke_share`` (already revoked: unchanged)."""
        count = 0
        for pk in list(queryset.filter(revoked_at__isnull=True).values_list("pk", flat=True)):
            try:
                services.revoke_share(share=pk)
            except ShareNotFound:
                continue  # deleted meanwhile
            count += 1
        self.message_user(request, f"Revoked {count} share link(s).", messages.SUCCESS)

    @admin.display(description="state")
    def state_badge(self, obj: Share) -> SafeString:
        """active, expired or revoked."""
        if obj.revoked_at is not None:
            return badge("cancelled", "revoked")
        if obj.expires_at is not None and obj.expires_at <= timezone.now():
            return badge("interrupted", "expired")
        return badge("completed", "active")

    @admin.display(description="frozen rows")
    def frozen_rows(self, obj: Share) -> int:
        """How many display rows a snapshot link froze."""
        return obj.rows.count()

    @admin.display(description="snapshot summary")
    def snapshot_pretty(self, obj: Share) -> SafeString | str:
        """The conversation's summary as the snapshot froze it."""
        return "-" if obj.snapshot is None else pre(obj.snapshot)


class RatingFilter(admin.SimpleListFilter):
    """Feedback by rating (``?rating=1`` or ``-1``)."""

    title = _("rating")
    parameter_name = "rating"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        """Thumbs up and thumbs down."""
        return [("1", _("thumbs up")), ("-1", _("thumbs down"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """Keep the chosen rating; an unknown value is the admin's ``?e=1``."""
        value = self.value()
        if value is None:
            return queryset
        if value not in ("1", "-1"):
            raise IncorrectLookupParameters(f"unknown rating {value!r}")
        return queryset.filter(rating=int(value))


@admin.register(Feedback)
class FeedbackAdmin(ConversationRowAdmin):
    """Feedback on display rows, newest first; filtered by rating and date."""

    list_display = (
        "rating_badge",
        "preview",
        "user",
        "conversation_link",
        "row_link",
        "updated_at",
    )
    list_display_links = ("rating_badge",)
    list_filter = (RatingFilter, ("updated_at", admin.DateFieldListFilter))
    list_select_related = ("user",)
    list_defer = ("comment",)
    preview_field = "comment"
    ordering = ("-updated_at", "-id")
    raw_id_fields = ("user", "display_message")
    fields = (
        "conversation",
        "display_message",
        "user",
        "rating",
        "created_at",
        "updated_at",
        "comment_pretty",
    )

    @admin.display(description="rating", ordering="rating")
    def rating_badge(self, obj: Feedback) -> SafeString:
        """Thumbs up or down, as a badge."""
        return badge("completed", "+1") if obj.rating > 0 else badge("failed", "-1")

    @admin.display(description="display row")
    def row_link(self, obj: Feedback) -> SafeString:
        """A link to the rated display row, from the foreign key alone."""
        return format_html(
            '<a href="{}">row {}</a>',
            self.url_for("displaymessage", obj.display_message_id),
            obj.display_message_id,
        )

    @admin.display(description="comment")
    def comment_pretty(self, obj: Feedback) -> SafeString:
        """The whole comment."""
        return pre(obj.comment)


@admin.register(ConversationTag)
class ConversationTagAdmin(ReadOnlyAdmin):
    """Tags, by name: the search box takes a tag (exact, normalised like a stored tag)."""

    list_display = ("name", "conversation_link")
    list_display_links = ("name",)
    search_fields = ("=name",)  # shows the box; get_search_results does the work
    search_help_text = "Exact tag."
    link_lookups = frozenset({"conversation__id__exact"})
    #: Tags are the owners' words: their lists and pages are logged like a conversation's rows.
    list_surface = page_surface = AccessSurface.ADMIN_ROWS
    fields = ("name", "conversation")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        """The rows of exactly that tag (an index lookup); none for a term no tag can be."""
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            return queryset.filter(name=clean_tag(term)), False
        except InvalidContent:
            return queryset.none(), False
