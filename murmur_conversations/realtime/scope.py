"""Reading the ASGI scope of a websocket connection: query parameters and the session digest."""

from __future__ import annotations

import re
from typing import Any, Final
from urllib.parse import parse_qs

from murmur_conversations.tickets import session_digest

_DIGITS: Final = re.compile(r"[0-9]+")
#: The largest ``since`` a socket accepts: the largest event_seq a database column can hold.
MAX_SINCE: Final = 2**63 - 1

#: The subprotocol the server answers with when the client offers it (docs/websocket.md).
SUBPROTOCOL: Final = "murmur"


class InvalidSince(ValueError):
    """``since`` is present but not one integer from 0 to :data:`MAX_SINCE`."""


def query_values(scope: dict[str, Any], name: str) -> list[str] | None:
    """Every value of query parameter ``name`` (None when absent); undecodable bytes become U+FFFD."""
    raw = scope.get("query_string", b"")
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return parse_qs(text, keep_blank_values=True).get(name)


def since_of(scope: dict[str, Any]) -> int | None:
    """The ``since`` query parameter: None when absent, else one integer from 0 to
    :data:`MAX_SINCE` written in ASCII digits; ``InvalidSince`` otherwise (docs/websocket.md:
    close 4400). The digits are measured before any conversion, so a value of any length is an
    answer, never the interpreter's integer-conversion limit."""
    values = query_values(scope, "since")
    if values is None:
        return None
    if len(values) != 1 or not _DIGITS.fullmatch(values[0]):
        raise InvalidSince("since must be one integer >= 0")
    digits = values[0].lstrip("0") or "0"
    if len(digits) > len(str(MAX_SINCE)) or int(digits) > MAX_SINCE:
        raise InvalidSince("since is beyond any event_seq")
    return int(digits)


def session_of(scope: dict[str, Any]) -> str:
    """The digest of the session the connection was opened with: the ticket's, set by
    ``TicketMiddleware``, else the cookie session's; "" for none."""
    if "murmur_session" in scope:
        return str(scope["murmur_session"] or "")
    session = scope.get("session")
    return session_digest(getattr(session, "session_key", None))
