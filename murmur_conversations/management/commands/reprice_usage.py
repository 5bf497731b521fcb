"""``manage.py reprice_usage``: price a period's usage rows again at today's prices
(``services.reprice_usage``; docs/usage.md "Re-pricing")."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.http import QueryDict

from murmur_conversations import services
from murmur_conversations.api.exceptions import InvalidFilter
from murmur_conversations.api.params import read_period
from murmur_conversations.management.base import AppCommand
from murmur_conversations.prices import GENAI_PRICES


def _period(start: str | None, end: str | None) -> tuple[datetime | None, datetime | None]:
    """``[since, until)`` of the UTC days ``start`` to ``end`` (both included, as ``GET usage/``
    reads them); ``CommandError`` for a bad day or ``start`` after ``end``."""
    query = QueryDict(mutable=True)
    for name, value in (("from", start), ("to", end)):
        if value is not None:
            query[name] = value
    try:
        period = read_period(query)
    except InvalidFilter as error:
        raise CommandError(f"{error.detail} (--from, --to)", returncode=2) from None
    since = None if period.start is None else datetime.combine(period.start, time(), UTC)
    until = None
    if period.end is not None and period.end < date.max:
        until = datetime.combine(period.end + timedelta(days=1), time(), UTC)
    return since, until


class Command(AppCommand):
    help = (
        "Price the usage rows of UTC days --from to --to (both included; default: all) again at "
        "today's prices (PRICES over the installed genai-prices) and record which prices priced "
        "each row."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from", dest="start", metavar="DAY", help="first UTC day")
        parser.add_argument("--to", dest="end", metavar="DAY", help="last UTC day")
        parser.add_argument("--database", default="default", help="database alias")

    def handle(self, *args: Any, **options: Any) -> None:
        since, until = _period(options["start"], options["end"])
        changed = services.reprice_usage(since=since, until=until, using=options["database"])
        self.stdout.write(f"{changed} usage row(s) re-priced ({GENAI_PRICES}, PRICES over it)")
