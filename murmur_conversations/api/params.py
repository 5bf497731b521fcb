"""Reading request input (docs/api.md): query parameters (``since``, the tool-call ``status``
filter) and JSON bodies (PATCH, the pending-ask answer). Each bad value raises its 400 with a
message that says what to send.

Query parameters: an empty value (``?status=``) is the same as leaving the parameter out, as in
stock DRF and django-filter. Bodies: a JSON object sent as ``application/json``; an empty body, a
body of another content type, or JSON that is not an object is ``InvalidField`` (400
``invalid_field``), never a 415.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any, Final

from django.core.exceptions import RequestDataTooBig
from django.http import QueryDict
from django.http.request import RawPostDataException
from rest_framework.request import Request

from murmur_conversations import jsonenc
from murmur_conversations.api.exceptions import (
    InvalidField,
    InvalidFilter,
    InvalidQuery,
    InvalidSince,
)
from murmur_conversations.exceptions import InvalidSearch
from murmur_conversations.models import ToolStatus
from murmur_conversations.search import SearchQuery, parse_query
from murmur_conversations.services import MAX_ANSWER_CHARS
from murmur_conversations.usage_report import Period

_NON_NEGATIVE: Final = re.compile(r"[0-9]+")
_DAY: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
GROUP_BY: Final = ("day", "model", "conversation")
#: event_seq is a 64-bit column; a larger ``since`` is simply after every event.
_MAX_EVENT_SEQ: Final = 2**63 - 1
PATCH_FIELDS: Final = frozenset({"title", "metadata"})
ANSWER_FIELDS: Final = frozenset({"answer", "event_seq"})
JSON_MEDIA_TYPE: Final = "application/json"


def query_value(query: QueryDict, name: str) -> str | None:
    """The (last) value of query parameter ``name``; None when it is absent or empty."""
    raw = query.get(name)
    return raw if raw else None


def read_since(query: QueryDict) -> int | None:
    """``since`` as an int (capped at 2**63-1), or None when absent or empty; ``InvalidSince``
    unless it is a base-10 integer >= 0."""
    raw = query_value(query, "since")
    if raw is None:
        return None
    if not _NON_NEGATIVE.fullmatch(raw):
        raise InvalidSince("since must be an integer >= 0 (an event_seq)")
    digits = raw.lstrip("0") or "0"
    return _MAX_EVENT_SEQ if len(digits) > 19 else min(int(digits), _MAX_EVENT_SEQ)


def read_status_filter(query: QueryDict) -> str | None:
    """The tool-call ``status`` filter, or None when absent or empty; ``InvalidFilter`` for a
    value that is not a tool status."""
    raw = query_value(query, "status")
    if raw is None:
        return None
    if raw not in ToolStatus.values:
        raise InvalidFilter(f"status must be one of {', '.join(ToolStatus.values)}")
    return raw


def decode_json(raw: bytes) -> Any:
    """The JSON value of ``raw`` (``jsonenc.loads``: UTF-8, -16 or -32, no ``NaN``/``Infinity``);
    ``ValueError`` for anything that is not strict JSON: empty bytes, a bad encoding, or nesting
    deeper than the interpreter can decode."""
    try:
        return jsonenc.loads(raw)
    except (ValueError, UnicodeError, RecursionError) as error:
        raise ValueError(str(error) or "not JSON") from None


def read_json_object(request: Request, *, expected: str) -> dict[str, Any]:
    """The JSON object in the body of ``request``; ``InvalidField`` naming ``expected`` (what the
    object holds) for a body that is empty, too large, of another content type than
    ``application/json`` (parameters such as ``charset`` are ignored), not JSON, or not an object.
    """
    content_type = (request.content_type or "").split(";", 1)[0].strip().lower()
    try:
        raw = request._request.body
    except RequestDataTooBig:
        raise InvalidField(
            "the body is larger than the server accepts (DATA_UPLOAD_MAX_MEMORY_SIZE)"
        ) from None
    except RawPostDataException:  # pragma: no cover - nothing reads the stream before us
        raise InvalidField(f"the body must be a JSON object with {expected}") from None
    if not raw.strip():
        raise InvalidField(f"the body is empty; send a JSON object with {expected}")
    if content_type != JSON_MEDIA_TYPE:
        raise InvalidField(
            f"the body must be a JSON object with {expected}, sent as Content-Type: "
            f"{JSON_MEDIA_TYPE}"
        )
    try:
        data = decode_json(raw)
    except ValueError:
        raise InvalidField(
            f"the body is not valid JSON; send a JSON object with {expected}"
        ) from None
    if not isinstance(data, dict):
        raise InvalidField(f"the body must be a JSON object with {expected}")
    return data


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


def read_answer(data: Any) -> tuple[str, int | None]:
    """``(answer, event_seq or None)`` of a ``POST pending/answer/`` body: ``answer`` a string,
    ``event_seq`` (optional, null is absent) an integer >= 0, no other key; ``InvalidField``
    otherwise. ``services.answer_pending_ask`` checks the answer's value (non-blank, at most
    ``MAX_ANSWER_CHARS`` characters) and repairs bad text."""
    if not isinstance(data, dict):
        raise InvalidField("the body must be a JSON object with 'answer' and maybe 'event_seq'")
    unknown = sorted(str(key) for key in data if key not in ANSWER_FIELDS)
    if unknown:
        raise InvalidField(f"unknown field {unknown[0]!r}; send 'answer' and maybe 'event_seq'")
    answer = data.get("answer")
    if not isinstance(answer, str):
        raise InvalidField(
            f"answer is required: a non-blank string of at most {MAX_ANSWER_CHARS} characters"
        )
    event_seq = data.get("event_seq")
    if event_seq is not None and (
        isinstance(event_seq, bool) or not isinstance(event_seq, int) or event_seq < 0
    ):
        raise InvalidField("event_seq must be an integer >= 0 (the event_seq you saw the ask at)")
    return answer, event_seq


def read_search(query: QueryDict, *, required: bool) -> SearchQuery | None:
    """The search ``q`` (docs/search.md), parsed; None when it is absent or empty and not
    ``required``. ``InvalidQuery`` when it is required and missing or blank, longer than
    ``search.MAX_QUERY_CHARS`` characters, or holds a NUL character."""
    raw = query.get("q")
    if not raw:
        if required:
            raise InvalidQuery("q is required: the words to search for")
        return None
    try:
        return parse_query(raw)
    except InvalidSearch as error:
        raise InvalidQuery(str(error)) from None


def read_group_by(query: QueryDict) -> str:
    """``group_by`` of ``GET usage/``: ``day`` (the default), ``model`` or ``conversation``;
    ``InvalidFilter`` for anything else."""
    raw = query_value(query, "group_by") or "day"
    if raw not in GROUP_BY:
        raise InvalidFilter(f"group_by must be one of {', '.join(GROUP_BY)}")
    return raw


def read_period(query: QueryDict) -> Period:
    """``from`` and ``to`` of ``GET usage/``: UTC days ``YYYY-MM-DD``, both included, each
    optional; ``InvalidFilter`` for another form, a day that does not exist, or ``from`` after
    ``to``."""
    days: dict[str, date | None] = {}
    for name in ("from", "to"):
        raw = query_value(query, name)
        if raw is None:
            days[name] = None
            continue
        try:
            if not _DAY.fullmatch(raw):
                raise ValueError(raw)
            days[name] = date.fromisoformat(raw)
        except ValueError:
            raise InvalidFilter(f"{name} must be a day written YYYY-MM-DD (UTC)") from None
    start, end = days["from"], days["to"]
    if start is not None and end is not None and start > end:
        raise InvalidFilter("from must not be after to")
    return Period(start=start, end=end)
