"""``manage.py purge_conversations``: retention and erasure (``services.purge_conversations``;
docs/deployment.md "Retention and holds")."""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from typing import Any, Final

from django.core.management.base import CommandError, CommandParser
from django.db.models import QuerySet

from murmur_conversations import services
from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import WriteConflict
from murmur_conversations.management.base import AppCommand, owner_named
from murmur_conversations.models import Conversation
from murmur_conversations.representations import iso
from murmur_conversations.selectors import held_condition, purge_candidates, retention_cutoff

_AGE: Final = re.compile(r"([0-9]{1,6})([dhmw]?)")
_UNITS: Final = {"": "days", "d": "days", "w": "weeks", "h": "hours", "m": "minutes"}
_RETRIES: Final = 3


def parse_age(value: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``2w`` or a number of days; ``CommandError`` (exit 2)
    otherwise."""
    match = _AGE.fullmatch(value.strip())
    if match is None:
        raise CommandError(
            f"--older-than must look like 30d, 12h, 90m or 2w, not {value!r}", returncode=2
        )
    try:
        return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    except OverflowError:
        raise CommandError(
            f"--older-than {value!r} is longer than a calendar can count", returncode=2
        ) from None


class Command(AppCommand):
    help = (
        "Delete conversations whose retained_at (the later of the last write and its import) is "
        "older than --older-than (default: RETENTION_DAYS) and/or those "
        "of --owner, in bounded batches; held conversations are kept. Safe from cron and "
        "concurrently."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            metavar="AGE",
            help="30d, 12h, 90m or 2w since retained_at: the last write, or the import that "
            "brought it in when later (default: RETENTION_DAYS days)",
        )
        parser.add_argument("--owner", help="only this user's conversations (USERNAME_FIELD)")
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="list what would be deleted and why (retained_at and the rule); delete nothing",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=None,
            help="conversations per transaction (default: the service's, 50)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        older_than = None
        if options["older_than"] is not None:
            older_than = parse_age(options["older_than"])
        elif app_settings.retention_days is not None:
            older_than = timedelta(days=app_settings.retention_days)
        owner = owner_named(options["owner"]) if options["owner"] is not None else None
        if owner is None and older_than is None:
            raise CommandError(
                "nothing to purge: give --older-than or --owner, or set RETENTION_DAYS",
                returncode=2,
            )
        batch_size = options["batch_size"]
        if batch_size is not None and batch_size < 1:
            raise CommandError("--batch-size must be a positive integer", returncode=2)
        candidates = purge_candidates(owner=owner, older_than=older_than)
        if options["dry_run"]:
            self._explain(candidates, owner, older_than, options)
            return
        held = candidates.filter(held_condition()).count()
        total = candidates.count() - held
        deleted = self._purge(owner, older_than, batch_size, total)
        self.stdout.write(f"deleted {deleted} conversation(s); {held} held conversation(s) kept")

    def _explain(
        self,
        candidates: QuerySet[Conversation],
        owner: Any,
        older_than: timedelta | None,
        options: dict[str, Any],
    ) -> None:
        """The dry run: one line per top-level conversation the purge would take (or keeps, held),
        oldest first, with the rule that takes it and the value of ``retained_at`` it applies to;
        then the totals, children included."""
        rules = []
        if older_than is not None:
            given = options["older_than"]
            spelled = f"--older-than {given}" if given else "RETENTION_DAYS"
            cutoff = retention_cutoff(older_than)
            rules.append(f"{spelled}: retained_at before {iso(cutoff) if cutoff else '-'}")
        if owner is not None:
            rules.append(f"--owner {options['owner']}")
        rule = "; ".join(rules)
        top = candidates.filter(parent__isnull=True).order_by("retained_at", "pk")
        held_pks = set(top.filter(held_condition()).values_list("pk", flat=True))
        total = held = 0
        for pk, retained_at, title in top.values_list("pk", "retained_at", "title").iterator():
            children = _descendant_count(pk)
            family = f" with {children} child conversation(s)" if children else ""
            why = f"retained_at {iso(retained_at)} ({rule}); title {title!r}{family}"
            if pk in held_pks:
                held += 1
                self.stdout.write(f"keep {pk}: held; {why}")
            else:
                total += 1 + children
                self.stdout.write(f"would delete {pk}: {why}")
        self.stdout.write(f"would delete {total} conversation(s); {held} held conversation(s) kept")

    def _purge(
        self, owner: Any, older_than: timedelta | None, batch_size: int | None, total: int
    ) -> int:
        from tqdm import tqdm

        deleted = 0
        with tqdm(
            total=total,
            unit="conv",
            desc="purge",
            file=sys.stderr,
            disable=not sys.stderr.isatty(),
        ) as bar:
            failures = 0
            while True:
                try:
                    done, more = services.purge_conversations(
                        owner=owner,
                        older_than=older_than,
                        progress=bar.update,
                        **({} if batch_size is None else {"batch_size": batch_size}),
                    )
                except WriteConflict as error:
                    failures += 1
                    if failures >= _RETRIES:
                        raise CommandError(
                            f"the database stayed busy ({error}); {deleted} conversation(s) "
                            "deleted so far; run the command again",
                            returncode=1,
                        ) from None
                    continue
                deleted += done
                if not more or not done:
                    return deleted


def _descendant_count(pk: Any) -> int:
    """How many conversations descend from ``pk`` (children, theirs...): deleted with it."""
    count, level = 0, [pk]
    while level:
        level = list(Conversation.objects.filter(parent_id__in=level).values_list("pk", flat=True))
        count += len(level)
    return count
