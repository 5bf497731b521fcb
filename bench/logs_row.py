"""Agent-log import rows (docs/benchmarks.md): import MB/s per format on generated logs of our own
(``bench.agentlog_gen``: Claude Code sessions and stream-json, Codex rollouts and exec streams,
every line kind the importers read), and a re-run over 1,000 unchanged files (goal: under 2 s).

Each measured run is one ``bench.import_worker`` process (Django set up before its clock). The
generated files live in the run's temporary directory and are never committed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.agentlog_gen import GENERATORS, write_file, write_logs
from bench.harness import Benchmark, BenchmarkResult, RatioSpec, Variant, run_benchmark
from bench.import_row import run_worker
from bench.stats import Target, summarize_ratio

#: The re-run row's goal (seconds) for 1,000 unchanged files.
RERUN_GOAL_S = 2.0


def _measured(env: dict[str, str], variant: str, files: list[str], per: float) -> Any:
    def run() -> float:
        return float(run_worker(env, variant, files)["seconds"]) / per

    return run


def generated_rate(
    env: dict[str, str], workdir: str, *, megabytes: float, rounds: int
) -> BenchmarkResult:
    """Import MB/s per generated format, against parsing every line with ``json.loads``."""
    variants: list[Variant] = []
    ratios: list[RatioSpec] = []
    for kind in GENERATORS:
        files = write_logs(Path(workdir) / "logs" / kind, kind, megabytes)
        size = sum(Path(f).stat().st_size for f in files) / 1e6
        for variant in ("ours", "json.loads"):
            variants.append(
                Variant(f"{kind} {variant}", _measured(env, variant, files, size), 1, measures=True)
            )
        ratios.append(
            RatioSpec(
                f"{kind}: ours MB/s / json.loads",
                f"{kind} ours",
                f"{kind} json.loads",
                kind="throughput",
            )
        )
    benchmark = Benchmark(
        name="import: generated logs MB/s",
        description=(
            f"generated logs of each format, {megabytes:g} MB each (40 turns a file), imported by "
            "a fresh process per run for a new owner; value = seconds per MB"
        ),
        unit="MB",
        variants=variants,
        ratios=ratios,
    )
    return run_benchmark(benchmark, rounds=rounds, warmup=0)


def rerun_unchanged(
    env: dict[str, str], workdir: str, *, files: int, rounds: int
) -> BenchmarkResult:
    """A re-run of ``import_conversations`` over ``files`` files imported before and unchanged:
    every file skipped without parsing (size, mtime, head hash). The first import is not timed."""
    folder = Path(workdir) / "rerun"
    for index in range(files):
        kind = ("claude_session", "codex_rollout")[index % 2]
        write_file(folder / f"{index:05d}.jsonl", kind, 10_000 + index, 3)
    owner_env = {**env, "BENCH_IMPORT_OWNER": "bench-rerun"}
    run_worker(owner_env, "ours-as", [str(folder)])  # the first import
    rerun = Variant(
        f"re-run, {files} unchanged files",
        _measured(owner_env, "ours-as", [str(folder)], 1.0),
        1,
        measures=True,
    )
    benchmark = Benchmark(
        name="import: re-run unchanged",
        description=(
            f"import_conversations FOLDER again over {files} small files imported before "
            "(Claude Code sessions and Codex rollouts); value = seconds per re-run"
        ),
        unit="run",
        variants=[rerun],
    )
    result = run_benchmark(benchmark, rounds=rounds, warmup=0)
    seconds = [sum(r) / len(r) for r in result.rounds[rerun.name]]
    result.ratios.append(
        summarize_ratio(
            f"re-run seconds / {RERUN_GOAL_S:g} s goal",
            [s / RERUN_GOAL_S for s in seconds],
            Target("<=", 1.0),
        )
    )
    return result
