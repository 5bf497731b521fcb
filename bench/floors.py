"""Raw floors on our own tables: the least work that leaves the same rows and counters committed.

Each floor writes what ``save_message`` writes for a plain text message (a record row, one display
row, the conversation counters and ``saved_at``) or reads what the page selector reads, with
hand-written SQL on a bare driver connection: psycopg 3 for PostgreSQL, ``sqlite3`` for SQLite.
They skip validation, text repair, de-duplication, signals and the ORM: that gap is what the ratios
measure. Built after ``django.setup()`` (table names come from the models).
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from bench.workload import display_content


def _tables() -> tuple[str, str, str]:
    from murmur_conversations.models import Conversation, DisplayMessage, Message

    return Conversation._meta.db_table, Message._meta.db_table, DisplayMessage._meta.db_table


_MESSAGE_COLUMNS = (
    "conversation_id, position, message_id, role, content, tool_call_id, is_error, source_id, "
    "extra, created_at"
)
_DISPLAY_COLUMNS = (
    "conversation_id, message_id, seq, message_type, content_type, content, status, tool_call_id, "
    "metadata, created_event_seq, event_seq, created_at, updated_at"
)


def _message_id() -> str:
    return "msg_" + uuid.uuid4().hex


# --------------------------------------------------------------------------- PostgreSQL


def pg_append_one(
    conn: psycopg.Connection[Any], conversation_id: uuid.UUID
) -> Callable[[str], None]:
    """Floor for one committed append: one statement (three CTEs) in autocommit. The UPDATE locks
    the conversation row and numbers the message, as ``save_message`` does under its lock."""
    conv, message, display = _tables()
    statement = f"""
        WITH c AS (
            UPDATE {conv} SET record_length = record_length + 1,
                transcript_count = transcript_count + 1, last_seq = last_seq + 1,
                last_event_seq = last_event_seq + 1, saved_at = now()
            WHERE id = %(conv)s RETURNING record_length, last_seq, last_event_seq
        ), m AS (
            INSERT INTO {message} ({_MESSAGE_COLUMNS})
            SELECT %(conv)s, c.record_length, %(mid)s, 'user', %(content)s, '', false, '',
                '{{}}', now() FROM c
            RETURNING id
        )
        INSERT INTO {display} ({_DISPLAY_COLUMNS})
        SELECT %(conv)s, m.id, c.last_seq, 'user', 'text', %(display)s, 'completed', NULL,
            '{{}}', c.last_event_seq, c.last_event_seq, now(), now() FROM c, m
    """

    def append(text: str) -> None:
        conn.execute(
            statement,
            {
                "conv": conversation_id,
                "mid": _message_id(),
                "content": Jsonb(text),
                "display": Jsonb(display_content(text)),
            },
        )

    return append


def _pg_reserve(
    cur: psycopg.Cursor[Any], conversation_id: uuid.UUID, count: int
) -> tuple[int, int, int]:
    conv, _, _ = _tables()
    cur.execute(
        f"""UPDATE {conv} SET record_length = record_length + %(n)s,
            transcript_count = transcript_count + %(n)s, last_seq = last_seq + %(n)s,
            last_event_seq = last_event_seq + 1, saved_at = now()
            WHERE id = %(conv)s RETURNING record_length, last_seq, last_event_seq""",
        {"n": count, "conv": conversation_id},
    )
    row = cur.fetchone()
    assert row is not None
    return row[0] - count, row[1] - count, row[2]


def pg_append_batch_executemany(
    conn: psycopg.Connection[Any], conversation_id: uuid.UUID
) -> Callable[[list[str]], None]:
    """Floor for a committed batch with ``executemany`` (psycopg pipelines it): one transaction,
    counters reserved by one UPDATE, record rows inserted returning ids, then display rows."""
    _, message, display = _tables()
    insert_message = (
        f"INSERT INTO {message} ({_MESSAGE_COLUMNS}) "
        "VALUES (%s, %s, %s, 'user', %s, '', false, '', '{}', now()) RETURNING id"
    )
    insert_display = (
        f"INSERT INTO {display} ({_DISPLAY_COLUMNS}) "
        "VALUES (%s, %s, %s, 'user', 'text', %s, 'completed', NULL, '{}', %s, %s, now(), now())"
    )

    def append(texts: list[str]) -> None:
        with conn.transaction(), conn.cursor() as cur:
            position, seq, event = _pg_reserve(cur, conversation_id, len(texts))
            cur.executemany(
                insert_message,
                [
                    (conversation_id, position + i + 1, _message_id(), Jsonb(text))
                    for i, text in enumerate(texts)
                ],
                returning=True,
            )
            ids = []
            while True:
                row = cur.fetchone()
                assert row is not None
                ids.append(row[0])
                if not cur.nextset():
                    break
            cur.executemany(
                insert_display,
                [
                    (conversation_id, ids[i], seq + i + 1, Jsonb(display_content(t)), event, event)
                    for i, t in enumerate(texts)
                ],
            )

    return append


def pg_append_batch_copy(
    conn: psycopg.Connection[Any], conversation_id: uuid.UUID
) -> Callable[[list[str]], None]:
    """Floor for a committed batch with COPY: one transaction, counters reserved by one UPDATE,
    record ids taken from the sequence in one query, then one COPY per table."""
    _, message, display = _tables()

    def append(texts: list[str]) -> None:
        with conn.transaction(), conn.cursor() as cur:
            position, seq, event = _pg_reserve(cur, conversation_id, len(texts))
            cur.execute(
                f"SELECT nextval(pg_get_serial_sequence('{message}', 'id')) "
                "FROM generate_series(1, %s)",
                (len(texts),),
            )
            ids = [row[0] for row in cur.fetchall()]
            now = datetime.now(UTC)
            with cur.copy(f"COPY {message} (id, {_MESSAGE_COLUMNS}) FROM STDIN") as copy:
                for i, text in enumerate(texts):
                    copy.write_row(
                        (
                            ids[i],
                            conversation_id,
                            position + i + 1,
                            _message_id(),
                            "user",
                            json.dumps(text),
                            "",
                            False,
                            "",
                            "{}",
                            now,
                        )
                    )
            with cur.copy(f"COPY {display} ({_DISPLAY_COLUMNS}) FROM STDIN") as copy:
                for i, text in enumerate(texts):
                    copy.write_row(
                        (
                            conversation_id,
                            ids[i],
                            seq + i + 1,
                            "user",
                            "text",
                            json.dumps(display_content(text)),
                            "completed",
                            None,
                            "{}",
                            event,
                            event,
                            now,
                            now,
                        )
                    )

    return append


_PAGE_COLUMNS = (
    "id, seq, message_type, content_type, content, status, metadata, created_event_seq, "
    "event_seq, created_at, updated_at"
)


def _row_dict(row: tuple[Any, ...], iso: Callable[[Any], str | None]) -> dict[str, Any]:
    """The REST display row shape (``representations.display_row``) from a raw row."""
    content = row[4]
    if row[3] == "tool_call":
        call = content.get("call_id") or None
    elif row[3] == "tool_result":
        call = content.get("tool_call_id") or None
    else:
        call = None
    return {
        "id": str(row[0]),
        "seq": row[1],
        "message_type": row[2],
        "content_type": row[3],
        "content": content,
        "status": row[5],
        "tool_call_id": call,
        "metadata": row[6],
        "created_event_seq": row[7],
        "event_seq": row[8],
        "created_at": iso(row[9]),
        "updated_at": iso(row[10]),
    }


def pg_page_keyset(
    conn: psycopg.Connection[Any], conversation_id: uuid.UUID, size: int
) -> Callable[[int], list[dict[str, Any]]]:
    """Floor for a newest-first page: keyset SQL (``seq < cursor ORDER BY seq DESC LIMIT n``) on
    the ``(conversation, seq)`` unique index, rows turned into the same JSON-ready dicts."""
    from murmur_conversations.representations import iso

    _, _, display = _tables()
    statement = (
        f"SELECT {_PAGE_COLUMNS} FROM {display} WHERE conversation_id = %s AND seq < %s "
        "ORDER BY seq DESC LIMIT %s"
    )

    def page(before_seq: int) -> list[dict[str, Any]]:
        rows = conn.execute(statement, (conversation_id, before_seq, size)).fetchall()
        return [_row_dict(row, iso) for row in rows]

    return page


# --------------------------------------------------------------------------- SQLite


def _sqlite_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def sqlite_connect(path: str) -> sqlite3.Connection:
    """A bare ``sqlite3`` connection with the embedded default's pragmas, in autocommit, and the
    function the search index's triggers call."""
    from murmur_conversations import search_index

    conn = sqlite3.connect(path, isolation_level=None, timeout=20)
    search_index.register_sqlite(conn)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _sqlite_reserve(conn: sqlite3.Connection, conv_hex: str, count: int) -> tuple[int, int, int]:
    conv, _, _ = _tables()
    row = conn.execute(
        f"""UPDATE {conv} SET record_length = record_length + :n,
            transcript_count = transcript_count + :n, last_seq = last_seq + :n,
            last_event_seq = last_event_seq + 1, saved_at = :now
            WHERE id = :conv RETURNING record_length, last_seq, last_event_seq""",
        {"n": count, "now": _sqlite_now(), "conv": conv_hex},
    ).fetchone()
    return row[0] - count, row[1] - count, row[2]


def _sqlite_next_id(conn: sqlite3.Connection, table: str) -> int:
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
    return 0 if row is None else int(row[0])


def sqlite_append_batch(
    conn: sqlite3.Connection, conversation_id: uuid.UUID
) -> Callable[[list[str]], None]:
    """Floor for a committed batch (one message is a batch of one): ``BEGIN IMMEDIATE``, counters
    reserved by one UPDATE, ids taken under the write lock, ``executemany`` per table, COMMIT."""
    _, message, display = _tables()
    conv_hex = conversation_id.hex  # Django stores UUIDs as 32 hex characters on SQLite
    insert_message = (
        f"INSERT INTO {message} (id, {_MESSAGE_COLUMNS}) "
        "VALUES (?, ?, ?, ?, 'user', ?, '', 0, '', '{}', ?)"
    )
    insert_display = (
        f"INSERT INTO {display} ({_DISPLAY_COLUMNS}) "
        "VALUES (?, ?, ?, 'user', 'text', ?, 'completed', NULL, '{}', ?, ?, ?, ?)"
    )

    def append(texts: list[str]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            position, seq, event = _sqlite_reserve(conn, conv_hex, len(texts))
            first = _sqlite_next_id(conn, message) + 1
            now = _sqlite_now()
            conn.executemany(
                insert_message,
                [
                    (first + i, conv_hex, position + i + 1, _message_id(), json.dumps(t), now)
                    for i, t in enumerate(texts)
                ],
            )
            conn.executemany(
                insert_display,
                [
                    (
                        conv_hex,
                        first + i,
                        seq + i + 1,
                        json.dumps(display_content(t)),
                        event,
                        event,
                        now,
                        now,
                    )
                    for i, t in enumerate(texts)
                ],
            )
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    return append


def sqlite_page_keyset(
    conn: sqlite3.Connection, conversation_id: uuid.UUID, size: int
) -> Callable[[int], list[dict[str, Any]]]:
    """Floor for a newest-first page on SQLite: keyset SQL, JSON decoded, same dicts."""
    _, _, display = _tables()
    conv_hex = conversation_id.hex
    statement = (
        f"SELECT {_PAGE_COLUMNS} FROM {display} WHERE conversation_id = ? AND seq < ? "
        "ORDER BY seq DESC LIMIT ?"
    )

    def iso(value: str) -> str:
        return value.replace(" ", "T") + "Z"

    def page(before_seq: int) -> list[dict[str, Any]]:
        rows = conn.execute(statement, (conv_hex, before_seq, size)).fetchall()
        return [
            _row_dict((*row[:4], json.loads(row[4]), row[5], json.loads(row[6]), *row[7:]), iso)
            for row in rows
        ]

    return page
