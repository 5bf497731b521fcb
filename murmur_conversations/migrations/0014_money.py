"""Usage rows record what they cost and which prices priced them (docs/usage.md "Prices"); the
rows already stored are priced here at the prices installed now, each at its own time."""

from django.db import migrations, models

from murmur_conversations.conf import app_settings
from murmur_conversations.usage import COUNTERS, Usage, row_cost


def price_existing_rows(apps, schema_editor):
    MessageUsage = apps.get_model("murmur_conversations", "MessageUsage")
    rows = MessageUsage.objects.using(schema_editor.connection.alias).order_by("pk")
    book = app_settings.prices
    last = 0
    while batch := list(rows.filter(pk__gt=last)[:2000]):
        last = batch[-1].pk
        for row in batch:
            tokens = Usage(*(getattr(row, name) for name in COUNTERS))
            row.cost_nanocents, row.priced_with = row_cost(
                row.model, tokens, book, at=row.created_at
            )
        MessageUsage.objects.using(schema_editor.connection.alias).bulk_update(
            batch, ["cost_nanocents", "priced_with"]
        )


class Migration(migrations.Migration):
    dependencies = [
        ("murmur_conversations", "0013_search"),
    ]

    operations = [
        migrations.AddField(
            model_name="messageusage",
            name="cost_nanocents",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="messageusage",
            name="priced_with",
            field=models.CharField(blank=True, db_default="", default="", max_length=64),
        ),
        migrations.RunPython(price_existing_rows, migrations.RunPython.noop, elidable=True),
    ]
