"""``python -m bench [--quick]``: run every benchmark, print the table, write the JSON.

Tracks run one after the other (PostgreSQL, then SQLite); inside a track each benchmark's variants
run in interleaved rounds (``harness``). The JSON goes to ``bench/results/<timestamp>.json``
(git-ignored): environment, per-variant medians and rounds, per-benchmark ratio medians with min
and max. The bench database and SQLite file are created fresh and removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from bench import cost, django_setup, peers, rows, search_row, verify, write_kinds
from bench.django_setup import DEFAULT_URL
from bench.harness import TABLE_HEADERS, Benchmark, BenchmarkResult, result_rows, run_benchmark
from bench.paths import FULL, QUICK, Sizes, Track, append_batch, append_one, page
from bench.stats import format_table

RESULTS_DIR = Path(__file__).resolve().parent / "results"


ALL_PARTS = ("pg", "sqlite", "cost", *rows.ROWS)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="CI smoke run: every row at small sizes (minutes, not seconds)",
    )
    parser.add_argument("--rounds", type=int, help="measured rounds (default 7 quick, 15 full)")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL),
        help="PostgreSQL database to create, use and drop (default: %(default)s)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the bench databases")
    parser.add_argument("--no-sqlite", action="store_true", help="skip the SQLite track")
    parser.add_argument(
        "--only",
        default=",".join(ALL_PARTS),
        help="comma-separated parts to run (default: all of %(default)s)",
    )
    return parser.parse_args(argv)


def environment(pg: psycopg.Connection[Any]) -> dict[str, Any]:
    """Versions and machine facts recorded with every result."""
    import django

    return {
        "python": platform.python_version(),
        "django": django.get_version(),
        "psycopg": psycopg.__version__,
        "postgresql": pg.execute("SHOW server_version").fetchone()[0],  # type: ignore[index]
        "sqlite": sqlite3.sqlite_version,
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "load_average": list(os.getloadavg()),
        "peers": peers.peer_versions(),
    }


def run_track(track: Track, sizes: Sizes, rounds: int, warmup: int) -> list[BenchmarkResult]:
    """Every benchmark of one track, each in its own interleaved rounds."""
    django_setup.use_alias(track.alias)
    results = []
    builders: tuple[Callable[[Track, Sizes], Benchmark | None], ...] = (
        write_kinds.profile,
        append_one,
        write_kinds.kinds,
        append_batch,
        page,
        search_row.search,
    )
    for build in builders:
        started = time.perf_counter()
        benchmark = build(track, sizes)
        if benchmark is None:
            continue
        result = run_benchmark(benchmark, rounds=rounds, warmup=warmup)
        if build is write_kinds.kinds:
            write_kinds.add_statement_counts(result, track.is_postgres)
        print(f"  {benchmark.name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
        results.append(result)
    problems = verify.mismatches(track.alias) + verify.mismatches(track.noindex_alias)
    if problems:
        raise SystemExit("rows and counters disagree:\n" + "\n".join(problems))
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM ends the run through the finally blocks: servers stopped, databases dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parts = {part.strip() for part in args.only.split(",") if part.strip()}
    if parts - set(ALL_PARTS):
        raise SystemExit(f"unknown parts {sorted(parts - set(ALL_PARTS))}; known: {ALL_PARTS}")
    if args.no_sqlite:
        parts.discard("sqlite")
    sizes = QUICK if args.quick else FULL
    rounds = args.rounds or (7 if args.quick else 15)
    warmup = 1 if args.quick else 2
    started = time.perf_counter()
    params = django_setup.pg_params(args.database_url)
    django_setup.recreate_pg_database(params)
    workdir = tempfile.mkdtemp(prefix="murmur-bench-")
    wants_sqlite = "sqlite" in parts or ("cost" in parts and not args.no_sqlite)
    sqlite_path = str(Path(workdir) / "bench.sqlite3") if wants_sqlite else None
    notes: list[str] = []
    skipped: list[rows.Skip] = []
    results: dict[str, list[BenchmarkResult]] = {}
    cost_report: dict[str, Any] | None = None
    try:
        django_setup.configure(params, sqlite_path)
        raw_pg = psycopg.connect(**params, autocommit=True)
        missing = peers.langchain_available()
        langchain_conn = None
        if missing is None:
            langchain_conn = psycopg.connect(**params)
            peers.create_langchain_table(langchain_conn)
        else:
            notes.append(missing)
        env = environment(raw_pg)
        tracks = [Track("pg", "default", raw_pg, langchain_conn)] if "pg" in parts else []
        if sqlite_path and "sqlite" in parts:
            from bench.floors import sqlite_connect

            missing_sqlite_peer = peers.langchain_community_available()
            if missing_sqlite_peer is not None:
                notes.append(missing_sqlite_peer)
            tracks.append(
                Track(
                    "sqlite",
                    "sqlite",
                    sqlite_connect(sqlite_path),
                    langchain_sqlite=sqlite_path if missing_sqlite_peer is None else None,
                )
            )
        for track in tracks:
            print(f"track {track.name} ...", file=sys.stderr)
            results[track.name] = run_track(track, sizes, rounds, warmup)
            # Each track's table as soon as it is measured (stderr): a run stopped later, by a
            # timeout or a failing row, keeps what it measured. The whole report follows at the end.
            print(render({track.name: results[track.name]}, [], []), file=sys.stderr, flush=True)
        if "cost" in parts:
            print("cost rows (CPU + WAL against issue 30's goals) ...", file=sys.stderr)
            django_setup.use_alias("default")
            cost_report = cost.run(
                params,
                quick=args.quick,
                workdir=workdir,
                sqlite_alias="sqlite" if sqlite_path else None,
            )
            print(cost_report["table"], file=sys.stderr, flush=True)
        wanted = [name for name in rows.ROWS if name in parts]
        if wanted:
            django_setup.use_alias("default")
            results["service"], skipped = rows.run_rows(
                wanted, params=params, quick=args.quick, workdir=workdir
            )
        from django.db import connections

        connections.close_all()
        raw_pg.close()
        if langchain_conn is not None:
            langchain_conn.close()
    finally:
        if not args.keep:
            django_setup.drop_pg_database(params)
            names = [*django_setup.admin_database_names(params)]
            names.append(django_setup.noindex_database_name(params))
            for name in names:
                django_setup.drop_pg_database({**params, "dbname": name})
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - started
    report = {
        "mode": "quick" if args.quick else "full",
        "started_at": datetime.now(UTC).isoformat(),
        "duration_s": elapsed,
        "rounds": rounds,
        "warmup_rounds": warmup,
        "environment": env,
        "notes": notes,
        "skipped": [skip.as_dict() for skip in skipped],
        "cost": cost_report,
        "tracks": {
            name: [result.as_dict() for result in track_results]
            for name, track_results in results.items()
        },
    }
    path = write_report(report)
    print(render(results, notes, skipped))
    if cost_report is not None:
        print(
            "\n== cost: CPU (client + PostgreSQL backends) and WAL per operation, issue 30's goals"
        )
        print(cost_report["table"])
        for note in cost_report["notes"]:
            print(f"note: {note}")
    print(
        f"\n{elapsed:.0f} s; JSON: {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}"
    )
    failed = [skip for skip in skipped if skip.failed]
    return 1 if failed or (cost_report is not None and cost_report["failed"]) else 0


def write_report(report: dict[str, Any]) -> Path:
    """Write the JSON report to ``bench/results/<timestamp>.json`` and return its path."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return path


def render(
    results: dict[str, list[BenchmarkResult]],
    notes: list[str],
    skipped: list[rows.Skip] | None = None,
) -> str:
    """The printed table: one block per track (the service rows are the track ``service``);
    skipped rows and variants show as rows with their reason."""
    blocks = []
    for name, track_results in results.items():
        lines = [line for result in track_results for line in result_rows(result)]
        if name == "service":
            lines += [skip.row() for skip in skipped or []]
        blocks.append(f"== {name}\n{format_table(TABLE_HEADERS, lines)}")
    if skipped and "service" not in results:
        lines = [skip.row() for skip in skipped]
        blocks.append(f"== service\n{format_table(TABLE_HEADERS, lines)}")
    blocks += [f"note: {note}" for note in notes]
    return "\n\n".join(blocks)
