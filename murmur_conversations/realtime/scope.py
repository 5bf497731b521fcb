"""Reading the ASGI scope of a websocket connection: query parameters and the session digest."""

from __future__ import annotations

import re
from typing import Any, Final
from urllib.parse import parse_qs

from murmur_conversations.tickets import session_digest

_DIGITS: Final = re.compile(r"[0-9]+")


class InvalidSince(ValueError):
    """``since`` is present but not one integer >= 0."""


def query_values(scope: dict[str, Any], name: str) -> list[str] | None:
    """Every value of query parameter ``name`` (None when absent); undecodable bytes become U+FFFD."""
    raw = scope.get("query_string", b"")
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return parse_qs(text, keep_blank_values=True).get(name)


def since_of(scope: dict[str, Any]) -> int | None:
    """The ``since`` query parameter: None when absent, else one integer >= 0 written in ASCII
    digits; ``InvalidSince`` otherwise (docs/websocket.md: close 4400)."""
    values = query_values(scope, "since")
    if values is None:
        return None
    if len(values) != 1 or not _DIGITS.fullmatch(values[0]):
        raise InvalidSince(values)
    return int(values[0])


def session_of(scope: dict[str, Any]) -> str:
    """The digest of the session the connection was opened with: the ticket's, set by
    ``TicketMiddleware``, else the cookie session's; "" for none."""
    if "murmur_session" in scope:
        return str(scope["murmur_session"] or "")
    session = scope.get("session")
    return session_digest(getattr(session, "session_key", None))
