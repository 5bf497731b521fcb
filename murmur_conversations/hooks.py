"""Record reads for plug-ins with murmur's ``murmur:conversation/read`` semantics (docs/hooks.md), gated by default-deny grants in ``MURMUR_CONVERSATIONS["HOOKS"]``.

    page = read_messages(hook="recall", conversation=conv_id, cursor=None, limit=50)
    while page.next_cursor is not None:
        page = read_messages(hook="recall", conversation=conv_id, cursor=page.next_cursor)

Over HTTP, :func:`issue_token` gives a signed token for one conversation that the ``record/`` route
accepts with ``Authorization: MurmurHook <token>``.
"""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass
from typing import Any, Final

from django.core import signing
from django.db import DatabaseError

from murmur_conversations import jsonenc, reading
from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import ConversationsError
from murmur_conversations.models import Conversation, Message
from murmur_conversations.representations import record_message

__all__ = [
    "MAX_LIMIT",
    "MAX_TOKEN_AGE",
    "HookReadError",
    "HookToken",
    "MessagePage",
    "hook_message",
    "is_granted",
    "issue_token",
    "read_messages",
    "verify_token",
]

CURSOR_RE: Final = re.compile(r"^mc_[0-9]+$")
MAX_LIMIT: Final = 100
TOKEN_SALT: Final = "murmur_conversations.hook-token"
MAX_TOKEN_AGE: Final = 24 * 3600


class HookReadError(ConversationsError):
    """A refused read; ``code`` is exactly ``not-granted``, ``invalid-cursor`` or
    ``unavailable: <reason>`` (murmur's error strings)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True)
class MessagePage:
    """One page of the record, newest first (murmur ``message-page``).

    ``messages``: ``[{id, role, content, source_id, message}]`` with ``content`` the JSON text of
    the stored content (the tool-message envelope for tool messages) and ``message`` the message as
    the model saw it (:func:`hook_message`); ``next_cursor``: ``mc_<n>`` for the next
    older page, or None at the oldest message; ``total``: the record length when served.
    """

    messages: list[dict[str, Any]]
    next_cursor: str | None
    total: int


def is_granted(hook: Any) -> bool:
    """Whether ``hook`` declares ``capabilities.conversation.read: true``. Default-deny: an
    undeclared hook, a malformed declaration or a non-boolean ``read`` is not a grant. Read on every
    call, so removing a grant takes effect on the next read."""
    if not isinstance(hook, str):
        return False
    declaration = app_settings.hooks.get(hook)
    if not isinstance(declaration, dict):
        return False
    capabilities = declaration.get("capabilities")
    if not isinstance(capabilities, dict):
        return False
    block = capabilities.get("conversation")
    return isinstance(block, dict) and block.get("read") is True


def hook_message(message: Message) -> dict[str, Any]:
    """``{id, role, content, source_id, message}`` of one record message as murmur hands it to a
    hook.

    A tool message (role ``tool``, or any message answering a call) carries the envelope
    ``{"__murmur_tool_msg__": true, "tool_call_id", "is_error", "body"}`` as its content. Inside
    the envelope, ``message`` is the whole message as the model saw it
    (``representations.record_message``: null content, ``tool_calls``, ``name``, ``refusal`` and
    every other key it arrived with), which ``services.save_messages`` takes back as it is.
    """
    content: Any = message.content
    if message.role == "tool" or message.tool_call_id:
        content = {
            "__murmur_tool_msg__": True,
            "tool_call_id": message.tool_call_id or None,
            "is_error": message.is_error,
            "body": message.content,
        }
    return {
        "id": message.message_id,
        "role": message.role,
        "content": jsonenc.dumps(content),
        "source_id": message.source_id or None,
        "message": record_message(message),
    }


#: Digits of the largest cursor: a record position is a 64-bit integer.
_MAX_CURSOR_DIGITS: Final = 19


def _parse_cursor(cursor: Any) -> int | None:
    if cursor is None:
        return None
    if not isinstance(cursor, str) or not CURSOR_RE.fullmatch(cursor):
        raise HookReadError("invalid-cursor")
    digits = cursor[3:].lstrip("0") or "0"
    if len(digits) > _MAX_CURSOR_DIGITS:  # beyond any record, and before int() of a huge string
        raise HookReadError("invalid-cursor")
    return int(digits)


def _page_size(limit: Any) -> int:
    """``limit`` clamped to 1..MAX_LIMIT whatever it is: an int or a finite float (rounded down);
    the infinities clamp to their end; anything else (NaN, bool, str, None) reads one."""
    if isinstance(limit, bool):
        return 1
    if isinstance(limit, float):
        if math.isnan(limit):
            return 1
        if math.isinf(limit):
            return MAX_LIMIT if limit > 0 else 1
        limit = math.floor(limit)
    if not isinstance(limit, int):
        return 1
    return max(1, min(MAX_LIMIT, limit))


def _conversation_pk(conversation: Any) -> uuid.UUID | None:
    if isinstance(conversation, Conversation):
        return conversation.pk
    if isinstance(conversation, uuid.UUID):
        return conversation
    try:
        return uuid.UUID(str(conversation))
    except ValueError:
        return None


def read_messages(
    *, hook: str, conversation: Any, cursor: str | None = None, limit: int = 50
) -> MessagePage:
    """One page of a conversation's record, newest first, with murmur's semantics.

    ``cursor`` is None for the newest page, else ``mc_<n>`` from a previous page: ``n`` is the
    exclusive upper bound counted from the oldest message, valid iff it matches ``^mc_[0-9]+$`` and
    ``n`` is at most the record length. Pages are anchored at the oldest message, so appends during a
    walk repeat and skip nothing. ``limit`` is clamped to 1..100 (0 reads one; an infinity its end;
    NaN, a bool or a non-number reads one). No record, or no
    such conversation, is an empty page with ``total`` 0.

    Raises ``HookReadError`` with code ``not-granted``, ``invalid-cursor`` or
    ``unavailable: <reason>`` (the database could not be read).
    """
    if not is_granted(hook):
        raise HookReadError("not-granted")
    upper = _parse_cursor(cursor)
    size = _page_size(limit)
    pk = _conversation_pk(conversation)
    try:
        total = 0
        if pk is not None:
            total = (
                Conversation.objects.filter(pk=pk).values_list("record_length", flat=True).first()
            ) or 0
        if upper is None:
            upper = total
        elif upper > total:
            raise HookReadError("invalid-cursor")
        lower = max(0, upper - size)
        rows = (
            []
            if pk is None or upper == 0
            else reading.record_messages(pk, limit=upper - lower, below=upper + 1, above=lower)
        )
    except DatabaseError as error:
        raise HookReadError(f"unavailable: {error}") from error
    return MessagePage(
        messages=[hook_message(row) for row in rows],
        next_cursor=f"mc_{lower}" if lower > 0 else None,
        total=total,
    )


def issue_token(*, hook: str, conversation: Any, max_age: int = 300) -> str:
    """A signed token that lets ``hook`` read one conversation's record over HTTP for ``max_age``
    seconds (1..86400). The grant is checked again at every read, not here. Raises ``ValueError``
    for a bad ``max_age``, a non-string hook or a conversation that is not a UUID."""
    if (
        isinstance(max_age, bool)
        or not isinstance(max_age, int)
        or not 1 <= max_age <= MAX_TOKEN_AGE
    ):
        raise ValueError(f"max_age must be 1..{MAX_TOKEN_AGE} seconds")
    pk = _conversation_pk(conversation)
    if not isinstance(hook, str) or not hook or pk is None:
        raise ValueError("issue_token needs a hook name and a conversation id")
    return signing.TimestampSigner(salt=TOKEN_SALT).sign_object(
        {"h": hook, "c": str(pk), "m": max_age}
    )


@dataclass(frozen=True)
class HookToken:
    """A verified hook token: the hook name and the conversation it may read."""

    hook: str
    conversation_id: uuid.UUID


def verify_token(token: Any) -> HookToken | None:
    """The hook and conversation of a valid, unexpired token from :func:`issue_token`; None for a
    malformed, forged or expired one."""
    if not isinstance(token, str) or not token or len(token) > 2048:
        return None
    signer = signing.TimestampSigner(salt=TOKEN_SALT)
    try:
        payload = signer.unsign_object(token, max_age=MAX_TOKEN_AGE)
        if not isinstance(payload, dict) or not isinstance(payload.get("m"), int):
            return None
        signer.unsign_object(token, max_age=payload["m"])
        return HookToken(hook=str(payload["h"]), conversation_id=uuid.UUID(str(payload["c"])))
    except (signing.BadSignature, KeyError, ValueError, TypeError):
        return None
