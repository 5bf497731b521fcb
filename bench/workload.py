"""The data every variant writes and reads: message texts and prefilled long conversations.

One message is a plain text of about 300 bytes (a typical chat turn). Long conversations for the
page benchmarks are filled with set-based SQL (``generate_series`` / a recursive CTE), not through
the services, so a million rows take seconds; they hold display rows only, which is all a display
page reads.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from typing import Any

_WORDS = (
    "the parser drops a trailing newline when the record ends without one, so the test "
    "reads one line short; I will look at the tokenizer first and then rerun the suite "
)
_counter = itertools.count(1)


def text() -> str:
    """A fresh ~300-byte message text (unique, so nothing can be de-duplicated)."""
    return f"{next(_counter)}: {_WORDS}{_WORDS}"


def texts(count: int) -> list[str]:
    """``count`` fresh message texts."""
    return [text() for _ in range(count)]


def display_content(value: str) -> dict[str, Any]:
    """The display content of a plain text message (``content_type`` ``text``)."""
    return {"text": value}


def usage() -> dict[str, Any]:
    """``model`` and ``usage`` (Anthropic's spelling) of an assistant message."""
    return {
        "model": "claude-sonnet-4-5",
        "usage": {
            "input_tokens": 12,
            "cache_creation_input_tokens": 300,
            "cache_read_input_tokens": 21000,
            "output_tokens": 240,
        },
    }


def messages(count: int) -> Iterator[dict[str, Any]]:
    """``count`` fresh plain user messages in the shape ``save_message`` takes."""
    for value in texts(count):
        yield {"role": "user", "content": value}


def _display_table() -> tuple[str, str]:
    from murmur_conversations.models import Conversation, DisplayMessage

    return Conversation._meta.db_table, DisplayMessage._meta.db_table


FILL_TEXT = "row text that stands for a turn of about one hundred and twenty bytes in a chat log"


def fill_display_rows(alias: str, conversation_id: uuid.UUID, count: int) -> None:
    """Give the conversation ``count`` display rows (seq 1..count, alternating user/assistant
    text rows) and matching counters, in set-based SQL on the Django connection ``alias``."""
    from django.db import connections, transaction

    conv, display = _display_table()
    connection = connections[alias]
    with transaction.atomic(using=alias), connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute(
                f"""INSERT INTO {display} (conversation_id, message_id, seq, message_type,
                    content_type, content, status, tool_call_id, metadata, created_event_seq,
                    event_seq, created_at, updated_at)
                SELECT %s, NULL, g, CASE WHEN g %% 2 = 0 THEN 'assistant' ELSE 'user' END, 'text',
                    jsonb_build_object('text', g || ' ' || %s), 'completed', NULL, '{{}}', g, g,
                    now(), now()
                FROM generate_series(1, %s) AS g""",
                [conversation_id, FILL_TEXT, count],
            )
        else:
            cur.execute(
                f"""WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < %s)
                INSERT INTO {display} (conversation_id, message_id, seq, message_type,
                    content_type, content, status, tool_call_id, metadata, created_event_seq,
                    event_seq, created_at, updated_at)
                SELECT %s, NULL, n, CASE WHEN n %% 2 = 0 THEN 'assistant' ELSE 'user' END, 'text',
                    json_object('text', n || ' ' || %s), 'completed', NULL, '{{}}', n, n,
                    strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now'),
                    strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')
                FROM g""",
                [count, conversation_id.hex, FILL_TEXT],
            )
        cur.execute(
            f"UPDATE {conv} SET last_seq = %s, last_event_seq = %s WHERE id = %s",
            [
                count,
                count,
                conversation_id if connection.vendor == "postgresql" else conversation_id.hex,
            ],
        )
        cur.execute(f"ANALYZE {display}")
