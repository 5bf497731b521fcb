"""The data model (docs/write-path.md): Conversation, Message (the record), DisplayMessage, ToolCall,
SourceRecord, and MessageUsage (the tokens of one assistant message, docs/usage.md); and around them
Share (with its frozen ShareRow copies), Feedback and ConversationTag (docs/api.md "Share links",
"Feedback", "Organising").

Rows are written only by ``services``. The invariants that the services rely on are named database
constraints, so they hold whatever writes the rows.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone


class ConversationStatus(models.TextChoices):
    """Where the agent run of a conversation stands (agentfootprint session, sagents)."""

    IDLE = "idle", "Idle"
    """No run in progress."""
    RUNNING = "running", "Running"
    """An agent run is in progress."""
    PAUSED = "paused", "Paused"
    """The run waits for the person; a pending ask may say for what."""
    INTERRUPTED = "interrupted", "Interrupted"
    """The run stopped unexpectedly (worker lost) or waits for input after an interrupt."""
    CANCELLED = "cancelled", "Cancelled"
    """The run was cancelled (``cancel_run``)."""
    ERROR = "error", "Error"
    """The run ended with an error."""


class ToolStatus(models.TextChoices):
    """The lifecycle of one tool call (sagents ``update_tool_status``; muse task lifecycle)."""

    PENDING = "pending", "Pending"
    """The model asked for the call; it has not started."""
    EXECUTING = "executing", "Executing"
    """The call is running."""
    COMPLETED = "completed", "Completed"
    """The call returned a result. Terminal. Also the status of every plain display row."""
    FAILED = "failed", "Failed"
    """The call returned an error. Terminal."""
    INTERRUPTED = "interrupted", "Interrupted"
    """The call stopped before it finished; ``interrupt_reason`` says why. Can still finish."""
    CANCELLED = "cancelled", "Cancelled"
    """The run was cancelled before the call finished. Terminal."""


TERMINAL_TOOL_STATUSES = frozenset({ToolStatus.COMPLETED, ToolStatus.FAILED, ToolStatus.CANCELLED})
OPEN_TOOL_STATUSES = frozenset({ToolStatus.PENDING, ToolStatus.EXECUTING, ToolStatus.INTERRUPTED})


class InterruptReason(models.TextChoices):
    """Why a tool call is ``interrupted``."""

    NONE = "", "None"
    """The call is not interrupted."""
    AWAITING_INPUT = "awaiting_input", "Awaiting input"
    """The tool asked the person something (an interrupt result); ``resolve_tool_result`` ends it."""
    WORKER_LOST = "worker_lost", "Worker lost"
    """The process running the call went away (``recover_interrupted``)."""
    LOG_ENDED = "log_ended", "Log ended"
    """An imported log ended while the call was still open."""
    FORKED = "forked", "Forked"
    """The conversation was forked before the call's result: the fork's record holds none."""


class MessageType(models.TextChoices):
    """Who a display row speaks for."""

    USER = "user", "User"
    """Typed by the person."""
    ASSISTANT = "assistant", "Assistant"
    """Written by the model, including its tool calls."""
    TOOL = "tool", "Tool"
    """A tool's result."""
    SYSTEM = "system", "System"
    """System prompts, notices, injected context and unknown roles."""


class ContentType(models.TextChoices):
    """The shape of a display row's ``content`` (required keys: ``validation.check_display_content``)."""

    TEXT = "text", "Text"
    """``{"text"}``."""
    THINKING = "thinking", "Thinking"
    """``{"text"}``, maybe ``signature``."""
    NOTIFICATION = "notification", "Notification"
    """``{"text"}``: a notice for people, not said by anyone."""
    ERROR = "error", "Error"
    """``{"text"}``, maybe ``error_type``."""
    IMAGE = "image", "Image"
    """``{"url"}`` or ``{"data", "mime_type"}``."""
    FILE_REFERENCE = "file_reference", "File reference"
    """``{"path", "name"}``."""
    STRUCTURED_DATA = "structured_data", "Structured data"
    """``{"format", "data"}``: any other block type, kept whole."""
    TOOL_CALL = "tool_call", "Tool call"
    """``{"call_id", "name", "arguments"}``; the row's status mirrors its ToolCall."""
    TOOL_RESULT = "tool_result", "Tool result"
    """``{"tool_call_id", "name", "content", "is_error", "is_interrupt"}``."""
    TODO_SNAPSHOT = "todo_snapshot", "Todo snapshot"
    """``{"todos"}``, maybe ``summary``."""


class ConversationQuerySet(models.QuerySet["Conversation"]):
    """Queries over conversations, named for what they return."""

    def owned_by(self, user: Any) -> ConversationQuerySet:
        """Conversations whose owner is ``user``; none for an anonymous or inactive user."""
        if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
            return self.none()
        return self.filter(owner_id=user.pk)

    def newest_first(self) -> ConversationQuerySet:
        """Ordered ``saved_at`` desc, then ``id`` desc (the sidebar order, docs/api.md)."""
        return self.order_by("-saved_at", "-id")

    def pinned_first(self) -> ConversationQuerySet:
        """Ordered ``pinned`` first, then ``saved_at`` desc, then ``id`` desc (the list order of
        ``GET conversations/``, docs/api.md "Organising")."""
        return self.order_by("-pinned", "-saved_at", "-id")


class Conversation(models.Model):
    """One agent conversation: owner, title, status, pending ask and counters over its rows.

    The counters always equal what the rows say: ``record_length`` is the number of record messages
    (= the last ``position``), ``transcript_count`` the length of the transcript projection,
    ``last_seq`` the last display ``seq``, ``last_event_seq`` the last event_seq taken,
    ``tool_call_count`` the number of tool calls, ``child_count`` the number of children.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="murmur_conversations",
    )
    title = models.CharField(max_length=255, blank=True, default="", db_default="")
    metadata = models.JSONField(default=dict, db_default={}, blank=True)
    status = models.CharField(
        max_length=16,
        choices=ConversationStatus.choices,
        default=ConversationStatus.IDLE,
        db_default=ConversationStatus.IDLE,
    )
    pending_ask = models.JSONField(null=True, blank=True, default=None)
    #: The event_seq of the last write that set, changed or cleared ``pending_ask`` (0: none yet);
    #: an answer written against an earlier event_seq is stale (docs/write-path.md).
    pending_ask_event_seq = models.PositiveBigIntegerField(default=0, db_default=0)
    #: The event_seq of the last write that changed ``status`` or ``pending_ask`` (0: none yet): a
    #: reconnect with ``?since=N`` sends ``status_changed`` exactly when it is above N
    #: (docs/websocket.md).
    status_event_seq = models.PositiveBigIntegerField(default=0, db_default=0)
    source = models.CharField(max_length=64, blank=True, default="", db_default="")
    external_id = models.CharField(max_length=255, blank=True, default="", db_default="")
    record_length = models.PositiveBigIntegerField(default=0, db_default=0)
    transcript_count = models.PositiveBigIntegerField(default=0, db_default=0)
    last_seq = models.PositiveBigIntegerField(default=0, db_default=0)
    last_event_seq = models.PositiveBigIntegerField(default=0, db_default=0)
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())
    #: The time people see and sort by: the time of the last message or run change, by the
    #: writer's clock (the log's own time for an import, docs/write-path.md "Times"). Organising
    #: (title, tags, pinned, archived, metadata) and feedback never move it.
    saved_at = models.DateTimeField(default=timezone.now, db_default=Now())
    #: The time retention counts from (``purge_conversations --older-than``, ``RETENTION_DAYS``;
    #: docs/deployment.md "Retention and holds"): the later of ``saved_at`` and the wall-clock
    #: time of the last write that moved it, so a history imported today is kept as if written
    #: today however old its log's times are. Never earlier than ``saved_at``; organising and
    #: feedback never move it.
    retained_at = models.DateTimeField(default=timezone.now, db_default=Now())
    #: When the conversation was last organised (title, tags, pinned, archived, metadata), by
    #: the wall clock; null: never. Organising moves no other time; a conversation-list walk
    #: leaves out what was organised after it began (docs/api.md "Organising").
    organised_at = models.DateTimeField(null=True, blank=True)
    #: The conversation that launched this one (a subagent's parent), or None for a top-level
    #: conversation. Set when the child is created and never changed; deleting the parent deletes
    #: its children (docs/architecture.md "Child conversations").
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="children",
        db_index=False,  # murmur_conv_child_idx, partial: most conversations have no parent
    )
    #: The call id in the parent that launched this child ("" when the log does not say).
    #: Write-once: set at creation or later when still empty, never changed.
    parent_call_id = models.CharField(max_length=255, blank=True, default="", db_default="")
    #: The parent's event_seq when this child was created: which call of a repeated call id
    #: launched it (``selectors.launching_calls``).
    parent_created_event_seq = models.PositiveBigIntegerField(default=0, db_default=0)
    #: The parent's event_seq of the last change of this child announced on the parent's stream
    #: (creation, status, steps, link); ``?since=`` replays children above it.
    parent_event_seq = models.PositiveBigIntegerField(default=0, db_default=0)
    #: How many children this conversation has (a counter kept by the write path).
    child_count = models.PositiveBigIntegerField(default=0, db_default=0)
    #: How many tool calls this conversation has (a counter kept by the write path): a child's
    #: "steps" (docs/websocket.md "child_updated").
    tool_call_count = models.PositiveBigIntegerField(default=0, db_default=0)
    #: How many tool results wait for their call (stored before the call that they answer, shown
    #: with ``metadata.orphan``): a counter kept by the write path, so that a new call looks for
    #: its held result only when there is one (docs/write-path.md "What one message becomes").
    held_results = models.PositiveBigIntegerField(default=0, db_default=0)
    # Token usage of the conversation's own assistant messages (docs/usage.md): counters kept by
    # the write path in the same write as the messages (never summed on read), in total and by
    # model (``{model: {counter: int}}``, the counters of ``usage.COUNTERS``).
    input_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    output_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    cache_write_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    cache_write_1h_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    reasoning_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    usage_by_model = models.JSONField(default=dict, db_default={}, blank=True)
    #: Organising (docs/api.md "Organising"): pinned conversations list first, archived ones only
    #: with ``?archived=``; ``tags`` is the ordered list of tag names, mirrored row by row in
    #: ConversationTag (which the ``?tag=`` filter reads through its index).
    pinned = models.BooleanField(default=False, db_default=False)
    archived = models.BooleanField(default=False, db_default=False)
    tags = models.JSONField(default=list, db_default=[], blank=True)
    #: Forks (docs/api.md "Forking"): the conversation this one was copied from (null once that one
    #: is deleted) and the display ``seq`` it was forked at.
    forked_from = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="forks",
        db_index=False,  # murmur_conv_fork_idx, partial: most conversations are no fork
    )
    forked_at_seq = models.PositiveBigIntegerField(null=True, blank=True)

    objects = ConversationQuerySet.as_manager()

    class Meta:
        ordering = ("-saved_at", "-id")
        # Every index here gets an entry on every write that moves saved_at or retained_at
        # (PostgreSQL cannot update the row in place while an index holds a changed column):
        # each serves a read named in docs/indexes.md, and a partial index skips the rows it
        # cannot serve.
        indexes = (
            # The admin's list, newest first (Meta.ordering).
            models.Index(fields=("-saved_at", "-id"), name="murmur_conv_saved_id_idx"),
            # A conversation's children (?parent=, the child frames, exports, deletion).
            models.Index(
                fields=("parent",),
                name="murmur_conv_child_idx",
                condition=Q(parent__isnull=False),
            ),
            # Retention: the oldest top-level conversations first (services.purge_conversations).
            models.Index(
                fields=("retained_at", "id"),
                name="murmur_conv_retained_idx",
                condition=Q(parent__isnull=True),
            ),
            # The sidebar and GET conversations/: an owner's listed (or archived) top-level
            # conversations, pinned first, newest first.
            models.Index(
                fields=("owner", "archived", "-pinned", "-saved_at", "-id"),
                name="murmur_conv_owner_list_idx",
                condition=Q(parent__isnull=True),
            ),
            # Title prefix search (LIKE 'x%') in the admin; the opclass applies on PostgreSQL only.
            models.Index(
                fields=("title",),
                name="murmur_conv_title_prefix_idx",
                opclasses=("varchar_pattern_ops",),
            ),
            # The forks of a conversation (set to null when it is deleted).
            models.Index(
                fields=("forked_from",),
                name="murmur_conv_fork_idx",
                condition=Q(forked_from__isnull=False),
            ),
        )
        constraints = (
            models.UniqueConstraint(
                fields=("owner", "source", "external_id"),
                condition=Q(owner__isnull=False) & ~Q(external_id=""),
                name="murmur_conv_owner_external_uniq",
            ),
            models.UniqueConstraint(
                fields=("source", "external_id"),
                condition=Q(owner__isnull=True) & ~Q(external_id=""),
                name="murmur_conv_ownerless_external_uniq",
            ),
            models.CheckConstraint(
                condition=Q(status__in=ConversationStatus.values), name="murmur_conv_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(pending_ask__isnull=True)
                | Q(status__in=(ConversationStatus.PAUSED, ConversationStatus.INTERRUPTED)),
                name="murmur_conv_pending_needs_pause",
            ),
            models.CheckConstraint(
                condition=Q(parent__isnull=True) | ~Q(parent=models.F("id")),
                name="murmur_conv_parent_not_self",
            ),
            models.CheckConstraint(
                condition=Q(parent__isnull=False) | Q(parent_call_id=""),
                name="murmur_conv_call_needs_parent",
            ),
        )

    def __str__(self) -> str:
        return self.title or str(self.id)

    @property
    def format(self) -> str:
        """agentfootprint's envelope format: ``flowchart-v1`` iff a pending ask is set."""
        return "flowchart-v1" if self.pending_ask is not None else "conversation-v1"


class Message(models.Model):
    """One message of the durable record (murmur ``conversation.jsonl``): append-only, in order."""

    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="messages",
        db_index=False,  # murmur_message_position_uniq leads with it
    )
    position = models.PositiveBigIntegerField()
    message_id = models.CharField(max_length=255)
    role = models.CharField(max_length=255)
    #: As given: a string, a list of blocks, or null (SQL NULL) when the message's content was null.
    #: A raw writer that leaves it out stores null, as a message without ``content`` does.
    content: models.JSONField[Any, Any] = models.JSONField(null=True, blank=True, default=str)
    tool_call_id = models.CharField(max_length=255, blank=True, default="", db_default="")
    is_error = models.BooleanField(default=False, db_default=False)
    source_id = models.CharField(max_length=255, blank=True, default="", db_default="")
    extra = models.JSONField(default=dict, db_default={}, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())

    class Meta:
        ordering = ("conversation", "position")
        constraints = (
            models.UniqueConstraint(
                fields=("conversation", "position"), name="murmur_message_position_uniq"
            ),
            models.UniqueConstraint(
                fields=("conversation", "message_id"), name="murmur_message_id_uniq"
            ),
            models.CheckConstraint(
                condition=Q(position__gte=1), name="murmur_message_position_gte1"
            ),
            models.CheckConstraint(condition=~Q(role=""), name="murmur_message_role_nonempty"),
        )

    def __str__(self) -> str:
        return f"{self.role} #{self.position}"


class ToolCall(models.Model):
    """One tool call, by call id: the single source of truth for its status (sagents, muse tasks)."""

    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="tool_calls",
        db_index=False,  # murmur_tool_call_id_idx leads with it
    )
    call_id = models.CharField(max_length=255)
    name = models.CharField(max_length=255, blank=True, default="", db_default="")
    arguments = models.JSONField(default=dict, db_default={}, blank=True)
    status = models.CharField(
        max_length=16,
        choices=ToolStatus.choices,
        default=ToolStatus.PENDING,
        db_default=ToolStatus.PENDING,
    )
    interrupt_reason = models.CharField(
        max_length=32,
        choices=InterruptReason.choices,
        blank=True,
        default=InterruptReason.NONE,
        db_default=InterruptReason.NONE,
    )
    display_text = models.TextField(blank=True, default="", db_default="")
    result = models.JSONField(null=True, blank=True, default=None)
    error = models.JSONField(null=True, blank=True, default=None)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    event_seq = models.PositiveBigIntegerField(default=0, db_default=0)
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())

    class Meta:
        ordering = ("conversation", "id")
        indexes = (
            models.Index(fields=("conversation", "status", "-id"), name="murmur_tool_status_idx"),
            models.Index(fields=("status", "name"), name="murmur_tool_status_name_idx"),
            models.Index(fields=("name", "-id"), name="murmur_tool_name_idx"),
            models.Index(fields=("conversation", "call_id"), name="murmur_tool_call_id_idx"),
        )
        constraints = (
            # A call id names one call among the conversation's open calls; once a call ended, a
            # new call may reuse its id (docs/write-path.md "Call ids").
            models.UniqueConstraint(
                fields=("conversation", "call_id"),
                condition=Q(status__in=sorted(OPEN_TOOL_STATUSES)),
                name="murmur_toolcall_open_call_id_uniq",
            ),
            models.CheckConstraint(
                condition=Q(status__in=ToolStatus.values), name="murmur_toolcall_status_valid"
            ),
        )

    def __str__(self) -> str:
        return f"{self.name or 'tool'} ({self.call_id}): {self.status}"


class DisplayMessage(models.Model):
    """One row people see (sagents ``DisplayMessage``): text, thinking, a tool-call card, a result,
    an error or a notice. ``seq`` is the display order; ``event_seq`` the last change."""

    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="display_messages",
        db_index=False,  # murmur_display_seq_uniq leads with it
    )
    message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.CASCADE, related_name="display_messages"
    )
    seq = models.PositiveBigIntegerField()
    message_type = models.CharField(max_length=16, choices=MessageType.choices)
    content_type = models.CharField(max_length=32, choices=ContentType.choices)
    content = models.JSONField(default=dict, db_default={})
    status = models.CharField(
        max_length=16,
        choices=ToolStatus.choices,
        default=ToolStatus.COMPLETED,
        db_default=ToolStatus.COMPLETED,
    )
    tool_call = models.ForeignKey(
        ToolCall,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="display_messages",
        db_index=False,  # murmur_display_tool_call_idx, partial: most rows have none
    )
    metadata = models.JSONField(default=dict, db_default={}, blank=True)
    created_event_seq = models.PositiveBigIntegerField()
    event_seq = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())
    updated_at = models.DateTimeField(default=timezone.now, db_default=Now())
    #: The conversation owner's feedback on this row, ``{"rating", "comment"}`` or null: a copy of
    #: the owner's Feedback row kept by ``services.set_feedback``/``clear_feedback``, so websocket
    #: frames (one per conversation, not per reader) carry it without a query (docs/websocket.md).
    owner_feedback = models.JSONField(null=True, blank=True, default=None)

    class Meta:
        ordering = ("conversation", "seq")
        indexes = (
            models.Index(
                fields=("conversation", "event_seq", "seq"), name="murmur_display_event_idx"
            ),
            # A tool call's rows (its card, its results), without the rows of no tool call.
            models.Index(
                fields=("tool_call",),
                name="murmur_display_tool_call_idx",
                condition=Q(tool_call__isnull=False),
            ),
        )
        constraints = (
            models.UniqueConstraint(fields=("conversation", "seq"), name="murmur_display_seq_uniq"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="murmur_display_seq_gte1"),
            models.CheckConstraint(
                condition=Q(event_seq__gte=models.F("created_event_seq")),
                name="murmur_display_event_order",
            ),
            models.CheckConstraint(
                condition=Q(message_type__in=MessageType.values), name="murmur_display_type_valid"
            ),
            models.CheckConstraint(
                condition=Q(content_type__in=ContentType.values),
                name="murmur_display_content_type_valid",
            ),
        )

    def __str__(self) -> str:
        return f"{self.message_type}/{self.content_type} #{self.seq}"

    @property
    def tool_call_id_value(self) -> str | None:
        """The call id this row belongs to (its tool call's, or a result's), else None."""
        if self.content_type == ContentType.TOOL_RESULT:
            return str(self.content.get("tool_call_id") or "") or None
        if self.content_type == ContentType.TOOL_CALL:
            return str(self.content.get("call_id") or "") or None
        return None


class SourceRecord(models.Model):
    """One line of an imported log, kept verbatim (``raw`` is text: jsonb would reorder keys)."""

    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="source_records",
        db_index=False,  # murmur_source_key_uniq leads with it
    )
    source = models.CharField(max_length=32)
    source_key = models.CharField(max_length=255)
    line_number = models.PositiveBigIntegerField(null=True, blank=True)
    raw = models.TextField()
    record_type = models.CharField(max_length=64, blank=True, default="", db_default="")
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())

    class Meta:
        ordering = ("conversation", "id")
        constraints = (
            models.UniqueConstraint(
                fields=("conversation", "source", "source_key"), name="murmur_source_key_uniq"
            ),
        )

    def __str__(self) -> str:
        return f"{self.source}:{self.source_key}"


class ImportedSource(models.Model):
    """How far ``import_conversations`` has read one file for one owner (docs/formats.md "Whole
    folders"), so a re-run skips an unchanged file without parsing it and reads an appended file
    from where the last import ended.

    ``path`` is the resolved path (``path_key`` its sha256, for the unique index); ``size``,
    ``mtime_ns`` and ``head_hash`` (sha256 of the first ``head_size`` bytes) tell an unchanged,
    appended or replaced file apart; ``offset`` (bytes) and ``line`` (the last line number read)
    say where to go on; ``state`` is the parser's own resume state (JSON, or null when the format
    must be re-read whole); ``options`` the forced format and conversation id it was read with;
    ``conversations`` the keys and ids it wrote to; ``titles`` the titles the import set, per
    conversation id (a title a person changed since is left alone).
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="murmur_imported_sources",
        db_index=False,  # murmur_imported_path_uniq leads with it
    )
    path = models.TextField()
    path_key = models.CharField(max_length=64)
    format = models.CharField(max_length=32)
    options = models.CharField(max_length=64, blank=True, default="", db_default="")
    size = models.PositiveBigIntegerField(default=0, db_default=0)
    mtime_ns = models.BigIntegerField(default=0, db_default=0)
    head_size = models.PositiveIntegerField(default=0, db_default=0)
    head_hash = models.CharField(max_length=64, blank=True, default="", db_default="")
    offset = models.PositiveBigIntegerField(default=0, db_default=0)
    line = models.PositiveBigIntegerField(default=0, db_default=0)
    state = models.JSONField(null=True, blank=True, default=None)
    conversations = models.JSONField(default=list, db_default=[], blank=True)
    titles = models.JSONField(default=dict, db_default={}, blank=True)
    imported_at = models.DateTimeField(default=timezone.now, db_default=Now())

    class Meta:
        ordering = ("owner", "path")
        constraints = (
            models.UniqueConstraint(fields=("owner", "path_key"), name="murmur_imported_path_uniq"),
        )

    def __str__(self) -> str:
        return self.path

    @staticmethod
    def key_of(path: str) -> str:
        """The ``path_key`` of a resolved path: the hex sha256 of its UTF-8 bytes."""
        return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()


#: Import formats whose conversation key is made from the messages themselves (a bare message
#: list or an envelope has no session id: ``importers.records.key_of_messages``). Deleting their
#: conversations leaves no :class:`DeletedSource`, which would keep a fingerprint of the content
#: (docs/formats.md "Deleted conversations stay deleted").
CONTENT_KEYED_SOURCES = frozenset({"openai", "anthropic", "agentfootprint"})
#: The ``source`` of the :class:`DeletedSource` each deleted conversation of an owner leaves of
#: its own id (no import format has this name): an import naming that id (a frontend list's
#: ``metadata.conversationId``, ``--conversation-id``, a murmur export's conversation line) is
#: refused like one of a deleted source.
CONVERSATION_ID_SOURCE = "murmur.conversation-id"
#: The ``Conversation.metadata`` key of a conversation imported from a murmur export: the
#: ``conversation_id`` its conversation line named, which its own export names again (so export
#: then import stays a fixed point).
EXPORTED_FROM_KEY = "exported_from"


class DeletedSource(models.Model):
    """What remains of a deleted conversation that came from a source with an identity: its
    owner, its ``source`` (the import format) and the sha256 of its ``external_id`` (the log's
    session id, the murmur key...), and when it was deleted; nothing of its content. Written in
    the deletion's transaction; ``import_conversations`` refuses to import a conversation with
    that identity again unless ``--restore-deleted`` (docs/formats.md "Deleted conversations stay
    deleted"). Conversations without an owner or an ``external_id``, and those of
    :data:`CONTENT_KEYED_SOURCES`, leave none of their key; every conversation with an owner
    leaves one of its own id (``source`` :data:`CONVERSATION_ID_SOURCE`, ``key_hash`` the
    sha256 of the id's canonical text)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="murmur_deleted_sources",
        db_index=False,  # murmur_deleted_source_uniq leads with it
    )
    source = models.CharField(max_length=64)
    key_hash = models.CharField(max_length=64)
    deleted_at = models.DateTimeField(default=timezone.now, db_default=Now())

    class Meta:
        ordering = ("owner", "source", "key_hash")
        constraints = (
            models.UniqueConstraint(
                fields=("owner", "source", "key_hash"), name="murmur_deleted_source_uniq"
            ),
        )

    def __str__(self) -> str:
        return f"deleted {self.source} conversation {self.key_hash[:12]}"

    @staticmethod
    def key_of(external_id: str) -> str:
        """The ``key_hash`` of an ``external_id``: the hex sha256 of its UTF-8 bytes."""
        return hashlib.sha256(external_id.encode("utf-8", "surrogatepass")).hexdigest()


class RedactionCount(models.Model):
    """How many secrets one detector replaced in one conversation's writes (docs/write-path.md
    "Redaction"). Kept by the services in the write that stored the redacted text, never summed
    at read time; the removed text itself is stored nowhere."""

    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="redaction_counts",
        db_index=False,  # murmur_redaction_detector_uniq leads with it
    )
    detector = models.CharField(max_length=64)
    count = models.PositiveBigIntegerField(default=0, db_default=0)

    class Meta:
        ordering = ("conversation", "detector")
        indexes = (models.Index(fields=("detector", "-count"), name="murmur_redaction_det_idx"),)
        constraints = (
            models.UniqueConstraint(
                fields=("conversation", "detector"), name="murmur_redaction_detector_uniq"
            ),
        )

    def __str__(self) -> str:
        return f"{self.detector}: {self.count}"


class Hold(models.Model):
    """A legal hold: the conversation may not be deleted or purged by anyone while it exists
    (docs/deployment.md "Retention and holds"). ``PROTECT`` makes the database refuse too, and
    makes deleting the owner's account fail rather than take the conversation with it."""

    conversation = models.OneToOneField(
        Conversation, on_delete=models.PROTECT, related_name="hold", primary_key=True
    )
    reason = models.TextField()
    placed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    placed_at = models.DateTimeField(default=timezone.now, db_default=Now())

    class Meta:
        ordering = ("-placed_at",)
        permissions = (("manage_holds", "Can place and release legal holds"),)

    def __str__(self) -> str:
        return f"hold on {self.conversation_id}"


class AccessSurface(models.TextChoices):
    """Where a conversation was read by someone who is not its owner (the staff access log), or
    by an agent acting for a user, its owner included (the ``mcp-*`` members: agent reads)."""

    ADMIN = "admin", "Admin: conversation page"
    """The admin's conversation page and its transcript pages."""
    ADMIN_LIST = "admin-list", "Admin: conversation list"
    """The admin's list of conversations (their titles), one entry per conversation on a page."""
    ADMIN_SEARCH = "admin-search", "Admin: conversation search"
    """The admin's list of conversations searched (by words of the titles and messages, an owner,
    a title prefix): one entry per conversation found on a page."""
    ADMIN_HISTORY = "admin-history", "Admin: history page"
    """The admin's history page of a conversation or one of its rows."""
    ADMIN_DELETE = "admin-delete", "Admin: delete confirmation"
    """The admin's delete confirmation of a conversation, and the delete action's."""
    ADMIN_ROWS = "admin-rows", "Admin: a conversation's rows"
    """The admin's lists and pages of a conversation's rows: record, display rows, tool calls,
    source records, share links, feedback, tags."""
    ADMIN_EXPORT = "admin-export", "Admin: export"
    """The admin's export action."""
    API_DETAIL = "api-detail", "API: conversation"
    """``GET conversations/{id}/``."""
    API_DISPLAY = "api-display-messages", "API: display rows"
    """``GET conversations/{id}/display-messages/``."""
    API_RECORD = "api-record", "API: record"
    """``GET conversations/{id}/record/``."""
    API_TRANSCRIPT = "api-transcript", "API: transcript"
    """``GET conversations/{id}/transcript/`` and the session wire's transcript."""
    API_TOOL_CALLS = "api-tool-calls", "API: tool calls"
    """``GET conversations/{id}/tool-calls/``."""
    API_FORK = "api-fork", "API: fork"
    """``POST conversations/{id}/fork/`` (the fork copies the conversation)."""
    API_SHARES = "api-shares", "API: share link"
    """``POST conversations/{id}/shares/`` (the link shows the conversation to others)."""
    WS_CONVERSATION = "ws-conversation", "Websocket: conversation stream"
    """``ws/conversations/{id}/``: one entry per socket opened (its snapshot, replay and live
    frames are one view)."""
    MCP_LIST = "mcp-list", "Agent (MCP): conversation list"
    """The MCP server's ``list_conversations`` (docs/mcp.md): an agent acting for the actor read
    the list; one entry per conversation on the page (titles are content)."""
    MCP_SEARCH = "mcp-search", "Agent (MCP): search"
    """The MCP server's ``search_conversations``: one entry per conversation with a hit on the
    page."""
    MCP_TRANSCRIPT = "mcp-transcript", "Agent (MCP): transcript"
    """The MCP server's ``read_transcript``: one entry per page read."""


class AccessLogEntry(models.Model):
    """One view of a conversation by someone who is not its owner (docs/admin.md "The access
    log"), or one read by an agent acting for a user, the owner included (``surface`` ``mcp-*``,
    docs/mcp.md): who, when, where. ``actor_name`` is the actor's full name, else their username, as it
    was at the time (never their e-mail), so the entry outlives the account."""

    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="access_log",
        db_index=False,  # murmur_access_conv_idx leads with it
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,  # murmur_access_actor_idx leads with it
    )
    actor_name = models.CharField(max_length=255)
    surface = models.CharField(max_length=64)
    at = models.DateTimeField(default=timezone.now, db_default=Now())

    class Meta:
        ordering = ("-id",)
        verbose_name_plural = "access log entries"
        indexes = (
            models.Index(fields=("conversation", "-id"), name="murmur_access_conv_idx"),
            models.Index(fields=("actor", "-id"), name="murmur_access_actor_idx"),
        )

    def __str__(self) -> str:
        return f"{self.actor_name} read {self.conversation_id} ({self.surface})"


class MessageUsage(models.Model):
    """The tokens of one assistant message that carried ``usage`` (docs/usage.md), written in the
    same write as the message; ``GET usage/`` sums these rows by day, model or conversation.
    ``model`` is the message's ``model`` ("" when it named none); the counters are the normalised
    ones of ``usage.COUNTERS``; ``created_at`` is the message's; ``cost_nanocents`` and
    ``priced_with`` say what it cost at the prices that priced it (``usage.row_cost``), so a period
    can be re-priced when prices change (``services.reprice_usage``)."""

    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="usage_rows",
        db_index=False,  # murmur_usage_conv_time_idx leads with it
    )
    message = models.OneToOneField(Message, on_delete=models.CASCADE, related_name="usage_row")
    model = models.CharField(max_length=255, blank=True, default="", db_default="")
    input_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    output_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    cache_read_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    cache_write_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    cache_write_1h_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    reasoning_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    #: What the row cost when it was priced, in billionths of a cent (USD x 10^11, an integer so
    #: sums are exact on every database); null when its model had no price.
    cost_nanocents = models.BigIntegerField(null=True, blank=True)
    #: Which prices priced it: ``"genai-prices <version>"``, ``"PRICES"`` (the host's setting), or
    #: "" when it had no price (docs/usage.md "Prices").
    priced_with = models.CharField(max_length=64, blank=True, default="", db_default="")
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())

    class Meta:
        ordering = ("conversation", "id")
        indexes = (
            models.Index(fields=("conversation", "created_at"), name="murmur_usage_conv_time_idx"),
        )

    def __str__(self) -> str:
        return f"{self.model or 'model'}: {self.input_tokens} in, {self.output_tokens} out"


class ShareMode(models.TextChoices):
    """What a share link shows (docs/api.md "Share links")."""

    SNAPSHOT = "snapshot", "Snapshot"
    """The display rows exactly as they were when the link was made (frozen ShareRow copies)."""
    LIVE = "live", "Live"
    """The conversation's current display rows."""


class Share(models.Model):
    """A share link of one conversation. The token itself is never stored: ``token_hash`` is the
    sha256 hex of it (``selectors.share_for_token`` looks it up). ``revoked_at`` set, or
    ``expires_at`` passed, and the link answers like an unknown one."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="shares",
        db_index=False,  # murmur_share_conv_idx leads with it
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="murmur_shares",
    )
    token_hash = models.CharField(max_length=64, unique=True)
    mode = models.CharField(
        max_length=16,
        choices=ShareMode.choices,
        default=ShareMode.SNAPSHOT,
        db_default=ShareMode.SNAPSHOT,
    )
    require_login = models.BooleanField(default=False, db_default=False)
    #: The conversation's ``last_event_seq`` when a snapshot link was made; null for live links.
    snapshot_event_seq = models.PositiveBigIntegerField(null=True, blank=True)
    #: A snapshot link's conversation summary as it was then (title, times, status, counts).
    snapshot = models.JSONField(null=True, blank=True, default=None)
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = (
            models.Index(
                fields=("conversation", "-created_at", "-id"), name="murmur_share_conv_idx"
            ),
        )
        constraints = (
            models.CheckConstraint(
                condition=Q(mode__in=ShareMode.values), name="murmur_share_mode_valid"
            ),
            models.CheckConstraint(
                condition=Q(mode=ShareMode.LIVE) | Q(snapshot_event_seq__isnull=False),
                name="murmur_share_snapshot_has_seq",
            ),
        )
        permissions = (("revoke_share", "Can revoke share links"),)

    def __str__(self) -> str:
        return f"{self.mode} share of {self.conversation_id}"


class ShareRow(models.Model):
    """One display row of a snapshot share, copied when the link was made and never changed, so the
    link shows exactly the rows as of ``Share.snapshot_event_seq`` (docs/api.md "Share links").
    Anything that later removes content from display rows (redaction, erasure) must treat these
    copies the same way, or revoke the conversation's snapshot links."""

    share = models.ForeignKey(
        Share,
        on_delete=models.CASCADE,
        related_name="rows",
        db_index=False,  # murmur_sharerow_seq_uniq leads with it
    )
    seq = models.PositiveBigIntegerField()
    message_type = models.CharField(max_length=16, choices=MessageType.choices)
    content_type = models.CharField(max_length=32, choices=ContentType.choices)
    content = models.JSONField(default=dict, db_default={})
    status = models.CharField(
        max_length=16,
        choices=ToolStatus.choices,
        default=ToolStatus.COMPLETED,
        db_default=ToolStatus.COMPLETED,
    )
    metadata = models.JSONField(default=dict, db_default={}, blank=True)
    created_event_seq = models.PositiveBigIntegerField()
    event_seq = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())
    updated_at = models.DateTimeField(default=timezone.now, db_default=Now())

    class Meta:
        ordering = ("share", "seq")
        constraints = (
            models.UniqueConstraint(fields=("share", "seq"), name="murmur_sharerow_seq_uniq"),
        )

    def __str__(self) -> str:
        return f"{self.message_type}/{self.content_type} #{self.seq}"

    @property
    def tool_call_id_value(self) -> str | None:
        """The call id this row belongs to, as ``DisplayMessage.tool_call_id_value``."""
        if self.content_type == ContentType.TOOL_RESULT:
            return str(self.content.get("tool_call_id") or "") or None
        if self.content_type == ContentType.TOOL_CALL:
            return str(self.content.get("call_id") or "") or None
        return None


class Rating(models.IntegerChoices):
    """A feedback rating (docs/api.md "Feedback")."""

    UP = 1, "Thumbs up"
    DOWN = -1, "Thumbs down"


class Feedback(models.Model):
    """One user's feedback on one display row of the record: a rating and an optional comment.
    One per ``(display_message, user)``; written by ``services.set_feedback``/``clear_feedback``."""

    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="feedback",
        db_index=False,  # murmur_feedback_conv_idx leads with it
    )
    display_message = models.ForeignKey(
        DisplayMessage,
        on_delete=models.CASCADE,
        related_name="feedback",
        db_index=False,  # murmur_feedback_row_user_uniq leads with it
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="murmur_feedback"
    )
    rating = models.SmallIntegerField(choices=Rating.choices)
    comment = models.TextField(blank=True, default="", db_default="")
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())
    updated_at = models.DateTimeField(default=timezone.now, db_default=Now())

    class Meta:
        ordering = ("conversation", "display_message", "user")
        verbose_name_plural = "feedback"
        indexes = (
            models.Index(fields=("conversation", "rating"), name="murmur_feedback_conv_idx"),
            models.Index(fields=("rating", "-updated_at"), name="murmur_feedback_rating_idx"),
        )
        constraints = (
            models.UniqueConstraint(
                fields=("display_message", "user"), name="murmur_feedback_row_user_uniq"
            ),
            models.CheckConstraint(
                condition=Q(rating__in=Rating.values), name="murmur_feedback_rating_valid"
            ),
        )

    def __str__(self) -> str:
        return f"{'+1' if self.rating > 0 else '-1'} on row {self.display_message_id}"


class ConversationTag(models.Model):
    """One tag of a conversation, one row per name: the indexed form of ``Conversation.tags`` that
    the ``?tag=`` filter reads (kept equal to it by ``services.update_conversation``)."""

    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="tag_rows",
        db_index=False,  # murmur_tag_uniq leads with it
    )
    name = models.CharField(max_length=32)

    class Meta:
        ordering = ("name", "conversation")
        indexes = (models.Index(fields=("name", "conversation"), name="murmur_tag_name_idx"),)
        constraints = (
            models.UniqueConstraint(fields=("conversation", "name"), name="murmur_tag_uniq"),
        )

    def __str__(self) -> str:
        return self.name


class FrameKind(models.IntegerChoices):
    """What one frame-log row announces (docs/websocket.md "The frame log")."""

    EVENT = 0, "event"
    """One event_seq of the conversation (its frames), or its creation (event_seq 0)."""
    DELETED = 1, "deleted"
    """The conversation was deleted."""


class FrameLogEntry(models.Model):
    """The live frames of one event, written in the same transaction as the change, so that a
    process on a process-local channel layer delivers another process's writes exactly as its own
    (docs/websocket.md "The frame log"). Short-lived: rows older than ``FRAME_LOG_RETENTION``
    seconds are pruned. Not a foreign key to the conversation: a deletion is logged too.

    ``frames`` is the JSON list of the conversation stream's frames of ``event_seq`` ("" when the
    conversation stream gets no message: a creation, event_seq 0); ``sidebar`` the JSON of the
    owner's user-stream frame (``conversation_saved`` or ``conversation_deleted``); ``owner`` the
    owner's primary key as text ("" for none); ``origin`` the writing process's token, so a
    process skips what it delivered itself."""

    id = models.BigAutoField(primary_key=True)
    conversation_id = models.UUIDField()
    event_seq = models.BigIntegerField(default=0, db_default=0)
    kind = models.SmallIntegerField(
        choices=FrameKind.choices, default=FrameKind.EVENT, db_default=FrameKind.EVENT
    )
    owner = models.CharField(max_length=64, blank=True, default="", db_default="")
    frames = models.TextField(blank=True, default="", db_default="")
    sidebar = models.TextField(blank=True, default="", db_default="")
    origin = models.CharField(max_length=32, blank=True, default="", db_default="")
    created_at = models.DateTimeField(default=timezone.now, db_default=Now())

    class Meta:
        ordering = ("id",)
        verbose_name_plural = "frame log entries"
        indexes = (
            models.Index(fields=("conversation_id", "event_seq"), name="murmur_framelog_conv_idx"),
        )

    def __str__(self) -> str:
        return f"frames of {self.conversation_id} at {self.event_seq}"
