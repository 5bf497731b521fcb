"""The API's routes (docs/api.md); the host mounts them, e.g. under ``/api/``.

Conversation ids are matched as any single path segment (``<str:id>``) so that malformed ids reach
the view and get the same 404 as foreign and missing ones.
"""

from __future__ import annotations

from django.urls import path

from murmur_conversations.api.exports import ExportViewSet
from murmur_conversations.api.feedback import FeedbackViewSet
from murmur_conversations.api.forks import ForkViewSet
from murmur_conversations.api.search import SearchView
from murmur_conversations.api.session_wire import SessionWireView
from murmur_conversations.api.shares import SharedView, ShareViewSet
from murmur_conversations.api.usage import UsageView
from murmur_conversations.api.viewsets import (
    AccessLogViewSet,
    ConversationViewSet,
    RecordViewSet,
)
from murmur_conversations.api.ws_ticket import WsTicketView

app_name = "murmur_conversations"

_DETAIL = "conversations/<str:id>/"

urlpatterns = [
    path(
        "conversations/",
        ConversationViewSet.as_view({"get": "page"}),
        name="conversation-list",
    ),
    path(
        _DETAIL,
        ConversationViewSet.as_view(
            {"get": "retrieve", "patch": "partial_update", "delete": "destroy"}
        ),
        name="conversation-detail",
    ),
    path(
        _DETAIL + "display-messages/",
        ConversationViewSet.as_view({"get": "display_messages"}),
        name="conversation-display-messages",
    ),
    path(
        _DETAIL + "record/",
        RecordViewSet.as_view({"get": "record"}),
        name="conversation-record",
    ),
    path(
        _DETAIL + "transcript/",
        ConversationViewSet.as_view({"get": "transcript"}),
        name="conversation-transcript",
    ),
    path(
        _DETAIL + "pending/",
        ConversationViewSet.as_view({"get": "pending"}),
        name="conversation-pending",
    ),
    path(
        _DETAIL + "pending/answer/",
        ConversationViewSet.as_view({"post": "answer_pending"}),
        name="conversation-pending-answer",
    ),
    path(
        _DETAIL + "export/",
        ExportViewSet.as_view({"get": "export"}),
        name="conversation-export",
    ),
    path(
        _DETAIL + "tool-calls/",
        ConversationViewSet.as_view({"get": "tool_calls"}),
        name="conversation-tool-calls",
    ),
    path(
        _DETAIL + "access-log/",
        AccessLogViewSet.as_view({"get": "entries"}),
        name="conversation-access-log",
    ),
    path("search/", SearchView.as_view(), name="search"),
    path("usage/", UsageView.as_view(), name="usage"),
    path(
        _DETAIL + "display-messages/<str:display_id>/feedback/",
        FeedbackViewSet.as_view({"put": "put", "delete": "delete"}),
        name="conversation-feedback",
    ),
    path(
        _DETAIL + "fork/",
        ForkViewSet.as_view({"post": "fork"}),
        name="conversation-fork",
    ),
    path(
        _DETAIL + "shares/",
        ShareViewSet.as_view({"get": "links", "post": "create"}),
        name="conversation-shares",
    ),
    path(
        _DETAIL + "shares/<str:share_id>/",
        ShareViewSet.as_view({"delete": "revoke"}),
        name="conversation-share",
    ),
    path("shared/<str:token>/", SharedView.as_view(), name="shared"),
    path("ws-ticket/", WsTicketView.as_view(), name="ws-ticket"),
    path("session/", SessionWireView.as_view(), name="session"),
]
