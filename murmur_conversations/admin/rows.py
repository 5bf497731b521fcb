"""Admins of the rows inside a conversation: the record, display rows, tool calls and source
records (docs/admin.md). All read-only; lists never load whole payloads; change pages show
the whole value, escaped."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from murmur_conversations.admin.base import ReadOnlyAdmin, badge, pre
from murmur_conversations.admin.filters import ToolNameFilter
from murmur_conversations.models import (
    AccessSurface,
    DisplayMessage,
    Message,
    SourceRecord,
    ToolCall,
)


class ConversationRowAdmin(ReadOnlyAdmin):
    """Rows that belong to a conversation: the search box takes a conversation id (exact), and
    ``?conversation__id__exact=`` (the conversation page's links) narrows the list to one. Every
    page that shows rows to staff is written to the access log (``admin-rows``), once per
    conversation on it that they do not own (docs/admin.md "The access log")."""

    search_fields = ("=conversation__id",)  # shows the box; get_search_results does the work
    search_help_text = "Exact conversation id."
    link_lookups = frozenset({"conversation__id__exact"})
    list_surface = page_surface = AccessSurface.ADMIN_ROWS

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        """Rows of the conversation whose id is ``search_term``; none for anything else."""
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            pk = uuid.UUID(term)
        except ValueError:
            return queryset.none(), False
        return queryset.filter(conversation_id=pk), False


@admin.register(Message)
class MessageAdmin(ConversationRowAdmin):
    """The durable record, one row per message, in conversation order."""

    list_display = (
        "position",
        "role",
        "preview",
        "tool_call_id",
        "is_error",
        "conversation_link",
        "created_at",
    )
    list_display_links = ("position",)
    list_filter = ("is_error",)
    list_defer = ("content", "extra")
    preview_field = "content"
    fields = (
        "conversation",
        "position",
        "message_id",
        "role",
        "tool_call_id",
        "is_error",
        "source_id",
        "created_at",
        "display_rows",
        "content_pretty",
        "extra_pretty",
    )

    @admin.display(description="display rows")
    def display_rows(self, obj: Message) -> SafeString:
        """A link to the display rows made from this message."""
        query = urlencode({"message__id__exact": obj.pk})
        return format_html(
            '<a href="{}?{}">display rows</a>', self.changelist_url("displaymessage"), query
        )

    @admin.display(description="content")
    def content_pretty(self, obj: Message) -> SafeString:
        """The whole content."""
        return pre(obj.content)

    @admin.display(description="extra keys")
    def extra_pretty(self, obj: Message) -> SafeString:
        """The unknown top-level keys kept for export."""
        return pre(obj.extra)


@admin.register(DisplayMessage)
class DisplayMessageAdmin(ConversationRowAdmin):
    """Display rows (what people see), in conversation and ``seq`` order."""

    list_display = (
        "seq",
        "message_type",
        "content_type",
        "status_badge",
        "preview",
        "conversation_link",
        "event_seq",
        "updated_at",
    )
    list_display_links = ("seq",)
    list_filter = ("message_type", "content_type", "status")
    link_lookups = frozenset({"conversation__id__exact", "message__id__exact"})
    list_defer = ("content", "metadata")
    preview_field = "content"
    fields = (
        "conversation",
        "seq",
        "message_type",
        "content_type",
        "status",
        "tool_call",
        "message",
        "created_event_seq",
        "event_seq",
        "created_at",
        "updated_at",
        "content_pretty",
        "metadata_pretty",
    )

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: DisplayMessage) -> SafeString:
        """The status as a badge."""
        return badge(obj.status, obj.get_status_display())

    @admin.display(description="content")
    def content_pretty(self, obj: DisplayMessage) -> SafeString:
        """The whole content."""
        return pre(obj.content)

    @admin.display(description="metadata")
    def metadata_pretty(self, obj: DisplayMessage) -> SafeString:
        """The whole metadata."""
        return pre(obj.metadata)


@admin.register(ToolCall)
class ToolCallAdmin(ConversationRowAdmin):
    """Tool calls, newest first; filtered by status, interrupt reason and name (a name in the
    list links to the calls of that name)."""

    list_display = (
        "call_id",
        "name_link",
        "status_badge",
        "interrupt_reason",
        "conversation_link",
        "created_at",
        "finished_at",
    )
    list_display_links = ("call_id",)
    list_filter = ("status", "interrupt_reason", ToolNameFilter)
    list_defer = ("arguments", "result", "error", "display_text")
    ordering = ("-id",)
    fields = (
        "conversation",
        "call_id",
        "name",
        "status",
        "interrupt_reason",
        "display_text",
        "started_at",
        "finished_at",
        "event_seq",
        "created_at",
        "arguments_pretty",
        "result_pretty",
        "error_pretty",
    )

    @admin.display(description="name", ordering="name")
    def name_link(self, obj: ToolCall) -> SafeString:
        """The name, linked to the list of calls with that name."""
        return format_html('<a href="?{}">{}</a>', urlencode({"name": obj.name}), obj.name)

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: ToolCall) -> SafeString:
        """The status as a badge."""
        return badge(obj.status, obj.get_status_display())

    @admin.display(description="arguments")
    def arguments_pretty(self, obj: ToolCall) -> SafeString:
        """The whole arguments."""
        return pre(obj.arguments)

    @admin.display(description="result")
    def result_pretty(self, obj: ToolCall) -> SafeString | str:
        """The whole result."""
        return "-" if obj.result is None else pre(obj.result)

    @admin.display(description="error")
    def error_pretty(self, obj: ToolCall) -> SafeString | str:
        """The whole error."""
        return "-" if obj.error is None else pre(obj.error)


@admin.register(SourceRecord)
class SourceRecordAdmin(ConversationRowAdmin):
    """Imported log lines kept verbatim."""

    list_display = (
        "source_key",
        "source",
        "record_type",
        "line_number",
        "preview",
        "conversation_link",
        "created_at",
    )
    list_display_links = ("source_key",)
    list_defer = ("raw",)
    preview_field = "raw"
    fields = (
        "conversation",
        "source",
        "source_key",
        "record_type",
        "line_number",
        "created_at",
        "raw_pretty",
    )

    @admin.display(description="raw line")
    def raw_pretty(self, obj: SourceRecord) -> SafeString:
        """The whole stored line."""
        return pre(obj.raw)
