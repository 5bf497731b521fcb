"""``run_import``: feed a source's lines to its parser and write what it yields through the services
(docs/formats.md). The only module of ``importers`` that touches the database.

Messages are validated one by one (``messages.normalize_message``) before any write, so a bad
message is reported with its line and never fails its neighbours; good ones are written in batches
through ``services.save_messages`` (one transaction each, with their source records). Memory is
bounded by one batch, whatever the file size. Re-importing adds nothing: message ids and source keys
are de-duplicated by the services, tool moves already made are skipped. When the source ends, calls
left ``pending`` or ``executing`` become ``interrupted`` (``log_ended``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from django.contrib.auth import get_user_model

from murmur_conversations import services
from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import (
    ConversationsError,
    InvalidContent,
    InvalidToolTransition,
    WriteConflict,
)
from murmur_conversations.importers.records import (
    Begin,
    Delta,
    Item,
    Kept,
    Notice,
    Parsed,
    Parser,
    Problem,
    Rated,
    SourceLine,
    StatusChange,
    ToolUpdate,
    compact_json,
    excerpt,
    first_text,
    known,
)
from murmur_conversations.messages import normalize_message
from murmur_conversations.models import Conversation, DisplayMessage, ToolCall, ToolStatus

#: Messages (or source records) written per ``save_messages`` call.
BATCH: Final = 500
_RETRIES: Final = 3
T = TypeVar("T")


@dataclass
class Outcome:
    """What importing one source did. ``usable`` counts the items that landed (or would, with
    ``--dry-run``); ``problems`` the refused lines; ``conversations`` the conversation ids."""

    messages_added: int = 0
    messages_seen: int = 0
    unknown: int = 0
    usable: int = 0
    problems: int = 0
    interrupted: int = 0
    conversations: list[str] = field(default_factory=list)


def _retry(call: Callable[[], T]) -> T:
    """Run a service call, retrying a ``WriteConflict`` (nothing was written) a few times."""
    for _attempt in range(_RETRIES - 1):
        try:
            return call()
        except WriteConflict:
            continue
    return call()


def _external_id(key: str) -> str:
    """Keys longer than the column are replaced by their sha256 (still stable and unique)."""
    if len(key) <= 255:
        return key
    return "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


class _Writer:
    """Writes the items of one source, one conversation at a time."""

    def __init__(
        self,
        *,
        owner: Any,
        source: str,
        dry_run: bool,
        live: bool,
        report: Callable[[Problem], None],
        outcome: Outcome,
    ) -> None:
        self.owner = owner
        self.source = source
        self.dry_run = dry_run
        self.live = live
        self.report = report
        self.outcome = outcome
        self.key: str | None = None
        self.conversation: Conversation | None = None
        self.messages: list[tuple[dict[str, Any], int | None]] = []
        self.records: list[dict[str, Any]] = []
        self.refused_ids: set[str] = set()
        self.touched: dict[str, Conversation] = {}
        self.max_content = app_settings.max_content_bytes

    def problem(self, problem: Problem) -> None:
        self.outcome.problems += 1
        self.report(problem)

    def handle(self, item: Item) -> None:
        if isinstance(item, Problem):
            self.problem(item)
        elif isinstance(item, Begin):
            self.begin(item.key)
        elif self.key is None:
            self.problem(Problem(None, f"the parser gave {type(item).__name__} before a key"))
        elif isinstance(item, Parsed):
            self.message(item)
        elif isinstance(item, Kept):
            self.kept(item)
        elif isinstance(item, ToolUpdate):
            self.tool_update(item)
        elif isinstance(item, StatusChange):
            self.status(item)
        elif isinstance(item, Notice):
            self.notice(item)
        elif isinstance(item, Rated):
            self.rated(item)
        elif isinstance(item, Delta):
            self.delta(item)

    def begin(self, key: str) -> None:
        self.flush()
        self.key = _external_id(key)
        self.conversation = None
        self.refused_ids.clear()

    def ensure(self) -> Conversation:
        """The current conversation, created on its first write (title: the first user text)."""
        if self.conversation is None:
            key = known(self.key)
            title = next(
                (
                    first_text(m.get("content"))
                    for m, _ in self.messages
                    if m.get("role") == "user" and not m.get("injected")
                ),
                "",
            )
            self.conversation = _retry(
                lambda: services.start_conversation(
                    owner=self.owner, title=title, source=self.source, external_id=key
                )
            )
            pk = str(self.conversation.pk)
            if pk not in self.touched:
                self.touched[pk] = self.conversation
                self.outcome.conversations.append(pk)
        return self.conversation

    def message(self, item: Parsed) -> None:
        try:
            normalize_message(item.message, max_content_bytes=self.max_content)
        except InvalidContent as error:
            self.refused_ids.add(str(item.message.get("id")))
            self.problem(Problem(item.line, str(error), excerpt(compact_json(item.message))))
            return
        self.outcome.messages_seen += 1
        self.outcome.usable += 1
        self.messages.append((item.message, item.line))
        if len(self.messages) >= BATCH:
            self.flush()

    def kept(self, item: Kept) -> None:
        if item.source_key in self.refused_ids:
            return  # the raw line of a refused message is not kept either
        if not item.source_key or len(item.source_key) > 255:
            self.problem(Problem(item.line, "source key is empty or longer than 255 characters"))
            return
        if item.unknown:
            self.outcome.unknown += 1
            self.outcome.usable += 1
        self.records.append(
            {
                "source_key": item.source_key,
                "line_number": item.line,
                "raw": item.raw,
                "record_type": item.record_type[:64],
            }
        )
        if len(self.records) >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Write the held messages and source records in one ``save_messages`` call."""
        if not self.messages and not self.records:
            return
        if self.dry_run:
            self.messages, self.records = [], []
            return
        try:
            conversation = self.ensure()
        except ConversationsError as error:
            self.messages, self.records = [], []
            self.problem(Problem(None, f"conversation {self.key!r} not created: {error}"))
            return
        messages, self.messages = self.messages, []
        records, self.records = self.records, []
        before = conversation.record_length
        try:
            _retry(
                lambda: services.save_messages(
                    conversation=conversation,
                    messages=[m for m, _ in messages],
                    source=self.source,
                    source_records=records,
                )
            )
        except ConversationsError as error:
            lines = [line for _, line in messages if line is not None]
            where = f"lines {min(lines)}-{max(lines)}" if lines else "a batch of messages"
            self.problem(Problem(None, f"{where} not saved: {error}"))
            return
        conversation.refresh_from_db(fields=["record_length"])
        self.outcome.messages_added += conversation.record_length - before

    def tool_update(self, item: ToolUpdate) -> None:
        self.flush()
        if self.dry_run:
            return
        conversation = self.ensure()
        try:
            _retry(
                lambda: services.update_tool_status(
                    conversation=conversation, status=item.status, tool_info=item.info
                )
            )
        except InvalidToolTransition:
            pass  # a move the call has already made or passed (a re-import): nothing to do
        except ConversationsError as error:
            self.problem(Problem(item.line, f"tool call {item.info.get('call_id')!r}: {error}"))

    def status(self, item: StatusChange) -> None:
        self.flush()
        if self.dry_run:
            return
        conversation = self.ensure()
        try:
            _retry(
                lambda: services.set_status(
                    conversation=conversation, status=item.status, pending_ask=item.pending_ask
                )
            )
        except ConversationsError as error:
            self.problem(Problem(None, f"status {item.status!r} not set: {error}"))

    def notice(self, item: Notice) -> None:
        """A display row outside the record, saved once per ``item.key`` (kept in its metadata
        as ``import_key``), so re-imports add nothing."""
        self.flush()
        if self.dry_run:
            return
        conversation = self.ensure()
        if DisplayMessage.objects.filter(
            conversation=conversation, metadata__import_key=item.key
        ).exists():
            return
        metadata = {**item.metadata, "import_key": item.key}
        try:
            _retry(
                lambda: services.save_synthetic_message(
                    conversation=conversation,
                    message_type=item.message_type,
                    content_type=item.content_type,
                    content=item.content,
                    metadata=metadata,
                )
            )
        except ConversationsError as error:
            self.problem(Problem(item.line, f"notice not saved: {error}"))

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
        if not self.live or self.dry_run:
            return
        self.flush()
        services.broadcast_delta(
            conversation=self.ensure(), stream_id=item.stream_id, text=item.text
        )

    def close_open_calls(self) -> None:
        """Calls still ``pending`` or ``executing`` when the log ends: ``interrupted``
        (``log_ended``), never something that looks live."""
        self.flush()
        if self.dry_run:
            return
        for conversation in self.touched.values():
            open_ids = ToolCall.objects.filter(
                conversation=conversation,
                status__in=(ToolStatus.PENDING, ToolStatus.EXECUTING),
            ).values_list("call_id", flat=True)
            for call_id in list(open_ids):
                if self._interrupt(conversation, call_id):
                    self.outcome.interrupted += 1

    @staticmethod
    def _interrupt(conversation: Conversation, call_id: str) -> bool:
        info = {"call_id": call_id, "interrupt_reason": "log_ended"}
        try:
            _retry(
                lambda: services.update_tool_status(
                    conversation=conversation, status=ToolStatus.INTERRUPTED, tool_info=info
                )
            )
        except ConversationsError:
            return False  # moved meanwhile by another writer
        return True


def run_import(
    *,
    lines: Iterable[SourceLine],
    parser: Parser,
    source: str,
    owner: Any,
    dry_run: bool = False,
    live: bool = False,
    report: Callable[[Problem], None],
) -> Outcome:
    """Import one source: ``lines`` (from ``reading.iter_lines``) through ``parser`` (of format
    ``source``, the conversations' ``source`` column) for ``owner``. Each refused line is passed to
    ``report`` as it is found. ``dry_run`` writes nothing; ``live`` (``--follow``) also broadcasts
    streamed text. Returns the ``Outcome``; raises nothing for bad input."""
    outcome = Outcome()
    writer = _Writer(
        owner=owner, source=source, dry_run=dry_run, live=live, report=report, outcome=outcome
    )
    for line in lines:
        for item in parser.feed(line):
            writer.handle(item)
        if live:
            writer.flush()  # a live stream shows each line as it completes
    for item in parser.finish():
        writer.handle(item)
    writer.close_open_calls()
    return outcome
