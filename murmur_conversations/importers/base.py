"""``run_import``: feed a source's lines to its parser and write what it yields through the services
(docs/formats.md). The only module of ``importers`` that touches the database.

Messages are validated one by one (``messages.normalize_message``) before any write, so a bad
message is reported with its line and never fails its neighbours; good ones are written in batches
through ``services.save_messages`` (with their source records), in chunks of ``CHUNK_ROWS`` rows
that are one transaction each (``Chunks``; docs/formats.md "Transactions"). Memory is bounded by
one batch per conversation and the items read ahead for a file's first line time (``LOOKAHEAD``;
one clock per file: docs/formats.md "Times"), whatever the file size. Re-importing adds nothing: message ids and source keys
are de-duplicated by the services, tool moves already made are skipped. When the source ends, calls
left ``pending`` or ``executing`` become ``interrupted`` (``log_ended``).

Times (docs/formats.md "Times"): every write carries the time of the line it comes from, or of the
nearest earlier line that has one, or the source's fallback time (a file's modification time); a
new conversation is dated by the first time of its lines. Titles (docs/formats.md "Titles"): the
best ``Title`` item of a conversation wins, else its first user text; a title the import set
earlier is replaced by a better one, a title a person set is left alone.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final, TypeVar

from django.contrib.auth import get_user_model
from django.db import router, transaction

from murmur_conversations import selectors, services
from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import (
    ConversationsError,
    InvalidContent,
    InvalidToolTransition,
    WriteConflict,
)
from murmur_conversations.importers.ledger import (
    IMPORTED,
    KEPT,
    NOT_KEPT,
    REFUSED,
    Ledger,
    LineCounts,
)
from murmur_conversations.importers.records import (
    TITLE_EXPORTED,
    Begin,
    Covered,
    Delta,
    Item,
    Kept,
    Link,
    Notice,
    Parsed,
    Parser,
    Problem,
    Rated,
    SourceLine,
    StatusChange,
    Title,
    ToolUpdate,
    compact_json,
    excerpt,
    prompt_title,
)
from murmur_conversations.messages import NormalizedMessage, normalize_message
from murmur_conversations.models import (
    EXPORTED_FROM_KEY,
    Conversation,
    DisplayMessage,
    Message,
    ToolCall,
    ToolStatus,
)
from murmur_conversations.redaction import (
    StoredPieces,
    redact,
    redact_and_cut,
    replace_in_line,
)
from murmur_conversations.selectors import parse_conversation_id
from murmur_conversations.usage import read_usage
from murmur_conversations.validation import source_key

#: Messages (or source records) written per ``save_messages`` call, at most.
BATCH: Final = 2000
#: Rows (messages, source records, display rows outside the record) an import writes in one
#: transaction: it commits at the first line boundary past this many (docs/formats.md
#: "Transactions").
CHUNK_ROWS: Final = 5000
#: Source records held, at most, while a conversation has nothing to show yet.
HOLD_RECORDS: Final = 2000
#: Items a file import reads ahead for its first line time before it writes (docs/formats.md
#: "Times"): none in them, and the file is dated by its modification time throughout.
LOOKAHEAD: Final = 2000
#: ``Conversation.metadata["clock"]`` of a conversation an import dated without line times: by
#: the file's modification time (``"file"``) or, for stdin, by the time of the import
#: (``"import"``). Absent: dated by the log's own times.
CLOCK_KEY: Final = "clock"
_RETRIES: Final = 3
#: The metadata key of an imported fork naming its original's key (``Begin.forked_from``), so a
#: fork imported before its original is linked when the original comes.
FORKED_FROM: Final = "forked_from_external_id"
T = TypeVar("T")


@dataclass
class Outcome:
    """What importing one source did. ``usable`` counts the items that landed (or would, with
    ``--dry-run``); ``problems`` the refused lines; ``conversations`` the conversation ids (children
    included); ``children`` the ids of child conversations among them; ``unknown_kinds`` the
    unknown records by kind; ``subagent_lines`` the lines of subagents (kept with their child
    conversation); ``bookkeeping_only`` the lines of keys that had nothing to show (not kept);
    ``titles`` the titles this import set, per conversation id; ``lines`` what became of
    every line read (``ledger.LineCounts``: its counts always add up to the lines read)."""

    messages_added: int = 0
    messages_seen: int = 0
    usable: int = 0
    problems: int = 0
    interrupted: int = 0
    #: Messages imported without their unreadable ``usage`` (kept in the record as
    #: ``usage_unread``, not counted; docs/formats.md "Usage").
    usage_unread: int = 0
    replayed: int = 0
    subagent_lines: int = 0
    bookkeeping_only: int = 0
    conversations: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    unknown_kinds: Counter[str] = field(default_factory=Counter)
    titles: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: Keys of conversations refused because they were deleted since an import, and the items of
    #: theirs left out (docs/formats.md "Deleted conversations stay deleted").
    deleted: list[str] = field(default_factory=list)
    deleted_items: int = 0
    lines: LineCounts = field(default_factory=LineCounts)
    #: Whether the source was one JSON document, accounted for by its messages (``lines``).
    document: bool = False

    @property
    def unknown(self) -> int:
        """How many unknown records were kept."""
        return sum(self.unknown_kinds.values())


def _retry(call: Callable[[], T]) -> T:
    """Run a service call, retrying a ``WriteConflict`` (nothing was written) a few times."""
    for _attempt in range(_RETRIES - 1):
        try:
            return call()
        except WriteConflict:
            continue
    return call()


class Chunks:
    """The transactions of one import (docs/formats.md "Transactions"): a context manager that
    holds one ``transaction.atomic`` open on the conversations' database while the import
    writes, and commits it and opens the next at a line boundary once ``rows`` rows were written
    in it (``wrote``, ``line_done``). So a source is written in a few transactions of thousands of
    rows, however often it switches conversations or gives a notice; a source smaller than
    ``rows`` (with what its caller writes inside the block: the remembered offset) in one.
    Leaving the block commits the last chunk, or rolls it back when an exception leaves it: the
    chunks committed before stay, and a rerun of the source adds only what is missing (message
    ids and source keys are de-duplicated). Inside a caller's transaction each chunk is a
    savepoint of it. ``rows`` defaults to ``CHUNK_ROWS``; ``commits`` counts the chunks
    committed."""

    def __init__(self, *, rows: int | None = None, using: str | None = None) -> None:
        self.limit = CHUNK_ROWS if rows is None else rows
        self.using = using or router.db_for_write(Conversation)
        self.rows = 0
        self.commits = 0
        self._atomic: transaction.Atomic | None = None

    def __enter__(self) -> Chunks:
        self._begin()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        atomic, self._atomic = self._atomic, None
        if atomic is not None:
            atomic.__exit__(*exc_info)
            if exc_info[0] is None:
                self.commits += 1

    def _begin(self) -> None:
        self.rows = 0
        self._atomic = transaction.atomic(using=self.using)
        self._atomic.__enter__()

    def wrote(self, rows: int) -> None:
        """Count ``rows`` written in the open chunk."""
        self.rows += rows

    def line_done(self) -> None:
        """A line's items are all written: commit the chunk if it is full, and open the next."""
        if self._atomic is not None and self.rows >= self.limit:
            self.__exit__(None, None, None)
            self._begin()


#: A message held for the next write: as parsed, its line, its time, ``once``, and as validated
#: (``normalize_message``, handed to ``save_messages`` so it is not normalized twice).
Held = tuple[dict[str, Any], int | None, datetime | None, bool, NormalizedMessage]


@dataclass
class _Target:
    """One conversation of a source: its key, its parent's key and launching call (a child's),
    the conversation once started, and what is held for it until the next write."""

    key: str
    parent: str | None = None
    call_id: str | None = None
    conversation: Conversation | None = None
    messages: list[Held] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    first_time: datetime | None = None  # the first line time of this key
    title: Title | None = None  # the best title of this key
    unknown_held: bool = False  # an unknown record of this key: kept whatever comes
    outside: bool = False  # a parent this source names but gives no line of
    merge: bool = False  # the key may name a conversation of the owner by id (Begin.merge)
    deleted: bool = False  # deleted since an import: its items are refused
    forked_from: str | None = None  # the key of the original of a fork (Begin.forked_from)
    exported_from: str | None = None  # the conversation id an export names (Begin.exported_from)
    notice_keys: set[str] | None = None  # the import keys of its notices, once read (notice)


class _Writer:
    """Writes the items of one source: its conversations, children included (docs/formats.md
    "Subagents"), each held until the items switch to another or the source ends."""

    def __init__(
        self,
        *,
        owner: Any,
        source: str,
        dry_run: bool,
        live: bool,
        report: Callable[[Problem], None],
        outcome: Outcome,
        fallback_time: datetime | None = None,
        previous_titles: dict[str, tuple[str, int]] | None = None,
        final: bool = True,
        restore_deleted: bool = False,
        chunks: Chunks | None = None,
    ) -> None:
        self.owner = owner
        self.chunks = chunks
        self.source = source
        self.dry_run = dry_run
        self.live = live
        #: The streams of this import's kept increments, by (conversation key, stream id).
        self.pieces: dict[tuple[str, str], StoredPieces] = {}
        self.report = report
        self.outcome = outcome
        self.targets: dict[str, _Target] = {}
        self.target: _Target | None = None  # the conversation the items go to now
        self.links: dict[str, str] = {}  # launching calls learned before their child began
        self.touched: dict[str, Conversation] = {}
        self.max_content = app_settings.max_content_bytes
        self.fallback_time = fallback_time
        #: Line times are ignored: the file has none in its head (``choose_clock``), so every
        #: row takes ``fallback_time`` (one clock per file, never two).
        self.file_clock = False
        self.last_time: datetime | None = None  # the latest line time seen in this source
        self.ended_at: dict[str, datetime] = {}  # conversation id -> time of its last item
        self.created: set[str] = set()  # conversations this import created
        self.previous_titles = previous_titles or {}
        self.final = final
        self.restore_deleted = restore_deleted
        self.ledger = Ledger()

    @property
    def current(self) -> _Target:
        """The target the items go to (there is one once ``Begin`` came; ``handle`` checks)."""
        if self.target is None:
            raise RuntimeError("an item came before the parser named its conversation")
        return self.target

    def problem(self, problem: Problem) -> None:
        """Report a refusal (a parser's, or a write that failed) and count it; a refused line
        keeps nothing, its source record included."""
        self.outcome.problems += 1
        self.ledger.mark(problem.line, problem.entry, REFUSED)
        # Reports go to stderr and logs: no secret in them either (docs/write-path.md).
        reason, found = redact(problem.reason)
        shown, found_in_excerpt = redact(problem.excerpt)
        if found or found_in_excerpt:
            problem = replace(problem, reason=reason, excerpt=shown)
        self.report(problem)

    def choose_clock(self, items: list[Item], *, final: bool) -> bool:
        """Decide the clock of this file from the items read ahead (before any is written): the
        first line time among them dates what comes before it (``fallback_time``); with none, and
        the source ended (``final``) or ``LOOKAHEAD`` items read, the file's modification time
        dates every row (``file_clock``). True once decided."""
        first = next((at for at in map(_item_time, items) if at is not None), None)
        if first is not None:
            self.fallback_time = first
            return True
        if final or len(items) >= LOOKAHEAD:
            self.file_clock = True
            return True
        return False

    def time(self, at: datetime | None) -> datetime | None:
        """The time of an item: its own, else the nearest earlier line's, else the fallback (the
        file's first line time, or on the file's clock its modification time)."""
        if self.file_clock:
            return self.fallback_time
        if at is not None:
            self.last_time = at
            if self.target is not None and self.target.first_time is None:
                self.target.first_time = at
            return at
        return self.last_time or self.fallback_time

    def handle(self, item: Item) -> None:
        if isinstance(item, Problem):
            self.problem(item)
        elif isinstance(item, Begin):
            self.begin(item)
        elif isinstance(item, Link):
            self.link(item)
        elif isinstance(item, Covered):
            deleted = self.target is not None and self.target.deleted
            self.ledger.mark(
                item.line, None, IMPORTED if item.imported and not deleted else NOT_KEPT
            )
        elif self.target is None:
            self.problem(Problem(None, f"the parser gave {type(item).__name__} before a key"))
        elif self.target.deleted:
            self.outcome.deleted_items += 1
            self.ledger.mark(getattr(item, "line", None), getattr(item, "entry", None), NOT_KEPT)
        elif isinstance(item, Title):
            if self.target.title is None or item.rank >= self.target.title.rank:
                self.target.title = item
        elif isinstance(item, Parsed):
            self.message(item)
        elif isinstance(item, Kept):
            self.kept(item)
        elif isinstance(item, ToolUpdate):
            self.outcome.usable += 1
            self.ledger.mark(item.line, None, IMPORTED)
            self.tool_update(item)
        elif isinstance(item, StatusChange):
            self.outcome.usable += 1
            self.status(item)
        elif isinstance(item, Notice):
            self.outcome.usable += 1
            self.ledger.mark(item.line, None, IMPORTED)
            self.notice(item)
        elif isinstance(item, Rated):
            self.ledger.mark(item.line, None, IMPORTED)
            self.rated(item)
        elif isinstance(item, Delta):
            self.delta(item)

    def begin(self, item: Begin) -> None:
        """Switch to the conversation ``item`` names: what is held for the current one is
        written first, in the open chunk (a child's creation and a parent's card take their
        numbers and ``event_seq`` in the source's order), and its state is kept for when the
        items come back to it."""
        key = source_key(item.key)
        if self.target is not None and self.target.key != key:
            self.flush()
        target = self.targets.get(key)
        if target is not None and target.outside:
            target.outside = False  # its lines came after all
            if target.conversation is not None and str(target.conversation.pk) not in self.touched:
                self.touched[str(target.conversation.pk)] = target.conversation
                self.outcome.conversations.append(str(target.conversation.pk))
        if target is None:
            parent = None if item.parent is None else source_key(item.parent)
            call_id = item.call_id or self.links.pop(key, None)
            target = self.targets[key] = _Target(key, parent, call_id, merge=item.merge)
            if item.forked_from and parent is None:
                target.forked_from = source_key(item.forked_from)
            if parse_conversation_id(item.exported_from) is not None:
                target.exported_from = item.exported_from
            target.deleted = self.refused_as_deleted(target)
        elif item.call_id and item.call_id != target.call_id:
            self.relink(target, item.call_id)
        if item.created_at is not None and target.first_time is None and not self.file_clock:
            target.first_time = item.created_at
        self.target = target

    def refused_as_deleted(self, target: _Target) -> bool:
        """Whether ``target``'s conversation, or the parent it names, was deleted since an import
        (``selectors.deleted_source``: by its source identity, whatever path or stream it comes
        from again, or by the conversation id its key or ``exported_from`` names), reported once; never with ``restore_deleted`` (docs/formats.md "Deleted
        conversations stay deleted")."""
        if self.restore_deleted:
            return False
        when = self._deleted_at(target.key)
        if when is None and target.exported_from is not None and not self._exists(target):
            when = self._deleted_at(target.exported_from)  # unless restored under its key
        whose = "it was"
        if when is None and target.parent is not None:
            above = self.targets.get(target.parent)
            if above is not None and above.deleted:
                return self._refuse_deleted(target, "its parent conversation was deleted")
            when = self._deleted_at(target.parent) if above is None else None
            whose = "its parent conversation was"
        if when is None:
            return False
        return self._refuse_deleted(target, f"{whose} deleted on {when:%Y-%m-%d %H:%M} UTC")

    def _deleted_at(self, key: str) -> datetime | None:
        return selectors.deleted_source(owner=self.owner, source=self.source, external_id=key)

    def _refuse_deleted(self, target: _Target, why: str) -> bool:
        """Report ``target`` as refused for a deletion: not a bad line (the deletion was meant;
        the run's exit status does not change), so ``refused`` is False."""
        self.outcome.deleted.append(target.key)
        reason, _ = redact(
            f"conversation {target.key!r} not imported: {why}, and a deleted conversation is "
            "not imported again; pass --restore-deleted to import it on purpose"
        )
        self.report(Problem(None, reason, refused=False))
        return True

    def link(self, item: Link) -> None:
        """A child's launching call, learned after its lines (or in another source)."""
        key = source_key(item.key)
        target = self.targets.get(key)
        if target is not None:
            if item.call_id != target.call_id:
                self.relink(target, item.call_id)
            return
        if self.dry_run:
            return
        child = (
            Conversation.objects.filter(
                owner=self.owner, source=self.source, external_id=key, parent__isnull=False
            )
            .only("pk", "parent_id", "parent_call_id")
            .first()
        )
        if child is None:
            self.links[key] = item.call_id  # its lines may come later in this source
        elif child.parent_call_id != item.call_id:
            self._set_link(child.parent_id, key, item.call_id)

    def relink(self, target: _Target, call_id: str) -> None:
        """Give ``target`` its launching call: at once when its conversation exists, else when
        it is started."""
        if target.call_id:
            self.problem(
                Problem(
                    None,
                    f"conversation {target.key!r} was launched by call {target.call_id!r}, the "
                    f"log also says {call_id!r}; the first is kept",
                )
            )
            return
        target.call_id = call_id
        if target.conversation is not None and not self.dry_run:
            self._set_link(target.conversation.parent_id, target.key, call_id)

    def _set_link(self, parent: Any, key: str, call_id: str) -> None:
        try:
            _retry(
                lambda: services.start_conversation(
                    owner=self.owner,
                    source=self.source,
                    external_id=key,
                    parent=parent,
                    parent_call_id=call_id,
                )
            )
        except ConversationsError as error:
            self.problem(Problem(None, f"call {call_id!r} of {key!r} not linked: {error}"))

    def best_title(self, target: _Target) -> str:
        """The best ``Title`` so far (an exported one even when empty), else the first user text
        held (wrappers removed)."""
        if target.title is not None and (target.title.text or target.title.rank == TITLE_EXPORTED):
            return redact_and_cut(target.title.text, 255).value
        return next(
            (
                prompt_title(m.get("content"))
                for m, _, _, _, _ in target.messages
                if m.get("role") == "user" and not m.get("injected") and not m.get("tool_call_id")
            ),
            "",
        )

    def ensure(self, target: _Target | None = None) -> Conversation:
        """The conversation of ``target`` (default: the current one), started on its first write
        and dated by its first line time; a child's parent is started first (created empty when
        this source never gave its lines: a subagent's log imported before its session)."""
        target = target or self.current
        if target.conversation is not None:
            return target.conversation
        parent: Conversation | None = None
        if target.parent is not None:
            above = self.targets.get(target.parent)
            if above is None:
                above = self.targets[target.parent] = _Target(target.parent, outside=True)
            parent = self.ensure(above)
        key = target.key
        title = self.best_title(target)
        created_at = target.first_time or self.last_time or self.fallback_time
        merged = self._merged(target)
        before = (
            merged is not None
            or (
                Conversation.objects.filter(owner=self.owner, source=self.source, external_id=key)
            ).exists()
        )
        origin: dict[str, Any] = {FORKED_FROM: target.forked_from} if target.forked_from else {}
        if self.file_clock:
            origin[CLOCK_KEY] = self._clock_name()
        if target.exported_from:
            origin[EXPORTED_FROM_KEY] = target.exported_from
        conversation = merged or _retry(
            lambda: services.start_conversation(
                owner=self.owner,
                title=title,
                metadata=origin or None,
                source=self.source,
                external_id=key,
                created_at=created_at,
                parent=parent,
                parent_call_id=target.call_id,
            )
        )
        target.conversation = conversation
        if not before:
            self._link_forks(conversation, target)
        pk = str(conversation.pk)
        if not before:
            self.created.add(pk)
            if title:
                rank = target.title.rank if target.title is not None and target.title.text else -1
                self.outcome.titles[pk] = (title, rank)
        if pk not in self.touched and not target.outside:
            self.touched[pk] = conversation
            self.outcome.conversations.append(pk)
            if parent is not None:
                self.outcome.children.append(pk)
        return conversation

    def _link_forks(self, conversation: Conversation, target: _Target) -> None:
        """Link a new conversation to the original it was forked from when that is stored, and
        the stored forks that wait for it (``metadata[FORKED_FROM]`` is its key) to it."""
        stored = Conversation.objects.filter(owner=self.owner, source=self.source)
        if target.forked_from:
            original = stored.filter(external_id=target.forked_from).only("pk").first()
            if original is not None:
                _retry(lambda: services.link_fork(conversation=conversation, original=original))
        waiting = stored.filter(
            **{f"metadata__{FORKED_FROM}": target.key}, forked_from__isnull=True
        ).only("pk")
        for fork in waiting:
            _retry(functools.partial(services.link_fork, conversation=fork, original=conversation))

    def _merged(self, target: _Target) -> Conversation | None:
        """The owner's conversation whose id a merging target's key is (``Begin.merge``), else
        None (a foreign id is as absent as a missing one: the key then names a new one)."""
        pk = parse_conversation_id(target.key) if target.merge else None
        if pk is None or self.owner is None:
            return None
        return Conversation.objects.filter(pk=pk, owner=self.owner).first()

    def _clock_name(self) -> str:
        """The ``CLOCK_KEY`` value of a conversation dated without line times."""
        return "import" if self.fallback_time is None else "file"

    def _exists(self, target: _Target) -> bool:
        """Whether the conversation of ``target`` exists already."""
        return (
            self._merged(target) is not None
            or Conversation.objects.filter(
                owner=self.owner, source=self.source, external_id=target.key
            ).exists()
        )

    def end_conversation(self, target: _Target) -> None:
        """Write what is held for ``target``, then give it the best title the log had (a
        ``Title`` item), unless a person has changed the title since an import set it, or an
        import set a title of a higher rank (docs/formats.md "Titles"). Bookkeeping lines of a
        key that gave nothing to show are kept only when its conversation exists already."""
        bookkeeping_only = (
            target.conversation is None
            and target.records
            and not target.messages
            and not self.dry_run
            and not target.unknown_held
        )
        if bookkeeping_only and not self._exists(target):
            self.outcome.bookkeeping_only += len(target.records)
            for record in target.records:
                if record["line_number"] is not None:
                    self.ledger.not_kept(record["line_number"])
            target.records = []
        self.flush(target, force=True)
        conversation = target.conversation
        best = target.title
        if conversation is None or self.dry_run or best is None or not best.text:
            return
        title = redact_and_cut(best.text, 255).value
        pk = str(conversation.pk)
        conversation.refresh_from_db(fields=["title"])
        if title == conversation.title:
            return
        set_before = [t for t in (self.previous_titles.get(pk), self.outcome.titles.get(pk)) if t]
        ours = conversation.title == "" or any(conversation.title == t[0] for t in set_before)
        if not ours or any(best.rank < t[1] for t in set_before if t[0] == conversation.title):
            return
        at = self.ended_at.get(pk)
        try:
            _retry(
                lambda: services.update_conversation(conversation=conversation, title=title, at=at)
            )
        except ConversationsError as error:
            self.problem(Problem(None, f"title of {target.key!r} not set: {error}"))
            return
        self.outcome.titles[pk] = (title, best.rank)

    def message(self, item: Parsed) -> None:
        """Hold one message for the next write. A line is refused whole: a message of a line
        already refused is not kept, and refusing a message drops the messages of its line held
        for this conversation (parsers whose line yields messages of several conversations, OTLP,
        check them all first: ``ParseContext.check``)."""
        target = self.current
        if self._refused(item.line):
            return
        try:
            normalized = normalize_message(item.message, max_content_bytes=self.max_content)
        except InvalidContent as error:
            kept = self._without_unreadable_usage(item)
            if kept is None:
                shown = excerpt(redact(compact_json(item.message)).value)
                self.problem(Problem(item.line, str(error), shown, entry=item.entry))
                if item.line is not None:
                    target.messages = [m for m in target.messages if m[1] != item.line]
                return
            item = kept
            normalized = normalize_message(item.message, max_content_bytes=self.max_content)
        self.outcome.messages_seen += 1
        self.outcome.usable += 1
        self.ledger.mark(item.line, item.entry, IMPORTED)
        target.messages.append((item.message, item.line, self.time(item.at), item.once, normalized))
        if len(target.messages) >= BATCH:
            self.flush()

    def _without_unreadable_usage(self, item: Parsed) -> Parsed | None:
        """A message refused only for its ``usage`` (a counter that is not a non-negative
        integer...) is imported without it: the record keeps the value as ``usage_unread``, the
        counters do not count it, and the line is reported (not refused). None when the message
        is refused for something else."""
        dropped = without_unreadable_usage(item.message, self.max_content)
        if dropped is None:
            return None
        message, reason = dropped
        self.outcome.usage_unread += 1
        shown, _ = redact(f"imported without its usage, which is not counted: {reason}")
        self.report(Problem(item.line, shown, refused=False))
        return replace(item, message=message)

    def kept(self, item: Kept) -> None:
        target = self.current
        if self._refused(item.line):
            return  # a refused line keeps nothing, its source record included
        if not item.source_key or len(item.source_key) > 255:
            self.problem(
                Problem(
                    item.line,
                    "source key is empty or longer than 255 characters",
                    entry=item.entry,
                )
            )
            return
        self.ledger.mark(item.line, item.entry, KEPT)
        self.time(item.at)
        if item.unknown:
            self.outcome.unknown_kinds[item.kind or item.record_type] += 1
            self.outcome.usable += 1
            target.unknown_held = True
        if item.subagent is not None:
            self.outcome.subagent_lines += 1
        if len(target.records) >= BATCH:  # before: the record stays for its line's increment
            self.flush()
        target.records.append(
            {
                "source_key": item.source_key,
                "line_number": item.line,
                "raw": item.raw,
                "record_type": item.record_type[:64],
                **({"cut": True} if item.cut else {}),
            }
        )

    def flush(self, target: _Target | None = None, *, force: bool = False) -> None:
        """Write the messages and source records held for ``target`` (default: the current one)
        in one ``save_messages`` call. Source records alone do not create a conversation: they
        wait (up to ``HOLD_RECORDS``) for something to show, so a file of bookkeeping lines only
        does not become an empty conversation (docs/formats.md "What every import does")."""
        target = target or self.target
        if target is None or (not target.messages and not target.records):
            return
        if self.dry_run:
            target.messages, target.records = [], []
            return
        waiting = target.conversation is None and not target.messages and not force
        if waiting and len(target.records) < HOLD_RECORDS:
            return
        try:
            conversation = self.ensure(target)
        except ConversationsError as error:
            self._refuse_held(target, f"conversation {target.key!r} not created: {error}")
            target.messages, target.records = [], []
            return
        messages = self._without_replayed_results(conversation, target.messages)
        target.messages = []
        records = [r for r in target.records if not self._refused(r["line_number"])]
        target.records = []
        before = conversation.record_length
        times = [at for _, _, at, _, _ in messages]
        stamped = [t for t in times if t is not None]
        if stamped:
            pk = str(conversation.pk)
            self.ended_at[pk] = max(
                [*stamped, *([self.ended_at[pk]] if pk in self.ended_at else [])]
            )
        try:
            _retry(
                lambda: services.save_messages(
                    conversation=conversation,
                    messages=[n for _, _, _, _, n in messages],
                    source=self.source,
                    source_records=records,
                    times=times,
                )
            )
        except ConversationsError as error:
            target.messages, target.records = messages, records
            self._refuse_held(target, f"not saved: {error}")
            target.messages, target.records = [], []
            return
        conversation.refresh_from_db(fields=["record_length"])
        self.outcome.messages_added += conversation.record_length - before
        self.wrote(len(messages) + len(records))

    def wrote(self, rows: int) -> None:
        """Count rows written in the open chunk (``Chunks``), if the import has chunks."""
        if self.chunks is not None:
            self.chunks.wrote(rows)

    def _refused(self, line: int | None) -> bool:
        return line is not None and self.ledger.fate(line) == REFUSED

    def _refuse_held(self, target: _Target, reason: str) -> None:
        """A write of what is held for ``target`` failed: each of its lines is refused, by
        number (one report for what came from a whole document)."""
        lines = sorted(
            {line for _, line, _, _, _ in target.messages if line is not None}
            | {r["line_number"] for r in target.records if r["line_number"] is not None}
        )
        for line in lines:
            self.problem(Problem(line, reason))
        if not lines:
            self.problem(Problem(None, reason))

    def refuse_unaccounted(self) -> None:
        """Refuse every line read that nothing came of (not imported, not kept, not refused by
        its parser), so no line is ever dropped silently; then total the ledger."""
        reason = (
            "the document holds no message"
            if self.ledger.document
            else "nothing was read from this line (not a record this format reads)"
        )
        for line in self.ledger.unaccounted():
            self.problem(Problem(line, reason))
        self.outcome.lines = self.ledger.counts()
        self.outcome.document = self.ledger.document

    def _without_replayed_results(
        self, conversation: Conversation, messages: list[Held]
    ) -> list[Held]:
        """Drop ``once`` tool results whose call already has a result under another message id
        (a resumed session writing its turns again; docs/formats.md "Replayed turns")."""
        wanted = {str(m.get("tool_call_id")) for m, _, _, once, _ in messages if once}
        if not wanted:
            return messages
        answered = dict(
            Message.objects.filter(conversation=conversation, tool_call_id__in=wanted)
            .order_by("position")
            .values_list("tool_call_id", "message_id")
        )
        kept = []
        for entry in messages:
            message, _, _, once, _ = entry
            call_id = str(message.get("tool_call_id"))
            if once and call_id in answered and answered[call_id] != message.get("id"):
                self.outcome.replayed += 1
                continue
            if once:
                answered.setdefault(call_id, str(message.get("id")))
            kept.append(entry)
        return kept

    def mark_time(self, at: datetime | None) -> datetime | None:
        """The time of an item that is written at once, remembered as its conversation's last."""
        when = self.time(at)
        conversation = self.current.conversation
        if when is not None and conversation is not None:
            pk = str(conversation.pk)
            self.ended_at[pk] = max(when, self.ended_at.get(pk, when))
        return when

    def tool_update(self, item: ToolUpdate) -> None:
        self.flush()
        if self.dry_run:
            return
        conversation = self.ensure()
        at = self.mark_time(item.at)
        try:
            _retry(
                lambda: services.update_tool_status(
                    conversation=conversation, status=item.status, tool_info=item.info, at=at
                )
            )
        except InvalidToolTransition:
            return  # a move the call has already made or passed (a re-import): nothing to do
        except ConversationsError as error:
            self.problem(Problem(item.line, f"tool call {item.info.get('call_id')!r}: {error}"))
            return
        self.wrote(1)

    def status(self, item: StatusChange) -> None:
        self.flush()
        if self.dry_run:
            return
        conversation = self.ensure()
        at = self.mark_time(item.at)
        try:
            _retry(
                lambda: services.set_status(
                    conversation=conversation,
                    status=item.status,
                    pending_ask=item.pending_ask,
                    at=at,
                )
            )
        except ConversationsError as error:
            self.problem(Problem(None, f"status {item.status!r} not set: {error}"))

    def notice(self, item: Notice) -> None:
        """A display row outside the record, saved once per ``item.key`` (kept in its metadata
        as ``import_key``), so re-imports add nothing. The messages held before it are written
        first, in the open chunk: the notice's ``seq`` and ``event_seq`` come after theirs."""
        self.flush()
        if self.dry_run:
            return
        conversation = self.ensure()
        keys = self._notice_keys(self.current, conversation)
        if item.key in keys:
            return
        metadata = {**item.metadata, "import_key": item.key}
        at = self.mark_time(item.at)
        try:
            _retry(
                lambda: services.save_synthetic_message(
                    conversation=conversation,
                    message_type=item.message_type,
                    content_type=item.content_type,
                    content=item.content,
                    metadata=metadata,
                    at=at,
                )
            )
        except ConversationsError as error:
            self.problem(Problem(item.line, f"notice not saved: {error}"))
            return
        keys.add(item.key)
        self.wrote(1)

    def _notice_keys(self, target: _Target, conversation: Conversation) -> set[str]:
        """The import keys of the notices of ``target``'s conversation: read once (none for a
        conversation this import created), then kept up to date by ``notice``."""
        if target.notice_keys is None:
            target.notice_keys = (
                set()
                if str(conversation.pk) in self.created
                else {
                    str(key)
                    for key in DisplayMessage.objects.filter(
                        conversation=conversation, metadata__has_key="import_key"
                    ).values_list("metadata__import_key", flat=True)
                }
            )
        return target.notice_keys

    def rated(self, item: Rated) -> None:
        """Feedback of an export, through ``services.set_feedback`` on the ``part``-th display
        row of its record message, for the owner (``user`` null) or the user of that username."""
        self.flush()
        self.outcome.usable += 1
        if self.dry_run:
            return
        conversation = self.ensure()
        if item.user is None:
            user = self.owner
        else:
            model = get_user_model()
            user = model._default_manager.filter(**{model.USERNAME_FIELD: item.user}).first()
        if user is None:
            self.problem(Problem(item.line, f"feedback by {item.user!r}: no such user"))
            return
        row = (
            DisplayMessage.objects.filter(
                conversation=conversation, message__message_id=item.message_id
            )
            .order_by("seq")[item.part : item.part + 1]
            .first()
        )
        if row is None:
            self.problem(
                Problem(item.line, f"feedback on {item.message_id!r} part {item.part}: no such row")
            )
            return
        try:
            _retry(
                lambda: services.set_feedback(
                    conversation=conversation,
                    display_message=row,
                    user=user,
                    rating=item.rating,
                    comment=item.comment,
                )
            )
        except ConversationsError as error:
            self.problem(Problem(item.line, f"feedback not saved: {error}"))

    def delta(self, item: Delta) -> None:
        self.store_piece(item)
        if not self.live or self.dry_run:
            return
        self.flush()
        services.broadcast_delta(
            conversation=self.ensure(), stream_id=item.stream_id, text=item.text
        )

    def store_piece(self, item: Delta) -> None:
        """The kept line of a streamed increment (the record just kept) stores its text redacted
        with the stream's text before it (``redaction.StoredPieces``): a secret split across
        lines leaves no part of it in either."""
        target = self.current
        pieces = self.pieces.setdefault((target.key, item.stream_id), StoredPieces())
        stored = pieces.add(item.text)
        if stored != item.text and target.records:
            record = target.records[-1]
            record["raw"] = replace_in_line(record["raw"], item.text, stored)

    def close_open_calls(self) -> None:
        """Write what is held for every conversation of the source, then calls still ``pending``
        or ``executing`` when the log ends: ``interrupted`` (``log_ended``, at the time of the
        conversation's last line), never something that looks live."""
        for target in list(self.targets.values()):
            self.end_conversation(target)
        if self.dry_run or not self.final:
            return
        for pk, conversation in self.touched.items():
            open_ids = ToolCall.objects.filter(
                conversation=conversation,
                status__in=(ToolStatus.PENDING, ToolStatus.EXECUTING),
            ).values_list("call_id", flat=True)
            for call_id in list(open_ids):
                if self._interrupt(conversation, call_id, self.ended_at.get(pk)):
                    self.outcome.interrupted += 1

    @staticmethod
    def _interrupt(conversation: Conversation, call_id: str, at: datetime | None) -> bool:
        info = {"call_id": call_id, "interrupt_reason": "log_ended"}
        try:
            _retry(
                lambda: services.update_tool_status(
                    conversation=conversation,
                    status=ToolStatus.INTERRUPTED,
                    tool_info=info,
                    at=at,
                )
            )
        except ConversationsError:
            return False  # moved meanwhile by another writer
        return True


def _item_time(item: Item) -> datetime | None:
    """The line time an item carries (``at``), if any."""
    at = getattr(item, "at", None)
    return at if isinstance(at, datetime) else None


def interrupt_open_calls(conversation_ids: Iterable[str]) -> int:
    """Calls still ``pending`` or ``executing`` in these conversations become ``interrupted``
    (``log_ended``) at the time of the conversation's last change: what ``--follow`` on folders
    does when it stops (docs/formats.md "Whole folders"). Returns how many moved."""
    moved = 0
    for conversation in Conversation.objects.filter(pk__in=list(conversation_ids)):
        open_ids = ToolCall.objects.filter(
            conversation=conversation, status__in=(ToolStatus.PENDING, ToolStatus.EXECUTING)
        ).values_list("call_id", flat=True)
        for call_id in list(open_ids):
            moved += _Writer._interrupt(conversation, call_id, conversation.saved_at)
    return moved


def without_unreadable_usage(
    message: dict[str, Any], max_content: int
) -> tuple[dict[str, Any], str] | None:
    """``(the message without its usage, kept as usage_unread; why the usage does not read)``
    when ``message`` is refused only for its ``usage``, else None (its usage reads, it has none,
    or it is refused for something else too). Pure: nothing is reported."""
    usage = message.get("usage")
    if usage is None:
        return None
    try:
        read_usage(usage)
        return None  # the usage reads: the message is refused for another reason
    except InvalidContent as error:
        reason = str(error)
    kept = {k: v for k, v in message.items() if k != "usage"}
    kept["usage_unread"] = usage
    try:
        normalize_message(kept, max_content_bytes=max_content)
    except InvalidContent:
        return None
    return kept, reason


def message_refusal(message: dict[str, Any]) -> str | None:
    """Why the writer would refuse ``message`` (``normalize_message`` with this app's
    ``MAX_CONTENT_BYTES``; a message refused only for its usage is imported without it, so it is
    not refused), or None when it would import it. Given to parsers as ``ParseContext.check``, so
    a parser whose line yields several messages can refuse the line whole before any of them is
    written (docs/formats.md "Every line accounted for")."""
    limit = app_settings.max_content_bytes
    try:
        normalize_message(message, max_content_bytes=limit)
    except InvalidContent as error:
        if without_unreadable_usage(message, limit) is None:
            return str(error)
    return None


def run_import(
    *,
    lines: Iterable[SourceLine],
    parser: Parser,
    source: str,
    owner: Any,
    dry_run: bool = False,
    live: bool = False,
    report: Callable[[Problem], None],
    fallback_time: datetime | None = None,
    previous_titles: dict[str, tuple[str, int]] | None = None,
    final: bool = True,
    restore_deleted: bool = False,
    chunks: Chunks | None = None,
) -> Outcome:
    """Import one source: ``lines`` (from ``reading.iter_lines``) through ``parser`` (of format
    ``source``, the conversations' ``source`` column) for ``owner``. Each refused line is passed to
    ``report`` as it is found. ``dry_run`` writes nothing; ``live`` (``--follow``) also broadcasts
    streamed text. ``fallback_time`` dates what comes before any line with a time (a file's
    modification time; None: now); ``previous_titles`` are the titles an earlier import of this
    source set (conversation id -> (title, rank)). ``final`` false (a pass of a folder being
    followed) leaves open calls open. A conversation deleted since an import is refused (reported
    once, its items left out) unless ``restore_deleted``. Writes go in the transactions of
    ``chunks`` (default: chunks of this call's own, unless ``live`` or ``dry_run``: then each
    service call is its own transaction, so a live stream shows each line as it completes).
    Returns the ``Outcome``; raises nothing for bad input (an exception of the database or a hook
    rolls back the open chunk and propagates)."""
    if chunks is None and not live and not dry_run:
        with Chunks() as own:
            return run_import(
                lines=lines,
                parser=parser,
                source=source,
                owner=owner,
                report=report,
                fallback_time=fallback_time,
                previous_titles=previous_titles,
                final=final,
                restore_deleted=restore_deleted,
                chunks=own,
            )
    outcome = Outcome()
    writer = _Writer(
        owner=owner,
        source=source,
        dry_run=dry_run,
        live=live,
        report=report,
        outcome=outcome,
        fallback_time=fallback_time,
        previous_titles=previous_titles,
        final=final,
        restore_deleted=restore_deleted,
        chunks=chunks,
    )
    ahead: list[Item] | None = None if live else []  # read ahead for the file's clock
    for line in lines:
        writer.ledger.read(line.number)
        items = parser.feed(line)
        if ahead is not None:
            ahead.extend(items)
            if not writer.choose_clock(ahead, final=False):
                continue
            items, ahead = ahead, None
        for item in items:
            writer.handle(item)
        if live:
            writer.flush()  # a live stream shows each line as it completes
        elif chunks is not None:
            chunks.line_done()
    items = parser.finish()
    if ahead is not None:
        ahead.extend(items)
        writer.choose_clock(ahead, final=True)
        items = ahead
    for item in items:
        writer.handle(item)
    writer.close_open_calls()
    writer.ledger.document = bool(getattr(parser, "document", False))
    writer.refuse_unaccounted()
    return outcome
