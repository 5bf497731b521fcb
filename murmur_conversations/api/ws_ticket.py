"""``POST ws-ticket/`` (docs/api.md and docs/websocket.md): a single-use websocket ticket for the caller."""

from __future__ import annotations

import logging

from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request
from rest_framework.response import Response

from murmur_conversations.api import serializers as docs
from murmur_conversations.api.base import AppAPIView
from murmur_conversations.api.exceptions import Unavailable
from murmur_conversations.api.schema import document
from murmur_conversations.tickets import TICKET_MAX_AGE, issue_ticket

logger = logging.getLogger("murmur_conversations.api")


class WsTicketView(AppAPIView):
    """Issues ``{"ticket", "expires_in": 60}`` for ``ws/conversations/...?ticket=``."""

    @document(
        summary="A websocket ticket for the caller, valid for expires_in seconds",
        request=None,
        responses={
            200: docs.WsTicketSerializer,
            **dict.fromkeys((401, 403, 503), docs.ErrorSerializer),
        },
    )
    def post(self, request: Request) -> Response:
        """The ticket is bound to the user, the user's auth hash (a password change voids it), the
        session it was issued under when the caller signed in with a session, and the API token
        it was issued with (logout, session deletion, token deletion void it and close its
        sockets); single-use, for 60 seconds (docs/websocket.md "Connecting")."""
        session_key = None
        if isinstance(request.successful_authenticator, SessionAuthentication):
            session = getattr(request._request, "session", None)
            session_key = getattr(session, "session_key", None)
        try:
            ticket = issue_ticket(
                user=request.user, session_key=session_key, credential=request.auth
            )
        except Exception as error:  # the ticket cache is down: a clear, retryable answer
            logger.warning("websocket ticket not stored: %r", error)
            raise Unavailable() from None
        return Response({"ticket": ticket, "expires_in": TICKET_MAX_AGE})
