"""Token usage over a period (docs/usage.md, ``GET usage/``): sums of ``MessageUsage`` rows by
day, model or conversation. Reads only; the conversations to count are always given as a queryset
(the API passes ``selectors.conversations_for(user)``).

Every figure is grouped by model first, so each group's cost is priced per model exactly
(``usage.usage_body``). Days are UTC days of the messages' ``created_at``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, Sum
from django.db.models.functions import TruncDate

from murmur_conversations.models import Conversation, MessageUsage
from murmur_conversations.usage import COUNTERS, ByModel, Usage, add_by_model

_SUMS = {name: Sum(name) for name in COUNTERS}


@dataclass(frozen=True)
class Period:
    """UTC days ``start`` to ``end``, both included; None is open-ended."""

    start: date | None = None
    end: date | None = None

    def rows(self, conversations: QuerySet[Conversation]) -> QuerySet[MessageUsage]:
        """The usage rows of ``conversations`` in this period."""
        rows = MessageUsage.objects.using(conversations.db).filter(
            conversation__in=conversations.order_by().values("pk")
        )
        return rows.filter(self.condition())

    def condition(self, prefix: str = "") -> Q:
        """The period as a filter on ``<prefix>created_at``."""
        condition = Q()
        if self.start is not None:
            condition &= Q(
                **{f"{prefix}created_at__gte": datetime.combine(self.start, time(), UTC)}
            )
        if self.end is not None and self.end < date.max:  # 9999-12-31: no upper bound
            after = datetime.combine(self.end + timedelta(days=1), time(), UTC)
            condition &= Q(**{f"{prefix}created_at__lt": after})
        return condition


def _by_model(rows: QuerySet[MessageUsage], *keys: str) -> list[tuple[tuple[Any, ...], str, Usage]]:
    grouped = rows.order_by().values(*keys, "model").annotate(**_SUMS)
    return [
        (
            tuple(item[key] for key in keys),
            item["model"],
            Usage(*(int(item[name] or 0) for name in COUNTERS)),
        )
        for item in grouped
    ]


def totals(conversations: QuerySet[Conversation], period: Period) -> ByModel:
    """Everything in the period, by model."""
    result: ByModel = {}
    for _key, model, usage in _by_model(period.rows(conversations)):
        result = add_by_model(result, model, usage)
    return result


def by_day(conversations: QuerySet[Conversation], period: Period) -> list[tuple[date, ByModel]]:
    """``(day, by model)`` for each UTC day with usage in the period, oldest first."""
    rows = period.rows(conversations).annotate(day=TruncDate("created_at", tzinfo=UTC))
    days: dict[date, ByModel] = {}
    for (day,), model, usage in _by_model(rows, "day"):
        days[day] = add_by_model(days.get(day, {}), model, usage)
    return sorted(days.items())


def by_model(conversations: QuerySet[Conversation], period: Period) -> list[tuple[str, ByModel]]:
    """``(model, {model: counters})`` for each model with usage in the period, by name."""
    return [
        (model, {model: counts}) for model, counts in sorted(totals(conversations, period).items())
    ]


@dataclass(frozen=True)
class ConversationUsage:
    """One conversation's usage in the period."""

    conversation_id: uuid.UUID
    title: str
    created_at: datetime
    by_model: ByModel


def conversations_with_usage(
    conversations: QuerySet[Conversation], period: Period
) -> QuerySet[Conversation]:
    """The conversations that have usage rows in the period, newest created first (``created_at``
    desc, then ``id`` desc: columns that never change, so keyset pages hold while agents write)."""
    rows = MessageUsage.objects.using(conversations.db).filter(
        Q(conversation=OuterRef("pk")) & period.condition()
    )
    return conversations.filter(Exists(rows)).order_by("-created_at", "-pk")


def by_conversation(
    conversations: QuerySet[Conversation],
    period: Period,
    *,
    after: tuple[datetime, uuid.UUID] | None = None,
    limit: int = 50,
) -> tuple[list[ConversationUsage], bool]:
    """A keyset page of :func:`conversations_with_usage` after ``after`` (``(created_at, id)`` of
    the last one served), each with its usage in the period; and whether more follow. Two
    queries whatever the page size."""
    page = conversations_with_usage(conversations, period)
    if after is not None:
        created_at, pk = after
        page = page.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, pk__lt=pk))
    fetched = list(page.values_list("pk", "title", "created_at")[: limit + 1])
    served = fetched[:limit]
    usage: dict[uuid.UUID, ByModel] = {pk: {} for pk, _title, _created in served}
    if served:
        rows = period.rows(conversations).filter(conversation__in=list(usage))
        for (pk,), model, counts in _by_model(rows, "conversation_id"):
            usage[pk] = add_by_model(usage[pk], model, counts)
    return (
        [
            ConversationUsage(
                conversation_id=pk, title=title, created_at=created, by_model=usage[pk]
            )
            for pk, title, created in served
        ],
        len(fetched) > limit,
    )
