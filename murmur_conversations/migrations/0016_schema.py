"""Indexes shaped for the write path (docs/indexes.md): each index serves a named read.

- The conversation table loses the indexes no read used (``murmur_conv_owner_saved_idx``,
  ``murmur_conv_owner_top_idx``); its children, forks and retention indexes become partial, so a
  write skips the rows they cannot serve; its title's full-text index moves to a table of its own
  on PostgreSQL (``search_index.reinstall_titles``), out of every write that moves ``saved_at``.
- The foreign keys' own indexes that an index leading with the same column covers are dropped;
  the display rows' tool-call index becomes partial (most rows belong to no tool call).
- PostgreSQL: fillfactor 50 on the conversation table and 80 on the tool-call table (rows updated
  in place), for the pages written from now on.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from murmur_conversations import search_index

#: PostgreSQL fillfactor of the tables whose rows are updated in place.
FILLFACTORS = {"conversation": 50, "toolcall": 80}


def _fillfactors(apps, schema_editor, reset):
    if schema_editor.connection.vendor != "postgresql":
        return
    for model, percent in FILLFACTORS.items():
        table = apps.get_model("murmur_conversations", model)._meta.db_table
        storage = "RESET (fillfactor)" if reset else f"SET (fillfactor = {percent})"
        schema_editor.execute(f'ALTER TABLE "{table}" {storage}')


def set_fillfactors(apps, schema_editor):
    _fillfactors(apps, schema_editor, reset=False)


def reset_fillfactors(apps, schema_editor):
    _fillfactors(apps, schema_editor, reset=True)


def move_title_search(apps, schema_editor):
    search_index.reinstall_titles(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("murmur_conversations", "0015_schema"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(set_fillfactors, reset_fillfactors, elidable=False),
        # Backwards keeps the titles' table: it answers the same queries.
        migrations.RunPython(move_title_search, migrations.RunPython.noop, elidable=False),
        migrations.RemoveIndex(
            model_name="conversation",
            name="murmur_conv_owner_saved_idx",
        ),
        migrations.RemoveIndex(
            model_name="conversation",
            name="murmur_conv_owner_top_idx",
        ),
        migrations.RemoveIndex(
            model_name="conversation",
            name="murmur_conv_parent_idx",
        ),
        migrations.RemoveIndex(
            model_name="conversation",
            name="murmur_conv_retained_idx",
        ),
        # The foreign keys' own indexes, which an index leading with the same column covers
        # (or a partial one below replaces): dropped by name, so SQLite does not rebuild the
        # tables (the names are Django's, the same on every database).
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="accesslogentry",
                    name="actor",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="accesslogentry",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="access_log",
                        to="murmur_conversations.conversation",
                    ),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="forked_from",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="forks",
                        to="murmur_conversations.conversation",
                    ),
                ),
                migrations.AlterField(
                    model_name="conversationtag",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="tag_rows",
                        to="murmur_conversations.conversation",
                    ),
                ),
                migrations.AlterField(
                    model_name="deletedsource",
                    name="owner",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="murmur_deleted_sources",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="displaymessage",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="display_messages",
                        to="murmur_conversations.conversation",
                    ),
                ),
                migrations.AlterField(
                    model_name="displaymessage",
                    name="tool_call",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="display_messages",
                        to="murmur_conversations.toolcall",
                    ),
                ),
                migrations.AlterField(
                    model_name="feedback",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="feedback",
                        to="murmur_conversations.conversation",
                    ),
                ),
                migrations.AlterField(
                    model_name="feedback",
                    name="display_message",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="feedback",
                        to="murmur_conversations.displaymessage",
                    ),
                ),
                migrations.AlterField(
                    model_name="importedsource",
                    name="owner",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="murmur_imported_sources",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="murmur_conversations.conversation",
                    ),
                ),
                migrations.AlterField(
                    model_name="messageusage",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="usage_rows",
                        to="murmur_conversations.conversation",
                    ),
                ),
                migrations.AlterField(
                    model_name="redactioncount",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="redaction_counts",
                        to="murmur_conversations.conversation",
                    ),
                ),
                migrations.AlterField(
                    model_name="share",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="shares",
                        to="murmur_conversations.conversation",
                    ),
                ),
                migrations.AlterField(
                    model_name="sharerow",
                    name="share",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="rows",
                        to="murmur_conversations.share",
                    ),
                ),
                migrations.AlterField(
                    model_name="sourcerecord",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="source_records",
                        to="murmur_conversations.conversation",
                    ),
                ),
                migrations.AlterField(
                    model_name="toolcall",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="tool_calls",
                        to="murmur_conversations.conversation",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_accesslogentry_actor_id_a2d501bf"',
                    'CREATE INDEX "murmur_conversations_accesslogentry_actor_id_a2d501bf" ON "murmur_conversations_accesslogentry" ("actor_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_accesslogentry_conversation_id_1db0754d"',
                    'CREATE INDEX "murmur_conversations_accesslogentry_conversation_id_1db0754d" ON "murmur_conversations_accesslogentry" ("conversation_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_conversation_forked_from_id_9c614018"',
                    'CREATE INDEX "murmur_conversations_conversation_forked_from_id_9c614018" ON "murmur_conversations_conversation" ("forked_from_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_conversationtag_conversation_id_9e10b7fe"',
                    'CREATE INDEX "murmur_conversations_conversationtag_conversation_id_9e10b7fe" ON "murmur_conversations_conversationtag" ("conversation_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_deletedsource_owner_id_eeb6818e"',
                    'CREATE INDEX "murmur_conversations_deletedsource_owner_id_eeb6818e" ON "murmur_conversations_deletedsource" ("owner_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_displaymessage_conversation_id_911b73de"',
                    'CREATE INDEX "murmur_conversations_displaymessage_conversation_id_911b73de" ON "murmur_conversations_displaymessage" ("conversation_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_displaymessage_tool_call_id_15b00149"',
                    'CREATE INDEX "murmur_conversations_displaymessage_tool_call_id_15b00149" ON "murmur_conversations_displaymessage" ("tool_call_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_feedback_conversation_id_a32b5942"',
                    'CREATE INDEX "murmur_conversations_feedback_conversation_id_a32b5942" ON "murmur_conversations_feedback" ("conversation_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_feedback_display_message_id_c4f9f1b5"',
                    'CREATE INDEX "murmur_conversations_feedback_display_message_id_c4f9f1b5" ON "murmur_conversations_feedback" ("display_message_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_importedsource_owner_id_beff3cd2"',
                    'CREATE INDEX "murmur_conversations_importedsource_owner_id_beff3cd2" ON "murmur_conversations_importedsource" ("owner_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_message_conversation_id_505b362f"',
                    'CREATE INDEX "murmur_conversations_message_conversation_id_505b362f" ON "murmur_conversations_message" ("conversation_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_messageusage_conversation_id_a9c6e383"',
                    'CREATE INDEX "murmur_conversations_messageusage_conversation_id_a9c6e383" ON "murmur_conversations_messageusage" ("conversation_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_redactioncount_conversation_id_8345080a"',
                    'CREATE INDEX "murmur_conversations_redactioncount_conversation_id_8345080a" ON "murmur_conversations_redactioncount" ("conversation_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_share_conversation_id_70520653"',
                    'CREATE INDEX "murmur_conversations_share_conversation_id_70520653" ON "murmur_conversations_share" ("conversation_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_sharerow_share_id_9ec75e76"',
                    'CREATE INDEX "murmur_conversations_sharerow_share_id_9ec75e76" ON "murmur_conversations_sharerow" ("share_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_sourcerecord_conversation_id_6764302d"',
                    'CREATE INDEX "murmur_conversations_sourcerecord_conversation_id_6764302d" ON "murmur_conversations_sourcerecord" ("conversation_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "murmur_conversations_toolcall_conversation_id_d9b70475"',
                    'CREATE INDEX "murmur_conversations_toolcall_conversation_id_d9b70475" ON "murmur_conversations_toolcall" ("conversation_id")',
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                condition=models.Q(("parent__isnull", False)),
                fields=["parent"],
                name="murmur_conv_child_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                condition=models.Q(("parent__isnull", True)),
                fields=["retained_at", "id"],
                name="murmur_conv_retained_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                condition=models.Q(("forked_from__isnull", False)),
                fields=["forked_from"],
                name="murmur_conv_fork_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="displaymessage",
            index=models.Index(
                condition=models.Q(("tool_call__isnull", False)),
                fields=["tool_call"],
                name="murmur_display_tool_call_idx",
            ),
        ),
    ]
