"""Token counters on the general write path (docs/usage.md): one ``MessageUsage`` row per
assistant message that carried ``usage`` (priced as it is written: ``usage.row_cost``), and the conversation's counters (in total and by
model), in the same transaction as the messages, under the conversation's lock. A planned append
(``services/plan.py``) plans the same rows and counters.

Private to ``murmur_conversations.services``.
"""

from __future__ import annotations

from murmur_conversations.conf import app_settings
from murmur_conversations.messages import NormalizedMessage
from murmur_conversations.models import Message, MessageUsage
from murmur_conversations.services import bulkcopy
from murmur_conversations.services.writing import Write
from murmur_conversations.usage import COUNTERS, add_by_model, row_cost

#: The conversation fields a write with usage changes.
USAGE_FIELDS = frozenset({*COUNTERS, "usage_by_model"})


def count_usage(
    write: Write, messages: list[NormalizedMessage], record: dict[int, Message]
) -> None:
    """Add the usage of ``messages`` (appended in this write; ``record`` maps ``id(message)`` to
    its saved record row) to the counters of ``write.conversation`` and insert their usage rows.
    ``Write.finish`` saves the counters."""
    conversation = write.conversation
    rows: list[MessageUsage] = []
    by_model = conversation.usage_by_model
    book = app_settings.prices
    for message in messages:
        if message.usage is None:
            continue
        saved = record[id(message)]
        cost, priced_with = row_cost(message.model, message.usage, book, at=saved.created_at)
        rows.append(
            MessageUsage(
                conversation=conversation,
                message=saved,
                model=message.model,
                created_at=saved.created_at,
                cost_nanocents=cost,
                priced_with=priced_with,
                **message.usage.as_dict(),
            )
        )
        for name in COUNTERS:
            setattr(conversation, name, getattr(conversation, name) + getattr(message.usage, name))
        by_model = add_by_model(by_model, message.model, message.usage)
    if rows:
        conversation.usage_by_model = by_model
        bulkcopy.insert(write.using, MessageUsage, rows)
        write.extra_fields |= USAGE_FIELDS
