"""``GET usage/`` (docs/usage.md): the caller's token usage and cost over a period, by day, model
or conversation. Scoped exactly as the conversation list (``selectors.conversations_for``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Final

from rest_framework.request import Request
from rest_framework.response import Response

from murmur_conversations import usage_report
from murmur_conversations.api import serializers as docs
from murmur_conversations.api.base import AppAPIView
from murmur_conversations.api.exceptions import InvalidCursor
from murmur_conversations.api.pagination import CursorBinding, page_limit
from murmur_conversations.api.params import GROUP_BY, read_group_by, read_period
from murmur_conversations.api.schema import CURSOR_PARAM, LIMIT_PARAM, Param, choice, document
from murmur_conversations.representations import iso
from murmur_conversations.selectors import conversations_for
from murmur_conversations.usage import usage_body

#: A day as ``from``/``to`` take it: YYYY-MM-DD, or empty (the same as leaving it out).
DAY: Final = {"anyOf": [{"type": "string", "maxLength": 0}, {"type": "string", "format": "date"}]}
PARAMS: list[Param] = [
    Param(
        "from",
        DAY,
        "query",
        "First UTC day, YYYY-MM-DD (included; not after to); default: no limit.",
    ),
    Param("to", DAY, "query", "Last UTC day, YYYY-MM-DD (included); default: no limit."),
    Param("group_by", choice(*GROUP_BY), "query", "day (default), model or conversation."),
    LIMIT_PARAM,
    CURSOR_PARAM,
]
_BAD_CURSOR = "cursor is not valid for this listing; start again without it"


def _body(tally: usage_report.Tally) -> dict[str, Any]:
    return usage_body(tally.by_model, tally.bill)


def _conversation_key(key: list[Any] | None) -> tuple[datetime, uuid.UUID] | None:
    if key is None:
        return None
    try:
        created_at, pk = key
        return datetime.fromisoformat(created_at.replace("Z", "+00:00")), uuid.UUID(pk)
    except (TypeError, ValueError, AttributeError):
        raise InvalidCursor(_BAD_CURSOR) from None


class UsageView(AppAPIView):
    """``GET usage/?from=&to=&group_by=day|model|conversation``."""

    @document(
        summary="The caller's token usage and cost over a period, by day, model or conversation",
        params=PARAMS,
        responses={
            200: docs.UsagePageSerializer,
            **dict.fromkeys((400, 401, 403, 429), docs.ErrorSerializer),
        },
    )
    def get(self, request: Request) -> Response:
        """``{"group_by", "from", "to", "results", "next_cursor", "total", "usage"}``: ``results``
        are ``{"day"|"model"|"conversation_id" and "title", "usage"}``, ``usage`` the period's
        totals; ``group_by=conversation`` is paged (``limit``, ``cursor``), the others come
        whole. 400 ``invalid_filter`` for a bad ``group_by``, ``from`` or ``to``."""
        group_by = read_group_by(request.query_params)
        period = read_period(request.query_params)
        scoped = conversations_for(request.user)
        results: list[dict[str, Any]]
        next_cursor = None
        if group_by == "day":
            results = [
                {"day": day.isoformat(), "usage": _body(tally)}
                for day, tally in usage_report.by_day(scoped, period)
            ]
            total = len(results)
        elif group_by == "model":
            results = [
                {"model": model, "usage": _body(tally)}
                for model, tally in usage_report.by_model(scoped, period)
            ]
            total = len(results)
        else:
            binding = CursorBinding(
                "usage",
                str(request.user.pk),
                (("from", str(period.start or "")), ("to", str(period.end or ""))),
            )
            after = _conversation_key(binding.read(request.query_params.get("cursor")))
            limit = page_limit(request.query_params)
            page, more = usage_report.by_conversation(scoped, period, after=after, limit=limit)
            results = [
                {
                    "conversation_id": str(item.conversation_id),
                    "title": item.title,
                    "usage": _body(item.tally),
                }
                for item in page
            ]
            if more and page:
                last = page[-1]
                next_cursor = binding.sign([iso(last.created_at), str(last.conversation_id)])
            total = usage_report.conversations_with_usage(scoped, period).count()
        return Response(
            {
                "group_by": group_by,
                "from": period.start.isoformat() if period.start else None,
                "to": period.end.isoformat() if period.end else None,
                "results": results,
                "next_cursor": next_cursor,
                "total": total,
                "usage": _body(usage_report.totals(scoped, period)),
            }
        )
