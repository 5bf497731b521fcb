"""The service rows of docs/benchmarks.md (HTTP, websocket, import, admin), after the database tracks.

Each row needs something beyond the database (wrk, Redis, orjson, a server process); what is
missing is reported as a skipped row or variant with the reason, never faked and never a crash. A
row that fails while running is reported as FAILED and makes the run exit 1 (the CI smoke checks
that the suite runs).
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.harness import BenchmarkResult, Skip

ROWS = ("http", "ws", "import", "logs", "rerun", "admin")


@dataclass(frozen=True)
class RowSizes:
    """How much each service row does, per mode."""

    http_depths: tuple[int, ...]
    http_seconds: int
    http_rounds: int
    ws_fanouts: tuple[int, ...]
    ws_saves: int
    ws_rounds: int
    import_mb: float
    import_rounds: int
    logs_mb: float
    rerun_files: int
    admin_stages: tuple[tuple[int, int], tuple[int, int]]  # (conversations, messages each)
    admin_requests: int
    admin_rounds: int


QUICK_ROWS = RowSizes(
    http_depths=(0, 10_000),
    http_seconds=1,
    http_rounds=1,
    ws_fanouts=(1, 10, 100),
    ws_saves=3,
    ws_rounds=2,
    import_mb=2.0,
    import_rounds=2,
    logs_mb=1.0,
    rerun_files=1000,
    admin_stages=((100, 10), (1_000, 11)),
    admin_requests=2,
    admin_rounds=2,
)
FULL_ROWS = RowSizes(
    http_depths=(0, 10_000, 1_000_000),
    http_seconds=2,
    http_rounds=5,
    ws_fanouts=(1, 100, 1000),
    ws_saves=3,
    ws_rounds=3,
    import_mb=40.0,
    import_rounds=3,
    logs_mb=20.0,
    rerun_files=1000,
    admin_stages=((1_000, 10), (100_000, 11)),
    admin_requests=3,
    admin_rounds=5,
)


def run_rows(
    wanted: list[str], *, params: dict[str, Any], quick: bool, workdir: str
) -> tuple[list[BenchmarkResult], list[Skip]]:
    """Run the ``wanted`` rows in order; returns their results and what was skipped or failed."""
    from bench import admin_row, http_row, import_row, logs_row, ws_row
    from bench.django_setup import bench_environment

    sizes = QUICK_ROWS if quick else FULL_ROWS
    env = {**bench_environment(params), "BENCH_DB_POOL": "1"}
    warmup = 1
    results: list[BenchmarkResult] = []
    skipped: list[Skip] = []

    def http() -> BenchmarkResult | None:
        missing = http_row.wrk_missing()
        if missing:
            skipped.append(Skip("http: page of 50", "whole row", missing))
            return None
        return http_row.http_page(
            env,
            sizes.http_depths,
            seconds=sizes.http_seconds,
            rounds=sizes.http_rounds,
            warmup=warmup,
        )

    def ws() -> BenchmarkResult | None:
        result, skips = ws_row.ws_fanout(
            env, sizes.ws_fanouts, saves=sizes.ws_saves, rounds=sizes.ws_rounds, warmup=warmup
        )
        skipped.extend(skips)
        return result

    def imports() -> BenchmarkResult | None:
        result, skips = import_row.import_rate(
            env, workdir, megabytes=sizes.import_mb, rounds=sizes.import_rounds
        )
        skipped.extend(skips)
        return result

    def logs() -> BenchmarkResult | None:
        return logs_row.generated_rate(
            env, workdir, megabytes=sizes.logs_mb, rounds=sizes.import_rounds
        )

    def rerun() -> BenchmarkResult | None:
        return logs_row.rerun_unchanged(
            env, workdir, files=sizes.rerun_files, rounds=sizes.import_rounds
        )

    def admin() -> BenchmarkResult | None:
        return admin_row.admin_changelist(
            params,
            sizes.admin_stages,
            requests=sizes.admin_requests,
            rounds=sizes.admin_rounds,
            warmup=warmup,
        )

    builders: dict[str, Callable[[], BenchmarkResult | None]] = {
        "http": http,
        "ws": ws,
        "import": imports,
        "logs": logs,
        "rerun": rerun,
        "admin": admin,
    }
    for name in wanted:
        started = time.perf_counter()
        print(f"row {name} ...", file=sys.stderr)
        try:
            result = builders[name]()
        except Exception as error:  # reported in the table; the run then exits 1
            traceback.print_exc()
            skipped.append(Skip(name, "whole row", f"{type(error).__name__}: {error}", True))
            result = None
        if result is not None:
            results.append(result)
        print(f"  {name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return results, skipped
