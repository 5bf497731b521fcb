"""The read-only transcript admin (docs/admin.md); importing it registers every model."""

from __future__ import annotations

from murmur_conversations.admin.conversation import ConversationAdmin
from murmur_conversations.admin.forget import AccessLogEntryAdmin, HoldAdmin, RedactionCountAdmin
from murmur_conversations.admin.rows import (
    DisplayMessageAdmin,
    MessageAdmin,
    SourceRecordAdmin,
    ToolCallAdmin,
)
from murmur_conversations.admin.sharing import ConversationTagAdmin, FeedbackAdmin, ShareAdmin

__all__ = [
    "AccessLogEntryAdmin",
    "ConversationAdmin",
    "ConversationTagAdmin",
    "DisplayMessageAdmin",
    "FeedbackAdmin",
    "HoldAdmin",
    "MessageAdmin",
    "RedactionCountAdmin",
    "ShareAdmin",
    "SourceRecordAdmin",
    "ToolCallAdmin",
]
