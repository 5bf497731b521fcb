"""Re-pricing usage rows (docs/usage.md "Re-pricing"): ``reprice_usage``.

Private to ``murmur_conversations.services``.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from murmur_conversations.conf import app_settings
from murmur_conversations.models import MessageUsage
from murmur_conversations.usage import COUNTERS, Usage, row_cost

_BATCH = 2000


def reprice_usage(
    *, since: datetime | None = None, until: datetime | None = None, using: str = "default"
) -> int:
    """Price every usage row created at or after ``since`` and before ``until`` (aware
    datetimes; None: no bound) again at today's prices (``PRICES`` over the installed
    ``genai-prices``), each at its own ``created_at``, and record which prices priced it
    (``cost_nanocents``, ``priced_with``). Returns the number of rows whose cost or source
    changed. Works in batches of 2000 rows by primary key, one transaction each; the counters are
    never touched. Rows written meanwhile are priced by the write path at the same prices."""
    rows = MessageUsage.objects.using(using).order_by("pk")
    if since is not None:
        rows = rows.filter(created_at__gte=since)
    if until is not None:
        rows = rows.filter(created_at__lt=until)
    book = app_settings.prices
    changed = 0
    last = 0
    fields = ("pk", "model", "created_at", "cost_nanocents", "priced_with", *COUNTERS)
    while True:
        batch = list(rows.filter(pk__gt=last).only(*fields)[:_BATCH])
        if not batch:
            return changed
        last = batch[-1].pk
        stale = []
        for row in batch:
            tokens = Usage(*(getattr(row, name) for name in COUNTERS))
            cost, source = row_cost(row.model, tokens, book, at=row.created_at)
            if (cost, source) != (row.cost_nanocents, row.priced_with):
                row.cost_nanocents, row.priced_with = cost, source
                stale.append(row)
        if stale:
            with transaction.atomic(using=using):
                MessageUsage.objects.using(using).bulk_update(
                    stale, ["cost_nanocents", "priced_with"]
                )
            changed += len(stale)
