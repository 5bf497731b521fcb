"""Normalising the app's tables for the golden fixtures (``tests/golden/__init__.py``): every model
of ``murmur_conversations``, introspected (a new model or column is included without a change
here), each row as ``{field: value}`` under a label, with what differs between two runs of the same
steps replaced:

- primary keys by ``<Model N>`` (conversations ``<conv N>``) numbered in a natural order of the
  table (``NATURAL``: by conversation and position, seq, event_seq...; the primary key last), and
  every foreign key by the label of the row it names; users by their username;
- UUIDs anywhere (dashed or as 32 hex digits, as in ``msg_<hex>``) by ``<uuid N>`` in order of
  first appearance (a conversation's by its label);
- times within a month of ``START`` (the frozen clock) by ``T+<seconds>``; a time near the real
  clock by ``<wall clock>`` (a timestamp no frozen clock reached: a database default); other
  times (given in a message or an imported file) as ISO text;
- the frame log's process ``origin``, share token hashes and import paths' hashes by
  ``<masked>``; the temporary folder of imported files by ``<files>``.

JSON stored as text (the frame log's frames and sidebar) is parsed; key order is kept as the
database gives it (PostgreSQL's ``jsonb`` has its own order, so fixtures are per vendor)."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.db.models import Field, Model
from django.utils import timezone as real_timezone

from murmur_conversations.models import Conversation

START = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
REAL_NOW = real_timezone.now  # read before a test freezes the clock

#: Columns whose value is random or names this machine: (model, field).
MASKED = {
    ("FrameLogEntry", "origin"),
    ("Share", "token_hash"),
    ("ImportedSource", "path_key"),
    ("DeletedSource", "key_hash"),  # a hash of the key, which may be a (random) conversation id
}
#: The order rows of a table are labelled and listed in (the primary key breaks ties), so that a
#: writer inserting the same rows in another order is not a difference.
NATURAL: dict[str, tuple[str, ...]] = {
    "Message": ("conversation", "position"),
    "DisplayMessage": ("conversation", "seq"),
    "ToolCall": ("conversation", "event_seq", "call_id"),
    "SourceRecord": ("conversation", "source", "line_number", "source_key"),
    "MessageUsage": ("conversation", "message"),
    "RedactionCount": ("conversation", "detector"),
    "FrameLogEntry": ("conversation_id", "event_seq", "kind"),
    "Share": ("conversation", "created_at", "mode"),
    "ShareRow": ("share", "seq"),
    "Feedback": ("conversation", "display_message", "user"),
    "ConversationTag": ("conversation", "name"),
    "ImportedSource": ("owner", "path"),
    "DeletedSource": ("owner", "source", "deleted_at"),
    "AccessLogEntry": ("conversation", "at"),
}
#: Tables labelled first, in this order (others follow by name): a table's foreign keys name
#: rows of tables before it.
FIRST = ("Conversation", "Message", "ToolCall", "DisplayMessage", "Share")
UUID_RE = re.compile(
    r"(?<![0-9a-fA-F])([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|[0-9a-f]{32})(?![0-9a-fA-F])"
)
ISO_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")


class Normaliser:
    """Labels, kept for one scenario: each value keeps its label wherever it appears."""

    def __init__(self, users: dict[Any, str], files: str) -> None:
        self.users = users
        self.files = files
        self.conversations: dict[uuid.UUID, str] = {}
        self.rows: dict[tuple[str, Any], str] = {}
        self.uuids: dict[uuid.UUID, str] = {}

    def see_conversations(self) -> None:
        """Label the conversations made since the last call, oldest first."""
        new = (
            Conversation.objects.exclude(pk__in=list(self.conversations))
            .order_by("created_at", "external_id", "title")
            .values_list("pk", flat=True)
        )
        for pk in new:
            self.conversations[pk] = f"<conv {len(self.conversations) + 1}>"

    def conversation(self, pk: Any) -> str:
        key = pk if isinstance(pk, uuid.UUID) else uuid.UUID(str(pk))
        if key not in self.conversations:
            self.conversations[key] = f"<conv {len(self.conversations) + 1}>"
        return self.conversations[key]

    def row(self, model: str, pk: Any) -> str:
        if model == "Conversation":
            return self.conversation(pk)
        if pk is None:
            return "<none>"
        key = (model, str(pk))
        if key not in self.rows:
            count = sum(1 for m, _ in self.rows if m == model)
            self.rows[key] = f"<{model} {count + 1}>"
        return self.rows[key]

    def uuid(self, text: str) -> str:
        value = uuid.UUID(text)
        if value in self.conversations:
            return self.conversations[value]
        if value not in self.uuids:
            self.uuids[value] = f"<uuid {len(self.uuids) + 1}>"
        return self.uuids[value]

    def time(self, when: datetime) -> str:
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        if abs(when - START) < timedelta(days=31):
            seconds = (when - START).total_seconds()
            return f"T{seconds:+g}"
        if abs(when - REAL_NOW()) < timedelta(days=2):
            return "<wall clock>"
        return when.isoformat()

    def text(self, value: str) -> str:
        if ISO_RE.fullmatch(value):
            try:
                return self.time(datetime.fromisoformat(value.replace("Z", "+00:00")))
            except ValueError:
                pass
        value = value.replace(self.files, "<files>")
        return UUID_RE.sub(lambda m: self.uuid(m.group(1)), value)

    def value(self, value: Any, key: str = "", parent: dict[str, Any] | None = None) -> Any:
        """``value`` (a column's, a JSON value, what a service returned) normalised."""
        if isinstance(value, Model):
            return self.instance(value)
        if isinstance(value, dict):
            items = [(self.text(str(k)), self.value(v, str(k), value)) for k, v in value.items()]
            if items and all(UUID_RE.fullmatch(str(k)) for k in value):
                # keyed by random ids (``ImportedSource.titles``): jsonb orders them by their
                # bytes, so the order is the labels'
                items.sort(key=lambda item: _number(item[0]))
            return dict(items)
        if isinstance(value, list | tuple):
            return [self.value(v, key, parent) for v in value]
        if isinstance(value, uuid.UUID):
            return self.uuid(str(value))
        if isinstance(value, datetime):
            return self.time(value)
        if isinstance(value, date | timedelta):
            return str(value)
        if isinstance(value, str):
            if key == "id" and parent is not None and value.isdigit():
                if "content_type" in parent:  # a display row's shape
                    return self.row("DisplayMessage", value)
                if "call_id" in parent:  # a tool call's shape
                    return self.row("ToolCall", value)
            return self.text(value)
        return value

    def field(self, model: str, field: Field[Any, Any], value: Any) -> Any:
        if (model, field.name) in MASKED:
            return "<masked>" if value not in ("", None, 0) else value
        if field.primary_key and not field.is_relation:
            return self.row(model, value)
        if field.is_relation and field.related_model is not None:
            if value is None:
                return None
            if field.related_model is get_user_model():
                return f"<user {self.users.get(value, value)}>"
            return self.row(field.related_model.__name__, value)
        if model == "FrameLogEntry" and field.name == "owner" and value:
            return f"<user {self.users.get(int(value), value)}>"
        if model == "FrameLogEntry" and field.name in ("frames", "sidebar") and value:
            return self.value(json.loads(value))
        return self.value(value, field.name)

    def instance(self, obj: Model) -> dict[str, Any]:
        """A model instance as it was when returned: its label and concrete fields."""
        model = type(obj).__name__
        data: dict[str, Any] = {"model": model}
        for field in type(obj)._meta.concrete_fields:
            data[field.name] = self.field(model, field, getattr(obj, field.attname))
        return data


def _number(label: str) -> int:
    """The number of a label (``<conv 12>``: 12)."""
    return int(label.rsplit(" ", 1)[1][:-1])


def app_models() -> list[type[Model]]:
    """The models of ``murmur_conversations``: those of ``FIRST``, then the others by name."""
    found = {m.__name__: m for m in apps.get_app_config("murmur_conversations").get_models()}
    return [found[n] for n in FIRST if n in found] + [
        found[n] for n in sorted(found) if n not in FIRST
    ]


def _sort_key(normaliser: Normaliser, model: type[Model], row: dict[str, Any]) -> tuple[Any, ...]:
    parts: list[Any] = []
    meta = model._meta
    for name in NATURAL.get(model.__name__, ()):
        field = meta.get_field(name)
        value = row[field.attname]  # type: ignore[union-attr]
        if (field.is_relation and field.related_model is Conversation) or name == "conversation_id":
            value = _number(normaliser.conversation(value)) if value is not None else -1
        elif field.is_relation and field.related_model is get_user_model():
            value = normaliser.users.get(value, str(value))
        elif field.is_relation and value is not None and field.related_model is not None:
            label = normaliser.rows.get((field.related_model.__name__, str(value)), "< 0>")
            value = _number(label)
        parts.append((value is None, "" if value is None else value))
    pk = row[meta.pk.attname]
    if model is Conversation:
        return (_number(normaliser.conversation(pk)),)
    if meta.pk.is_relation and meta.pk.related_model is Conversation:
        return (*parts, _number(normaliser.conversation(pk)))
    return (*parts, str(pk) if isinstance(pk, uuid.UUID) else pk)


def snapshot(normaliser: Normaliser) -> dict[str, dict[str, dict[str, Any]]]:
    """Every app table: ``{model: {row label: {field: value}}}``, rows in their natural order."""
    tables: dict[str, dict[str, dict[str, Any]]] = {}
    for model in app_models():
        name = model.__name__
        fields = list(model._meta.concrete_fields)
        rows = list(model._default_manager.values(*[f.attname for f in fields]))
        rows.sort(key=lambda row: _sort_key(normaliser, model, row))
        table: dict[str, dict[str, Any]] = {}
        for row in rows:
            pk_field = model._meta.pk
            assert pk_field is not None
            label = normaliser.field(name, pk_field, row[pk_field.attname])
            table[label] = {
                f.name: normaliser.field(name, f, row[f.attname])
                for f in fields
                if f is not pk_field
            }
        tables[name] = table
    return tables
