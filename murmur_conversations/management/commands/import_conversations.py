"""``manage.py import_conversations``: bring agent logs and message lists in (docs/formats.md).

Exit codes (docs/formats.md "What every import does"): 0 complete; 1 when any line or source was
refused; 2 when no source had a usable line, and for usage errors (unknown owner or format,
``--follow`` with several sources, no PATH that exists); :data:`EXIT_MISSING` (3) when some PATHs
do not exist and everything that does was imported (each missing one is named on stderr; refused
lines, 1, take precedence). A ``--follow`` stopped by Ctrl-C or SIGTERM while it waits ends as a
finished import does: summary, then the exit code of what it read.
Every line read is accounted for: each source's summary ends with how many lines were read and
how many of them were imported, kept as source records, not kept, or refused (docs/formats.md
"Every line accounted for").
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, Any, Final

from django.core.management.base import CommandError, CommandParser

from murmur_conversations.importers import registry
from murmur_conversations.importers.base import (
    Outcome,
    interrupt_open_calls,
    message_refusal,
    run_import,
)
from murmur_conversations.importers.reading import follow_lines
from murmur_conversations.importers.records import ParseContext, Problem, SourceLine, excerpt
from murmur_conversations.importers.sources import (
    BINARY_FORMATS,
    ONLY_DELETED,
    FileResult,
    Importer,
    Source,
    expand,
    only_deleted,
)
from murmur_conversations.management.base import AppCommand, owner_named
from murmur_conversations.realtime import layer_is_process_local
from murmur_conversations.validation import source_key

#: Seconds ``--follow`` waits at the end of a file before looking for appended lines.
FOLLOW_POLL_SECONDS: Final = 0.25
#: Said on stderr by ``--follow`` when live events cannot leave this process.
PROCESS_LOCAL_NOTE: Final = (
    "note: the channel layer is process-local: browsers get the durable messages of this import "
    "through database tailing, but streamed text (deltas) reaches them only with a shared layer; "
    "set CHANNEL_LAYERS to one (channels_redis, docs/websocket.md) to see it live."
)
#: A progress bar is shown on a terminal, or for sources at least this large (bytes).
LONG_IMPORT_BYTES: Final = 64 * 1024 * 1024
STDIN: Final = "-"
#: The exit code when some PATHs do not exist and everything that does was imported.
EXIT_MISSING: Final = 3


#: Rows of the end table before it is summed up per status.
TABLE_ROWS: Final = 20
#: Seconds ``--follow`` on folders waits between two passes.
FOLDER_POLL_SECONDS: Final = 1.0
STATUSES: Final = (
    "imported",
    "appended",
    "reread",
    "unchanged",
    "deleted",
    "skipped",
    "empty",
    "refused",
)


def _size(source: Source) -> int:
    if source.path == STDIN or source.skip:
        return 0
    try:
        return os.path.getsize(source.path)
    except OSError:
        return 0


class _Progress:
    """A tqdm bar on stderr over the bytes of every source (files done, lines, MB/s), shown when
    stderr is a terminal or the sources are long; silent otherwise."""

    def __init__(self, total: int, files: int) -> None:
        self.total = total
        self.files = files
        self.done = 0
        self.lines = 0
        self.bar: Any = None

    def __enter__(self) -> _Progress:
        if sys.stderr.isatty() or self.total >= LONG_IMPORT_BYTES:
            from tqdm import tqdm

            self.bar = tqdm(
                total=self.total, unit="B", unit_scale=True, file=sys.stderr, desc="import"
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()

    def file(self, name: str) -> None:
        """A new source starts."""
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(f"file {self.done}/{self.files}, {self.lines} lines")

    def line(self, size: int) -> None:
        """A line of ``size`` bytes was read."""
        self.lines += 1
        if self.bar is not None:
            self.bar.update(size)
            if not self.lines % 1000:
                self.bar.set_postfix_str(f"file {self.done}/{self.files}, {self.lines} lines")


class Command(AppCommand):
    help = (
        "Import conversations from agent logs and message lists (murmur records, muse journals, "
        "Claude Code transcripts and stream-json, Codex rollouts and exec streams, OpenAI and "
        "Anthropic message lists, agentfootprint envelopes, chat frontends' lists, OpenTelemetry "
        "GenAI traces). '-' reads stdin; --follow ingests "
        "one live stream."
    )
    stealth_options = ("stdin", "follow_wait")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH", help="files to import; - is stdin")
        parser.add_argument("--owner", required=True, help="the owner's username (USERNAME_FIELD)")
        parser.add_argument(
            "--format",
            default="auto",
            help=f"auto (default) or one of: {', '.join(registry.FORMAT_NAMES)}",
        )
        parser.add_argument(
            "--conversation-id",
            metavar="ID",
            help="the conversation key to import into (vercel-ui, ag-ui, openai-items: also the "
            "id of one of the owner's conversations, to merge into)",
        )
        parser.add_argument(
            "--follow",
            action="store_true",
            help="ingest one live source line by line: stdin until it ends, or a file, waiting "
            "for appends until interrupted",
        )
        parser.add_argument("--dry-run", action="store_true", help="read and check; write nothing")
        parser.add_argument(
            "--reread",
            action="store_true",
            help="read every file whole, not only what was appended since the last import",
        )
        parser.add_argument(
            "--restore-deleted",
            action="store_true",
            help="import conversations that were deleted since an import again (without it, "
            "a deleted conversation is refused however it comes back)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        fmt = options["format"]
        paths: list[str] = options["paths"]
        self._check_format(fmt)
        owner = owner_named(options["owner"])
        missing = self._check_paths(paths)
        paths = [p for p in paths if p not in missing]
        self.reread = bool(options.get("reread"))
        self.restore_deleted = bool(options.get("restore_deleted"))
        if options["conversation_id"] is not None:  # the key as stored (bytes not UTF-8 repaired)
            options["conversation_id"] = source_key(options["conversation_id"])
        self._run(paths, owner, fmt, options)
        if missing:
            raise CommandError(
                f"{len(missing)} PATH(s) not found and not imported: {', '.join(missing)}; "
                "everything else was imported",
                returncode=EXIT_MISSING,
            )

    def _run(self, paths: list[str], owner: Any, fmt: str, options: dict[str, Any]) -> None:
        """Import the existing ``paths`` (once, or following them)."""
        stdin = options.get("stdin") or sys.stdin.buffer
        folders = [p for p in paths if p != STDIN and Path(p).is_dir()]
        if options["follow"]:
            if not folders and len(paths) != 1:
                raise CommandError(
                    "--follow takes exactly one source (a file or stdin) or folders", returncode=2
                )
            if fmt in BINARY_FORMATS:
                raise CommandError(
                    f"--follow reads lines of text; import {fmt} sources without it", returncode=2
                )
            follow = self._follow_folders if folders else self._follow
            wait = options.get("follow_wait") or (wait_for_folder if folders else wait_for_append)
            with self._stoppable():
                follow(
                    paths,
                    stdin=stdin,
                    fmt=fmt,
                    owner=owner,
                    conversation_id=options["conversation_id"],
                    dry_run=options["dry_run"],
                    wait=self._until_stopped(wait),
                )
            return
        sources = expand(paths)
        results = self._import_all(
            sources,
            stdin=stdin,
            importer=self._importer(owner, fmt, options["conversation_id"], options["dry_run"]),
            dry_run=options["dry_run"],
            table=bool(folders) or len(sources) > 1,
        )
        self._exit(results, options["dry_run"])

    def _importer(
        self, owner: Any, fmt: str, conversation_id: str | None, dry_run: bool, final: bool = True
    ) -> Importer:
        return Importer(
            owner=owner,
            fmt=fmt,
            conversation_id=conversation_id,
            dry_run=dry_run,
            report=self._report,
            incremental=not self.reread,
            final=final,
            restore_deleted=self.restore_deleted,
        )

    def _import_all(
        self,
        sources: list[Source],
        *,
        stdin: IO[bytes],
        importer: Importer,
        dry_run: bool,
        table: bool,
        show: Callable[[FileResult], bool] | None = None,
    ) -> list[FileResult]:
        """Import every source with one progress bar (files, lines, MB/s; docs/formats.md "Whole
        folders"), then print the table of what happened. ``show`` picks the results that get
        their line (default: all); a stop asked for (SIGTERM) ends the pass between two files."""
        importer.prefetch(sources)
        started = time.monotonic()
        total = sum(_size(s) for s in sources)
        results: list[FileResult] = []
        with _Progress(total, len(sources)) as progress:
            importer.on_line = progress.line
            for source in sources:
                if self._stop_asked:
                    break
                progress.file(source.name)
                result = importer.run(source, stdin)
                results.append(result)
                if len(sources) <= TABLE_ROWS and (show is None or show(result)):
                    self._result_line(result, dry_run, table)
        if table:
            self._table(results, time.monotonic() - started, progress.lines, total)
        return results

    def _exit(self, results: list[FileResult], dry_run: bool = False) -> None:
        if not any(r.ok for r in results):
            raise CommandError("no source had a usable line; nothing was imported", returncode=2)
        problems = sum(len(r.problems) for r in results if r.status != "refused")
        refused = sum(r.status == "refused" for r in results)
        if problems or refused:
            raise CommandError(
                f"{problems} line(s) and {refused} source(s) refused; see the messages "
                f"above. Every other line {'would be' if dry_run else 'was'} imported.",
                returncode=1,
            )

    def _table(self, results: list[FileResult], seconds: float, lines: int, size: int) -> None:
        """The end table (docs/formats.md "Whole folders"): totals and counts per status, then
        one row per file, or, past ``TABLE_ROWS`` files, the refused ones and those with refused
        lines only."""
        rate = size / seconds / 1e6 if seconds > 0 else 0.0
        counts = Counter(r.status for r in results)
        per_status = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
        self.stdout.write(
            f"{len(results)} file(s), {lines} line(s), {size / 1e6:.1f} MB in {seconds:.1f} s "
            f"({rate:.1f} MB/s): {per_status}"
        )
        many = len(results) > TABLE_ROWS
        troubled = [r for r in results if r.status == "refused" or r.problems]
        rows = troubled[:TABLE_ROWS] if many else results
        if many:
            for status in STATUSES:
                if counts[status]:
                    self.stdout.write(f"  {status:<10} {counts[status]:>6} file(s)")
            if rows:
                self.stdout.write("  refused or with refused lines:")
        if rows:
            self.stdout.write(f"  {'status':<10} {'format':<12} {'added':>6}  file")
        for r in rows:
            added = str(r.outcome.messages_added) if r.outcome is not None else "-"
            detail = f": {r.reason}" if r.reason else ""
            if r.outcome is not None and r.outcome.problems:
                detail += f" ({r.outcome.problems} line(s) refused)"
            self.stdout.write(
                f"  {r.status:<10} {r.format or '-':<12} {added:>6}  {r.name}{detail}"
            )
        if many and len(troubled) > len(rows):
            self.stdout.write(f"  ... and {len(troubled) - len(rows)} more")

    # ------------------------------------------------------------------ arguments

    def _check_format(self, fmt: str) -> None:
        if fmt != "auto" and fmt not in registry.FORMAT_NAMES:
            raise CommandError(
                f"unknown --format {fmt!r}; use auto or one of {', '.join(registry.FORMAT_NAMES)}",
                returncode=2,
            )

    def _check_paths(self, paths: list[str]) -> list[str]:
        """The PATHs that do not exist, each named on stderr; ``CommandError`` (2) when none
        exists, or for stdin given twice."""
        if paths.count(STDIN) > 1:
            raise CommandError("stdin (-) can be read only once", returncode=2)
        missing = [path for path in paths if path != STDIN and not _names_a_source(path)]
        if len(missing) == len(paths):
            raise CommandError(
                f"{', '.join(missing)}: no such file or folder; nothing was imported", returncode=2
            )
        for path in missing:
            self.stderr.write(f"{path}: no such file or folder; not imported")
        return missing

    # ------------------------------------------------------------------ stopping --follow

    _stop_asked = False
    _waiting = False

    @contextlib.contextmanager
    def _stoppable(self) -> Iterator[None]:
        """SIGTERM stops a ``--follow`` as Ctrl-C does, and never in the middle of a write: in
        a wait it ends the wait at once; otherwise the follow stops at its next wait (a folder
        pass also between two files). Installed only in the main thread."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def asked(signum: int, frame: Any) -> None:
            self._stop_asked = True
            if self._waiting:
                raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, asked)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, previous)

    def _until_stopped(self, wait: Callable[[], None]) -> Callable[[], None]:
        """``wait``, raising ``KeyboardInterrupt`` (the follow's stop) once a stop was asked."""

        def waiting() -> None:
            if self._stop_asked:
                raise KeyboardInterrupt
            self._waiting = True
            try:
                wait()
            finally:
                self._waiting = False
            if self._stop_asked:
                raise KeyboardInterrupt

        return waiting

    # ------------------------------------------------------------------ one source

    def _report(self, name: str, problem: Problem) -> None:
        """``PATH:LINE: reason: excerpt`` on stderr; ``PATH: item N: reason`` for a message of a
        one-document source (``system`` for a request body's top-level prompt)."""
        where = f"{name}:{problem.line}" if problem.line is not None else name
        if problem.line is None and problem.entry is not None:
            where += ": system" if problem.entry < 0 else f": item {problem.entry}"
        tail = f": {problem.excerpt}" if problem.excerpt else ""
        self.stderr.write(f"{where}: {problem.reason}{tail}")

    def _format(
        self,
        name: str,
        fmt: str,
        lines: Iterator[SourceLine],
        detect: Callable[[Iterator[SourceLine]], tuple[str | None, list[SourceLine]]],
    ) -> tuple[str, Iterator[SourceLine]] | None:
        """The format to parse a live source's ``lines`` with (``--follow``) and the lines to give
        its parser (the ones read to tell the format come first again); None, reported, when the
        source is refused whole: auto cannot tell the format (the reason names the line), or a
        forced ``--format`` is plainly wrong (``registry.contradicts``). Files and folders are
        told the same way by ``importers.sources``."""
        detected, head = detect(lines)
        lines = _chain(head, lines)
        if fmt != "auto":
            if registry.contradicts(fmt, detected):
                self._report(
                    name,
                    Problem(
                        None,
                        f"refused whole: this looks like {detected}, not {fmt}; "
                        f"pass --format {detected} or --format auto",
                    ),
                )
                return None
            return fmt, lines
        if detected is None:
            if head:
                self._report(name, Problem(None, registry.undetected_reason(head)))
                return None
            detected = "murmur"  # an empty source: nothing to tell, nothing to import
        return detected, lines

    # ------------------------------------------------------------------ --follow

    def _follow(
        self,
        paths: list[str],
        *,
        stdin: IO[bytes],
        fmt: str,
        owner: Any,
        conversation_id: str | None,
        dry_run: bool,
        wait: Callable[[], None],
    ) -> None:
        """Ingest one live source line by line (docs/formats.md): stdin until it ends, a file
        until interrupted (Ctrl-C ends cleanly, with the summary). Each line is written through the
        services as soon as it completes a message; streamed text goes to ``broadcast_delta``.
        ``paths`` holds that one source."""
        (path,) = paths
        name = "<stdin>" if path == STDIN else path
        if not dry_run and layer_is_process_local():
            self.stderr.write(PROCESS_LOCAL_NOTE)
        refused = 0

        def refuse(number: int, reason: str, raw: bytes) -> None:
            nonlocal refused
            refused += 1
            text = raw.decode("utf-8", "replace").rstrip("\n")
            self._report(name, Problem(number, reason, excerpt(text)))

        parts: tuple[str, ...] = ()
        file_wait: Callable[[], None] | None = None
        with contextlib.ExitStack() as stack:
            if path == STDIN:
                stream = stdin
            else:
                stream = stack.enter_context(open(path, "rb"))
                parts = Path(os.path.abspath(path)).parts
                file_wait = wait
            lines: Iterator[SourceLine] = follow_lines(stream, wait=file_wait, refuse=refuse)
            told = self._format(name, fmt, lines, registry.detect_live)
            if told is None:
                raise CommandError("the source was refused", returncode=2)
            source, lines = told
            parser = registry.make_parser(
                source,
                ParseContext(
                    path_parts=parts,
                    conversation_id=conversation_id,
                    live=True,
                    check=message_refusal,
                ),
            )
            try:
                outcome = run_import(
                    lines=lines,
                    parser=parser,
                    source=source,
                    owner=owner,
                    dry_run=dry_run,
                    live=True,
                    report=lambda problem: self._report(name, problem),
                    restore_deleted=self.restore_deleted,
                )
            except KeyboardInterrupt:
                raise CommandError(
                    "interrupted while writing; every line before it was saved; run the same "
                    "command again to resume",
                    returncode=1,
                ) from None
        if refused:  # lines that were not UTF-8, refused before the parser saw them
            counts = outcome.lines
            outcome.lines = replace(
                counts, read=counts.read + refused, refused=counts.refused + refused
            )
        self._summary(name, source, outcome, dry_run)
        if not outcome.usable and not outcome.deleted:
            raise CommandError("the source had no usable line; nothing was imported", returncode=2)
        if outcome.problems or refused:
            rest = "would be imported" if dry_run else "was imported"
            raise CommandError(
                f"{outcome.problems + refused} line(s) refused; see the messages above. Every "
                f"other line {rest}.",
                returncode=1,
            )

    def _follow_folders(
        self,
        paths: list[str],
        *,
        stdin: IO[bytes],
        fmt: str,
        owner: Any,
        conversation_id: str | None,
        dry_run: bool,
        wait: Callable[[], None],
    ) -> None:
        """``--follow`` on folders (docs/formats.md "Whole folders"): import every file as a re-run
        does, then again after each wait, so files that grow are read on from where they ended and
        new files are picked up as they appear. Calls stay open between passes; Ctrl-C during a
        wait interrupts the calls still open (``log_ended``) and prints the table."""
        if STDIN in paths:
            raise CommandError("--follow on folders cannot also read stdin", returncode=2)
        if not dry_run and layer_is_process_local():
            self.stderr.write(PROCESS_LOCAL_NOTE)
        importer = self._importer(owner, fmt, conversation_id, dry_run, final=False)
        latest: dict[str, FileResult] = {}
        said: dict[str, tuple[str, str]] = {}
        started = time.monotonic()

        def changed(result: FileResult) -> bool:
            """Whether a pass prints this file's line: it read something, or its status or
            reason is not the one said last (an unchanged file is said once, and not at all
            after a pass that read it)."""
            if result.outcome is not None:  # what the next pass finds
                said[result.name] = (
                    ("deleted", ONLY_DELETED) if only_deleted(result.outcome) else ("unchanged", "")
                )
                return True
            now = (result.status, result.reason)
            if said.get(result.name) == now:
                return False
            said[result.name] = now
            return True

        def one_pass() -> None:
            sources = expand(paths)
            for result in self._import_all(
                sources, stdin=stdin, importer=importer, dry_run=dry_run, table=False, show=changed
            ):
                if result.status != "unchanged" or result.name not in latest:
                    latest[result.name] = result
            importer.incremental = not dry_run  # --reread reads whole once, then goes on

        try:
            one_pass()
            while True:
                try:
                    wait()
                except KeyboardInterrupt:
                    break
                one_pass()
        except KeyboardInterrupt:
            raise CommandError(
                "interrupted while writing; every line before it was saved; run the same "
                "command again to resume",
                returncode=1,
            ) from None
        results = list(latest.values())
        touched = {c for r in results if r.outcome is not None for c in r.outcome.conversations}
        interrupted = 0 if dry_run else interrupt_open_calls(touched)
        self._table(results, time.monotonic() - started, sum(r.lines for r in results), 0)
        if interrupted:
            self.stdout.write(
                f"{interrupted} call(s) still open when the follow ended: interrupted"
            )
        self._exit(results)

    def _result_line(self, result: FileResult, dry_run: bool, table: bool) -> None:
        """One line per source: its summary, or why nothing was read."""
        if result.outcome is not None:
            how = {
                "appended": f"; {result.lines} line(s) appended since the last import",
                "reread": "; changed since the last import, read whole again",
            }.get(result.status, "")
            self._summary(result.name, result.format, result.outcome, dry_run, how)
        elif table:
            return  # the end table says it
        elif result.status == "unchanged":
            self.stdout.write(
                f"{result.name} ({result.format}): unchanged since the last import; skipped "
                "(--reread reads it again)"
            )
        elif result.status in ("skipped", "deleted"):
            self.stdout.write(f"{result.name}: {result.status}: {result.reason}")
        elif result.status == "empty":
            self.stdout.write(f"{result.name}: empty; nothing to import")

    def _summary(
        self, name: str, source: str, outcome: Outcome, dry_run: bool, how: str = ""
    ) -> None:
        if dry_run:
            text = (
                f"{name} ({source}, dry run): {outcome.messages_seen} message(s) readable, "
                f"{outcome.unknown} unknown record(s), {outcome.problems} refused"
            )
        else:
            top = len(outcome.conversations) - len(outcome.children)
            children = f" and {len(outcome.children)} child(ren)" if outcome.children else ""
            text = (
                f"{name} ({source}): {top} conversation(s){children}, "
                f"{outcome.messages_added} message(s) added of {outcome.messages_seen} read, "
                f"{outcome.unknown} unknown record(s) kept, "
                f"{outcome.interrupted} open call(s) interrupted, {outcome.problems} refused"
            )
        if outcome.usage_unread:
            text += f"; {outcome.usage_unread} message(s) without their unreadable usage"
        if outcome.unknown_kinds:
            text += "; unknown kinds:" + _kinds(outcome)
        if outcome.replayed:
            text += f", {outcome.replayed} replayed result(s) dropped"
        if outcome.bookkeeping_only:
            text += (
                f", {outcome.bookkeeping_only} bookkeeping line(s) of a conversation without "
                "messages not kept"
            )
        if outcome.subagent_lines:
            text += f", {outcome.subagent_lines} subagent line(s) in child conversations"
        self.stdout.write(text + how + _accounted(outcome))


def _names_a_source(path: str) -> bool:
    """Whether ``path`` is an existing file or folder; False for an empty one (``Path("")`` is
    the current folder) and one the system cannot look up (too long, NUL)."""
    try:
        return bool(path) and (Path(path).is_file() or Path(path).is_dir())
    except (OSError, ValueError):
        return False


def wait_for_folder() -> None:
    """The default wait of ``--follow`` on folders between two passes."""
    time.sleep(FOLDER_POLL_SECONDS)


def wait_for_append() -> None:
    """The default ``--follow`` wait at the end of a file: a short sleep before reading again.
    Tests pass their own through the ``follow_wait`` option."""
    time.sleep(FOLLOW_POLL_SECONDS)


def _accounted(outcome: Outcome) -> str:
    """``; N line(s) read: I imported, K kept as source records, R refused`` (docs/formats.md
    "Every line accounted for"): the counts add up to the lines read. A one-document source is
    counted by its messages."""
    lines = outcome.lines
    unit = "message(s)" if outcome.document else "line(s)"
    not_kept = f", {lines.not_kept} not kept" if lines.not_kept else ""
    return (
        f"; {lines.read} {unit} read: {lines.imported} imported, {lines.kept} kept as source "
        f"records{not_kept}, {lines.refused} refused"
    )


def _kinds(outcome: Outcome) -> str:
    """`` kind xn, ...`` of the unknown records, most frequent first."""
    return " " + ", ".join(f"{k} x{n}" for k, n in outcome.unknown_kinds.most_common())


def _chain(head: list[SourceLine], rest: Iterator[SourceLine]) -> Iterator[SourceLine]:
    yield from head
    yield from rest
