"""The search vector without a per-row function call (docs/search.md "How the index is kept"):
on PostgreSQL the generated column is recomputed from its inline expression (a rewrite of the
display table, with its GIN index) and the function ``murmur_search_text`` is dropped. The stored
vectors are the same as before (tests/test_search_vectors.py). Nothing changes on SQLite."""

from django.db import migrations

from murmur_conversations import search_index


def inline_search_vector(apps, schema_editor):
    if search_index.backend_for(schema_editor.connection.vendor) != "postgresql":
        return
    search_index.uninstall(schema_editor.connection)
    search_index.install(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("murmur_conversations", "0014_money"),
    ]

    operations = [
        # Backwards leaves the column as it is: it holds the same vectors the function gave.
        migrations.RunPython(inline_search_vector, migrations.RunPython.noop, elidable=False),
    ]
