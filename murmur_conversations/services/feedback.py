"""Feedback on display rows (docs/api.md "Feedback"): one rating and comment per user and row.

A change is a write to the conversation like any other: under the lock, one event_seq, the row's
``event_seq`` and ``updated_at`` move (so ``?since=`` readers see it) and ``display_message_updated``
goes out after commit. The owner's own feedback is also copied onto the row
(``DisplayMessage.owner_feedback``) for the websocket frames.
"""

from __future__ import annotations

from typing import Any, Final

from murmur_conversations.exceptions import DisplayMessageNotFound, InvalidContent
from murmur_conversations.jsonenc import clean_text
from murmur_conversations.models import DisplayMessage, Feedback, Rating
from murmur_conversations.redaction import redact
from murmur_conversations.services.writing import ConversationRef, Write, owner_pk, writing

#: The longest feedback comment, in characters.
MAX_COMMENT_CHARS: Final = 2000

DisplayRef = DisplayMessage | int | str


def feedback_value(feedback: Feedback | None) -> dict[str, Any] | None:
    """``{"rating", "comment"}`` of ``feedback``, or None: the row's ``feedback`` key (docs/api.md)."""
    if feedback is None:
        return None
    return {"rating": feedback.rating, "comment": feedback.comment}


def _display_pk(display_message: DisplayRef) -> int:
    if isinstance(display_message, DisplayMessage):
        if display_message.pk is None:
            raise DisplayMessageNotFound("the display row is not saved")
        return int(display_message.pk)
    if isinstance(display_message, int) and not isinstance(display_message, bool):
        return display_message
    if (
        isinstance(display_message, str)
        and display_message.isascii()
        and display_message.isdigit()
        and len(display_message) <= 19
    ):
        return int(display_message)
    raise DisplayMessageNotFound(f"no display row {display_message!r}")


def _locked_row(write: Write, display_message: DisplayRef) -> DisplayMessage:
    pk = _display_pk(display_message)
    row = (
        DisplayMessage.objects.using(write.using)
        .filter(conversation=write.conversation, pk=pk)
        .first()
    )
    if row is None:
        raise DisplayMessageNotFound(
            f"conversation {write.conversation.pk} has no display row {display_message!r}"
        )
    if row.message_id is None:
        raise InvalidContent(
            f"display row {pk} is a notice outside the record; feedback is for rows of the record"
        )
    return row


def _user_pk(user: Any) -> Any:
    pk = owner_pk(user)
    if pk is None or getattr(user, "is_authenticated", True) is False:
        raise InvalidContent("feedback needs a user")
    return pk


def _touch(write: Write, row: DisplayMessage, user_pk: Any, value: dict[str, Any] | None) -> None:
    """Stamp ``row`` with this call's event_seq (announced as ``display_message_updated``) and copy
    the owner's feedback onto it."""
    write.mark_updated(row)
    fields = ["event_seq", "updated_at"]
    if user_pk == write.conversation.owner_id:
        row.owner_feedback = value
        fields.append("owner_feedback")
    row.save(using=write.using, update_fields=fields)


def set_feedback(
    *,
    conversation: ConversationRef,
    display_message: DisplayRef,
    user: Any,
    rating: int,
    comment: str | None = "",
) -> Feedback:
    """Store ``user``'s feedback on one display row (a DisplayMessage, or its id as an int or the
    REST id string), replacing the user's earlier feedback on it; returns the Feedback row.

    ``rating``: 1 or -1; ``comment``: a string of at most ``MAX_COMMENT_CHARS`` characters (bad text
    repaired, secrets redacted; None is ""). The row must belong to the record (not a notice outside it). The same
    rating and comment again change nothing and take no event_seq; a change takes one, moves the
    row's ``event_seq`` and sends ``display_message_updated``. Access is the caller's business (the
    REST route checks the conversation scope). Raises ``InvalidContent``, ``DisplayMessageNotFound``,
    ``ConversationNotFound``, ``WriteConflict``; nothing is written when it raises.
    """
    if isinstance(rating, bool) or rating not in Rating.values:
        raise InvalidContent(f"rating must be 1 or -1, not {rating!r}")
    if comment is None:
        comment = ""
    if not isinstance(comment, str):
        raise InvalidContent(f"comment must be a string, not {type(comment).__name__}")
    text = clean_text(comment)
    if len(text) > MAX_COMMENT_CHARS:
        raise InvalidContent(f"comment may hold at most {MAX_COMMENT_CHARS} characters")
    text, found = redact(text)  # stored like every text (docs/write-path.md "Redaction")
    user_pk = _user_pk(user)
    with writing(conversation) as write:
        write.keep_times = True  # feedback is not activity: the dates stay
        row = _locked_row(write, display_message)
        manager = Feedback.objects.using(write.using)
        feedback = manager.filter(display_message=row, user_id=user_pk).first()
        if feedback is not None and feedback.rating == rating and feedback.comment == text:
            return feedback
        write.redactions.update(found)
        if feedback is None:
            feedback = manager.create(
                conversation=write.conversation,
                display_message=row,
                user_id=user_pk,
                rating=rating,
                comment=text,
                created_at=write.now,
                updated_at=write.now,
            )
        else:
            feedback.rating, feedback.comment, feedback.updated_at = rating, text, write.now
            feedback.save(using=write.using, update_fields=["rating", "comment", "updated_at"])
        _touch(write, row, user_pk, feedback_value(feedback))
    return feedback


def clear_feedback(
    *, conversation: ConversationRef, display_message: DisplayRef, user: Any
) -> bool:
    """Remove ``user``'s feedback on one display row; True when there was some. Removing takes one
    event_seq and sends ``display_message_updated``; no feedback, no event. Raises
    ``DisplayMessageNotFound``, ``InvalidContent`` (no user, a row outside the record),
    ``ConversationNotFound``, ``WriteConflict``."""
    user_pk = _user_pk(user)
    with writing(conversation) as write:
        write.keep_times = True  # feedback is not activity: the dates stay
        row = _locked_row(write, display_message)
        deleted, _ = (
            Feedback.objects.using(write.using)
            .filter(display_message=row, user_id=user_pk)
            .delete()
        )
        if not deleted:
            return False
        _touch(write, row, user_pk, None)
    return True
