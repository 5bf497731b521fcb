"""``POST ws-ticket/`` (docs/api.md and docs/websocket.md): a signed websocket ticket for the caller."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response

from murmur_conversations.api import serializers as docs
from murmur_conversations.api.base import AppAPIView
from murmur_conversations.api.schema import document
from murmur_conversations.tickets import TICKET_MAX_AGE, issue_ticket


class WsTicketView(AppAPIView):
    """Issues ``{"ticket", "expires_in": 60}`` for ``ws/conversations/...?ticket=``."""

    @document(
        summary="A websocket ticket for the caller, valid for expires_in seconds",
        request=None,
        responses={200: docs.WsTicketSerializer, **dict.fromkeys((401, 403), docs.ErrorSerializer)},
    )
    def post(self, request: Request) -> Response:
        """The ticket is bound to the user, the user's auth hash (a password change voids it) and
        the session it was issued under (logout closes its sockets); reusable until it expires."""
        session = getattr(request._request, "session", None)
        ticket = issue_ticket(user=request.user, session_key=getattr(session, "session_key", None))
        return Response({"ticket": ticket, "expires_in": TICKET_MAX_AGE})
