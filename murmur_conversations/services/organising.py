"""Organising conversations (docs/api.md "Organising"): the tag rule and the tag rows.

Private to ``murmur_conversations.services``; ``update_conversation`` sets ``pinned``, ``archived``
and ``tags`` through here. ``MAX_TAGS`` and ``MAX_TAG_CHARS`` are public as ``services.MAX_TAGS``
and ``services.MAX_TAG_CHARS``.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Final

from murmur_conversations.exceptions import InvalidContent
from murmur_conversations.models import ConversationTag
from murmur_conversations.services.writing import Write
from murmur_conversations.validation import clean_text

#: At most this many tags per conversation.
MAX_TAGS: Final = 20
#: At most this many characters per tag.
MAX_TAG_CHARS: Final = 32


def clean_flag(value: Any, *, what: str) -> bool:
    """``value`` if it is a boolean; ``InvalidContent`` otherwise."""
    if not isinstance(value, bool):
        raise InvalidContent(f"{what} must be true or false, not {value!r}")
    return value


def clean_tag(value: Any) -> str:
    """One tag as stored: a string, bad text repaired, whitespace trimmed and runs of it made one
    space, lower case; 1 to :data:`MAX_TAG_CHARS` characters without control characters;
    ``InvalidContent`` otherwise."""
    if not isinstance(value, str):
        raise InvalidContent(f"a tag must be a string, not {type(value).__name__}")
    tag = " ".join(clean_text(value).split()).lower()
    if not tag:
        raise InvalidContent("a tag must not be empty or blank")
    if len(tag) > MAX_TAG_CHARS:
        raise InvalidContent(f"a tag may hold at most {MAX_TAG_CHARS} characters: {tag[:40]!r}")
    if any(unicodedata.category(ch)[0] == "C" for ch in tag):
        raise InvalidContent(f"a tag must not contain control characters: {tag!r}")
    return tag


def clean_tags(value: Any) -> list[str]:
    """The tag list as stored: a list of at most :data:`MAX_TAGS` tags (:func:`clean_tag`), the
    first of equal tags kept, order kept; ``InvalidContent`` otherwise."""
    if not isinstance(value, list | tuple):
        raise InvalidContent(f"tags must be a list of strings, not {type(value).__name__}")
    tags: list[str] = []
    for item in value:
        tag = clean_tag(item)
        if tag not in tags:
            tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise InvalidContent(f"a conversation may have at most {MAX_TAGS} tags, not {len(tags)}")
    return tags


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
