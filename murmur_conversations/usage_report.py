"""Token usage over a period (docs/usage.md, ``GET usage/``): sums of ``MessageUsage`` rows by
day, model or conversation. Reads only; the conversations to count are always given as a queryset
(the API passes ``selectors.conversations_for(user)``).

Every figure is grouped by model first. A group's cost is the sum of its rows' costs, as each
row was priced when it was written (or last re-priced: ``services.reprice_usage``), exact
(integers of ``MessageUsage.cost_nanocents``); the tokens of rows with no price are its
``unpriced`` part. Days are UTC days of the messages' ``created_at``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, Sum
from django.db.models.functions import TruncDate

from murmur_conversations.models import Conversation, MessageUsage
from murmur_conversations.usage import (
    COUNTERS,
    NANOCENTS,
    Bill,
    ByModel,
    Usage,
    add_by_model,
    counted,
)

_UNPRICED = Q(cost_nanocents__isnull=True)
_SUMS = {
    **{f"all_{name}": Sum(name) for name in COUNTERS},
    **{f"unpriced_{name}": Sum(name, filter=_UNPRICED) for name in COUNTERS},
    "cost": Sum("cost_nanocents"),
}


@dataclass(frozen=True)
class Tally:
    """Usage of a group: ``by_model`` (``{model: {counter: int}}``) and its ``bill``: the costs
    the rows were priced at when written (or last re-priced), and the tokens of rows with no
    price."""

    by_model: ByModel = field(default_factory=dict)
    bill: Bill = field(default_factory=Bill)

    def add(self, model: str, usage: Usage, bill: Bill) -> Tally:
        """This tally with ``model``'s ``usage`` and ``bill`` added."""
        return Tally(add_by_model(self.by_model, model, usage), self.bill + bill)


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


def _by_model(
    rows: QuerySet[MessageUsage], *keys: str
) -> list[tuple[tuple[Any, ...], str, Usage, Bill]]:
    """``(keys, model, usage, bill)`` of each group of ``rows`` by ``keys`` and model."""
    grouped = rows.order_by().values(*keys, "model").annotate(**_SUMS)
    result = []
    for item in grouped:
        usage = Usage(*(int(item[f"all_{name}"] or 0) for name in COUNTERS))
        unpriced = Usage(*(int(item[f"unpriced_{name}"] or 0) for name in COUNTERS))
        cost = Decimal(int(item["cost"] or 0)) / NANOCENTS
        bill = Bill(cost, counted(usage) - counted(unpriced)) + Bill.of(
            item["model"], unpriced, None
        )
        result.append((tuple(item[key] for key in keys), item["model"], usage, bill))
    return result


def totals(conversations: QuerySet[Conversation], period: Period) -> Tally:
    """Everything in the period."""
    result = Tally()
    for _key, model, usage, bill in _by_model(period.rows(conversations)):
        result = result.add(model, usage, bill)
    return result


def by_day(conversations: QuerySet[Conversation], period: Period) -> list[tuple[date, Tally]]:
    """``(day, tally)`` for each UTC day with usage in the period, oldest first."""
    rows = period.rows(conversations).annotate(day=TruncDate("created_at", tzinfo=UTC))
    days: dict[date, Tally] = {}
    for (day,), model, usage, bill in _by_model(rows, "day"):
        days[day] = days.get(day, Tally()).add(model, usage, bill)
    return sorted(days.items(), key=lambda item: item[0])


def by_model(conversations: QuerySet[Conversation], period: Period) -> list[tuple[str, Tally]]:
    """``(model, tally)`` for each model with usage in the period, by name."""
    models: dict[str, Tally] = {}
    for _key, model, usage, bill in _by_model(period.rows(conversations)):
        models[model] = models.get(model, Tally()).add(model, usage, bill)
    return sorted(models.items(), key=lambda item: item[0])


@dataclass(frozen=True)
class ConversationUsage:
    """One conversation's usage in the period."""

    conversation_id: uuid.UUID
    title: str
    created_at: datetime
    tally: Tally


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
    usage: dict[uuid.UUID, Tally] = {pk: Tally() for pk, _title, _created in served}
    if served:
        rows = period.rows(conversations).filter(conversation__in=list(usage))
        for (pk,), model, counts, bill in _by_model(rows, "conversation_id"):
            usage[pk] = usage[pk].add(model, counts, bill)
    return (
        [
            ConversationUsage(conversation_id=pk, title=title, created_at=created, tally=usage[pk])
            for pk, title, created in served
        ],
        len(fetched) > limit,
    )
