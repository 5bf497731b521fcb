"""Interleaved rounds: every variant of a benchmark runs in every round, in rotating order.

A benchmark is a list of variants (one operation each, timed one by one with ``perf_counter``) and
the ratios to report. After ``warmup`` unrecorded rounds, each of ``rounds`` rounds runs every
variant's operations back to back, starting with a different variant each round, so drift and noise
from other processes on the machine hit all variants alike. Ratios pair the variants' rounds.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.stats import (
    Kind,
    RatioSummary,
    Statistic,
    Target,
    VariantSummary,
    format_rate,
    format_ratio,
    format_seconds,
    round_ratios,
    summarize_ratio,
    summarize_variant,
)


@dataclass(frozen=True)
class Skip:
    """A row or variant left out, and why (``failed``: it broke while running)."""

    benchmark: str
    what: str
    reason: str
    failed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "what": self.what,
            "reason": self.reason,
            "failed": self.failed,
        }

    def row(self) -> list[str]:
        """A table row: the benchmark, what was left out, its status and why."""
        status = "FAILED" if self.failed else "skipped"
        return [self.benchmark, f"{self.what}: {status} ({self.reason})", "", "", "", "", ""]


@dataclass
class Variant:
    """One contender: ``operation`` does one unit of work (``items`` items, e.g. messages);
    ``operations`` is how many it runs per round. With ``measures``, ``operation`` returns the
    seconds to record itself (a load generator's seconds per request, a worker's own timing)
    instead of being timed from outside."""

    name: str
    operation: Callable[[], object]
    operations: int
    items: int = 1
    measures: bool = False


@dataclass(frozen=True)
class RatioSpec:
    """A ratio to report: ``numerator`` against ``denominator`` (variant names), per round.

    ``statistic`` is the per-round value compared (``mean`` for throughput, ``p50`` for latency);
    see ``stats.round_ratios`` for ``kind``.
    """

    label: str
    numerator: str
    denominator: str
    statistic: Statistic = "mean"
    kind: Kind = "time"
    target: Target | None = None


@dataclass
class Benchmark:
    """A named path with its unit (what one item is), its variants and the ratios to report."""

    name: str
    description: str
    unit: str
    variants: list[Variant]
    ratios: list[RatioSpec] = field(default_factory=list)


@dataclass
class BenchmarkResult:
    """What one benchmark measured: per-variant summaries and rounds, and its ratio summaries."""

    benchmark: Benchmark
    rounds: dict[str, list[list[float]]]
    summaries: dict[str, VariantSummary]
    ratios: list[RatioSummary]
    extra: dict[str, Any] = field(default_factory=dict)  # row-specific facts (lost messages, RSS)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.benchmark.name,
            "extra": self.extra,
            "description": self.benchmark.description,
            "unit": self.benchmark.unit,
            "variants": {
                name: {
                    **summary.as_dict(),
                    "items_per_operation": self._variant(name).items,
                    "round_means_s": [sum(r) / len(r) for r in self.rounds[name]],
                }
                for name, summary in self.summaries.items()
            },
            "ratios": [ratio.as_dict() for ratio in self.ratios],
        }

    def _variant(self, name: str) -> Variant:
        return next(v for v in self.benchmark.variants if v.name == name)


def _run_variant(variant: Variant) -> list[float]:
    latencies = []
    clock = time.perf_counter
    for _ in range(variant.operations):
        start = clock()
        value = variant.operation()
        latencies.append(float(value) if variant.measures else clock() - start)  # type: ignore[arg-type]
    return latencies


def run_benchmark(benchmark: Benchmark, *, rounds: int, warmup: int = 1) -> BenchmarkResult:
    """Run ``warmup`` then ``rounds`` interleaved rounds of every variant and summarize them."""
    variants = benchmark.variants
    recorded: dict[str, list[list[float]]] = {v.name: [] for v in variants}
    for index in range(warmup + rounds):
        offset = index % len(variants)
        for variant in [*variants[offset:], *variants[:offset]]:
            latencies = _run_variant(variant)
            if index >= warmup:
                recorded[variant.name].append(latencies)
        gc.collect()
    summaries = {v.name: summarize_variant(recorded[v.name], v.items) for v in variants}
    ratios = [
        summarize_ratio(
            spec.label,
            round_ratios(
                recorded[spec.numerator],
                recorded[spec.denominator],
                statistic=spec.statistic,
                kind=spec.kind,
            ),
            spec.target,
        )
        for spec in benchmark.ratios
        if spec.numerator in recorded and spec.denominator in recorded
    ]
    return BenchmarkResult(benchmark, recorded, summaries, ratios)


def result_rows(result: BenchmarkResult) -> Sequence[list[str]]:
    """Table rows of one result: one per variant (p50, p95, throughput), one per ratio."""
    name, unit = result.benchmark.name, result.benchmark.unit
    rows = [
        [
            name,
            variant,
            format_seconds(summary.p50),
            format_seconds(summary.p95),
            f"{format_rate(summary.items_per_second)} {unit}",
            "",
            "",
        ]
        for variant, summary in result.summaries.items()
    ]
    rows += [
        [
            name,
            ratio.label,
            "",
            "",
            "",
            format_ratio(ratio),
            f"{ratio.target or '-'} {ratio.verdict}",
        ]
        for ratio in result.ratios
    ]
    return rows


TABLE_HEADERS = ("benchmark", "variant / ratio", "p50", "p95", "throughput", "ratio", "target")
