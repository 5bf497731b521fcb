"""Database defaults (``db_default``) for every NOT NULL column with a fixed default, and
``now()`` for the timestamps (docs/write-path.md "Writers outside the ORM").

Django changes a column's default on SQLite by rebuilding the table, once per AlterField; the
AlterFields of one model are therefore grouped in :class:`AlterFieldsAtOnce`, which rebuilds
each table once on SQLite and runs the AlterFields one by one elsewhere (PostgreSQL: ``ALTER
COLUMN ... SET DEFAULT``, no rewrite).
"""

import django.db.models.functions.datetime
import django.utils.timezone
from django.db import migrations, models


class AlterFieldsAtOnce(migrations.operations.base.Operation):
    """The AlterField ``operations`` of model ``model_name`` as one step: the same state change;
    on SQLite one table rebuild for all of them, elsewhere each AlterField's own SQL."""

    reversible = True

    def __init__(self, model_name, operations):
        self.model_name = model_name
        self.operations = operations

    def deconstruct(self):
        return (self.__class__.__qualname__, [self.model_name, self.operations], {})

    def state_forwards(self, app_label, state):
        for operation in self.operations:
            operation.state_forwards(app_label, state)

    def _states(self, app_label, before):
        states = [before]
        for operation in self.operations:
            after = states[-1].clone()
            operation.state_forwards(app_label, after)
            states.append(after)
        return states

    def _rebuild(self, app_label, schema_editor, state):
        model = state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            schema_editor._remake_table(model)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "sqlite":
            self._rebuild(app_label, schema_editor, to_state)
            return
        states = self._states(app_label, from_state)
        for operation, before, after in zip(self.operations, states[:-1], states[1:], strict=True):
            operation.database_forwards(app_label, schema_editor, before, after)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "sqlite":
            self._rebuild(app_label, schema_editor, to_state)
            return
        states = self._states(app_label, to_state)
        steps = list(zip(self.operations, states[:-1], states[1:], strict=True))
        for operation, before, after in reversed(steps):
            operation.database_backwards(app_label, schema_editor, after, before)

    def describe(self):
        return f"Alter {len(self.operations)} fields of {self.model_name} at once"

    @property
    def migration_name_fragment(self):
        return f"alter_{self.model_name.lower()}_fields"


class Migration(migrations.Migration):
    dependencies = [
        ("murmur_conversations", "0007_share"),
    ]

    operations = [
        AlterFieldsAtOnce(
            "accesslogentry",
            [
                migrations.AlterField(
                    model_name="accesslogentry",
                    name="at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
            ],
        ),
        AlterFieldsAtOnce(
            "conversation",
            [
                migrations.AlterField(
                    model_name="conversation",
                    name="archived",
                    field=models.BooleanField(db_default=False, default=False),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="cache_read_tokens",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="cache_write_1h_tokens",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="cache_write_tokens",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="child_count",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="created_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="external_id",
                    field=models.CharField(blank=True, db_default="", default="", max_length=255),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="input_tokens",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="last_event_seq",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="last_seq",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="metadata",
                    field=models.JSONField(blank=True, db_default={}, default=dict),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="output_tokens",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="parent_call_id",
                    field=models.CharField(blank=True, db_default="", default="", max_length=255),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="parent_created_event_seq",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="parent_event_seq",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="pending_ask_event_seq",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="pinned",
                    field=models.BooleanField(db_default=False, default=False),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="reasoning_tokens",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="record_length",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="saved_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="source",
                    field=models.CharField(blank=True, db_default="", default="", max_length=64),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="status",
                    field=models.CharField(
                        choices=[
                            ("idle", "Idle"),
                            ("running", "Running"),
                            ("paused", "Paused"),
                            ("interrupted", "Interrupted"),
                            ("cancelled", "Cancelled"),
                            ("error", "Error"),
                        ],
                        db_default="idle",
                        default="idle",
                        max_length=16,
                    ),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="tags",
                    field=models.JSONField(blank=True, db_default=[], default=list),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="title",
                    field=models.CharField(blank=True, db_default="", default="", max_length=255),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="tool_call_count",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="transcript_count",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="usage_by_model",
                    field=models.JSONField(blank=True, db_default={}, default=dict),
                ),
            ],
        ),
        AlterFieldsAtOnce(
            "displaymessage",
            [
                migrations.AlterField(
                    model_name="displaymessage",
                    name="content",
                    field=models.JSONField(db_default={}, default=dict),
                ),
                migrations.AlterField(
                    model_name="displaymessage",
                    name="created_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
                migrations.AlterField(
                    model_name="displaymessage",
                    name="metadata",
                    field=models.JSONField(blank=True, db_default={}, default=dict),
                ),
                migrations.AlterField(
                    model_name="displaymessage",
                    name="status",
                    field=models.CharField(
                        choices=[
                            ("pending", "Pending"),
                            ("executing", "Executing"),
                            ("completed", "Completed"),
                            ("failed", "Failed"),
                            ("interrupted", "Interrupted"),
                            ("cancelled", "Cancelled"),
                        ],
                        db_default="completed",
                        default="completed",
                        max_length=16,
                    ),
                ),
                migrations.AlterField(
                    model_name="displaymessage",
                    name="updated_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
            ],
        ),
        AlterFieldsAtOnce(
            "feedback",
            [
                migrations.AlterField(
                    model_name="feedback",
                    name="comment",
                    field=models.TextField(blank=True, db_default="", default=""),
                ),
                migrations.AlterField(
                    model_name="feedback",
                    name="created_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
                migrations.AlterField(
                    model_name="feedback",
                    name="updated_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
            ],
        ),
        AlterFieldsAtOnce(
            "hold",
            [
                migrations.AlterField(
                    model_name="hold",
                    name="placed_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
            ],
        ),
        AlterFieldsAtOnce(
            "importedsource",
            [
                migrations.AlterField(
                    model_name="importedsource",
                    name="conversations",
                    field=models.JSONField(blank=True, db_default=[], default=list),
                ),
                migrations.AlterField(
                    model_name="importedsource",
                    name="head_hash",
                    field=models.CharField(blank=True, db_default="", default="", max_length=64),
                ),
                migrations.AlterField(
                    model_name="importedsource",
                    name="head_size",
                    field=models.PositiveIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="importedsource",
                    name="imported_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
                migrations.AlterField(
                    model_name="importedsource",
                    name="line",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="importedsource",
                    name="mtime_ns",
                    field=models.BigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="importedsource",
                    name="offset",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="importedsource",
                    name="options",
                    field=models.CharField(blank=True, db_default="", default="", max_length=64),
                ),
                migrations.AlterField(
                    model_name="importedsource",
                    name="size",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="importedsource",
                    name="titles",
                    field=models.JSONField(blank=True, db_default={}, default=dict),
                ),
            ],
        ),
        AlterFieldsAtOnce(
            "message",
            [
                migrations.AlterField(
                    model_name="message",
                    name="content",
                    field=models.JSONField(db_default="", default=str),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="created_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="extra",
                    field=models.JSONField(blank=True, db_default={}, default=dict),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="is_error",
                    field=models.BooleanField(db_default=False, default=False),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="source_id",
                    field=models.CharField(blank=True, db_default="", default="", max_length=255),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="tool_call_id",
                    field=models.CharField(blank=True, db_default="", default="", max_length=255),
                ),
            ],
        ),
        AlterFieldsAtOnce(
            "messageusage",
            [
                migrations.AlterField(
                    model_name="messageusage",
                    name="cache_read_tokens",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="messageusage",
                    name="cache_write_1h_tokens",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="messageusage",
                    name="cache_write_tokens",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="messageusage",
                    name="created_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
                migrations.AlterField(
                    model_name="messageusage",
                    name="input_tokens",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="messageusage",
                    name="model",
                    field=models.CharField(blank=True, db_default="", default="", max_length=255),
                ),
                migrations.AlterField(
                    model_name="messageusage",
                    name="output_tokens",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="messageusage",
                    name="reasoning_tokens",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
            ],
        ),
        AlterFieldsAtOnce(
            "redactioncount",
            [
                migrations.AlterField(
                    model_name="redactioncount",
                    name="count",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
            ],
        ),
        AlterFieldsAtOnce(
            "share",
            [
                migrations.AlterField(
                    model_name="share",
                    name="created_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
                migrations.AlterField(
                    model_name="share",
                    name="mode",
                    field=models.CharField(
                        choices=[("snapshot", "Snapshot"), ("live", "Live")],
                        db_default="snapshot",
                        default="snapshot",
                        max_length=16,
                    ),
                ),
                migrations.AlterField(
                    model_name="share",
                    name="require_login",
                    field=models.BooleanField(db_default=False, default=False),
                ),
            ],
        ),
        AlterFieldsAtOnce(
            "sharerow",
            [
                migrations.AlterField(
                    model_name="sharerow",
                    name="content",
                    field=models.JSONField(db_default={}, default=dict),
                ),
                migrations.AlterField(
                    model_name="sharerow",
                    name="created_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
                migrations.AlterField(
                    model_name="sharerow",
                    name="metadata",
                    field=models.JSONField(blank=True, db_default={}, default=dict),
                ),
                migrations.AlterField(
                    model_name="sharerow",
                    name="status",
                    field=models.CharField(
                        choices=[
                            ("pending", "Pending"),
                            ("executing", "Executing"),
                            ("completed", "Completed"),
                            ("failed", "Failed"),
                            ("interrupted", "Interrupted"),
                            ("cancelled", "Cancelled"),
                        ],
                        db_default="completed",
                        default="completed",
                        max_length=16,
                    ),
                ),
                migrations.AlterField(
                    model_name="sharerow",
                    name="updated_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
            ],
        ),
        AlterFieldsAtOnce(
            "sourcerecord",
            [
                migrations.AlterField(
                    model_name="sourcerecord",
                    name="created_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
                migrations.AlterField(
                    model_name="sourcerecord",
                    name="record_type",
                    field=models.CharField(blank=True, db_default="", default="", max_length=64),
                ),
            ],
        ),
        AlterFieldsAtOnce(
            "toolcall",
            [
                migrations.AlterField(
                    model_name="toolcall",
                    name="arguments",
                    field=models.JSONField(blank=True, db_default={}, default=dict),
                ),
                migrations.AlterField(
                    model_name="toolcall",
                    name="created_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=django.utils.timezone.now,
                    ),
                ),
                migrations.AlterField(
                    model_name="toolcall",
                    name="display_text",
                    field=models.TextField(blank=True, db_default="", default=""),
                ),
                migrations.AlterField(
                    model_name="toolcall",
                    name="event_seq",
                    field=models.PositiveBigIntegerField(db_default=0, default=0),
                ),
                migrations.AlterField(
                    model_name="toolcall",
                    name="interrupt_reason",
                    field=models.CharField(
                        blank=True,
                        choices=[
                            ("", "None"),
                            ("awaiting_input", "Awaiting input"),
                            ("worker_lost", "Worker lost"),
                            ("log_ended", "Log ended"),
                            ("forked", "Forked"),
                        ],
                        db_default="",
                        default="",
                        max_length=32,
                    ),
                ),
                migrations.AlterField(
                    model_name="toolcall",
                    name="name",
                    field=models.CharField(blank=True, db_default="", default="", max_length=255),
                ),
                migrations.AlterField(
                    model_name="toolcall",
                    name="status",
                    field=models.CharField(
                        choices=[
                            ("pending", "Pending"),
                            ("executing", "Executing"),
                            ("completed", "Completed"),
                            ("failed", "Failed"),
                            ("interrupted", "Interrupted"),
                            ("cancelled", "Cancelled"),
                        ],
                        db_default="pending",
                        default="pending",
                        max_length=16,
                    ),
                ),
            ],
        ),
    ]
