"""Reading request input: ``since``, the tool-call ``status`` filter and the PATCH body
(docs/api.md). Each bad value raises its 400 with a message that says what to send."""

from __future__ import annotations

import re
from typing import Any, Final

from django.http import QueryDict

from murmur_conversations.api.exceptions import InvalidField, InvalidFilter, InvalidSince
from murmur_conversations.models import ToolStatus

_NON_NEGATIVE: Final = re.compile(r"[0-9]+")
#: event_seq is a 64-bit column; a larger ``since`` is simply after every event.
_MAX_EVENT_SEQ: Final = 2**63 - 1
PATCH_FIELDS: Final = frozenset({"title", "metadata"})


def read_since(query: QueryDict) -> int | None:
    """``since`` as an int (capped at 2**63-1), or None when absent; ``InvalidSince`` unless it is
    a base-10 integer >= 0."""
    raw = query.get("since")
    if raw is None:
        return None
    if not _NON_NEGATIVE.fullmatch(raw):
        raise InvalidSince("since must be an integer >= 0 (an event_seq)")
    digits = raw.lstrip("0") or "0"
    return _MAX_EVENT_SEQ if len(digits) > 19 else min(int(digits), _MAX_EVENT_SEQ)


def read_status_filter(query: QueryDict) -> str | None:
    """The tool-call ``status`` filter, or None when absent; ``InvalidFilter`` for a value that
    is not a tool status."""
    raw = query.get("status")
    if raw is None:
        return None
    if raw not in ToolStatus.values:
        raise InvalidFilter(f"status must be one of {', '.join(ToolStatus.values)}")
    return raw


def read_patch(data: Any) -> dict[str, Any]:
    """The fields of a PATCH body: a JSON object with ``title`` and/or ``metadata`` only;
    ``InvalidField`` for anything else. Values are checked by ``services.update_conversation``."""
    if not isinstance(data, dict):
        raise InvalidField("the body must be a JSON object with 'title' and/or 'metadata'")
    unknown = sorted(str(key) for key in data if key not in PATCH_FIELDS)
    if unknown:
        raise InvalidField(f"unknown field {unknown[0]!r}; only 'title' and 'metadata' can change")
    if "title" in data and not isinstance(data["title"], str):
        raise InvalidField("title must be a string of at most 255 characters")
    if "metadata" in data and not isinstance(data["metadata"], dict):
        raise InvalidField("metadata must be a JSON object")
    return dict(data)
