from django.db import migrations

from murmur_conversations import search_index


def rebuild_search_index(apps, schema_editor):
    """The search index again, as ``search_index`` now defines it (docs/search.md): CJK runs as
    bigrams and "-" as a word break. PostgreSQL recomputes the generated column (a rewrite of
    the display table) and both GIN indexes; SQLite recreates its FTS5 tables and triggers and
    indexes every row."""
    search_index.uninstall(schema_editor.connection)
    search_index.install(schema_editor.connection)


class Migration(migrations.Migration):

    dependencies = [
        ("murmur_conversations", "0012_forget"),
    ]

    operations = [
        # Backwards leaves the index as it is: the index of 0006 is not kept anywhere, and
        # this one answers the same queries.
        migrations.RunPython(rebuild_search_index, migrations.RunPython.noop, elidable=False),
    ]
