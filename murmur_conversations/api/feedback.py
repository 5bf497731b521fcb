"""``PUT``/``DELETE conversations/{id}/display-messages/{display_id}/feedback/`` (docs/api.md
"Feedback"): the caller's own rating and comment on one display row of the record."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from murmur_conversations import services
from murmur_conversations.api import serializers as docs
from murmur_conversations.api.base import ConversationScopedViewSet
from murmur_conversations.api.exceptions import ConversationGone, InvalidField, Unavailable
from murmur_conversations.api.params import read_feedback, read_json_object
from murmur_conversations.api.schema import ID_PARAM, Param, document
from murmur_conversations.api.viewsets import WRITE_ERRORS
from murmur_conversations.exceptions import (
    ConversationNotFound,
    DisplayMessageNotFound,
    InvalidContent,
    WriteConflict,
)
from murmur_conversations.models import DisplayMessage
from murmur_conversations.representations import display_row
from murmur_conversations.selectors import feedback_for

DISPLAY_ID_PARAM = Param("display_id", str, "path", "The display row's id (its 'id' string).")


class FeedbackViewSet(ConversationScopedViewSet):
    """One route, two verbs; the conversation is resolved (and scoped) by the base class, the
    row within it here: a row of another conversation, a missing or malformed id are the same
    404 as a foreign conversation."""

    def _answer(self, display_id: str) -> Response:
        row = DisplayMessage.objects.filter(conversation=self.conversation, pk=display_id).first()
        if row is None:  # deleted meanwhile
            raise ConversationGone()
        mine = feedback_for(self.request.user, [row.pk])
        return Response(display_row(row, mine.get(row.pk)))

    def _run(self, call: Any) -> None:
        try:
            call()
        except (DisplayMessageNotFound, ConversationNotFound):
            raise ConversationGone() from None
        except InvalidContent as error:
            raise InvalidField(str(error)) from None
        except WriteConflict:
            raise Unavailable() from None

    @document(
        summary="Set the caller's feedback on a display row (PUT again replaces it)",
        params=[ID_PARAM, DISPLAY_ID_PARAM],
        request=docs.FeedbackRequestSerializer,
        responses={200: docs.DisplayRowSerializer, **WRITE_ERRORS},
    )
    def put(self, request: Request, id: str, display_id: str) -> Response:
        """Through ``services.set_feedback``; 200 with the display row, carrying the caller's
        ``feedback``. 400 ``invalid_field`` for a bad body or a notice outside the record."""
        data = read_json_object(request, expected="'rating' and maybe 'comment'")
        rating, comment = read_feedback(data)
        self._run(
            lambda: services.set_feedback(
                conversation=self.conversation,
                display_message=display_id,
                user=request.user,
                rating=rating,
                comment=comment,
            )
        )
        return self._answer(display_id)

    @document(
        summary="Remove the caller's feedback on a display row",
        params=[ID_PARAM, DISPLAY_ID_PARAM],
        responses={200: docs.DisplayRowSerializer, **WRITE_ERRORS},
    )
    def delete(self, request: Request, id: str, display_id: str) -> Response:
        """Through ``services.clear_feedback``; 200 with the display row (``feedback`` null),
        also when there was none."""
        self._run(
            lambda: services.clear_feedback(
                conversation=self.conversation, display_message=display_id, user=request.user
            )
        )
        return self._answer(display_id)
