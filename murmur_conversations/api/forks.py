"""``POST conversations/{id}/fork/`` (docs/api.md "Forking"): copy the conversation up to a display
row into a new conversation owned by the caller."""

from __future__ import annotations

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from murmur_conversations import services
from murmur_conversations.api import serializers as docs
from murmur_conversations.api.exceptions import ConversationGone, InvalidField, Unavailable
from murmur_conversations.api.params import read_fork, read_json_object
from murmur_conversations.api.schema import ID_PARAM, document
from murmur_conversations.api.viewsets import WRITE_ERRORS, ConversationViewSet
from murmur_conversations.exceptions import ConversationNotFound, InvalidContent, WriteConflict
from murmur_conversations.models import AccessSurface
from murmur_conversations.representations import summary_row


class ForkViewSet(ConversationViewSet):
    """The fork route; the original is resolved (and scoped) by the base class. A fork by a
    ``SCOPE`` reader who is not the owner is a view of the whole conversation: it is written to the
    access log (``api-fork``) first."""

    @document(
        summary="Fork the conversation at a display row into a new conversation of the caller",
        params=[ID_PARAM],
        request=docs.ForkRequestSerializer,
        responses={201: docs.SummarySerializer, **WRITE_ERRORS},
    )
    def fork(self, request: Request, id: str) -> Response:
        """Through ``services.fork_conversation``: 201 with the new conversation's summary row
        (``forked_from_id``, ``forked_at_seq``). 400 ``invalid_field`` for a bad body or an
        ``at_seq`` that is not a display seq of the conversation."""
        data = read_json_object(request, expected="'at_seq'")
        at_seq = read_fork(data)
        self._log_view(AccessSurface.API_FORK)
        try:
            fork = services.fork_conversation(
                conversation=self.conversation, at_seq=at_seq, owner=request.user
            )
        except InvalidContent as error:
            raise InvalidField(str(error)) from None
        except ConversationNotFound:
            raise ConversationGone() from None
        except WriteConflict:
            raise Unavailable() from None
        return Response(summary_row(fork), status=status.HTTP_201_CREATED)
