"""Import CPU against the same-rows floor (issue 30): Claude Code sessions and Codex rollouts.

The workload: ``copies`` copies (30 in a full run) of the corpus' 125 KB Claude Code session and
of its 132 KB Codex rollout (``import_row.FORMATS``), every id rewritten per copy and per round
(``import_row.rewrite_ids``) so each is a fresh session, imported by ``manage.py
import_conversations --owner <new user>`` in this process. The floor: parse every line of the
same files (orjson, else ``json``), then ``COPY`` exactly the rows ours wrote in its previous
import of the same files (every column but generated ones, read back as text tuples before the
window) into empty tables made ``LIKE`` ours ``INCLUDING ALL`` (the same columns, defaults,
generated columns, constraints but foreign keys, and indexes), in one transaction. The rows ours
wrote are every row of the new owner's conversations in every table of the app that has a
``conversation_id`` column, the conversations themselves, and the owner's rows of tables keyed by
``owner_id`` alone. Ratio: floor CPU / ours CPU per round (goal >= 0.6). Without the corpus
(``MURMUR_CORPUS``) the rows are skipped with the reason.
"""

from __future__ import annotations

import io
import json
import statistics
import uuid
from pathlib import Path
from typing import Any

import psycopg

from bench import import_row
from bench.meter import Window
from bench.stats import Target

FLOOR_SCHEMA = "importfloor"
Table = tuple[str, list[str], list[tuple[Any, ...]]]  # table, columns, rows (text values)


def _copies(source: Path, target: Path, copies: int, round_index: int) -> list[str]:
    target.mkdir(parents=True, exist_ok=True)
    data = source.read_bytes()
    files = []
    for copy in range(copies):
        path = target / f"{round_index:03d}-{copy:03d}-{source.name}"
        path.write_bytes(import_row.rewrite_ids(data, 100_000 + round_index * 1_000 + copy))
        files.append(str(path))
    return files


def _written_tables(conn: psycopg.Connection[Any]) -> list[tuple[str, str, list[str]]]:
    """``(table, key column, non-generated columns)`` of every app table an import can write."""
    from django.apps import apps

    found = []
    for model in apps.get_app_config("murmur_conversations").get_models():
        table = model._meta.db_table
        columns = [
            row[0]
            for row in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public'"
                " AND table_name = %s AND is_generated = 'NEVER' ORDER BY ordinal_position",
                (table,),
            ).fetchall()
        ]
        if model._meta.model_name == "conversation":
            found.append((table, "id", columns))
        elif "conversation_id" in columns:
            found.append((table, "conversation_id", columns))
        elif "owner_id" in columns:
            found.append((table, "owner_id", columns))
    return found


def read_rows(conn: psycopg.Connection[Any], owner: Any) -> list[Table]:
    """Every row ours wrote for ``owner``'s import, as tuples of text (NULL as None)."""
    from murmur_conversations.models import Conversation

    ids = list(Conversation.objects.filter(owner=owner).values_list("pk", flat=True))
    tables = []
    for table, key, columns in _written_tables(conn):
        values: Any = owner.pk if key == "owner_id" else ids
        test = "= %s" if key == "owner_id" else "= ANY(%s)"
        select = ", ".join(f'"{column}"::text' for column in columns)
        rows = conn.execute(
            f'SELECT {select} FROM public."{table}" WHERE "{key}" {test}', (values,)
        ).fetchall()
        if rows:
            tables.append((table, columns, [tuple(row) for row in rows]))
    return tables


def create_floor_tables(conn: psycopg.Connection[Any], tables: list[Table]) -> None:
    """Empty floor tables ``LIKE`` ours ``INCLUDING ALL`` in the schema ``importfloor``."""
    conn.execute(f"DROP SCHEMA IF EXISTS {FLOOR_SCHEMA} CASCADE")
    conn.execute(f"CREATE SCHEMA {FLOOR_SCHEMA}")
    for table, _columns, _rows in tables:
        conn.execute(f'CREATE TABLE {FLOOR_SCHEMA}."{table}" (LIKE public."{table}" INCLUDING ALL)')


def floor_import(conn: psycopg.Connection[Any], files: list[str], tables: list[Table]) -> int:
    """The floor's work: parse every line of ``files``, then COPY ``tables`` in one transaction.
    Returns the lines parsed."""
    try:
        from orjson import loads
    except ImportError:
        loads = json.loads
    lines = 0
    for name in files:
        with open(name, "rb") as stream:
            for line in stream:
                if line.strip():
                    loads(line)
                    lines += 1
    with conn.transaction(), conn.cursor() as cur:
        for table, columns, rows in tables:
            names = ", ".join(f'"{column}"' for column in columns)
            with cur.copy(f'COPY {FLOOR_SCHEMA}."{table}" ({names}) FROM STDIN') as copy:
                for row in rows:
                    copy.write_row(row)
    return lines


def _owner() -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create(username=f"bench-cost-import-{uuid.uuid4().hex[:10]}")


def _ours(files: list[str], owner: Any) -> None:
    from django.core.management import call_command

    quiet = io.StringIO()  # its per-file report is not the bench's output
    call_command(
        "import_conversations",
        *files,
        owner=owner.username,
        verbosity=0,
        stdout=quiet,
        stderr=quiet,
    )


def _format_rounds(ctx: Any, fmt: str, source: Path) -> tuple[list[Window], list[Window], int]:
    """Round 0 unrecorded (ours, to have rows); then each round runs ours and the floor, the
    floor first on odd rounds, and the floor copies the rows of ours' latest import."""
    sizes, gauge = ctx.sizes, ctx.gauge
    floor_conn = ctx.connect()
    workdir = Path(ctx.workdir) / "cost-import" / fmt
    files = _copies(source, workdir, sizes.import_copies, 0)
    owner = _owner()
    _ours(files, owner)
    tables = read_rows(ctx.monitor, owner)
    ours_windows, floor_windows = [], []
    for index in range(1, sizes.import_rounds + 1):
        files = _copies(source, workdir, sizes.import_copies, index)

        def floor(files: list[str] = files, tables: list[Table] = tables) -> None:
            create_floor_tables(ctx.monitor, tables)
            floor_windows.append(
                gauge.measure(lambda: floor_import(floor_conn, files, tables), len(files))
            )

        if index % 2:
            floor()
        owner = _owner()
        ours_windows.append(
            gauge.measure(lambda files=files, owner=owner: _ours(files, owner), len(files))
        )
        tables = read_rows(ctx.monitor, owner)
        if not index % 2:
            floor()
    ctx.monitor.execute(f"DROP SCHEMA IF EXISTS {FLOOR_SCHEMA} CASCADE")
    floor_conn.close()
    rows = sum(len(table[2]) for table in tables)
    return ours_windows, floor_windows, rows


def imports(ctx: Any) -> None:
    """The two import rows of the table (``bench.cost.Context``); skips without the corpus."""
    from bench.cost import Row, ratio_row

    corpus = import_row.corpus_dir()
    labels = {
        "claude_code_session": "import of Claude Code sessions, floor CPU / ours (same rows)",
        "codex_rollout": "import of Codex rollouts, floor CPU / ours (same rows)",
    }
    for fmt, label in labels.items():
        relative = import_row.FORMATS[fmt][0]
        if corpus is None:
            ctx.skip(label, "no real-log corpus (set MURMUR_CORPUS)")
            continue
        source = corpus / relative
        if not source.is_file():
            ctx.skip(label, f"corpus file {relative} is missing")
            continue
        ours, floor, rows = _format_rounds(ctx, fmt, source)
        ctx.windows[f"{fmt} ours"] = [window.as_dict() for window in ours]
        ctx.windows[f"{fmt} floor"] = [window.as_dict() for window in floor]
        size = source.stat().st_size / 1e6
        per_second = statistics.median(size / (w.cpu_s / w.ops) for w in ours)
        row = ratio_row(label, floor, ours, "cpu", Target(">=", 0.6))
        # Per file: the ratio is the floor's CPU over ours (higher is better for ours).
        ctx.rows.append(
            Row(
                row.label,
                row.floor + f" per file ({per_second:.2f} MB per CPU-s)",
                row.ours + " per file",
                row.ratio,
                row.low,
                row.high,
                row.target,
                f"{rows:,} rows per {ctx.sizes.import_copies} files",
            )
        )
        ctx.rows.append(
            ratio_row(f"{fmt} import, WAL: ours / floor (reported)", ours, floor, "wal", None)
        )
