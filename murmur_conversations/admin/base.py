"""The read-only admin base shared by every model of the app (docs/admin.md).

No add and no change for anyone (every write goes through ``services``), no delete unless a
subclass allows it; changelists count cheaply (:mod:`.pagination`), never compute facets, never
offer "show all", and select previews instead of whole payloads. An admin whose rows show an
owner's content (``list_surface``/``page_surface`` set) writes every page that shows them to the
access log before showing it: the list (its search included), a row's page, its history, its
delete confirmation and the delete action's (docs/admin.md "The access log").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeAlias

from django.contrib import admin
from django.contrib.admin import helpers
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.contrib.admin.utils import flatten_fieldsets
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet, TextField
from django.db.models.functions import Cast, Substr
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from murmur_conversations.admin.access import log_views
from murmur_conversations.admin.cards import pretty
from murmur_conversations.admin.pagination import EstimatedCountPaginator
from murmur_conversations.models import AccessSurface

if TYPE_CHECKING:
    ModelAdminBase: TypeAlias = admin.ModelAdmin[Any]
else:
    ModelAdminBase = admin.ModelAdmin

#: Characters of a payload shown in a changelist column.
LIST_PREVIEW_CHARS: Final = 120


class LeanChangeList(ChangeList):
    """A ChangeList whose queryset goes through the admin's ``lean_queryset`` (defers payload
    columns and adds a short preview), so a list page never loads whole payloads.

    It also refuses, the way Django's admin refuses a lookup on an unknown field (the ``?e=1``
    redirect, ``IncorrectLookupParameters``), every query the admin does not offer: a lookup that
    is neither a list filter's nor one of the admin's ``link_lookups`` (``?metadata__contains=``
    never reaches the database), a value outside a choices filter's choices, and a NUL character
    anywhere in the query string (PostgreSQL cannot compare text with one).
    """

    def get_filters(self, request: HttpRequest) -> tuple[Any, ...]:
        """Django's filter specs and remaining lookups, after the checks of the class docstring."""
        for key, values in request.GET.lists():
            if "\x00" in key or any("\x00" in value for value in values):
                raise IncorrectLookupParameters("a NUL character in the query string")
        filters = super().get_filters(request)
        specs, remaining = filters[0], filters[2]
        offered: frozenset[str] = getattr(self.model_admin, "link_lookups", frozenset())
        unknown = sorted(key for key in remaining if key not in offered)
        if unknown:
            raise IncorrectLookupParameters(f"{unknown[0]} is not a filter of this list")
        for spec in specs:
            if isinstance(spec, admin.ChoicesFieldListFilter) and spec.lookup_val is not None:
                allowed = {str(value) for value, _label in spec.field.flatchoices}
                if any(value not in allowed for value in spec.lookup_val):
                    raise IncorrectLookupParameters(f"unknown value of {spec.lookup_kwarg}")
        return filters

    def get_queryset(
        self, request: HttpRequest, exclude_parameters: list[str | None] | None = None
    ) -> QuerySet[Any]:
        """The filtered, searched and ordered rows, made lean."""
        queryset = super().get_queryset(request, exclude_parameters)
        model_admin = self.model_admin
        if isinstance(model_admin, ReadOnlyAdmin):
            queryset = model_admin.lean_queryset(queryset)
        return queryset


class ReadOnlyAdmin(ModelAdminBase):
    """View-only ModelAdmin: no add, change or delete; cheap counts; lean list queries.

    ``list_defer`` names the columns a changelist never loads; ``preview_field`` the column whose
    first ``LIST_PREVIEW_CHARS`` characters the ``preview`` column shows (cut in the database).
    """

    paginator = EstimatedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_max_show_all = 0
    list_per_page = 50
    list_defer: ClassVar[tuple[str, ...]] = ()
    preview_field: ClassVar[str | None] = None
    #: Lookups besides the list filters' that the admin's own links put in a changelist URL.
    link_lookups: ClassVar[frozenset[str]] = frozenset()
    #: The access-log surface of a list page and of a row's page, for admins whose rows show an
    #: owner's content; None: the rows show none, nothing is logged.
    list_surface: ClassVar[str | None] = None
    page_surface: ClassVar[str | None] = None

    class Media:
        css: ClassVar[dict[str, tuple[str, ...]]] = {"all": ("murmur_conversations/admin.css",)}

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Never: rows are written by the services only."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        """Never: rows are written by the services only."""
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        """Never, unless a subclass says otherwise."""
        return False

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        """Django's action handling, with the selected ids that cannot name a row (not a valid
        primary key) dropped first, like ids of rows that no longer exist: Django would pass them
        to ``pk__in`` and answer 500. Nothing valid left is Django's "Items must be selected".
        A page an action shows (the delete action's confirmation) is logged as ``admin-delete``."""
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        valid = [value for value in selected if self._names_a_row(value)]
        if len(valid) != len(selected):
            post = request.POST.copy()
            post.setlist(helpers.ACTION_CHECKBOX_NAME, valid)
            request.POST = post  # type: ignore[assignment]  # a QueryDict, as Django's
        response = super().response_action(request, queryset, *args, **kwargs)
        shown = _context(response).get("queryset")
        if shown is not None:
            return self.refused(request, shown, AccessSurface.ADMIN_DELETE) or response
        return response

    # ------------------------------------------------------------------ the access log

    def conversations_of(self, rows: Iterable[Any]) -> list[Any]:
        """The conversation ids of ``rows`` of this admin's model (their ``conversation_id``)."""
        return [row.conversation_id for row in rows]

    def surface_of_list(self, request: HttpRequest) -> str | None:
        """The access-log surface of a list page: ``list_surface``."""
        return self.list_surface

    def refused(
        self, request: HttpRequest, rows: Iterable[Any], surface: str | None
    ) -> HttpResponse | None:
        """Write the conversations of ``rows``, about to be shown, to the access log as
        ``surface`` (only when this admin's rows show content: ``page_surface`` set); None when
        done, else the 503 page to answer instead (a view that cannot be logged is not shown)."""
        if surface is None or self.page_surface is None:
            return None
        return log_views(request, self.conversations_of(rows), surface)

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        """Django's list; the page is logged once per conversation on it (its search results
        too: a search tells whether a conversation holds the words)."""
        response = super().changelist_view(request, extra_context)
        changelist = _context(response).get("cl") if request.method == "GET" else None
        if changelist is None:
            return response
        surface = self.surface_of_list(request)
        return self.refused(request, changelist.result_list, surface) or response

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> Any:
        """Django's page of one row, logged as ``page_surface``."""
        response = super().change_view(request, object_id, form_url, extra_context)
        row = _context(response).get("original")
        return self._refused_row(request, row, self.page_surface) or response

    def history_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> Any:
        """Django's history page of one row (it names the row), logged as ``admin-history``."""
        response = super().history_view(request, object_id, extra_context)
        row = _context(response).get("object")
        return self._refused_row(request, row, AccessSurface.ADMIN_HISTORY) or response

    def delete_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> Any:
        """Django's delete page; its confirmation (which shows the row) logged as
        ``admin-delete``."""
        response = super().delete_view(request, object_id, extra_context)
        row = _context(response).get("object")
        return self._refused_row(request, row, AccessSurface.ADMIN_DELETE) or response

    def _refused_row(
        self, request: HttpRequest, row: Any, surface: str | None
    ) -> HttpResponse | None:
        return None if row is None else self.refused(request, [row], surface)

    def _names_a_row(self, value: str) -> bool:
        pk_field = self.opts.pk
        assert pk_field is not None
        try:
            pk = pk_field.to_python(value)
        except ValidationError:
            return False
        return not isinstance(pk, int) or -(2**63) <= pk < 2**63

    def response_delete(self, request: HttpRequest, obj_display: str, obj_id: Any) -> HttpResponse:
        """Django's answer (the success message), but back to the changelist (with its filters)
        for anyone who may view it: Django sends users without the change permission, which
        nobody has here, to the admin index."""
        response = super().response_delete(request, obj_display, obj_id)
        if isinstance(response, HttpResponseRedirect) and self.has_view_permission(request):
            url = add_preserved_filters(
                {"preserved_filters": self.get_preserved_filters(request), "opts": self.opts},
                self.changelist_url(str(self.opts.model_name)),
            )
            return HttpResponseRedirect(url)
        return response

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        """Every field shown: nothing on these pages is a form input."""
        # From the declaration, not get_fieldsets(): that builds a form, which asks us again.
        shown = flatten_fieldsets(self.fieldsets) if self.fieldsets else list(self.fields or ())
        return [
            *self.readonly_fields,
            *(name for name in shown if name not in self.readonly_fields),
        ]

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        """:class:`LeanChangeList`."""
        return LeanChangeList

    def lean_queryset(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """``queryset`` without the ``list_defer`` columns, with ``preview_text`` annotated."""
        if self.list_defer:
            queryset = queryset.defer(*self.list_defer)
        if self.preview_field:
            text = Cast(self.preview_field, output_field=TextField())
            queryset = queryset.annotate(
                preview_text=Substr(text, 1, LIST_PREVIEW_CHARS + 1, output_field=TextField())
            )
        return queryset

    def url_for(self, model_name: str, pk: Any) -> str:
        """The admin change page of ``pk`` of this app's ``model_name`` on this admin site."""
        return reverse(
            f"{self.admin_site.name}:murmur_conversations_{model_name}_change", args=[pk]
        )

    def changelist_url(self, model_name: str) -> str:
        """The admin changelist of this app's ``model_name`` on this admin site."""
        return reverse(f"{self.admin_site.name}:murmur_conversations_{model_name}_changelist")

    @admin.display(description="conversation", ordering="conversation")
    def conversation_link(self, obj: Any) -> SafeString:
        """A link to the row's conversation, from the foreign key alone (no join, no query)."""
        pk = obj.conversation_id
        return format_html('<a href="{}">{}</a>', self.url_for("conversation", pk), str(pk)[:8])

    @admin.display(description="preview")
    def preview(self, obj: Any) -> str:
        """The first ``LIST_PREVIEW_CHARS`` characters of ``preview_field`` (escaped by the
        changelist), with an ellipsis when there is more."""
        text = str(getattr(obj, "preview_text", "") or "")
        if len(text) > LIST_PREVIEW_CHARS:
            return text[:LIST_PREVIEW_CHARS] + "…"
        return text


def _context(response: Any) -> dict[str, Any]:
    """The context of a page about to be rendered (a ``TemplateResponse``), else empty."""
    if isinstance(response, TemplateResponse):
        return dict(response.context_data or {})
    return {}


def pre(value: Any) -> SafeString:
    """``value`` whole (a string, or indented JSON) in an escaped ``<pre>`` block."""
    return format_html('<pre class="murmur-pre">{}</pre>', pretty(value))


def badge(value: str, label: Any = None) -> SafeString:
    """A status badge; ``value`` picks the colour, ``label`` (default ``value``) is shown."""
    return format_html(
        '<span class="murmur-badge murmur-status-{}">{}</span>',
        value,
        value if label is None else label,
    )
