"""Which agent-log files a CLI will delete soon, and whether each is captured here (docs/capture.md,
``manage.py capture_report``).

Claude Code deletes a transcript at its start-up once the file's modification time is older than
``cleanupPeriodDays`` days (``~/.claude/settings.json``, 30 when unset), so a file's deletion date
is its modification time plus that period. Codex has no setting or sweep that deletes its
rollouts that we know of: its files are never at risk. A file is *captured* when an import read
it to its current end (its ``ImportedSource`` has the file's head and an offset at its size), or
when it holds only conversations its owner deleted here on purpose (their ``DeletedSource``).
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from django.contrib.auth import get_user_model

from murmur_conversations.importers import registry
from murmur_conversations.importers.reading import iter_lines
from murmur_conversations.importers.sources import Importer, Source, expand, head_hash
from murmur_conversations.models import DeletedSource, ImportedSource

CLAUDE: Final = "claude-code"
CODEX: Final = "codex"
#: Claude Code's ``cleanupPeriodDays`` when the setting is unset (its documented default).
CLAUDE_DEFAULT_DAYS: Final = 30


@dataclass(frozen=True)
class Retention:
    """How long a CLI keeps its session files: ``days`` after their last modification (a number
    of days, possibly fractional), or None when it deletes none automatically; ``origin`` says
    where that came from; ``warning`` why a setting was not used (empty when it was, or unset)."""

    cli: str
    days: float | None
    origin: str
    warning: str = ""


def home() -> Path:
    """The user's home folder, read from ``$HOME`` at each call."""
    return Path(os.path.expanduser("~"))


def claude_folder() -> Path:
    """Claude Code's folder: ``$CLAUDE_CONFIG_DIR`` when set (as Claude Code reads it), else
    ``~/.claude``."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured) if configured else home() / ".claude"


def codex_folder() -> Path:
    """Codex's folder: ``$CODEX_HOME`` when set (as Codex reads it), else ``~/.codex``."""
    configured = os.environ.get("CODEX_HOME")
    return Path(configured) if configured else home() / ".codex"


def default_folders() -> list[Path]:
    """The CLIs' session folders: ``<claude folder>/projects`` and ``<codex folder>/sessions``
    (whether or not they exist)."""
    return [claude_folder() / "projects", codex_folder() / "sessions"]


def claude_retention() -> Retention:
    """Claude Code's retention from the ``cleanupPeriodDays`` of its user ``settings.json``;
    :data:`CLAUDE_DEFAULT_DAYS` when the file or the key is absent, and also, with a
    ``warning``, when the file cannot be read, is not a JSON object or the value is not a
    number of days at least 0. Never raises."""
    path = claude_folder() / "settings.json"
    default = f"Claude Code's default of {CLAUDE_DEFAULT_DAYS} days"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Retention(CLAUDE, CLAUDE_DEFAULT_DAYS, f"{default} ({path} not found)")
    except (OSError, UnicodeDecodeError) as error:
        why = getattr(error, "strerror", None) or error
        return Retention(
            CLAUDE, CLAUDE_DEFAULT_DAYS, default, f"{path}: cannot read it ({why}); {default}"
        )
    try:
        settings = json.loads(text)
    except ValueError as error:
        return Retention(
            CLAUDE, CLAUDE_DEFAULT_DAYS, default, f"{path}: not JSON ({error}); {default}"
        )
    if not isinstance(settings, dict):
        warning = f"{path}: not a JSON object; {default}"
        return Retention(CLAUDE, CLAUDE_DEFAULT_DAYS, default, warning)
    if "cleanupPeriodDays" not in settings:
        return Retention(CLAUDE, CLAUDE_DEFAULT_DAYS, f"{default} (cleanupPeriodDays unset)")
    value = settings["cleanupPeriodDays"]
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        warning = f"{path}: cleanupPeriodDays {value!r} is not a number of days >= 0; {default}"
        return Retention(CLAUDE, CLAUDE_DEFAULT_DAYS, default, warning)
    return Retention(CLAUDE, value, f"cleanupPeriodDays {value} in {path}")


def codex_retention() -> Retention:
    """Codex's retention: none (no setting or sweep of Codex deletes rollout files that we know
    of; docs/capture.md)."""
    return Retention(CODEX, None, "Codex deletes no session file automatically")


def cli_of(path: str) -> str | None:
    """The format of the file at ``path`` as ``import_conversations`` detects it from its first
    lines (``registry.detect``, at most ``registry.SNIFF_LINES`` lines read); None when it cannot
    be told or read."""
    try:
        with open(path, "rb") as stream:
            found, _head = registry.detect(
                itertools.islice(iter_lines(stream), registry.SNIFF_LINES)
            )
    except (OSError, ValueError):
        return None
    return found


@dataclass
class Session:
    """One session file at risk: its ``path`` (as found), the ``cli`` that wrote it, when that CLI
    deletes it (``deletes_at``, UTC; in the past when overdue), whether it is ``captured`` and
    ``status`` how (``imported``, ``deleted here``) or why not (``not imported``, ``imported up to
    byte N of M``, ``changed since its import``)."""

    path: str
    cli: str
    deletes_at: datetime
    captured: bool
    status: str

    def as_json(self, now: datetime) -> dict[str, Any]:
        """The session as ``{path, cli, deletes_at (ISO UTC), overdue, captured, status}``."""
        return {
            "path": self.path,
            "cli": self.cli,
            "deletes_at": iso(self.deletes_at),
            "overdue": self.deletes_at <= now,
            "captured": self.captured,
            "status": self.status,
        }


@dataclass
class Report:
    """What :func:`report` found: the ``retention`` per CLI, the ``folders`` read (``missing`` the
    default ones that do not exist), ``horizon`` (now plus the days looked ahead), the sessions at
    risk, soonest first, and how many files were looked at."""

    now: datetime
    horizon: datetime
    retention: dict[str, Retention]
    folders: list[str]
    missing: list[str] = field(default_factory=list)
    sessions: list[Session] = field(default_factory=list)
    files: int = 0

    @property
    def uncaptured(self) -> list[Session]:
        """The sessions at risk that are not captured."""
        return [s for s in self.sessions if not s.captured]


def iso(moment: datetime) -> str:
    """``moment`` as ISO 8601 in UTC, to the second, with ``Z``."""
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def report(
    folders: Iterable[str] | None, *, days: float, owner: Any = None, now: datetime | None = None
) -> Report:
    """The sessions of ``folders`` (files or folders walked as ``import_conversations`` walks
    them; None: :func:`default_folders`, those that exist) that their CLI deletes before ``now``
    plus ``days`` days, and whether each is captured for ``owner`` (a user; None: any owner).
    Only files whose deletion date falls in the window are read (their first lines, to tell
    their CLI); a file that vanishes meanwhile is left out."""
    now = now or datetime.now(UTC)
    retention = {CLAUDE: claude_retention(), CODEX: codex_retention()}
    missing: list[str] = []
    if folders is None:
        found = [str(f) for f in default_folders()]
        missing = [f for f in found if not os.path.isdir(f)]
        chosen = [f for f in found if f not in missing]
    else:
        chosen = list(folders)
    result = Report(now, now + timedelta(days=days), retention, chosen, missing)
    longest = max((r.days for r in retention.values() if r.days is not None), default=None)
    for source in expand(chosen):
        result.files += 1
        session = _at_risk(source, result, longest, owner)
        if session is not None:
            result.sessions.append(session)
    result.sessions.sort(key=lambda s: (s.deletes_at, s.path))
    return result


def _at_risk(source: Source, result: Report, longest: float | None, owner: Any) -> Session | None:
    """The :class:`Session` of ``source`` when its CLI deletes it before the horizon, else None."""
    try:
        stat = os.stat(source.path)
    except OSError:
        return None
    modified = datetime.fromtimestamp(stat.st_mtime_ns / 1e9, tz=UTC)
    if longest is None or modified + timedelta(days=longest) > result.horizon:
        return None  # no CLI deletes it in the window, whatever wrote it
    cli = cli_of(source.path)
    kept = result.retention.get(cli or "")
    if kept is None or kept.days is None:
        return None
    deletes_at = modified + timedelta(days=kept.days)
    if deletes_at > result.horizon:
        return None
    try:
        captured, status = captured_status(source, stat.st_size, cli or "", owner)
    except OSError:
        return None  # it vanished while being looked at
    return Session(source.path, kept.cli, deletes_at, captured, status)


def captured_status(source: Source, size: int, fmt: str, owner: Any) -> tuple[bool, str]:
    """Whether the file of ``source`` (``size`` bytes, format ``fmt``) is captured for ``owner``
    (None: any owner), and the status that says how or why not (see :class:`Session`)."""
    records = ImportedSource.objects.filter(path_key=ImportedSource.key_of(source.resolved))
    if owner is not None:
        records = records.filter(owner=owner)
    best = ""
    for record in records:
        if record.head_size > size or head_hash(source.path, record.head_size) != record.head_hash:
            best = best or "changed since its import"
        elif record.offset >= size:
            return True, "imported"
        else:
            best = f"imported up to byte {record.offset} of {size}"
    if _deleted_on_purpose(source, fmt, owner):
        return True, "deleted here"
    return False, best or "not imported"


def _deleted_on_purpose(source: Source, fmt: str, owner: Any) -> bool:
    """Whether an import of ``source`` for ``owner`` (None: each owner who deleted a conversation
    of ``fmt``) would refuse every conversation in it as deleted on purpose: a dry run, which
    writes nothing, through the importer's own refusal (``DeletedSource``)."""
    if owner is not None:
        owners = [owner]
    else:
        ids = DeletedSource.objects.filter(source=fmt).values_list("owner_id", flat=True)
        owners = list(get_user_model()._default_manager.filter(pk__in=ids).order_by("pk"))
    for candidate in owners:
        importer = Importer(
            owner=candidate,
            fmt="auto",
            conversation_id=None,
            dry_run=True,
            report=lambda _name, _problem: None,
        )
        outcome = importer.run(source).outcome
        if outcome is not None and outcome.deleted and not outcome.usable:
            return True
    return False
