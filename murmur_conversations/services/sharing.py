"""Share links (docs/api.md "Share links"): create one, revoke one.

A token is ``msh_`` + 43 characters of ``secrets.token_urlsafe(32)`` (256 random bits), shown once:
only its sha256 is stored, so neither the database nor any id gives it away. A snapshot link
freezes the conversation's display rows when it is made: one ``INSERT ... SELECT`` copies them
into ``ShareRow`` under the conversation's lock, so the copy is exactly the rows as of
``snapshot_event_seq`` whatever happens to the conversation later.
"""

from __future__ import annotations

import secrets
import uuid
from datetime import timedelta
from typing import Any, Final

from django.db import router, transaction
from django.utils import timezone

from murmur_conversations import signals
from murmur_conversations.exceptions import InvalidContent, ShareNotFound
from murmur_conversations.models import DisplayMessage, Share, ShareMode, ShareRow
from murmur_conversations.representations import shared_summary
from murmur_conversations.selectors import SHARE_TOKEN_PREFIX, share_token_hash
from murmur_conversations.services.copying import column, db_value, insert_select, table
from murmur_conversations.services.writing import (
    ConversationRef,
    conversation_pk,
    database_errors,
    lock_conversation,
    owner_pk,
    send_on_commit,
)

#: The longest ``expires_in``: ten years, in seconds.
MAX_SHARE_SECONDS: Final = 10 * 365 * 24 * 3600


def _check(mode: Any, expires_in: Any, require_login: Any) -> None:
    if mode not in ShareMode.values:
        raise InvalidContent(f"mode must be one of {', '.join(ShareMode.values)}, not {mode!r}")
    if expires_in is not None and (
        isinstance(expires_in, bool)
        or not isinstance(expires_in, int)
        or not 1 <= expires_in <= MAX_SHARE_SECONDS
    ):
        raise InvalidContent(
            f"expires_in must be null or a number of seconds from 1 to {MAX_SHARE_SECONDS}"
        )
    if not isinstance(require_login, bool):
        raise InvalidContent(f"require_login must be true or false, not {require_login!r}")


def _freeze_rows(using: str, share: Share, conversation_id: uuid.UUID) -> int:
    return insert_select(
        using=using,
        target=ShareRow,
        source_alias="d",
        from_sql=f"{table(using, DisplayMessage)} d",
        where_sql=f"d.{column(using, DisplayMessage, 'conversation')} = %(conversation)s",
        values={"share_id": "%(share)s"},
        params={
            "share": db_value(using, ShareRow, "share", share.pk),
            "conversation": db_value(using, DisplayMessage, "conversation", conversation_id),
        },
    )


def create_share(
    *,
    conversation: ConversationRef,
    created_by: Any,
    mode: str = ShareMode.SNAPSHOT,
    expires_in: int | None = None,
    require_login: bool = False,
) -> tuple[Share, str]:
    """Make a share link of ``conversation``; returns ``(share, token)``. The token is not stored
    and cannot be read again: hand it to the person now.

    ``mode``: ``snapshot`` (the display rows as they are now, frozen; ``snapshot_event_seq`` is the
    conversation's ``last_event_seq``) or ``live`` (the current rows whenever the link is read).
    ``expires_in``: None (never) or seconds, 1 to ``MAX_SHARE_SECONDS``. ``require_login``: only
    signed-in users may read it. ``created_by``: the user (or pk) making it; access is the
    caller's business (the REST route checks the conversation scope). Takes no event_seq and sends
    no signal: a link changes nothing people see in the conversation. Raises ``InvalidContent``,
    ``ConversationNotFound``, ``WriteConflict``.
    """
    _check(mode, expires_in, require_login)
    token = SHARE_TOKEN_PREFIX + secrets.token_urlsafe(32)
    pk = conversation_pk(conversation)
    using = router.db_for_write(Share)
    now = timezone.now()
    with database_errors(), transaction.atomic(using=using):
        locked = lock_conversation(pk, using)  # no write to the rows while they are copied
        snapshot = mode == ShareMode.SNAPSHOT
        share = Share.objects.using(using).create(
            conversation=locked,
            created_by_id=owner_pk(created_by),
            token_hash=share_token_hash(token),
            mode=mode,
            require_login=require_login,
            snapshot_event_seq=locked.last_event_seq if snapshot else None,
            snapshot=shared_summary(locked) if snapshot else None,
            created_at=now,
            expires_at=None if expires_in is None else now + timedelta(seconds=expires_in),
        )
        if snapshot:
            _freeze_rows(using, share, locked.pk)
    return share, token


def revoke_share(*, share: Share | uuid.UUID | str) -> Share:
    """Revoke a share link at once: from the commit on, its token answers like an unknown one.
    Revoking a revoked link changes nothing. Sends ``share_revoked`` after commit (the first
    time). Raises ``ShareNotFound`` for an unknown id, ``WriteConflict``."""
    if isinstance(share, Share):
        pk: Any = share.pk
    else:
        try:
            pk = share if isinstance(share, uuid.UUID) else uuid.UUID(str(share))
        except ValueError:
            raise ShareNotFound(f"no share {share!r}") from None
    using = router.db_for_write(Share)
    with database_errors(), transaction.atomic(using=using):
        manager = Share.objects.using(using)
        changed = manager.filter(pk=pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        found = manager.filter(pk=pk).first()
        if found is None:
            raise ShareNotFound(f"no share {share!r}")
        if changed:
            send_on_commit(
                signals.share_revoked, using, share=found, conversation_id=found.conversation_id
            )
    if isinstance(share, Share):
        share.revoked_at = found.revoked_at
    return found
