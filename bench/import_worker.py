"""One import run in a fresh process (so its peak RSS is its own):
``python -m bench.import_worker VARIANT FILE...`` prints ``{"seconds", "bytes", "max_rss_kb"}``.

Variants: ``ours`` (``manage.py import_conversations --owner <new user> FILE...``, a new owner per
run so nothing is de-duplicated away), ``ours-as`` (the same for the owner ``BENCH_IMPORT_OWNER``,
so a second run is an incremental re-run), ``json.loads`` (parse every line, write nothing) and
``orjson+COPY`` (the floor: parse every line with orjson and ``COPY`` one record row per line and
the raw line as a source record into our tables, one conversation per file, one transaction).
Needs the ``bench.settings`` environment.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import uuid
from pathlib import Path
from typing import Any


def _ours_setup() -> Any:
    """Django set up and a new owner, before the clock starts (a server is already running)."""
    import django
    from django.contrib.auth import get_user_model

    django.setup()
    return get_user_model().objects.create(username=f"bench-import-{uuid.uuid4().hex[:12]}")


def _ours(files: list[str], owner: Any) -> None:
    from django.core.management import call_command

    call_command("import_conversations", *files, owner=owner.username, verbosity=0)


def _ours_as_setup() -> Any:
    """Django set up and the owner named by ``BENCH_IMPORT_OWNER`` (the same on every run, so a
    re-run is incremental), before the clock starts."""
    import django
    from django.contrib.auth import get_user_model

    django.setup()
    owner, _ = get_user_model().objects.get_or_create(username=os.environ["BENCH_IMPORT_OWNER"])
    return owner


def _json_loads(files: list[str], _: Any) -> None:
    for name in files:
        with open(name, "rb") as stream:
            for line in stream:
                if line.strip():
                    json.loads(line)


def orjson_copy(files: list[str], _: Any) -> None:
    """The ``orjson+COPY`` floor: one conversation per file in ``files`` (JSONL paths), its lines
    parsed with orjson and written with one ``COPY`` per table on a bare psycopg connection to
    ``BENCH_DATABASE_URL``. Names only the columns it sets; the rest take their database
    defaults (docs/write-path.md "Writers outside the ORM")."""
    import orjson
    import psycopg

    from bench.django_setup import pg_params

    pg = pg_params(os.environ["BENCH_DATABASE_URL"])
    prefix = "murmur_conversations_"
    with psycopg.connect(**pg) as conn:
        for name in files:
            conversation = uuid.uuid4()
            conn.execute(
                f"""INSERT INTO {prefix}conversation (id, owner_id, title, metadata, status,
                    pending_ask, source, external_id, record_length, transcript_count, last_seq,
                    last_event_seq, created_at, saved_at)
                VALUES (%s, NULL, '', '{{}}', 'idle', NULL, 'floor', %s, 0, 0, 0, 0, now(),
                    now())""",
                [conversation, str(conversation)],
            )
            with open(name, "rb") as stream:
                lines = [line for line in stream if line.strip()]
            parsed = [orjson.loads(line) for line in lines]
            with conn.cursor() as cur:
                with cur.copy(
                    f"COPY {prefix}message (conversation_id, position, message_id, role, content, "
                    "tool_call_id, is_error, source_id, extra, created_at) FROM STDIN"
                ) as copy:
                    for position, record in enumerate(parsed, 1):
                        message = record.get("message") or record.get("payload") or record
                        content = message.get("content", "") if isinstance(message, dict) else ""
                        copy.write_row(
                            (
                                conversation,
                                position,
                                f"line-{position}",
                                str(record.get("type", "")),
                                orjson.dumps(content).decode(),
                                "",
                                False,
                                "",
                                "{}",
                                "now",
                            )
                        )
                with cur.copy(
                    f"COPY {prefix}sourcerecord (conversation_id, source, source_key, line_number, "
                    "raw, record_type, created_at) FROM STDIN"
                ) as copy:
                    for number, line in enumerate(lines, 1):
                        copy.write_row(
                            (
                                conversation,
                                "floor",
                                str(number),
                                number,
                                line.decode().rstrip("\n"),
                                "line",
                                "now",
                            )
                        )
            conn.execute(
                f"UPDATE {prefix}conversation SET record_length = %s WHERE id = %s",
                [len(parsed), conversation],
            )
        conn.commit()


VARIANTS: dict[str, Any] = {
    "ours": _ours,
    "ours-as": _ours,
    "json.loads": _json_loads,
    "orjson+COPY": orjson_copy,
}


def main(argv: list[str]) -> int:
    variant, files = argv[0], argv[1:]
    size = sum(Path(name).stat().st_size for name in files if Path(name).is_file())
    context = {"ours": _ours_setup, "ours-as": _ours_as_setup}.get(variant, lambda: None)()
    started = time.perf_counter()
    VARIANTS[variant](files, context)
    seconds = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "bytes": size, "max_rss_kb": rss}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
