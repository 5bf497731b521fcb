"""Errors raised by murmur_conversations: one base class, specific subclasses (docs/write-path.md).

Declarations only. Every service raises one of these and never a raw database error.
"""

from __future__ import annotations

__all__ = [
    "ConversationHeld",
    "ConversationNotFound",
    "ConversationsError",
    "DisplayMessageNotFound",
    "InvalidContent",
    "InvalidPendingAsk",
    "InvalidSearch",
    "InvalidStatus",
    "InvalidToolTransition",
    "NoPendingAsk",
    "OwnershipConflict",
    "ParentConflict",
    "ShareNotFound",
    "ToolCallNotFound",
    "WriteConflict",
]


class ConversationsError(Exception):
    """Base class of every error this app raises on purpose."""


class ConversationNotFound(ConversationsError, LookupError):
    """No conversation has the given id (or the id is not a canonical UUID)."""


class ToolCallNotFound(ConversationsError, LookupError):
    """The conversation has no tool call (or no interrupted result row) with the given call id."""


class DisplayMessageNotFound(ConversationsError, LookupError):
    """The conversation has no display row with the given id (feedback, docs/api.md)."""


class ShareNotFound(ConversationsError, LookupError):
    """No share link has the given id in that conversation (revocation, docs/api.md)."""


class InvalidToolTransition(ConversationsError, ValueError):
    """A tool status move that the lifecycle does not allow, or an unknown status or reason."""


class InvalidContent(ConversationsError, ValueError):
    """A message, display content, title or metadata that has the wrong shape or is too large."""


class InvalidPendingAsk(ConversationsError, ValueError):
    """A pending ask that is not agentfootprint's PendingAsk shape, or is given with a status that
    cannot carry one (only ``paused`` and ``interrupted`` can)."""


class NoPendingAsk(ConversationsError):
    """There is no pending ask to answer: none is set (it was answered, cancelled or never asked),
    or it was set or changed after the event_seq the answer was written against."""


class InvalidStatus(ConversationsError, ValueError):
    """A conversation status outside ``ConversationStatus``."""


class OwnershipConflict(ConversationsError):
    """The conversation already belongs to another owner (agentfootprint's write-once owner rule)."""


class ParentConflict(ConversationsError):
    """The conversation exists with another parent, or was launched by another call: a child's
    parent is set at creation and its ``parent_call_id`` is write-once (docs/architecture.md
    "Child conversations")."""


class WriteConflict(ConversationsError):
    """The write could not be completed now and changed nothing; retrying it is safe.

    Wraps "database is locked", deadlocks, serialization failures, a connection lost in the middle of
    a call and a connection-pool timeout. ``__cause__`` holds the original database error.
    """


class ConversationHeld(ConversationsError):
    """The conversation is under a legal hold (``services.place_hold``): nobody may delete or purge
    it, its owner included, until the hold is released; nothing was deleted."""


class InvalidSearch(ConversationsError, ValueError):
    """A search query that cannot be read: not a string, blank, too long, or holding a NUL
    character (docs/search.md)."""
