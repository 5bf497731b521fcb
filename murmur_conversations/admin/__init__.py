"""The read-only transcript admin (DESIGN.md section 9); importing it registers every model."""

from __future__ import annotations

from murmur_conversations.admin.conversation import ConversationAdmin
from murmur_conversations.admin.rows import (
    DisplayMessageAdmin,
    MessageAdmin,
    SourceRecordAdmin,
    ToolCallAdmin,
)

__all__ = [
    "ConversationAdmin",
    "DisplayMessageAdmin",
    "MessageAdmin",
    "SourceRecordAdmin",
    "ToolCallAdmin",
]
