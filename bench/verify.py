"""After a track: every conversation's counters equal its rows, whoever wrote them (ours, a floor),
token counters included.

This keeps the floors honest: a floor that wrote fewer rows or skipped a counter would look faster
than it is. Conversations filled for the page benchmark hold display rows only.
"""

from __future__ import annotations

from django.db.models import Count, Max


def mismatches(alias: str) -> list[str]:
    """One line per conversation whose counters disagree with its rows (empty when all agree)."""
    from murmur_conversations.models import Conversation, DisplayMessage, Message

    def grouped(
        model: type[Message] | type[DisplayMessage], field: str
    ) -> dict[object, tuple[int, int]]:
        rows = (
            model.objects.using(alias)
            .order_by()
            .values("conversation_id")
            .annotate(n=Count("pk"), top=Max(field))
        )
        return {row["conversation_id"]: (row["n"], row["top"]) for row in rows}

    records, displays = grouped(Message, "position"), grouped(DisplayMessage, "seq")
    problems = []
    for conv in Conversation.objects.using(alias):
        expected: tuple[int, ...] = (
            conv.record_length,
            conv.record_length,
            conv.last_seq,
            conv.last_seq,
        )
        found: tuple[int, ...] = (*records.get(conv.pk, (0, 0)), *displays.get(conv.pk, (0, 0)))
        if conv.title == "bench page":
            expected, found = expected[2:], found[2:]
        if expected != found:
            problems.append(f"{conv.title}: counters {expected} but rows {found}")
    problems += _usage_mismatches(alias)
    return problems


def _usage_mismatches(alias: str) -> list[str]:
    """Conversations whose token counters (docs/usage.md) disagree with their usage rows."""
    from django.db.models import Sum

    from murmur_conversations.models import Conversation, MessageUsage
    from murmur_conversations.usage import COUNTERS

    sums = {
        row.pop("conversation_id"): row
        for row in MessageUsage.objects.using(alias)
        .order_by()
        .values("conversation_id")
        .annotate(**{name: Sum(name) for name in COUNTERS})
    }
    problems = []
    for conv in Conversation.objects.using(alias).only("pk", "title", *COUNTERS):
        found = sums.get(conv.pk, {})
        expected = {name: getattr(conv, name) for name in COUNTERS}
        if expected != {name: found.get(name) or 0 for name in COUNTERS}:
            problems.append(f"{conv.title}: usage {expected} but rows {found}")
    return problems
