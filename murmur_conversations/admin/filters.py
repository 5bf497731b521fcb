"""Changelist filters that cost no query to draw (docs/admin.md).

Neither lists the values of a large table: the tool-status filter offers the fixed statuses, the
tool-name filter only echoes the name already chosen (from the search box or a name link).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from murmur_conversations.models import ToolCall, ToolStatus


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
