"""``manage.py capture_report``: the agent sessions a CLI deletes within ``--days`` days, and
whether each is captured here (``importers.capture``, docs/capture.md).

Exit codes: 0 when every session at risk is captured (or none is at risk); 1 when one is not;
2 for a bad argument (``--days`` not a whole number from 0 to :data:`MAX_DAYS`, an unknown
``--owner``, a FOLDER that does not exist). An unreadable Claude Code settings file is not an
error: the report uses the default retention and says why on stderr.
"""

from __future__ import annotations

import json
import os
from typing import Any, Final

from django.core.management.base import CommandError, CommandParser

from murmur_conversations.importers import capture
from murmur_conversations.management.base import AppCommand, owner_named

#: The longest ``--days``: a hundred years.
MAX_DAYS: Final = 36600


def _days(value: str) -> int:
    try:
        days = int(value)
    except ValueError:
        raise CommandError(
            f"--days must be a whole number of days, not {value!r}", returncode=2
        ) from None
    if not 0 <= days <= MAX_DAYS:
        raise CommandError(f"--days must be from 0 to {MAX_DAYS}, not {days}", returncode=2)
    return days


class Command(AppCommand):
    help = (
        "List the agent sessions Claude Code deletes within --days days (cleanupPeriodDays, "
        "by modification time) and whether each was imported; exits 1 when one was not."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "folders",
            nargs="*",
            metavar="FOLDER",
            help="session folders or files (default: ~/.claude/projects and ~/.codex/sessions)",
        )
        parser.add_argument(
            "--days", default="7", metavar="N", help="how many days to look ahead (default 7)"
        )
        parser.add_argument(
            "--owner", help="count only imports of this user (USERNAME_FIELD); default: any owner"
        )
        parser.add_argument("--json", action="store_true", help="one JSON object on stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        days = _days(options["days"])
        owner = owner_named(options["owner"]) if options["owner"] is not None else None
        folders: list[str] = options["folders"]
        for folder in folders:
            if not os.path.exists(folder):
                raise CommandError(f"{folder}: no such folder or file", returncode=2)
        found = capture.report(folders or None, days=days, owner=owner)
        for retention in found.retention.values():
            if retention.warning:
                self.stderr.write(f"warning: {retention.warning}")
        if options["json"]:
            self.stdout.write(json.dumps(_as_json(found, days), ensure_ascii=False))
        else:
            self._table(found, days)
        if found.uncaptured:
            raise CommandError(
                f"{len(found.uncaptured)} session(s) at risk are not captured; import them "
                "(python manage.py import_conversations FOLDER --owner USER)",
                returncode=1,
            )

    def _table(self, found: capture.Report, days: int) -> None:
        for retention in found.retention.values():
            if retention.days is None:
                self.stdout.write(f"{retention.cli}: {retention.origin}; none at risk")
            else:
                self.stdout.write(
                    f"{retention.cli}: deletes a session {retention.days:g} day(s) after its "
                    f"last change ({retention.origin})"
                )
        for folder in found.missing:
            self.stdout.write(f"{folder}: not found; nothing to read there")
        self.stdout.write(
            f"{found.files} file(s) read in {', '.join(found.folders) or 'no folder'}; "
            f"{len(found.sessions)} session(s) deleted by {capture.iso(found.horizon)} (in {days} "
            "day(s)) or overdue, "
            f"{len(found.uncaptured)} not captured"
        )
        if not found.sessions:
            return
        self.stdout.write(f"  {'deletes at':<20}  {'captured':<8}  path (status)")
        for session in found.sessions:
            when = "now (overdue)" if session.deletes_at <= found.now else ""
            self.stdout.write(
                f"  {when or capture.iso(session.deletes_at):<20}  "
                f"{'yes' if session.captured else 'NO':<8}  {session.path} ({session.status})"
            )


def _as_json(found: capture.Report, days: int) -> dict[str, Any]:
    """The report as one object: ``now``, ``days``, ``horizon``, ``retention`` per CLI (``days``
    null when it deletes nothing), ``folders``, ``missing``, ``files``, ``sessions``
    (``Session.as_json``) and ``uncaptured`` (a count)."""
    return {
        "now": capture.iso(found.now),
        "days": days,
        "horizon": capture.iso(found.horizon),
        "retention": {
            cli: {"days": r.days, "origin": r.origin, "warning": r.warning or None}
            for cli, r in found.retention.items()
        },
        "folders": found.folders,
        "missing": found.missing,
        "files": found.files,
        "sessions": [s.as_json(found.now) for s in found.sessions],
        "uncaptured": len(found.uncaptured),
    }
