"""The HTTP comparison views (docs/benchmarks.md, "What the variants and floors are"), served only by the bench servers.

Each answers the same question as ours (``GET api/conversations/<id>/display-messages/``): the
newest-first page of 50 display rows of a conversation the token's user owns, as JSON. They differ
in how much machinery they use:

- ``DRFCursorPage``: a stock DRF ``ListAPIView`` with a ``ModelSerializer`` and
  ``CursorPagination`` ordered by ``-seq`` (what a DRF user writes first);
- ``DRFLimitOffsetPage``: the same with ``LimitOffsetPagination`` (``?offset=`` = depth; it counts
  the rows on every request);
- ``plain_json``: a Django view, the token looked up with the ORM, ``.values()`` rows,
  ``JsonResponse``; ``?before=<seq>`` is the cursor;
- ``raw_orjson``: the floor: two SQL statements on Django's connection, ``orjson.dumps``.

``save`` is the websocket row's writer: ``services.save_message`` inside the server process, so
the embedded layer sees the write.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import generics, pagination, serializers
from rest_framework.authtoken.models import Token
from rest_framework.permissions import IsAuthenticated

from murmur_conversations.models import Conversation, DisplayMessage

PAGE = 50
FIELDS = (
    "id",
    "seq",
    "message_type",
    "content_type",
    "content",
    "status",
    "tool_call_id",
    "metadata",
    "created_event_seq",
    "event_seq",
    "created_at",
    "updated_at",
)


class DisplaySerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = DisplayMessage
        fields = FIELDS


class SeqCursor(pagination.CursorPagination):
    ordering = "-seq"
    page_size = PAGE


class LimitOffset(pagination.LimitOffsetPagination):
    default_limit = PAGE


class DRFCursorPage(generics.ListAPIView):  # type: ignore[type-arg]
    serializer_class = DisplaySerializer
    pagination_class = SeqCursor
    permission_classes = (IsAuthenticated,)

    def get_queryset(self) -> Any:
        return DisplayMessage.objects.filter(
            conversation_id=self.kwargs["id"], conversation__owner=self.request.user
        )


class DRFLimitOffsetPage(DRFCursorPage):
    pagination_class = LimitOffset

    def get_queryset(self) -> Any:
        return super().get_queryset().order_by("-seq")


def _token_user_id(request: HttpRequest) -> int | None:
    header = request.headers.get("Authorization", "")
    if not header.startswith("Token "):
        return None
    token = Token.objects.filter(key=header[6:]).values_list("user_id", flat=True).first()
    return token


def _before(request: HttpRequest) -> int | None:
    raw = request.GET.get("before")
    return int(raw) if raw and raw.isdigit() else None


def plain_json(request: HttpRequest, id: uuid.UUID) -> HttpResponse:
    """Token -> user, the owner check, 51 rows as dicts, ``JsonResponse``."""
    user_id = _token_user_id(request)
    if user_id is None:
        return JsonResponse({"detail": "not authenticated"}, status=401)
    conversation = Conversation.objects.filter(pk=id, owner_id=user_id).values("last_seq").first()
    if conversation is None:
        return JsonResponse({"detail": "not found"}, status=404)
    rows = DisplayMessage.objects.filter(conversation_id=id).order_by("-seq")
    before = _before(request)
    if before is not None:
        rows = rows.filter(seq__lt=before)
    page = list(rows.values(*FIELDS)[: PAGE + 1])
    more = len(page) > PAGE
    page = page[:PAGE]
    return JsonResponse(
        {
            "results": page,
            "next": page[-1]["seq"] if more else None,
            "total": conversation["last_seq"],
        }
    )


def _display_table() -> tuple[str, str]:
    return Conversation._meta.db_table, DisplayMessage._meta.db_table


def raw_orjson(request: HttpRequest, id: uuid.UUID) -> HttpResponse:
    """The floor: the token and the page (owner check joined in) in two statements, orjson."""
    import orjson

    header = request.headers.get("Authorization", "")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT user_id FROM authtoken_token WHERE key = %s", [header.removeprefix("Token ")]
        )
        token = cursor.fetchone()
        if token is None:
            return HttpResponse(b'{"detail":"not authenticated"}', status=401)
        before = _before(request) or 2**62
        cursor.execute(floor_page_sql(), [id, token[0], before, PAGE + 1])
        rows = cursor.fetchall()
    return HttpResponse(orjson.dumps(floor_page_body(rows)), content_type="application/json")


def floor_page_sql() -> str:
    """The floor's page: the rows of conversation ``%s`` owned by user ``%s`` below seq ``%s``,
    newest first, ``LIMIT %s``, each with the conversation's ``last_seq`` last."""
    conv, display = _display_table()
    return f"""SELECT d.id, d.seq, d.message_type, d.content_type, d.content, d.status,
            d.tool_call_id, d.metadata, d.created_event_seq, d.event_seq, d.created_at,
            d.updated_at, c.last_seq
        FROM {conv} c JOIN {display} d ON d.conversation_id = c.id
        WHERE c.id = %s AND c.owner_id = %s AND d.seq < %s
        ORDER BY d.seq DESC LIMIT %s"""


def floor_page_body(rows: list[Any]) -> dict[str, Any]:
    """The floor's JSON body from :func:`floor_page_sql` rows (``PAGE + 1`` asked for)."""
    results = [dict(zip(FIELDS, row[:12], strict=True)) for row in rows[:PAGE]]
    return {
        "results": results,
        "next": results[-1]["seq"] if len(rows) > PAGE else None,
        "total": rows[0][12] if rows else 0,
    }


@csrf_exempt
def save(request: HttpRequest, id: uuid.UUID) -> HttpResponse:
    """POST: save the body as one user message of conversation ``id`` (the websocket row)."""
    from murmur_conversations import services

    if request.method != "POST":
        return HttpResponse(status=405)
    services.save_message(
        conversation=id, message={"role": "user", "content": request.body.decode()}
    )
    return HttpResponse(status=204)


class _QueryCounter:
    """Counts the statements run on every database connection of this server process."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.count += 1
        return execute(sql, params, many, context)


QUERIES = _QueryCounter()


def count_queries(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver (``bench.asgi``): count this connection's statements."""
    if QUERIES not in connection.execute_wrappers:
        connection.execute_wrappers.append(QUERIES)


def queries(request: HttpRequest) -> HttpResponse:
    """GET: ``{"queries": n, "poller": m}``: statements run by this process so far, and by its
    frame-log pollers (the websocket row's tail line). Runs none itself."""
    from murmur_conversations.realtime import poller

    return JsonResponse({"queries": QUERIES.count, "poller": poller.queries_made()})
