"""docs/indexes.md names every index of the app's tables, on the database under test, and names
no index that exists on neither database; PostgreSQL keeps the titles' vectors off the
conversation row, in a table its triggers keep equal to the titles."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.db import connection

from murmur_conversations import search_index, services
from murmur_conversations.models import Conversation
from tests.helpers import MakeConversation

pytestmark = pytest.mark.django_db

_DOC = Path(__file__).resolve().parent.parent / "docs" / "indexes.md"
#: Indexes of the other database only (named in the doc, absent here).
_ONLY = {
    "postgresql": {
        "murmur_display_search_idx",
        "murmur_title_search_idx",
        "…_share_token_hash_2e2377f3_like",
        "…_messageusage_message_id_key",
        "…_share_token_hash_key",
    },
    "sqlite": set(),
}


def _documented() -> set[str]:
    names: set[str] = set()
    for line in _DOC.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3:
            for cell in cells[:2]:
                names.update(
                    n
                    for n in re.findall(r"`([^`]+)`", cell)
                    if n.endswith(("_idx", "_uniq", "_key", "_like"))
                    or re.search(r"_[0-9a-f]{8}$", n)
                )
    return names


def _indexes() -> set[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT i.indexname FROM pg_indexes AS i WHERE i.schemaname = current_schema() "
                "AND (i.tablename LIKE 'murmur_conversations_%%' OR i.tablename = %s) "
                "AND i.indexname NOT LIKE '%%_pkey'",
                [search_index.TITLE_VECTORS],
            )
        else:
            # A unique constraint without a condition is part of its table's definition on
            # SQLite (its index is an sqlite_autoindex): it counts under its constraint's name.
            cursor.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE type IN ('index', 'table') "
                "AND tbl_name LIKE 'murmur_conversations_%'"
            )
            names: set[str] = set()
            for kind, name, sql in cursor.fetchall():
                if kind == "table":
                    names.update(re.findall(r'CONSTRAINT "(\w+)" UNIQUE', sql or ""))
                elif not name.startswith("sqlite_autoindex_"):
                    names.add(name)
            return names
        return {row[0] for row in cursor.fetchall()}


def _named(index: str, documented: set[str]) -> bool:
    return index in documented or any(
        name.startswith("…") and index.endswith(name[1:]) for name in documented
    )


def test_the_doc_names_every_index_and_no_other() -> None:
    documented = _documented()
    present = _indexes()
    assert sorted(i for i in present if not _named(i, documented)) == []
    only_elsewhere = {
        name for vendor, names in _ONLY.items() if vendor != connection.vendor for name in names
    }
    missing = {n for n in documented if not any(_named(i, {n}) for i in present)}
    assert missing == only_elsewhere - _ONLY.get(connection.vendor, set())


def _title_vectors() -> dict[str, bool]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT t.conversation_id, t.vector = {search_index.pg_vector_sql('c.title')} "
            f'FROM "{search_index.TITLE_VECTORS}" AS t '
            f'FULL JOIN "{Conversation._meta.db_table}" AS c ON c.id = t.conversation_id'
        )
        return {str(pk): same for pk, same in cursor.fetchall()}


def test_the_title_table_follows_every_title(make_conversation: MakeConversation) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's title table; SQLite keeps murmur_title_doc")
    kept = make_conversation(title="Flaky parser in 東京")
    renamed = make_conversation(title="first")
    gone = make_conversation(title="going")
    services.update_conversation(conversation=renamed, title="the lexer/tokenizer rewrite")
    services.save_message(conversation=kept, message={"role": "user", "content": "hi"})
    services.delete_conversation(conversation=gone)
    assert _title_vectors() == {str(kept.pk): True, str(renamed.pk): True}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_indexes WHERE tablename = %s AND indexdef LIKE %s",
            [Conversation._meta.db_table, "%to_tsvector%"],
        )
        assert cursor.fetchone() == (0,)
