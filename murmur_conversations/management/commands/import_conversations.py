"""``manage.py import_conversations``: bring agent logs and message lists in (docs/formats.md).

Exit codes: 0 complete; 1 when any line or source was refused; 2 when no source had a usable line,
and for usage errors (unknown owner or format, ``--follow`` with several sources, a missing file).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from murmur_conversations.importers import registry
from murmur_conversations.importers.base import Outcome, run_import
from murmur_conversations.importers.reading import (
    NotUTF8,
    check_utf8,
    follow_lines,
    iter_lines,
    spool,
)
from murmur_conversations.importers.records import ParseContext, Problem, SourceLine, excerpt
from murmur_conversations.realtime import layer_is_process_local

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


def _progress(lines: Iterator[SourceLine], total: int | None, name: str) -> Iterator[SourceLine]:
    """``lines``, with a tqdm bar on stderr when stderr is a terminal or the source is long."""
    show = sys.stderr.isatty() or (total or 0) >= LONG_IMPORT_BYTES
    if not show:
        yield from lines
        return
    from tqdm import tqdm

    with tqdm(total=total, unit="B", unit_scale=True, desc=name, file=sys.stderr) as bar:
        for line in lines:
            bar.update(len(line.text.encode("utf-8", "surrogatepass")) + 1)
            yield line


class Command(BaseCommand):
    help = (
        "Import conversations from agent logs and message lists (murmur records, muse journals, "
        "Claude Code transcripts and stream-json, Codex rollouts and exec streams, OpenAI and "
        "Anthropic message lists, agentfootprint envelopes). '-' reads stdin; --follow ingests "
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
            "--conversation-id", metavar="ID", help="the conversation key to import into"
        )
        parser.add_argument(
            "--follow",
            action="store_true",
            help="ingest one live source line by line: stdin until it ends, or a file, waiting "
            "for appends until interrupted",
        )
        parser.add_argument("--dry-run", action="store_true", help="read and check; write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        fmt = options["format"]
        paths: list[str] = options["paths"]
        self._check_format(fmt)
        owner = self._owner(options["owner"])
        if options["follow"] and len(paths) != 1:
            raise CommandError("--follow takes exactly one source", returncode=2)
        self._check_paths(paths)
        stdin = options.get("stdin") or sys.stdin.buffer
        if options["follow"]:
            self._follow(
                paths[0],
                stdin=stdin,
                fmt=fmt,
                owner=owner,
                conversation_id=options["conversation_id"],
                dry_run=options["dry_run"],
                wait=options.get("follow_wait") or wait_for_append,
            )
            return
        outcomes: list[Outcome] = []
        refused_sources = 0
        for path in paths:
            outcome = self._import_one(
                path,
                stdin=stdin,
                fmt=fmt,
                owner=owner,
                conversation_id=options["conversation_id"],
                dry_run=options["dry_run"],
            )
            if outcome is None:
                refused_sources += 1
            else:
                outcomes.append(outcome)
        if not any(o.usable for o in outcomes):
            raise CommandError("no source had a usable line; nothing was imported", returncode=2)
        problems = sum(o.problems for o in outcomes)
        if problems or refused_sources:
            raise CommandError(
                f"{problems} line(s) and {refused_sources} source(s) refused; see the messages "
                "above. Every other line was imported.",
                returncode=1,
            )

    # ------------------------------------------------------------------ arguments

    def _check_format(self, fmt: str) -> None:
        if fmt != "auto" and fmt not in registry.FORMAT_NAMES:
            raise CommandError(
                f"unknown --format {fmt!r}; use auto or one of {', '.join(registry.FORMAT_NAMES)}",
                returncode=2,
            )

    def _owner(self, name: str) -> Any:
        model = get_user_model()
        owner = model._default_manager.filter(**{model.USERNAME_FIELD: name}).first()
        if owner is None:
            raise CommandError(
                f"no user with {model.USERNAME_FIELD} {name!r}; --owner names an existing user",
                returncode=2,
            )
        return owner

    def _check_paths(self, paths: list[str]) -> None:
        if paths.count(STDIN) > 1:
            raise CommandError("stdin (-) can be read only once", returncode=2)
        for path in paths:
            if path != STDIN and not Path(path).is_file():
                raise CommandError(f"{path}: no such file", returncode=2)

    # ------------------------------------------------------------------ one source

    def _report(self, name: str, problem: Problem) -> None:
        where = f"{name}:{problem.line}" if problem.line is not None else name
        tail = f": {problem.excerpt}" if problem.excerpt else ""
        self.stderr.write(f"{where}: {problem.reason}{tail}")

    def _import_one(
        self,
        path: str,
        *,
        stdin: IO[bytes],
        fmt: str,
        owner: Any,
        conversation_id: str | None,
        dry_run: bool,
    ) -> Outcome | None:
        """Import one source; None when it is refused whole (reported)."""
        name = "<stdin>" if path == STDIN else path
        with contextlib.ExitStack() as stack:
            if path == STDIN:
                stream = stack.enter_context(spool(stdin))
                parts: tuple[str, ...] = ()
            else:
                stream = stack.enter_context(open(path, "rb"))
                parts = Path(os.path.abspath(path)).parts
            try:
                check_utf8(stream)
            except NotUTF8 as error:
                self._report(name, Problem(None, f"refused whole: {error}"))
                return None
            total = stream.tell()
            stream.seek(0)
            lines = _progress(iter_lines(stream), total, name)
            told = self._format(name, fmt, lines, registry.detect)
            if told is None:
                return None
            source, lines = told
            parser = registry.make_parser(
                source, ParseContext(path_parts=parts, conversation_id=conversation_id)
            )
            outcome = run_import(
                lines=lines,
                parser=parser,
                source=source,
                owner=owner,
                dry_run=dry_run,
                report=lambda problem: self._report(name, problem),
            )
        self._summary(name, source, outcome, dry_run)
        return outcome

    def _format(
        self,
        name: str,
        fmt: str,
        lines: Iterator[SourceLine],
        detect: Callable[[Iterator[SourceLine]], tuple[str | None, list[SourceLine]]],
    ) -> tuple[str, Iterator[SourceLine]] | None:
        """The format to parse ``lines`` with and the lines to give its parser (the ones read to
        tell the format come first again); None, reported, when the source is refused whole: auto
        cannot tell the format, or a forced ``--format`` is plainly wrong (:func:`_contradicts`).
        ``detect`` is ``registry.detect`` for a file, ``registry.detect_live`` for ``--follow``."""
        detected, head = detect(lines)
        lines = _chain(head, lines)
        if fmt != "auto":
            if _contradicts(fmt, detected):
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
                self._report(name, Problem(None, "cannot tell the format; pass --format"))
                return None
            detected = "murmur"  # an empty source: nothing to tell, nothing to import
        return detected, lines

    # ------------------------------------------------------------------ --follow

    def _follow(
        self,
        path: str,
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
        services as soon as it completes a message; streamed text goes to ``broadcast_delta``."""
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
                source, ParseContext(path_parts=parts, conversation_id=conversation_id)
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
                )
            except KeyboardInterrupt:
                raise CommandError(
                    "interrupted while writing; every line before it was saved; run the same "
                    "command again to resume",
                    returncode=1,
                ) from None
        self._summary(name, source, outcome, dry_run)
        if not outcome.usable:
            raise CommandError("the source had no usable line; nothing was imported", returncode=2)
        if outcome.problems or refused:
            raise CommandError(
                f"{outcome.problems + refused} line(s) refused; see the messages above. Every "
                "other line was imported.",
                returncode=1,
            )

    def _summary(self, name: str, source: str, outcome: Outcome, dry_run: bool) -> None:
        if dry_run:
            text = (
                f"{name} ({source}, dry run): {outcome.messages_seen} message(s) readable, "
                f"{outcome.unknown} unknown record(s), {outcome.problems} refused"
            )
        else:
            text = (
                f"{name} ({source}): {len(outcome.conversations)} conversation(s), "
                f"{outcome.messages_added} message(s) added of {outcome.messages_seen} read, "
                f"{outcome.unknown} unknown record(s) kept, {outcome.interrupted} open call(s) "
                f"interrupted, {outcome.problems} refused"
            )
        self.stdout.write(text)


#: Agent-log formats that detection tells apart without doubt.
_DISTINCT_FORMATS = frozenset({"muse", "codex", "claude-code"})


def _contradicts(forced: str, detected: str | None) -> bool:
    """Whether a forced ``--format`` is plainly wrong for the source: detection names another
    format and one of the two is an agent log, whose records the other could only keep as unknown
    (which would import an empty conversation)."""
    return (
        detected is not None and detected != forced and bool({forced, detected} & _DISTINCT_FORMATS)
    )


def wait_for_append() -> None:
    """The default ``--follow`` wait at the end of a file: a short sleep before reading again.
    Tests pass their own through the ``follow_wait`` option."""
    time.sleep(FOLLOW_POLL_SECONDS)


def _chain(head: list[SourceLine], rest: Iterator[SourceLine]) -> Iterator[SourceLine]:
    yield from head
    yield from rest
