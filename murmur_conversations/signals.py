"""Signals sent by ``services`` after the transaction commits (docs/write-path.md).

Declarations only. Each is sent with ``send_robust`` inside ``transaction.on_commit(..., robust=True)``,
so a failing receiver is logged under ``murmur_conversations.signals`` and never fails the write, and
nothing is sent for a write that rolled back. ``sender`` is always the ``Conversation`` model class.

With ``FRAME_LOG`` on (docs/websocket.md "The frame log") the services build each event's frames
once, inside the transaction: ``conversation_saved`` then also carries ``frames`` (the
conversation stream's frames of the event) and ``sidebar`` (the owner's ``conversation_saved``
frame), each also as the text it was encoded to once (``frame_texts``: a list of str,
``sidebar_text``: a str; ``frames.encode``), and the event's other signals carry ``logged=True``.
Receivers of your own can ignore them all.
"""

from __future__ import annotations

from django.dispatch import Signal

__all__ = [
    "child_deleted",
    "child_updated",
    "conversation_deleted",
    "conversation_saved",
    "conversation_updated",
    "delta",
    "display_message_updated",
    "display_messages_saved",
    "pending_answered",
    "share_revoked",
    "status_changed",
    "tool_call_updated",
]

# Arguments: conversation (Conversation), rows (list[DisplayMessage], by seq), event_seq (int)
display_messages_saved = Signal()

# Arguments: conversation (Conversation), row (DisplayMessage), event_seq (int)
display_message_updated = Signal()

# Arguments: conversation (Conversation), tool_call (ToolCall), event_seq (int)
tool_call_updated = Signal()

# Arguments: conversation (Conversation), event_seq (int); status or pending ask changed
status_changed = Signal()

# Arguments: conversation (Conversation), event_seq (int); title or metadata changed
conversation_updated = Signal()

# Arguments: conversation (Conversation), event_seq (int); once per call that takes an event_seq,
# and with event_seq 0 when start_conversation creates the conversation
conversation_saved = Signal()

# Arguments: conversation_id (uuid.UUID), owner_id (int | None)
conversation_deleted = Signal()

# Arguments: conversation (Conversation, the parent), child (Conversation), event_seq (int, the
# parent's); a child was created, or its status, steps or parent_call_id changed. Sent before the
# parent's conversation_saved of the same event_seq (docs/websocket.md "child_updated").
child_updated = Signal()

# Arguments: conversation (Conversation, the parent), child_id (uuid.UUID), event_seq (int, the
# parent's); a child was deleted on its own (not with its parent). Before the parent's
# conversation_saved of the same event_seq.
child_deleted = Signal()

# Arguments: conversation (Conversation), stream_id (str), text (str); ephemeral, never stored
delta = Signal()

# Arguments: conversation (Conversation), ask (dict, the pending ask that was answered), answer
# (str, as saved), rows (list[DisplayMessage], the display rows of the saved user message),
# event_seq (int). Sent by answer_pending_ask after the call's other signals; a host's agent
# runtime listens to it to resume the paused run.
pending_answered = Signal()

# Arguments: share (Share), conversation_id (uuid.UUID). Sent by services.revoke_share after commit,
# so a live share's open readers can be closed at once (docs/api.md "Share links").
share_revoked = Signal()
