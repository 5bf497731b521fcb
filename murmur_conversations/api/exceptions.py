"""The API's errors and exception handler (docs/api.md).

Every failure body is ``{"detail": <text>, "code": <code>}``. The not-found answer is one constant
(``NOT_FOUND_BODY``), in English whatever the active language, so a foreign, a missing and a
malformed id get byte-identical responses.
"""

from __future__ import annotations

from typing import Any, Final

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import connections
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response

from murmur_conversations.jsonenc import clean_text
from murmur_conversations.outage import caused_by_database_outage, replace_dead_connections
from murmur_conversations.redaction import redact

#: The one 404 body of every conversation route; never translated.
NOT_FOUND_BODY: Final = {"detail": "Not found.", "code": "not_found"}


class ApiError(exceptions.APIException):
    """A 400 with a fixed machine-readable ``code`` and a message that says what to fix."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid"

    def __init__(self, detail: str) -> None:
        super().__init__(detail=detail, code=self.default_code)


class InvalidCursor(ApiError):
    """A cursor that is not one this listing issued for this conversation and these parameters."""

    default_code = "invalid_cursor"


class InvalidSince(ApiError):
    """``since`` is not an integer >= 0."""

    default_code = "invalid_since"


class InvalidFilter(ApiError):
    """An unknown value for a filter parameter (tool-call ``status``)."""

    default_code = "invalid_filter"


class InvalidQuery(ApiError):
    """A search ``q`` that cannot be read: missing or blank where required, too long, or holding
    a NUL character (docs/search.md)."""

    default_code = "invalid_query"


class InvalidField(ApiError):
    """A PATCH body that is not an object, names another key or carries a bad value."""

    default_code = "invalid_field"


class PendingAskGone(exceptions.APIException):
    """409 ``no_pending_ask``: the conversation has no pending ask to answer, or it was set or
    changed after the ``event_seq`` the answer was written against; nothing was written."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "no_pending_ask"
    default_detail = (
        "There is no pending ask to answer: it was answered or cancelled, or it changed after "
        "the event_seq you sent. Read GET pending/ again."
    )


class ConversationIsHeld(exceptions.APIException):
    """409 ``conversation_held``: the conversation is under a legal hold; nobody may delete it,
    its owner included, until the hold is released. Nothing was deleted."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "conversation_held"
    default_detail = (
        "This conversation is under a legal hold and cannot be deleted until the hold is "
        "released. Nothing was deleted."
    )


class ConversationGone(exceptions.NotFound):
    """The conversation is not visible to the caller (foreign, missing or malformed id)."""


class Unavailable(exceptions.APIException):
    """A write could not happen now (``WriteConflict``); retrying is safe. 503 with Retry-After."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "write_conflict"
    default_detail = "The conversation is busy; retry the request."
    wait = 1


def _text(detail: Any) -> str:
    """One message from a DRF detail (a string, or a list/dict of them)."""
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_text(value)}" for key, value in detail.items())
    if isinstance(detail, list):
        return "; ".join(_text(item) for item in detail)
    return str(detail)


def _redacted(text: str) -> str:
    """``text`` with its secrets redacted; a text the detectors cannot read (a lone surrogate
    quoted from a request) is checked as repaired, and kept as it is when nothing is found."""
    found = redact(clean_text(text))
    return found.value if found.counts else text


def _code(exc: exceptions.APIException) -> str:
    codes = exc.get_codes()
    while isinstance(codes, list | dict):
        if not codes:
            return str(exc.default_code)
        codes = next(iter(codes.values())) if isinstance(codes, dict) else codes[0]
    return str(codes)


def _rollback_atomic_requests() -> None:
    for db in connections.all(initialized_only=True):
        if db.settings_dict.get("ATOMIC_REQUESTS") and db.in_atomic_block:
            db.set_rollback(True)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """``{"detail", "code"}`` for every API error, with ``WWW-Authenticate`` and ``Retry-After``
    where DRF sets them; :data:`NOT_FOUND_BODY` for every not-found; None (a 500) for anything
    that is not an API error. The detail is redacted (``redaction.redact``)."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if not isinstance(exc, exceptions.APIException):
        return None  # a database outage goes on to middleware.OutageMiddleware: a 503
    if isinstance(exc, Unavailable) and caused_by_database_outage(exc):
        replace_dead_connections()  # a write lost its connection: the pool's other dead ones go
    headers: dict[str, str] = {}
    auth_header = getattr(exc, "auth_header", None)
    if auth_header:
        headers["WWW-Authenticate"] = str(auth_header)
    wait = getattr(exc, "wait", None)
    if wait:
        headers["Retry-After"] = str(int(wait))
    if isinstance(exc, exceptions.NotFound):
        data: dict[str, str] = dict(NOT_FOUND_BODY)
    else:
        # an error may quote the value it refuses: redacted like stored text (docs/security.md)
        data = {"detail": _redacted(_text(exc.detail)), "code": _code(exc)}
    _rollback_atomic_requests()
    return Response(data, status=exc.status_code, headers=headers)
