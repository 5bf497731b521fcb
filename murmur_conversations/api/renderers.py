"""The app's only renderer and a negotiation that always picks it (docs/api.md: always JSON,
whatever ``Accept`` or ``?format=`` say, and whatever the host's REST_FRAMEWORK settings are)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request

from murmur_conversations.jsonenc import clean_text


class CompactJSONRenderer(JSONRenderer):
    """Compact UTF-8 JSON (``application/json``), independent of the host's ``COMPACT_JSON``,
    ``UNICODE_JSON`` and ``STRICT_JSON``; no ``indent`` from the media type."""

    ensure_ascii = False
    compact = True
    strict = True

    def get_indent(self, accepted_media_type: str, renderer_context: Any) -> None:
        """Never indent: one byte-exact answer whatever the client asked for."""
        return None

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        """UTF-8 JSON of ``data``. Client text echoed in an answer (an unknown id in an error
        message) may hold a lone surrogate, which UTF-8 cannot encode: such strings are written
        with U+FFFD in its place (``jsonenc.clean_text``), never a 500."""
        try:
            rendered: bytes = super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            rendered = super().render(_clean_strings(data), accepted_media_type, renderer_context)
        return rendered


def _clean_strings(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {_clean_strings(k): _clean_strings(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean_strings(item) for item in value]
    return value


class FixedContentNegotiation(BaseContentNegotiation):
    """Picks the view's first renderer and parser, ignoring ``Accept`` and ``?format=``."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        """The first parser whose media type matches the request's content type, else None
        (DRF then answers 415)."""
        content_type = request.content_type.split(";", 1)[0].strip().lower()
        for parser in parsers:
            if parser.media_type == content_type:
                return parser
        return None

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        """Always ``(the first renderer, its media type)``."""
        renderer = next(iter(renderers))
        return renderer, str(renderer.media_type)
