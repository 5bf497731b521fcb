"""Changelist filters that cost no query to draw (docs/admin.md).

None lists the values of a large table: the tool-status and feedback filters offer fixed values,
the tool-name and tag filters only echo the value already chosen (from a link).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from murmur_conversations.exceptions import InvalidContent
from murmur_conversations.models import ConversationTag, Feedback, Rating, ToolCall, ToolStatus
from murmur_conversations.selectors import held_condition
from murmur_conversations.validation import clean_tag


class ToolStatusFilter(admin.SimpleListFilter):
    """Conversations that have at least one tool call in the chosen status ("has failed tool
    calls" is ``?tool_status=failed``); an ``EXISTS`` on the ``(conversation, status)`` index."""

    title = _("tool calls")
    parameter_name = "tool_status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        """One choice per tool status: "has <status> tool calls"."""
        return [
            (value, _("has %(status)s tool calls") % {"status": str(label).lower()})
            for value, label in ToolStatus.choices
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """Keep the conversations with a call in the chosen status; an unknown value is
        ``IncorrectLookupParameters`` (the admin's ``?e=1`` redirect), as for a field filter."""
        value = self.value()
        if value is None:
            return queryset
        if value not in ToolStatus.values:
            raise IncorrectLookupParameters(f"unknown tool status {value!r}")
        calls = ToolCall.objects.filter(conversation=OuterRef("pk"), status=value)
        return queryset.filter(Exists(calls))


class ToolNameFilter(admin.SimpleListFilter):
    """Tool calls with exactly the chosen name (``?name=bash``). Shows only the chosen name, so
    drawing it never runs ``SELECT DISTINCT name`` over the whole table."""

    title = _("name")
    parameter_name = "name"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        """The chosen name only (nothing when no name is chosen)."""
        value = self.value()
        return [(value, value)] if value else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """Keep the calls with the chosen name."""
        value = self.value()
        return queryset.filter(name=value) if value else queryset


class HeldFilter(admin.SimpleListFilter):
    """Conversations under a legal hold (``?held=yes``) or not (``?held=no``);
    ``selectors.held_condition``, an ``EXISTS``."""

    title = _("legal hold")
    parameter_name = "held"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        """Held, not held."""
        return [("yes", _("under a legal hold")), ("no", _("not held"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """Keep the held or the other conversations; another value is ``?e=1``."""
        value = self.value()
        if value is None:
            return queryset
        if value == "yes":
            return queryset.filter(held_condition())
        if value == "no":
            return queryset.exclude(held_condition())
        raise IncorrectLookupParameters(f"unknown value of held: {value!r}")


class TagFilter(admin.SimpleListFilter):
    """Conversations with exactly the chosen tag (``?tag=work``), through the tag index. Shows only
    the chosen tag, so drawing it never lists every tag."""

    title = _("tag")
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        """The chosen tag only (nothing when no tag is chosen)."""
        value = self.value()
        return [(value, value)] if value else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """Keep the conversations with the chosen tag; a value no tag can be is the admin's
        ``?e=1``."""
        value = self.value()
        if value is None:
            return queryset
        try:
            tag = clean_tag(value)
        except InvalidContent:
            raise IncorrectLookupParameters(f"{value!r} is not a tag") from None
        return queryset.filter(
            pk__in=ConversationTag.objects.filter(name=tag).values("conversation_id")
        )


class FeedbackFilter(admin.SimpleListFilter):
    """Conversations with at least one thumbs up (``?feedback=up``) or down (``?feedback=down``);
    an ``EXISTS`` on the ``(conversation, rating)`` index."""

    title = _("feedback")
    parameter_name = "feedback"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        """Has thumbs up, has thumbs down."""
        return [("up", _("has thumbs up")), ("down", _("has thumbs down"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """Keep the conversations with that rating; an unknown value is the admin's ``?e=1``."""
        value = self.value()
        if value is None:
            return queryset
        if value not in ("up", "down"):
            raise IncorrectLookupParameters(f"unknown feedback {value!r}")
        rating = Rating.UP if value == "up" else Rating.DOWN
        return queryset.filter(
            Exists(Feedback.objects.filter(conversation=OuterRef("pk"), rating=rating))
        )
