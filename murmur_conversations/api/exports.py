"""``GET conversations/{id}/export/?format=NAME`` (docs/api.md "Export"): the conversation in one
of the export formats of ``export_conversation`` (docs/formats.md), as a download of exactly the
bytes the command writes. Scoped like every read: a foreign id is the same 404 as a missing one.

One body, not cursor pages: every format is one document a client loads whole (useChat's
``messages``, AG-UI's ``messages``, a Conversations item list, a message list), and in
``vercel-ui`` a tool result folds into the message that made its call, wherever it stands.
"""

from __future__ import annotations

from typing import Final

from django.http import HttpResponse
from rest_framework.request import Request

from murmur_conversations.api.exceptions import InvalidField
from murmur_conversations.api.params import query_value
from murmur_conversations.api.schema import ID_PARAM, Param, document, free_form
from murmur_conversations.api.viewsets import ERROR_RESPONSES, ConversationViewSet
from murmur_conversations.exporters import EXPORTERS, export_murmur
from murmur_conversations.models import AccessSurface

FORMAT_PARAM: Param = (
    "format",
    str,
    "query",
    "murmur (default; JSON Lines), openai, anthropic, vercel-ui, ag-ui or openai-items.",
)
#: ``format -> (media type, file name extension)`` of the download.
MEDIA: Final = {"murmur": ("application/x-ndjson", "jsonl")}
JSON_MEDIA: Final = ("application/json", "json")
#: The body's schema per media type: JSON Lines for murmur, one JSON document for the others.
EXPORT_BODIES: Final = {
    (200, "application/json"): free_form("json"),
    (200, "application/x-ndjson"): free_form("text"),
}


class ExportViewSet(ConversationViewSet):
    """The export route; the conversation is resolved (and scoped) by the base class. A
    ``SCOPE`` reader who is not the owner reads the record: written to the access log
    (``api-record``) first."""

    @document(
        summary="The conversation in an export format, as the export_conversation command writes it",
        params=[ID_PARAM, FORMAT_PARAM],
        responses={**EXPORT_BODIES, **ERROR_RESPONSES},
    )
    def export(self, request: Request, id: str) -> HttpResponse:
        """The bytes of ``exporters.EXPORTERS[format]`` (murmur with its feedback lines), with
        ``Content-Disposition: attachment``. 400 ``invalid_field`` for an unknown format."""
        name = query_value(request.query_params, "format") or "murmur"
        exporter = EXPORTERS.get(name)
        if exporter is None:
            raise InvalidField(f"unknown format {name!r}; use one of {', '.join(EXPORTERS)}")
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
