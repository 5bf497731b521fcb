"""Reading request input (docs/api.md): query parameters (``since``, the tool-call ``status``
filter, the list's ``archived`` and ``tag``) and JSON bodies (PATCH, the pending-ask answer,
feedback, forks, share links). Each bad value raises its 400 with a
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
from murmur_conversations.exceptions import InvalidContent, InvalidSearch
from murmur_conversations.models import ShareMode, ToolStatus
from murmur_conversations.search import SearchQuery, parse_query
from murmur_conversations.services import (
    MAX_ANSWER_CHARS,
    MAX_COMMENT_CHARS,
    MAX_SHARE_SECONDS,
    MAX_TAG_CHARS,
)
from murmur_conversations.usage_report import Period
from murmur_conversations.validation import clean_tag

_NON_NEGATIVE: Final = re.compile(r"[0-9]+")
_DAY: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
GROUP_BY: Final = ("day", "model", "conversation")
#: event_seq is a 64-bit column; a larger ``since`` is simply after every event.
_MAX_EVENT_SEQ: Final = 2**63 - 1
PATCH_FIELDS: Final = frozenset({"title", "metadata", "pinned", "archived", "tags"})
FEEDBACK_FIELDS: Final = frozenset({"rating", "comment"})
FORK_FIELDS: Final = frozenset({"at_seq"})
SHARE_FIELDS: Final = frozenset({"mode", "expires_in", "require_login"})
ARCHIVED_VALUES: Final = ("0", "1", "all")
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


def read_json_object(
    request: Request, *, expected: str, allow_empty: bool = False
) -> dict[str, Any]:
    """The JSON object in the body of ``request``; ``InvalidField`` naming ``expected`` (what the
    object holds) for a body that is empty, too large, of another content type than
    ``application/json`` (parameters such as ``charset`` are ignored), not JSON, or not an object.
    With ``allow_empty`` an empty body (no bytes at all; all fields optional) is ``{}``.
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
    if not raw and allow_empty:
        return {}
    if not raw.strip():  # blank is not empty: it is not JSON either
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
    """The fields of a PATCH body: a JSON object with ``title``, ``metadata``, ``pinned``,
    ``archived`` and/or ``tags`` only; ``InvalidField`` for anything else. Values are checked by
    ``services.update_conversation``."""
    if not isinstance(data, dict):
        raise InvalidField(
            "the body must be a JSON object with 'title', 'metadata', 'pinned', 'archived' "
            "and/or 'tags'"
        )
    unknown = sorted(str(key) for key in data if key not in PATCH_FIELDS)
    if unknown:
        raise InvalidField(
            f"unknown field {unknown[0]!r}; only 'title', 'metadata', 'pinned', 'archived' and "
            "'tags' can change"
        )
    if "title" in data and not isinstance(data["title"], str):
        raise InvalidField("title must be a string of at most 255 characters")
    if "metadata" in data and not isinstance(data["metadata"], dict):
        raise InvalidField("metadata must be a JSON object")
    for flag in ("pinned", "archived"):
        if flag in data and not isinstance(data[flag], bool):
            raise InvalidField(f"{flag} must be true or false")
    if "tags" in data and (
        not isinstance(data["tags"], list) or not all(isinstance(t, str) for t in data["tags"])
    ):
        raise InvalidField("tags must be a list of strings")
    return dict(data)


def read_archived(query: QueryDict) -> str:
    """The list's ``archived`` parameter: ``0`` (the default: archived conversations hidden),
    ``1`` (only archived ones) or ``all``; ``InvalidFilter`` for another value."""
    raw = query_value(query, "archived")
    if raw is None:
        return "0"
    if raw not in ARCHIVED_VALUES:
        raise InvalidFilter("archived must be 0, 1 or all")
    return raw


def read_tag(query: QueryDict) -> str | None:
    """The list's ``tag`` filter, normalised like a stored tag, or None when absent or empty;
    ``InvalidFilter`` for a value no tag can have."""
    raw = query_value(query, "tag")
    if raw is None:
        return None
    try:
        return clean_tag(raw)
    except InvalidContent:
        raise InvalidFilter(
            f"tag must be a tag: 1 to {MAX_TAG_CHARS} characters without control characters"
        ) from None


def _unknown(data: dict[str, Any], allowed: frozenset[str], expected: str) -> None:
    unknown = sorted(str(key) for key in data if key not in allowed)
    if unknown:
        raise InvalidField(f"unknown field {unknown[0]!r}; send {expected}")


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_feedback(data: dict[str, Any]) -> tuple[int, str]:
    """``(rating, comment)`` of a ``PUT .../feedback/`` body: ``rating`` 1 or -1, ``comment``
    (optional, null is "") a string of at most ``MAX_COMMENT_CHARS`` characters, no other key;
    ``InvalidField`` otherwise."""
    _unknown(data, FEEDBACK_FIELDS, "'rating' and maybe 'comment'")
    rating = data.get("rating")
    if not _integer(rating) or rating not in (1, -1):
        raise InvalidField("rating is required: 1 (thumbs up) or -1 (thumbs down)")
    comment = data.get("comment")
    if comment is None:
        comment = ""
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT_CHARS:
        raise InvalidField(f"comment must be a string of at most {MAX_COMMENT_CHARS} characters")
    return int(rating), comment


def read_fork(data: dict[str, Any]) -> int:
    """``at_seq`` of a ``POST fork/`` body: an integer >= 1, no other key; ``InvalidField``
    otherwise (``services.fork_conversation`` checks it names a row)."""
    _unknown(data, FORK_FIELDS, "'at_seq'")
    at_seq = data.get("at_seq")
    if isinstance(at_seq, bool) or not isinstance(at_seq, int) or at_seq < 1:
        raise InvalidField("at_seq is required: the seq of a display row (an integer >= 1)")
    return at_seq


def read_share(data: dict[str, Any]) -> dict[str, Any]:
    """The options of a ``POST shares/`` body, all optional: ``mode`` (``snapshot``, the default,
    or ``live``), ``expires_in`` (null, the default, or seconds from 1 to ``MAX_SHARE_SECONDS``),
    ``require_login`` (default false); ``InvalidField`` for anything else."""
    _unknown(data, SHARE_FIELDS, "'mode', 'expires_in' and/or 'require_login'")
    mode = data.get("mode")
    if mode is None:
        mode = ShareMode.SNAPSHOT
    if mode not in ShareMode.values:
        raise InvalidField("mode must be 'snapshot' or 'live'")
    expires_in = data.get("expires_in")
    if expires_in is not None and (
        not _integer(expires_in) or not 1 <= expires_in <= MAX_SHARE_SECONDS
    ):
        raise InvalidField(f"expires_in must be null or seconds from 1 to {MAX_SHARE_SECONDS}")
    require_login = data.get("require_login")
    if require_login is None:
        require_login = False
    if not isinstance(require_login, bool):
        raise InvalidField("require_login must be true or false")
    return {"mode": mode, "expires_in": expires_in, "require_login": require_login}


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
