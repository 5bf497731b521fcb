"""Import MB/s on corpus formats replicated to a size (docs/benchmarks.md), and peak memory.

The source is a file of the real-log corpus, which is not part of the repository: its folder is
``MURMUR_CORPUS`` (the variable the tests read; ``BENCH_CORPUS`` is kept as an older alias).
Without it the row is skipped
with a reason naming the variable. The file is replicated into a temporary directory as many
copies, each with every UUID and tool-call id rewritten, so each copy is a new conversation with
new message ids; it is never committed. Each operation is one ``bench.import_worker`` process (its
own peak RSS) reading every copy; rounds run the variants interleaved. ``ours @1/10`` imports a tenth of the copies: peak RSS of the whole
over the tenth says whether memory stays flat as the input grows.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from bench import servers
from bench.harness import (
    Benchmark,
    BenchmarkResult,
    RatioSpec,
    Skip,
    Variant,
    run_benchmark,
)
from bench.stats import Target, summarize_ratio

FORMATS = {  # format: (corpus file, the largest real session of it; share of the size)
    "claude_code_session": (
        "claude_code_session/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
        1.0,
    ),
    # A tenth of the size: ours imports this format about ten times slower (see BENCHMARKS.md).
    "codex_rollout": (
        "codex_rollout/rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
        0.1,
    ),
}
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: A tool-call-like id (``call_...``), never a key that looks like one (``"call_id":``).
_CALL = re.compile(rb'\b(toolu|call|msg|fc|rs)_[A-Za-z0-9]+\b(?!":)')


def corpus_dir() -> Path | None:
    """The real-log corpus folder, or None: ``MURMUR_CORPUS`` (else its alias ``BENCH_CORPUS``; a
    relative path is taken from the repository root); the same rule as tests/helpers.py."""
    given = os.environ.get("MURMUR_CORPUS") or os.environ.get("BENCH_CORPUS")
    if not given:
        return None
    path = servers.ROOT / given
    return path if path.is_dir() else None


def rewrite_ids(data: bytes, copy: int) -> bytes:
    """``data`` with every UUID and tool-call-like id replaced by one unique to ``copy`` (the
    same original gives the same replacement within a copy, so references still match)."""
    salt = uuid.UUID(int=copy)

    def new_uuid(match: re.Match[bytes]) -> bytes:
        return str(uuid.uuid5(salt, match.group(0).decode())).encode()

    def new_call(match: re.Match[bytes]) -> bytes:
        return match.group(0) + b"c" + str(copy).encode()

    return _CALL.sub(new_call, _UUID.sub(new_uuid, data))


def replicate(source: Path, target: Path, megabytes: float) -> list[str]:
    """Copies of ``source`` with rewritten ids in ``target`` until they hold ``megabytes``."""
    target.mkdir(parents=True, exist_ok=True)
    data = source.read_bytes()
    files, total, copy = [], 0, 0
    while total < megabytes * 1_000_000:
        copy += 1
        path = target / f"{copy:05d}-{source.name}"
        path.write_bytes(rewrite_ids(data, copy))
        files.append(str(path))
        total += path.stat().st_size
    return files


def run_worker(env: dict[str, str], variant: str, files: list[str]) -> dict[str, Any]:
    """Import ``files`` with ``variant`` in a fresh ``bench.import_worker`` process (``env`` on
    top of this one's); its last stdout line, a JSON object (``seconds`` among its keys).
    Raises RuntimeError when the worker fails."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.import_worker", variant, *files],
        cwd=servers.ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"import worker {variant} failed: {done.stderr[-800:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def import_rate(
    env: dict[str, str], workdir: str, *, megabytes: float, rounds: int
) -> tuple[BenchmarkResult | None, list[Skip]]:
    """The row (one benchmark holding every format); skips formats or floors that cannot run."""
    skips: list[Skip] = []
    corpus = corpus_dir()
    name = "import: MB/s"
    if corpus is None:
        return None, [Skip(name, "whole row", "no real-log corpus (set MURMUR_CORPUS)")]
    try:
        import orjson  # noqa: F401
    except ImportError:
        skips.append(Skip(name, "orjson+COPY", "orjson is not installed (bench/requirements.txt)"))
    variants: list[Variant] = []
    ratios: list[RatioSpec] = []
    runs: dict[str, list[dict[str, Any]]] = {}
    for fmt, (relative, share) in FORMATS.items():
        source = corpus / relative
        if not source.is_file():
            skips.append(Skip(name, fmt, f"corpus file {relative} is missing"))
            continue
        files = replicate(source, Path(workdir) / "import" / fmt, megabytes * share)
        tenth = files[: max(1, len(files) // 10)]
        size = sum(Path(f).stat().st_size for f in files) / 1e6
        names = ["ours", "json.loads"] + (
            [] if skips and skips[0].what == "orjson+COPY" else ["orjson+COPY"]
        )
        for variant in names:
            label = f"{fmt} {variant}"
            runs[label] = []
            variants.append(
                Variant(label, _operation(env, variant, files, runs[label], size), 1, measures=True)
            )
        runs[f"{fmt} ours @1/10"] = []
        variants.append(
            Variant(
                f"{fmt} ours @1/10",
                _operation(
                    env, "ours", tenth, runs[f"{fmt} ours @1/10"], size / len(files) * len(tenth)
                ),
                1,
                measures=True,
            )
        )
        ratios.append(
            RatioSpec(
                f"{fmt}: ours MB/s / json.loads",
                f"{fmt} ours",
                f"{fmt} json.loads",
                kind="throughput",
            )
        )
        ratios.append(
            RatioSpec(
                f"{fmt}: ours MB/s / orjson+COPY",
                f"{fmt} ours",
                f"{fmt} orjson+COPY",
                kind="throughput",
                target=Target(">=", 0.6),
            )
        )
    if not variants:
        return None, skips
    benchmark = Benchmark(
        name=name,
        description=(
            f"corpus files replicated to {megabytes:g} MB (codex_rollout: a tenth) with rewritten "
            "ids, imported by a fresh process per run (Django set up before the clock); value = "
            "seconds per MB, throughput = MB/s"
        ),
        unit="MB",
        variants=variants,
        ratios=ratios,
    )
    result = run_benchmark(benchmark, rounds=rounds, warmup=0)
    for fmt in FORMATS:
        whole, tenth_runs = runs.get(f"{fmt} ours", []), runs.get(f"{fmt} ours @1/10", [])
        if whole and tenth_runs:
            result.ratios.append(
                summarize_ratio(
                    f"{fmt}: ours peak RSS, all / 1/10 of the input",
                    [
                        a["max_rss_kb"] / b["max_rss_kb"]
                        for a, b in zip(whole, tenth_runs, strict=True)
                    ],
                    Target("<=", 1.25),
                )
            )
    result.extra["runs"] = runs
    return result, skips


def _operation(
    env: dict[str, str], variant: str, files: list[str], log: list[dict[str, Any]], megabytes: float
) -> Any:
    def run() -> float:
        outcome = run_worker(env, variant, files)
        log.append(outcome)
        return float(outcome["seconds"]) / megabytes

    return run
