"""``GET search/`` (docs/search.md): the caller's display rows that match a query, best first,
in keyset pages. Scoped exactly as the conversation list (``selectors.conversations_for``): a
search never returns, counts or hints at another user's words."""

from __future__ import annotations

import math
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from murmur_conversations.api import serializers as docs
from murmur_conversations.api.base import AppAPIView
from murmur_conversations.api.exceptions import InvalidCursor
from murmur_conversations.api.pagination import CursorBinding, page_limit
from murmur_conversations.api.params import read_search
from murmur_conversations.api.schema import (
    CURSOR_PARAM,
    LIMIT_PARAM,
    QUERY_PATTERN,
    Param,
    document,
)
from murmur_conversations.representations import search_hit_row
from murmur_conversations.search import MAX_QUERY_CHARS, SearchQuery, search_hits
from murmur_conversations.selectors import conversations_for

Q_PARAM = Param(
    "q",
    {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS, "pattern": QUERY_PATTERN},
    "query",
    'The words to find: stemmed words, "quoted phrases", -excluded, or (websearch_to_tsquery).',
    required=True,
)
_BAD_CURSOR = "cursor is not valid for this listing; start again without it"


def _search_key(key: list[Any] | None) -> tuple[float, int] | None:
    """``(rank, id)`` of a search cursor (signed by us; checked all the same)."""
    if key is None:
        return None
    if len(key) != 2:
        raise InvalidCursor(_BAD_CURSOR)
    rank, pk = key
    if (
        isinstance(rank, bool)
        or not isinstance(rank, int | float)
        or not math.isfinite(rank)
        or type(pk) is not int
    ):
        raise InvalidCursor(_BAD_CURSOR)
    return float(rank), pk


class SearchView(AppAPIView):
    """``GET search/?q=&limit=&cursor=``."""

    @document(
        summary="Full-text search over the caller's conversations, best first",
        params=[Q_PARAM, LIMIT_PARAM, CURSOR_PARAM],
        responses={
            200: docs.SearchPageSerializer,
            **dict.fromkeys((400, 401, 403, 429), docs.ErrorSerializer),
        },
    )
    def get(self, request: Request) -> Response:
        """``{"results": [<hit>], "next_cursor"}``: 400 ``invalid_query`` for a missing, blank
        or unreadable ``q``, ``invalid_cursor`` for a cursor of another listing, caller or ``q``.
        No ``total``: counting every hit would cost as much as ranking them all."""
        query = read_search(request.query_params, required=True)
        assert query is not None
        page = search_page(
            request.user,
            query,
            cursor=request.query_params.get("cursor"),
            limit=page_limit(request.query_params),
        )
        return Response(page)


def search_page(user: Any, query: SearchQuery, *, cursor: str | None, limit: int) -> dict[str, Any]:
    """One page of ``user``'s search hits for ``query``, best first: ``{"results": [<hit>],
    "next_cursor"}`` (``representations.search_hit_row``), over the conversations
    ``selectors.conversations_for`` gives them, as ``GET search/`` and the MCP server's
    ``search_conversations`` answer it. ``cursor``: one this listing gave for this user and
    query, or None for the first page; ``InvalidCursor`` otherwise. ``limit``: hits per page."""
    binding = CursorBinding("search", str(user.pk), (("q", query.raw),))
    after = _search_key(binding.read(cursor))
    hits, more = search_hits(conversations_for(user), query, after=after, limit=limit)
    next_cursor = (
        binding.sign([hits[-1].rank, hits[-1].display_message_id]) if more and hits else None
    )
    return {"results": [search_hit_row(hit) for hit in hits], "next_cursor": next_cursor}
