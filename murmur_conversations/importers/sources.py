"""Importing files, whole folders and stdin, incrementally (docs/formats.md "Whole folders").

A folder is walked for ``*.jsonl`` and ``*.ndjson`` files; each file's format is told on its own.
Claude Code subagent logs come after the sessions that launched them, and a session file given by
name brings its ``<session>/subagents/agent-*.jsonl`` files along (docs/formats.md "Subagents").
What each file's import reached is kept per owner (``ImportedSource``): a file whose size,
modification time and head (a hash of its first bytes) are unchanged is skipped without being
parsed; a file that grew is read from the byte where the last import ended, its parser going on
from the state it left (``ParseContext.resume``); a file that was truncated or replaced (its head
differs) is read whole again, which imports nothing twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Final

from murmur_conversations import services
from murmur_conversations.exceptions import ConversationsError
from murmur_conversations.importers import registry
from murmur_conversations.importers.base import Chunks, Outcome, message_refusal, run_import
from murmur_conversations.importers.reading import (
    FrameCursor,
    LineCursor,
    NotUTF8,
    check_utf8,
    spool,
)
from murmur_conversations.importers.records import (
    ParseContext,
    Problem,
    SourceLine,
    resumable,
    subagent_links,
)
from murmur_conversations.models import Conversation, ImportedSource

STDIN: Final = "-"
#: Formats whose sources are binary frames, not lines of text (never detected: named with
#: ``--format``).
BINARY_FORMATS: Final = frozenset({"otlp-proto"})
#: File names a folder walk reads.
SUFFIXES: Final = (".jsonl", ".ndjson")
#: Why a file whose conversations were all deleted since its last import is not read again: a
#: deleted conversation stays deleted (reading on from the remembered offset would bring back
#: only its tail); ``--reread`` imports the file whole again.
DELETED_SINCE = "its conversations were deleted since the last import; --reread imports it again"


#: Why a file ``--follow`` read before is not read again: it held only conversations deleted since
#: an import (refused, and said once) and has not changed since.
ONLY_DELETED = "only conversations deleted since an import; --restore-deleted imports them again"


def only_deleted(outcome: Outcome | None) -> bool:
    """Whether an import's ``outcome`` refused deleted conversations and wrote to none."""
    return outcome is not None and bool(outcome.deleted) and not outcome.conversations


def _all_deleted(record: ImportedSource) -> bool:
    """Whether every conversation the remembered import wrote to is gone (False if it wrote none)."""
    ids = [str(pk) for pk in record.conversations or []]
    if not ids:
        return False
    return not Conversation.objects.filter(pk__in=ids).exists()


#: Bytes of a file's head that are hashed to tell an appended file from a replaced one.
HEAD_BYTES: Final = 4096


@dataclass(frozen=True)
class Source:
    """One source to import: ``path`` as given (``-`` for stdin), ``name`` as reported,
    ``resolved`` its real path (empty for stdin), ``skip`` why it is skipped unread, ``subagent``
    whether it is a Claude Code subagent log (read with what its session told of its agents)."""

    path: str
    name: str
    resolved: str = ""
    skip: str = ""
    subagent: bool = False


_AGENT_ID: Final = re.compile(r"agent-[0-9a-f]{6,40}\.jsonl")


def _subagent_log(path: Path) -> bool:
    """Claude Code subagent logs: ``<session>/subagents/agent-*.jsonl``, and in older versions
    ``agent-<hex id>.jsonl`` beside the sessions."""
    if path.suffix != ".jsonl" or not path.name.startswith("agent-"):
        return False
    return path.parent.name == "subagents" or _AGENT_ID.fullmatch(path.name) is not None


def session_of(path: str) -> str | None:
    """The session file a ``<session>/subagents/agent-*.jsonl`` log belongs to
    (``<session>.jsonl`` beside the ``<session>`` folder), else None."""
    log = Path(path)
    if not _subagent_log(log) or log.parent.name != "subagents":
        return None
    folder = log.parent.parent
    return str(folder.parent / f"{folder.name}.jsonl")


def _subagent_logs(session: str) -> list[str]:
    """The ``<session>/subagents/agent-*.jsonl`` files beside a session file, in name order."""
    folder = Path(session).with_suffix("") / "subagents"
    if Path(session).suffix != ".jsonl" or not folder.is_dir():
        return []
    return [str(p) for p in sorted(folder.iterdir()) if p.is_file() and _subagent_log(p)]


def expand(paths: Iterable[str]) -> list[Source]:
    """The sources of ``paths``: stdin, files as given, and the ``*.jsonl``/``*.ndjson`` files of
    folders (recursively, in name order, symbolic links to folders not followed); each real file
    once. Claude Code subagent logs (see :func:`_subagent_log`) come after the other files of
    their folder, which the walk reads before its subfolders, so a session comes before its
    subagents; a session file given by name brings its ``subagents/agent-*.jsonl`` along."""
    seen: set[str] = set()
    out: list[Source] = []

    def add(full: str, name: str) -> None:
        resolved = os.path.realpath(full)
        if resolved not in seen:
            seen.add(resolved)
            out.append(Source(full, name, resolved, subagent=_subagent_log(Path(full))))

    for given in paths:
        if given == STDIN:
            out.append(Source(STDIN, "<stdin>"))
            continue
        if not os.path.isdir(given):
            add(given, given)
            for log in _subagent_logs(given):
                add(log, log)
            continue
        for root, dirs, files in os.walk(given):
            dirs.sort()
            names = sorted(files, key=lambda n: (_subagent_log(Path(root, n)), n))
            for name in names:
                if name.endswith(SUFFIXES):
                    full = os.path.join(root, name)
                    add(full, full)
    return out


@dataclass(frozen=True)
class Facts:
    """What tells a file's version apart: size (bytes), modification time (ns), the sha256 of its
    first ``head_size`` bytes."""

    size: int
    mtime_ns: int
    head_size: int
    head_hash: str


def head_hash(path: str, size: int) -> str:
    """The hex sha256 of the first ``size`` bytes of the file at ``path``."""
    with open(path, "rb") as stream:
        return hashlib.sha256(stream.read(size)).hexdigest()


def facts(path: str) -> Facts:
    """The ``Facts`` of the file at ``path`` (``OSError`` when it cannot be read)."""
    stat = os.stat(path)
    size = min(stat.st_size, HEAD_BYTES)
    return Facts(stat.st_size, stat.st_mtime_ns, size, head_hash(path, size))


@dataclass
class FileResult:
    """What happened to one source: ``status`` is ``imported``, ``appended`` (read from where the
    last import ended), ``reread`` (changed otherwise, read whole again), ``unchanged``,
    ``deleted`` (every conversation it wrote to was deleted since: not read again), ``skipped``,
    ``empty`` or ``refused`` (``reason`` says why)."""

    name: str
    status: str
    format: str = ""
    reason: str = ""
    outcome: Outcome | None = None
    lines: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the source counts as imported (something usable, or known and unchanged, or
        only conversations deleted on purpose)."""
        if self.status in ("unchanged", "appended", "deleted"):
            return True
        return self.outcome is not None and (self.outcome.usable > 0 or bool(self.outcome.deleted))


def _options(fmt: str, conversation_id: str | None) -> str:
    """What, besides the file, decides an import's result: the forced format and key."""
    return hashlib.sha256(f"{fmt}\0{conversation_id or ''}".encode()).hexdigest()


class Importer:
    """Imports sources for one owner with one set of options (``import_conversations``).

    ``report(name, problem)`` is called for every refused line or source; ``on_line(size)`` for
    every line read (progress). ``incremental`` false reads every file whole and remembers
    nothing (so does ``dry_run``); ``final`` false (a pass of ``--follow`` over folders) leaves
    calls open when a file ends; ``restore_deleted`` imports conversations deleted since an
    import again (``run_import``).
    """

    def __init__(
        self,
        *,
        owner: Any,
        fmt: str,
        conversation_id: str | None,
        dry_run: bool,
        report: Callable[[str, Problem], None],
        on_line: Callable[[int], None] | None = None,
        incremental: bool = True,
        final: bool = True,
        restore_deleted: bool = False,
    ) -> None:
        self.owner = owner
        self.fmt = fmt
        self.conversation_id = conversation_id
        self.dry_run = dry_run
        self.report = report
        self.on_line = on_line
        self.incremental = incremental and not dry_run
        self.final = final
        self.restore_deleted = restore_deleted
        self.options = _options(fmt, conversation_id)
        self.known: dict[str, ImportedSource] = {}
        #: Files read whole that held only deleted conversations (not remembered in the database:
        #: a deletion keeps no path), by path key: ``(size, mtime_ns, format)`` when read. Such a
        #: file is not read again by this importer until it changes (``--follow``'s passes).
        self.refused_files: dict[str, tuple[int, int, str]] = {}
        #: What the sessions read so far told of their subagents: agent id -> launching call.
        self.links: dict[str, str] = {}

    def prefetch(self, sources: Iterable[Source]) -> None:
        """Load what was remembered of ``sources`` in a few queries (a re-run over many files)."""
        if not self.incremental:
            return
        keys = [ImportedSource.key_of(s.resolved) for s in sources if s.resolved]
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            for record in ImportedSource.objects.filter(owner=self.owner, path_key__in=chunk):
                self.known[record.path_key] = record

    # ------------------------------------------------------------------ one source

    def run(self, source: Source, stdin: IO[bytes] | None = None) -> FileResult:
        """Import one source; never raises for bad input (the result says what happened)."""
        if source.skip:
            return FileResult(source.name, "skipped", reason=source.skip)
        if source.path == STDIN:
            if stdin is None:
                return self._refuse(source, "no stdin to read")
            with spool(stdin) as stream:
                return self._read(source, stream, fallback_time=None)
        try:
            now = facts(source.path)
        except OSError as error:
            return self._refuse(source, f"cannot read it ({error.strerror or error})")
        refused = self.refused_files.get(ImportedSource.key_of(source.resolved))
        if refused is not None and refused[:2] == (now.size, now.mtime_ns):
            return FileResult(source.name, "deleted", refused[2], reason=ONLY_DELETED)
        record = self._record(source)
        if record is not None and _all_deleted(record):
            return FileResult(source.name, "deleted", record.format, reason=DELETED_SINCE)
        if record is not None and record.head_size <= now.size:
            same_head = (
                record.head_hash == now.head_hash
                if record.head_size == now.head_size
                else record.head_hash == head_hash(source.path, record.head_size)
            )
            if same_head and record.offset <= now.size:
                if (record.size, record.mtime_ns) == (now.size, now.mtime_ns):
                    return FileResult(source.name, "unchanged", record.format)
                if record.state is not None:
                    return self._file(source, now, record, append=True)
        status = "imported" if record is None else "reread"
        return self._file(source, now, record, append=False, status=status)

    def _chunks(self) -> contextlib.AbstractContextManager[Chunks | None]:
        """The transactions of one file's import (``base.Chunks``); none for a dry run."""
        return contextlib.nullcontext() if self.dry_run else Chunks()

    def _record(self, source: Source) -> ImportedSource | None:
        if not self.incremental:
            return None
        key = ImportedSource.key_of(source.resolved)
        record = self.known.get(key)
        if record is None:
            record = ImportedSource.objects.filter(owner=self.owner, path_key=key).first()
        if record is not None and record.options != self.options:
            return None
        return record

    def _refuse(self, source: Source, reason: str) -> FileResult:
        problem = Problem(None, f"refused whole: {reason}")
        self.report(source.name, problem)
        return FileResult(source.name, "refused", reason=reason, problems=[problem])

    def _file(
        self,
        source: Source,
        now: Facts,
        record: ImportedSource | None,
        *,
        append: bool,
        status: str = "appended",
    ) -> FileResult:
        mtime = datetime.fromtimestamp(now.mtime_ns / 1e9, tz=UTC)
        # Where the import ended is remembered in its last chunk: a file that fits one chunk is
        # one transaction, rows and offset together (docs/formats.md "Transactions").
        with open(source.path, "rb") as stream, self._chunks() as chunks:
            result = self._read(
                source,
                stream,
                fallback_time=mtime,
                record=record if append else None,
                status=status,
                previous=record,
                chunks=chunks,
            )
            if result.status not in ("refused", "empty") and not self.dry_run:
                self._remember(source, now, result, record)
            if only_deleted(result.outcome) and record is None and not result.problems:
                key = ImportedSource.key_of(source.resolved)
                self.refused_files[key] = (now.size, now.mtime_ns, result.format)
        return result

    def _read(
        self,
        source: Source,
        stream: IO[bytes],
        *,
        fallback_time: datetime | None,
        record: ImportedSource | None = None,
        status: str = "imported",
        previous: ImportedSource | None = None,
        chunks: Chunks | None = None,
    ) -> FileResult:
        start = record.offset if record is not None else 0
        stream.seek(start)
        binary = (record.format if record is not None else self.fmt) in BINARY_FORMATS
        if not binary:
            try:
                check_utf8(stream, start)
            except NotUTF8 as error:
                return self._refuse(source, str(error))
        cursor = (FrameCursor if binary else LineCursor)(
            stream,
            offset=start,
            line=record.line if record is not None else 0,
            on_line=self.on_line,
        )
        lines: Iterator[SourceLine] = iter(cursor)
        resume: dict[str, Any] | None = None
        if record is not None:
            fmt = record.format
            resume = record.state
        elif binary:
            fmt = self.fmt  # a binary format is never detected: it is named with --format
        else:
            decided = self._format(source, lines)
            if isinstance(decided, FileResult):
                return decided
            fmt, head = decided
            lines = _chain(head, lines)
        parts = Path(os.path.abspath(source.path)).parts if source.path != STDIN else ()
        context = ParseContext(
            path_parts=parts,
            conversation_id=self.conversation_id,
            resume=resume,
            links=self._links_for(source) if source.subagent else {},
            check=message_refusal,
        )
        parser = registry.make_parser(fmt, context)
        problems: list[Problem] = []

        def report(problem: Problem) -> None:
            if problem.refused:
                problems.append(problem)
            self.report(source.name, problem)

        titles = previous.titles if previous is not None else {}
        outcome = run_import(
            lines=lines,
            parser=parser,
            source=fmt,
            owner=self.owner,
            dry_run=self.dry_run,
            report=report,
            fallback_time=fallback_time,
            previous_titles={k: (v[0], v[1]) for k, v in titles.items() if _title_entry(v)},
            final=self.final,
            restore_deleted=self.restore_deleted,
            chunks=chunks,
        )
        result = FileResult(source.name, status, fmt, outcome=outcome, problems=problems)
        result.lines = cursor.line - (record.line if record is not None else 0)
        self.cursor = cursor
        self.parser = parser
        self.links.update(subagent_links(parser))
        return result

    def _links_for(self, source: Source) -> dict[str, str]:
        """What is known of the agents of a subagent log: what the sessions read in this run
        told, else what its session's last import remembered (its parser state's ``agents``)."""
        links = dict(self.links)
        session = session_of(source.path)
        if session is None:
            return links
        key = ImportedSource.key_of(os.path.realpath(session))
        record = self.known.get(key) or (
            ImportedSource.objects.filter(owner=self.owner, path_key=key).first()
        )
        state = record.state if record is not None else None
        agents = state.get("agents") if isinstance(state, dict) else None
        if isinstance(agents, dict):
            for agent, call in agents.items():
                if isinstance(agent, str) and isinstance(call, str):
                    links.setdefault(agent, call)
        return links

    def _format(
        self, source: Source, lines: Iterator[SourceLine]
    ) -> tuple[str, list[SourceLine]] | FileResult:
        """The format of a source read from its start (detected or forced), with the lines read
        to tell it; or the result of refusing it."""
        detected, head = registry.detect(lines)
        if self.fmt == "auto":
            if detected is None:
                if not head:
                    return FileResult(source.name, "empty", "murmur")
                return self._refuse(source, registry.undetected_reason(head))
            return detected, head
        if registry.contradicts(self.fmt, detected):
            return self._refuse(
                source,
                f"this looks like {detected}, not {self.fmt}; pass --format {detected} or "
                "--format auto",
            )
        return self.fmt, head

    def _remember(
        self, source: Source, now: Facts, result: FileResult, previous: ImportedSource | None
    ) -> None:
        """Keep where this import ended, unless a line was refused (other than a last line still
        being written): such a file is read whole again next time, and its lines reported again."""
        cursor = self.cursor
        if any(p.line is None or p.line <= cursor.line for p in result.problems):
            if previous is not None:
                services.forget_imported_source(owner=self.owner, path=source.resolved)
            return
        outcome = result.outcome
        if outcome is None or (only_deleted(outcome) and not previous):
            return  # nothing but deleted conversations: no memory of the file either
        conversations = list(previous.conversations) if previous is not None else []
        conversations += [c for c in outcome.conversations if c not in conversations]
        titles = dict(previous.titles) if previous is not None else {}
        titles.update({pk: [title, rank] for pk, (title, rank) in outcome.titles.items()})
        try:
            services.remember_imported_source(
                owner=self.owner,
                path=source.resolved,
                format=result.format,
                options=self.options,
                size=now.size,
                mtime_ns=now.mtime_ns,
                head_size=now.head_size,
                head_hash=now.head_hash,
                offset=cursor.offset,
                line=cursor.line,
                state=resumable(self.parser),
                conversations=conversations,
                titles=titles,
            )
        except ConversationsError as error:
            self.report(
                source.name, Problem(None, f"where this import ended was not kept: {error}")
            )


def _title_entry(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int)
    )


def _chain(head: list[SourceLine], rest: Iterator[SourceLine]) -> Iterator[SourceLine]:
    yield from head
    yield from rest
