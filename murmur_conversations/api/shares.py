"""Share links (docs/api.md "Share links"): ``GET``/``POST conversations/{id}/shares/``,
``DELETE conversations/{id}/shares/{share_id}/`` for the conversation's readers, and
``GET shared/{token}/`` for anyone holding a link.

Every answer of ``shared/`` carries ``Cache-Control: no-store``, ``Referrer-Policy: no-referrer``
and ``X-Robots-Tag: noindex, nofollow``; a malformed, unknown, revoked or expired token is the one
constant 404, byte for byte the same.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Final

from django.db.models import Q
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response

from murmur_conversations import services
from murmur_conversations.api import serializers as docs
from murmur_conversations.api.base import AppAPIView
from murmur_conversations.api.exceptions import (
    ConversationGone,
    InvalidCursor,
    InvalidField,
    Unavailable,
)
from murmur_conversations.api.pagination import CursorBinding, body, keyset_page, page_limit
from murmur_conversations.api.params import read_json_object, read_share
from murmur_conversations.api.schema import CURSOR_PARAM, ID_PARAM, LIMIT_PARAM, Param, document
from murmur_conversations.api.viewsets import (
    ERROR_RESPONSES,
    WRITE_ERRORS,
    ConversationViewSet,
)
from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import (
    ConversationNotFound,
    InvalidContent,
    ShareNotFound,
    WriteConflict,
)
from murmur_conversations.models import AccessSurface, DisplayMessage, Share, ShareMode, ShareRow
from murmur_conversations.representations import (
    iso,
    shared_row,
    shared_row_shown,
    shared_summary,
)
from murmur_conversations.selectors import share_for_token

SHARE_ID_PARAM = Param("share_id", str, "path", "The share link's id.")
TOKEN_PARAM = Param("token", str, "path", "The share link's token.")
#: Headers of every ``shared/`` answer: the token is in the address, so keep it out of caches,
#: referrers and search engines.
SHARED_HEADERS: Final = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Robots-Tag": "noindex, nofollow",
}


def share_row(share: Share, now: datetime | None = None) -> dict[str, Any]:
    """``{id, mode, require_login, snapshot_event_seq, created_at, expires_at, revoked_at,
    active}`` (never the token: only its hash is stored)."""
    now = now or timezone.now()
    expired = share.expires_at is not None and share.expires_at <= now
    return {
        "id": str(share.pk),
        "mode": share.mode,
        "require_login": share.require_login,
        "snapshot_event_seq": share.snapshot_event_seq,
        "created_at": iso(share.created_at),
        "expires_at": iso(share.expires_at),
        "revoked_at": iso(share.revoked_at),
        "active": share.revoked_at is None and not expired,
    }


def share_url(request: Request, token: str) -> str:
    """The address of a link: ``SHARE_URL`` with the token (made absolute on this host when it is
    a path), else the absolute address of ``GET shared/<token>/`` where this API is mounted."""
    template = app_settings.share_url
    if template is not None:
        address = template.replace("{token}", token)
        return request.build_absolute_uri(address) if address.startswith("/") else address
    match = getattr(request._request, "resolver_match", None)
    namespace = getattr(match, "namespace", "") or "murmur_conversations"
    try:
        path = reverse(f"{namespace}:shared", kwargs={"token": token})
    except NoReverseMatch:  # mounted without its namespace
        path = reverse("shared", kwargs={"token": token})
    return request.build_absolute_uri(path)


def _share_key(key: list[Any]) -> tuple[datetime, uuid.UUID]:
    try:
        created_at, pk = key
        return datetime.fromisoformat(created_at.replace("Z", "+00:00")), uuid.UUID(pk)
    except (TypeError, ValueError, AttributeError):
        raise InvalidCursor(
            "cursor is not valid for this listing; start again without it"
        ) from None


class ShareViewSet(ConversationViewSet):
    """The links of one conversation; the conversation is resolved (and scoped) by the base
    class, so another user's conversation cannot be shared (the usual 404). A link made by a
    ``SCOPE`` reader who is not the owner is written to the access log (``api-shares``)."""

    @document(
        summary="The conversation's share links, newest first (never their tokens)",
        params=[ID_PARAM, LIMIT_PARAM, CURSOR_PARAM],
        responses={200: docs.SharePageSerializer, **ERROR_RESPONSES},
    )
    def links(self, request: Request, id: str) -> Response:
        """Every link of the conversation, revoked and expired ones included (``active`` false);
        ``total`` counts them."""
        binding = CursorBinding("shares", str(self.conversation.pk))
        key = binding.read(request.query_params.get("cursor"))
        limit = page_limit(request.query_params)
        shares = Share.objects.filter(conversation=self.conversation)
        rows = shares
        if key is not None:
            created_at, pk = _share_key(key)
            rows = rows.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, pk__lt=pk))
        fetched = list(rows.order_by("-created_at", "-id")[: limit + 1])
        page = keyset_page(
            fetched, limit=limit, binding=binding, key_of=lambda s: [iso(s.created_at), str(s.pk)]
        )
        now = timezone.now()
        return Response(body([share_row(s, now) for s in page.rows], page, shares.count()))

    @document(
        summary="Make a share link (snapshot by default); its token is shown this once",
        params=[ID_PARAM],
        request=docs.ShareRequestSerializer,
        responses={201: docs.ShareCreatedSerializer, **WRITE_ERRORS},
    )
    def create(self, request: Request, id: str) -> Response:
        """Through ``services.create_share``: 201 with the link, its ``token`` and ``url``. The
        body (all keys optional, an empty body too): ``mode``, ``expires_in``, ``require_login``."""
        data = read_json_object(
            request, expected="'mode', 'expires_in' and/or 'require_login'", allow_empty=True
        )
        options = read_share(data)
        self._log_view(AccessSurface.API_SHARES)
        try:
            share, token = services.create_share(
                conversation=self.conversation, created_by=request.user, **options
            )
        except InvalidContent as error:
            raise InvalidField(str(error)) from None
        except ConversationNotFound:
            raise ConversationGone() from None
        except WriteConflict:
            raise Unavailable() from None
        answer = {**share_row(share), "token": token, "url": share_url(request, token)}
        return Response(answer, status=status.HTTP_201_CREATED)

    @document(
        summary="Revoke a share link at once",
        params=[ID_PARAM, SHARE_ID_PARAM],
        responses={204: None, **WRITE_ERRORS},
    )
    def revoke(self, request: Request, id: str, share_id: str) -> Response:
        """Through ``services.revoke_share``; 204, also for a link already revoked. A link of
        another conversation, a missing or malformed id: the usual 404."""
        try:
            pk = uuid.UUID(share_id)
        except ValueError:
            raise ConversationGone() from None
        if str(pk) != share_id:
            raise ConversationGone()
        share = Share.objects.filter(conversation=self.conversation, pk=pk).first()
        if share is None:
            raise ConversationGone()
        try:
            services.revoke_share(share=share)
        except ShareNotFound:
            raise ConversationGone() from None
        except WriteConflict:
            raise Unavailable() from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class SharedView(AppAPIView):
    """``GET shared/{token}/``: read-only, for anyone holding the token (any signed-in user when
    the link requires a login). The token is checked before anything else is read."""

    permission_classes = ()
    share: Share

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """DRF's checks (authentication, throttles), the 405 check, then the token: one 404 for
        every token that opens nothing; ``not_authenticated`` when the link needs a login."""
        super().initial(request, *args, **kwargs)
        self.check_method_allowed(request)
        share = share_for_token(kwargs.get("token"))
        if share is None:
            raise ConversationGone()
        user = request.user
        if share.require_login and not (
            user is not None and user.is_authenticated and getattr(user, "is_active", True)
        ):
            raise exceptions.NotAuthenticated()
        self.share = share

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        """Every answer, errors included, with :data:`SHARED_HEADERS`."""
        response = super().finalize_response(request, response, *args, **kwargs)
        for name, value in SHARED_HEADERS.items():
            response[name] = value
        return response

    @document(
        summary="A shared conversation: its summary and a page of its display rows, oldest first",
        params=[TOKEN_PARAM, LIMIT_PARAM, CURSOR_PARAM],
        responses={200: docs.SharedPageSerializer, **ERROR_RESPONSES},
    )
    def get(self, request: Request, token: str) -> Response:
        """A snapshot link: the summary and rows frozen when it was made; a live link: the
        current ones. Rows of injected context are left out (a page may hold fewer than ``limit``
        rows: follow ``next_cursor`` until it is null); see ``representations.shared_row``."""
        share = self.share
        binding = CursorBinding("shared", str(share.pk))
        key = binding.read(request.query_params.get("cursor"))
        if key is not None and (len(key) != 1 or type(key[0]) is not int):
            raise InvalidCursor("cursor is not valid for this listing; start again without it")
        after = 0 if key is None else key[0]
        limit = page_limit(request.query_params)
        conversation = share.conversation
        rows: Any
        if share.mode == ShareMode.SNAPSHOT:
            rows = ShareRow.objects.filter(share=share)
            summary = dict(share.snapshot or {})
            event_seq = share.snapshot_event_seq or 0
        else:
            rows = DisplayMessage.objects.filter(conversation=conversation)
            summary = shared_summary(conversation)
            event_seq = conversation.last_event_seq
        fetched = list(rows.filter(seq__gt=after).order_by("seq")[: limit + 1])
        page = keyset_page(fetched, limit=limit, binding=binding, key_of=lambda r: [r.seq])
        private = app_settings.private_tools
        return Response(
            {
                "conversation": summary,
                "share": {
                    "mode": share.mode,
                    "event_seq": event_seq,
                    "expires_at": iso(share.expires_at),
                    "require_login": share.require_login,
                },
                "messages": [
                    shared_row(row, private_tools=private)
                    for row in page.rows
                    if shared_row_shown(row)
                ],
                "next_cursor": page.next_cursor,
            }
        )
