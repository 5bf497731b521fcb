"""Organising conversations (docs/api.md "Organising"): the tag rows.

Private to ``murmur_conversations.services``; ``update_conversation`` sets ``pinned``, ``archived``
and ``tags`` through here (the tag rule itself is ``validation.clean_tags``). ``MAX_TAGS`` and
``MAX_TAG_CHARS`` are public as ``services.MAX_TAGS`` and ``services.MAX_TAG_CHARS``.
"""

from __future__ import annotations

from murmur_conversations.models import ConversationTag
from murmur_conversations.services.writing import Write
from murmur_conversations.validation import (
    MAX_TAG_CHARS,
    MAX_TAGS,
    clean_flag,
    clean_tag,
    clean_tags,
)

__all__ = ["MAX_TAGS", "MAX_TAG_CHARS", "clean_flag", "clean_tag", "clean_tags", "save_tag_rows"]


def save_tag_rows(write: Write, old: list[str], new: list[str]) -> None:
    """Make the conversation's ConversationTag rows the names of ``new`` (they were ``old``)."""
    manager = ConversationTag.objects.using(write.using)
    gone = [tag for tag in old if tag not in new]
    if gone:
        manager.filter(conversation=write.conversation, name__in=gone).delete()
    added = [tag for tag in new if tag not in old]
    if added:
        manager.bulk_create(
            [ConversationTag(conversation=write.conversation, name=tag) for tag in added]
        )
