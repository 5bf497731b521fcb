"""``GET conversations/{id}/export/?format=NAME`` (docs/api.md "Export"): the conversation in one
of the export formats of ``export_conversation`` (docs/formats.md), as a download of exactly the
bytes the command writes. Scoped like every read: a foreign id is the same 404 as a missing one.

``ag-ui`` and ``openai-items`` also come in cursor pages (``limit``/``cursor``): each record
message becomes its own messages or items there, so a page of record messages is a page of the
list. ``otlp-json`` is JSON Lines (one OTLP trace export request per line); ``otlp-proto``, binary
frames, is not served (the route's bodies are text). The others are one body only: ``vercel-ui`` folds a tool result into the message that made
its call, wherever the result stands; murmur, OpenAI and Anthropic lists are documents a client
reads whole (an Anthropic list folds runs of results into one message).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from django.http import HttpResponse
from rest_framework.request import Request
from rest_framework.response import Response

from murmur_conversations.api.exceptions import InvalidCursor, InvalidField
from murmur_conversations.api.pagination import CursorBinding, body, keyset_page, page_limit
from murmur_conversations.api.params import query_value
from murmur_conversations.api.schema import (
    CURSOR_PARAM,
    ID_PARAM,
    Param,
    choice,
    document,
    free_form,
)
from murmur_conversations.api.viewsets import ERROR_RESPONSES, ConversationViewSet
from murmur_conversations.exporters import EXPORTERS, export_murmur
from murmur_conversations.frontends.ag_ui import to_ag_ui
from murmur_conversations.frontends.openai_items import to_openai_items
from murmur_conversations.models import AccessSurface, Conversation, Message
from murmur_conversations.representations import record_message

FORMAT_PARAM = Param(
    "format",
    choice(*EXPORTERS),
    "query",
    "murmur (default; JSON Lines), openai, anthropic, vercel-ui, ag-ui, openai-items or "
    "otlp-json (JSON Lines of OTLP trace export requests; otlp-proto is the command's only).",
)
PAGE_LIMIT_PARAM = Param(
    "limit",
    str,
    "query",
    "ag-ui and openai-items only: a page of this many record messages (clamped to "
    "1..MAX_PAGE_SIZE) instead of the whole list.",
)
#: ``format -> (media type, file name extension)`` of the download.
MEDIA: Final = {
    "murmur": ("application/x-ndjson", "jsonl"),
    "otlp-json": ("application/x-ndjson", "jsonl"),
}
JSON_MEDIA: Final = ("application/json", "json")
#: The body's schema per media type: JSON Lines for murmur and otlp-json, one JSON document for
#: the others.
EXPORT_BODIES: Final = {
    (200, "application/json"): free_form("json"),
    (200, "application/x-ndjson"): free_form("text"),
}
#: The formats that come in pages: record messages (dicts, in order) -> that page's list.
PAGED: Final[dict[str, Callable[[list[dict[str, Any]], Conversation], list[dict[str, Any]]]]] = {
    "ag-ui": lambda records, c: to_ag_ui(records, conversation_id=str(c.pk)),
    "openai-items": lambda records, _c: to_openai_items(records),
}


class ExportViewSet(ConversationViewSet):
    """The export route; the conversation is resolved (and scoped) by the base class. A
    ``SCOPE`` reader who is not the owner reads the record: written to the access log
    (``api-record``) first."""

    @document(
        summary="The conversation in an export format, as the export_conversation command writes it",
        params=[ID_PARAM, FORMAT_PARAM, PAGE_LIMIT_PARAM, CURSOR_PARAM],
        responses={**EXPORT_BODIES, **ERROR_RESPONSES},
    )
    def export(self, request: Request, id: str) -> HttpResponse:
        """The bytes of ``exporters.EXPORTERS[format]`` (murmur with its feedback lines), with
        ``Content-Disposition: attachment``; with ``limit`` or ``cursor`` (``ag-ui``,
        ``openai-items``) a page ``{"results", "next_cursor", "total"}`` instead. 400
        ``invalid_field`` for an unknown format, ``invalid_cursor`` for a bad cursor."""
        name = query_value(request.query_params, "format") or "murmur"
        exporter = EXPORTERS.get(name)
        if exporter is None:
            raise InvalidField(f"unknown format {name!r}; use one of {', '.join(EXPORTERS)}")
        paged = name in PAGED and any(
            query_value(request.query_params, p) for p in ("limit", "cursor")
        )
        if paged:
            return self._page(request, name)
        self._log_view(AccessSurface.API_RECORD)
        lines = (
            export_murmur(self.conversation)
            if exporter is export_murmur
            else exporter(self.conversation)
        )
        media, extension = MEDIA.get(name, JSON_MEDIA)
        response = HttpResponse("".join(lines), content_type=f"{media}; charset=utf-8")
        filename = f"{self.conversation.pk}.{name}.{extension}"
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response

    def _page(self, request: Request, name: str) -> Response:
        """``limit`` record messages after the cursor's position, oldest first, as that format's
        list; ``total`` is ``record_length`` (record messages, not list entries)."""
        binding = CursorBinding("export", self._scope(), (("format", name),))
        key = binding.read(request.query_params.get("cursor"))
        if key is not None and (len(key) != 1 or type(key[0]) is not int):
            raise InvalidCursor("cursor is not valid for this listing; start again without it")
        limit = page_limit(request.query_params)
        self._log_view(AccessSurface.API_RECORD)
        after = key[0] if key else 0
        fetched = list(
            Message.objects.filter(conversation=self.conversation, position__gt=after).order_by(
                "position"
            )[: limit + 1]
        )
        page = keyset_page(fetched, limit=limit, binding=binding, key_of=lambda m: [m.position])
        results = PAGED[name]([record_message(m) for m in page.rows], self.conversation)
        return Response(body(results, page, self.conversation.record_length))
