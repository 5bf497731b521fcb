"""``POST session/``: agentfootprint's session wire (``hosting/sessionWire``; docs/api.md).

Ops: ``session-list``, ``session-transcript`` and ``session-pending``. Order of the answers:
credentials first (none or bad: 401 ``ERR_IDENTITY_NOT_VERIFIED``, whatever the host's
authentication order), then the body (400 ``ERR_INVALID_WIRE_OP``), then CSRF (403
``ERR_CSRF_FAILED``), then the session (404 ``ERR_SESSION_NOT_FOUND`` for foreign, missing and
malformed ids alike). Every failure body is exactly ``{"error", "code"}``.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from django.core.exceptions import RequestDataTooBig
from django.http.request import RawPostDataException
from rest_framework import exceptions, status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from murmur_conversations import jsonenc, services
from murmur_conversations.api import serializers as docs
from murmur_conversations.api.base import AppAPIView
from murmur_conversations.api.exceptions import exception_handler
from murmur_conversations.api.params import ARCHIVED_VALUES
from murmur_conversations.api.schema import document
from murmur_conversations.exceptions import ConversationNotFound, WriteConflict
from murmur_conversations.models import AccessSurface
from murmur_conversations.representations import unix_ms
from murmur_conversations.selectors import (
    conversation_for,
    conversations_for,
    organised,
    top_level,
    transcript,
)

LIST_OP: Final = "session-list"
TRANSCRIPT_OP: Final = "session-transcript"
PENDING_OP: Final = "session-pending"
OPS: Final = frozenset({LIST_OP, TRANSCRIPT_OP, PENDING_OP})
LIST_SIZE: Final = 50


class WireError(exceptions.APIException):
    """A session-wire failure: ``{"error": <message>, "code": <ERR_...>}`` with ``status_code``."""

    def __init__(self, status_code: int, code: str, message: str) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.wire_code = code


def not_verified() -> WireError:
    """401: no credentials, or credentials that did not verify."""
    return WireError(401, "ERR_IDENTITY_NOT_VERIFIED", "A verified identity is required.")


def invalid_op(message: str) -> WireError:
    """400: the body is not a session-wire operation."""
    return WireError(400, "ERR_INVALID_WIRE_OP", message)


class WireOperation(NamedTuple):
    """One session-wire request: the ``op``; the ``sessionId`` (None for the list); for the list,
    which conversations by their archived flag: ``"0"`` (the default: archived ones hidden, as
    ``GET conversations/``), ``"1"`` (only archived ones) or ``"all"`` (docs/api.md)."""

    op: str
    session_id: str | None
    archived: str = "0"


def read_operation(raw: bytes) -> WireOperation:
    """The operation of a request body, whatever its content type; ``ERR_INVALID_WIRE_OP`` for
    anything that is not a JSON object with a known ``op`` (and a non-blank string
    ``sessionId`` for the transcript and pending ops, and for the list an ``archived`` of
    ``"0"``, ``"1"`` or ``"all"`` when given)."""
    try:
        body = jsonenc.loads(raw)
    except (ValueError, UnicodeError, RecursionError):
        raise invalid_op("The body must be a JSON object.") from None
    if not isinstance(body, dict):
        raise invalid_op("The body must be a JSON object.")
    op = body.get("op")
    if not isinstance(op, str) or not op.strip() or op not in OPS:
        raise invalid_op(f"op must be one of {', '.join(sorted(OPS))}.")
    if op == LIST_OP:
        archived = body.get("archived", "0")
        if not isinstance(archived, str) or archived not in ARCHIVED_VALUES:
            raise invalid_op(f"archived must be one of {', '.join(ARCHIVED_VALUES)}.")
        return WireOperation(op, None, archived)
    session_id = body.get("sessionId")
    if not isinstance(session_id, str) or not session_id.strip():
        raise invalid_op(f"{op} needs a non-blank string sessionId.")
    return WireOperation(op, session_id)


class SessionWireView(AppAPIView):
    """The wire: one POST whose body names the op.

    The body is read as bytes and decoded as JSON whatever its content type (a browser ``fetch``
    with a string body sends ``text/plain``); no parser runs, so no content type is refused, and
    a cookie client's CSRF token is read from the ``X-CSRFToken`` header.
    """

    permission_classes: tuple[
        type[BasePermission], ...
    ] = ()  # identity is checked in perform_authentication, first of all
    csrf_failed = False

    def perform_authentication(self, request: Request) -> None:
        """Resolve the caller. No or bad credentials: 401. A CSRF failure (a valid session cookie
        without a valid token; DRF raises ``PermissionDenied`` while authenticating) is kept for
        after the body check."""
        try:
            user = request.user
        except (exceptions.NotAuthenticated, exceptions.AuthenticationFailed):
            raise not_verified() from None
        except exceptions.PermissionDenied:
            self.csrf_failed = True
            return
        if not (user is not None and user.is_authenticated and getattr(user, "is_active", True)):
            raise not_verified()

    def handle_exception(self, exc: Exception) -> Response:
        """``{"error", "code"}`` for every failure, 401s included whatever the first
        authentication class is."""
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            exc = not_verified()
        response = exception_handler(exc, self.get_exception_handler_context())
        if response is None:
            self.raise_uncaught_exception(exc)
            raise exc  # pragma: no cover - raise_uncaught_exception always raises
        code = getattr(exc, "wire_code", None) or "ERR_" + str(response.data["code"]).upper()
        message = response.data["detail"] if "detail" in response.data else str(exc)
        response.data = {"error": str(message), "code": code}
        if response.status_code == status.HTTP_401_UNAUTHORIZED:
            header = next(
                (
                    h
                    for a in self.get_authenticators()
                    if (h := a.authenticate_header(self.request))
                ),
                None,
            )
            if header:
                response["WWW-Authenticate"] = header
        response.exception = True
        return response

    @document(
        summary="agentfootprint session wire: session-list, session-transcript, session-pending",
        request=docs.WireRequestSerializer,
        responses={
            200: docs.WireResponseSerializer,
            **dict.fromkeys((400, 401, 403, 404, 429), docs.WireErrorSerializer),
        },
    )
    def post(self, request: Request) -> Response:
        """Answers the op named by the body (and nothing else)."""
        try:
            raw = request._request.body
        except (RawPostDataException, RequestDataTooBig):  # consumed multipart, or too large
            raise invalid_op("The body must be a JSON object.") from None
        op, session_id, archived = read_operation(raw)
        if self.csrf_failed:
            raise WireError(403, "ERR_CSRF_FAILED", "CSRF verification failed.")
        if op == LIST_OP:
            return Response({"sessions": self._sessions(request.user, archived)})
        if session_id is None:  # read_operation gives one for every op but the list
            raise invalid_op(f"{op} needs a non-blank string sessionId.")
        conversation = conversation_for(request.user, session_id)
        if conversation is None:
            raise WireError(404, "ERR_SESSION_NOT_FOUND", f"No session {session_id}.")
        if op == PENDING_OP:
            return Response({"pending": conversation.pending_ask})
        if conversation.owner_id != request.user.pk:  # a SCOPE reader: the access log
            try:
                services.log_access(
                    conversation=conversation,
                    actor=request.user,
                    surface=AccessSurface.API_TRANSCRIPT,
                )
            except ConversationNotFound:
                raise WireError(404, "ERR_SESSION_NOT_FOUND", f"No session {session_id}.") from None
            except WriteConflict:
                raise WireError(503, "ERR_BUSY", "The database is busy; retry.") from None
        messages = [entry for _position, entry in transcript(conversation)]
        return Response({"transcript": {"sessionId": session_id, "messages": messages}})

    @staticmethod
    def _sessions(user: Any, archived: str) -> list[dict[str, Any]]:
        """agentfootprint ``SessionSummary`` rows of the caller's first 50 top-level conversations
        in the order and with the archived filter of ``GET conversations/`` (children are reached
        from their parent, docs/api.md)."""
        return [
            {
                "sessionId": str(c.pk),
                "savedAt": unix_ms(c.saved_at),
                "format": c.format,
                "messageCount": c.transcript_count,
            }
            for c in organised(top_level(conversations_for(user)), archived=archived)[:LIST_SIZE]
        ]
