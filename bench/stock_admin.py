"""A stock ``ModelAdmin`` site for the admin row: what a Django user registers first (list
columns, a filter, a search box), on its own ``AdminSite`` so ours stays as the app ships it."""

from __future__ import annotations

from django.contrib import admin

from murmur_conversations.models import Conversation, Message

site = admin.AdminSite(name="stock_admin")


class StockConversationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("id", "title", "owner", "status", "record_length", "saved_at")
    list_filter = ("status",)
    search_fields = ("title",)


class StockMessageAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("conversation", "position", "role", "message_id", "created_at")
    list_filter = ("is_error",)


site.register(Conversation, StockConversationAdmin)
site.register(Message, StockMessageAdmin)
