"""The app's only renderer and a negotiation that always picks it (docs/api.md: always JSON,
whatever ``Accept`` or ``?format=`` say, and whatever the host's REST_FRAMEWORK settings are)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request

from murmur_conversations import jsonenc
from murmur_conversations.jsonenc import clean_text

#: U+2028 and U+2029 in UTF-8, and their escapes: DRF's renderer escapes both (JavaScript before
#: ES2019 reads them as line ends), so this one does.
_SEPARATORS: Final = ((b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029"))


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
        """UTF-8 JSON of ``data``: ``jsonenc.encode`` (once, no per-row work beyond it), with
        U+2028 and U+2029 escaped as DRF's ``JSONRenderer`` escapes them, so the bytes are DRF's.
        What ``jsonenc`` cannot write (a datetime, a ``Decimal``: DRF's encoder can) goes through
        DRF. Client text echoed in an answer (an unknown id in an error message) may hold a lone
        surrogate, which UTF-8 cannot encode: such strings are written with U+FFFD in its place
        (``jsonenc.clean_text``), never a 500."""
        if data is None:
            return b""
        try:
            body = jsonenc.encode(data)
        except (TypeError, ValueError, UnicodeEncodeError):
            return self._render_drf(data, accepted_media_type, renderer_context)
        for raw, escaped in _SEPARATORS:
            if raw in body:
                body = body.replace(raw, escaped)
        return body

    def _render_drf(
        self, data: Any, accepted_media_type: str | None, renderer_context: Any
    ) -> bytes:
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
