"""PostgreSQL's stored search vectors are what they were when a SQL function computed them.

Until migration 0015 the generated column called ``murmur_search_text``, whose body gathered the
strings inside arguments and results with a subquery (``string_agg`` over ``jsonb_path_query``);
PostgreSQL never inlines such a function. The column's expression is now written inline without a
subquery (``search_index.pg_text_sql``). Here the old body, kept below as the reference, is
evaluated beside the stored column for a varied set of rows: escapes, control characters,
backslashes, quotes, the ``", "`` that separates array elements in jsonb's text, CJK, skipped
keys, nesting, texts longer than the cuts (the array's text is cut before it is unescaped).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from django.db import connection

from murmur_conversations import search_index
from murmur_conversations.models import Conversation, DisplayMessage
from tests.helpers import MakeConversation

pytestmark = pytest.mark.django_db


def _reference_strings(value: str) -> str:
    """The strings inside the jsonb ``value`` as migrations 0006 to 0014 gathered them."""
    union = " UNION ALL ".join(
        f"SELECT v FROM jsonb_path_query({value}, '{path}') AS v"
        for path in search_index.PG_STRING_PATHS
    )
    return (
        f"left(coalesce((SELECT string_agg(s.v #>> '{{}}', ' ') FROM ({union}) AS s), ''), "
        f"{search_index.TOOL_CHARS})"
    )


def _reference_text(row: str) -> str:
    return f"""CASE
  WHEN {row}.content_type IN ('text', 'thinking', 'notification', 'error')
    THEN left(coalesce({row}.content ->> 'text', ''), {search_index.TEXT_CHARS})
  WHEN {row}.content_type = 'tool_call' THEN
    coalesce({row}.content ->> 'name', '') || ' ' || coalesce({row}.metadata ->> 'display_text', '')
    || ' ' || {_reference_strings(f"{row}.content -> 'arguments'")}
  WHEN {row}.content_type = 'tool_result' THEN
    coalesce({row}.content ->> 'name', '') || ' ' || {_reference_strings(f"{row}.content -> 'content'")}
  ELSE ''
END"""


_CHARACTERS = 'ab Zé "\\\n\t\r\b\f\x01\x1f\x7f/,:.-[]{}東京都庁' + "'"
_AWKWARD = ('", "', '\\", "', "\\", "\\\\n", '\\"', "", " ", "x" * 20_000 + '"\\')


def _string(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return rng.choice(_AWKWARD)
    return "".join(rng.choice(_CHARACTERS) for _ in range(rng.randint(0, 14)))


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        return rng.choice([_string(rng), _string(rng), 7, None, True])
    if roll < 0.7:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["type", "id", "data", "call_id", "text", "command", "path"]
    return {
        rng.choice([*keys, _string(rng)]): _value(rng, depth + 1) for _ in range(rng.randint(0, 4))
    }


def _rows(conversation: Conversation) -> list[DisplayMessage]:
    rng = random.Random(15)
    shapes: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = []
    for _ in range(150):
        arguments = _value(rng)
        shapes.append(
            ("assistant", "tool_call", {"name": "bash", "arguments": arguments}, {})
            if rng.random() < 0.5
            else ("assistant", "tool_call", {"arguments": arguments}, {"display_text": "Run it"})
        )
        shapes.append(("tool", "tool_result", {"name": "t", "content": _value(rng)}, {}))
    shapes += [
        ("assistant", "text", {"text": "東京都庁 src/lexer.py foo-bar " + "y" * 70_000}, {}),
        ("assistant", "thinking", {"text": _string(rng)}, {}),
        ("system", "error", {"text": 42}, {}),
        ("assistant", "image", {"text": "not searched"}, {}),
        ("tool", "tool_result", {"content": ["word"] * 5_000}, {}),
        ("assistant", "tool_call", {}, {}),
        # Past the cuts, with escapes where the text is cut before it is unescaped.
        ("tool", "tool_result", {"content": ["\x01" * 17_000, "tail words"]}, {}),
        ("tool", "tool_result", {"content": ['"\\' * 60_000, "tail"]}, {}),
        ("assistant", "tool_call", {"arguments": {"a": "y" * 98_300 + "\n" * 10, "b": "\x1f"}}, {}),
        ("assistant", "tool_call", {"arguments": {"id": "\x01", "command": "ls \\n -la"}}, {}),
    ]
    return [
        DisplayMessage(
            conversation=conversation,
            seq=seq,
            message_type=message_type,
            content_type=content_type,
            content=content,
            metadata=metadata,
            created_event_seq=1,
            event_seq=1,
        )
        for seq, (message_type, content_type, content, metadata) in enumerate(shapes, start=1)
    ]


def test_stored_vectors_equal_the_reference_function(
    make_conversation: MakeConversation,
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's generated column; SQLite's FTS5 triggers did not change")
    conversation = make_conversation()
    DisplayMessage.objects.bulk_create(_rows(conversation))
    table = DisplayMessage._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT d.id, {search_index.pg_text_sql('d.content_type', 'd.content', 'd.metadata')}"
            f" = {_reference_text('d')}, d.{search_index.VECTOR_COLUMN} = "
            f"{search_index.pg_vector_sql(_reference_text('d'))}, d.content "
            f'FROM "{table}" AS d WHERE d.conversation_id = %s ORDER BY d.seq',
            [conversation.pk],
        )
        compared = cursor.fetchall()
    assert len(compared) == 310
    differing = [(pk, json.dumps(content)[:200]) for pk, same, _v, content in compared if not same]
    assert differing == []
    assert [pk for pk, _same, same_vector, _c in compared if not same_vector] == []
