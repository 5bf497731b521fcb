"""Pure statistics and formatting for the benchmark runner (no Django, no database).

Times are seconds throughout; a *round* is one interleaved pass in which every variant of a benchmark
ran its operations once (see ``harness``). Verdicts only ever compare variants of the same round.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Statistic = Literal["mean", "p50"]
Kind = Literal["time", "throughput"]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` by linear interpolation; ValueError if empty."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def round_statistic(latencies: Sequence[float], statistic: Statistic) -> float:
    """One round's value of ``statistic`` over its per-operation latencies (seconds)."""
    if statistic == "mean":
        return statistics.fmean(latencies)
    return statistics.median(latencies)


@dataclass(frozen=True)
class VariantSummary:
    """Per-variant numbers over all measured rounds: per-operation latency (seconds) and throughput
    (items per second, from the median of the round means)."""

    p50: float
    p95: float
    mean_of_rounds: float
    items_per_second: float
    operations: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "p50_s": self.p50,
            "p95_s": self.p95,
            "median_round_mean_s": self.mean_of_rounds,
            "items_per_s": self.items_per_second,
            "operations": self.operations,
        }


def summarize_variant(rounds: Sequence[Sequence[float]], items_per_op: int = 1) -> VariantSummary:
    """Summarize the per-operation latencies of every round of one variant."""
    flat = [value for latencies in rounds for value in latencies]
    mean_of_rounds = statistics.median(round_statistic(r, "mean") for r in rounds)
    return VariantSummary(
        p50=percentile(flat, 50),
        p95=percentile(flat, 95),
        mean_of_rounds=mean_of_rounds,
        items_per_second=items_per_op / mean_of_rounds if mean_of_rounds > 0 else math.inf,
        operations=len(flat),
    )


def round_ratios(
    numerator: Sequence[Sequence[float]],
    denominator: Sequence[Sequence[float]],
    *,
    statistic: Statistic,
    kind: Kind,
) -> list[float]:
    """One ratio per round, pairing rounds by index.

    ``kind="time"``: numerator time / denominator time ("x times as slow"; lower is better for the
    numerator). ``kind="throughput"``: denominator time / numerator time (the numerator's throughput
    as a multiple of the denominator's; higher is better).
    """
    if len(numerator) != len(denominator):
        raise ValueError("ratios need the same number of rounds on both sides")
    ratios = []
    for num, den in zip(numerator, denominator, strict=True):
        a, b = round_statistic(num, statistic), round_statistic(den, statistic)
        ratios.append(a / b if kind == "time" else b / a)
    return ratios


@dataclass(frozen=True)
class Target:
    """A target on a median ratio: ``op`` is ``"<="`` or ``">="``."""

    op: Literal["<=", ">="]
    value: float

    def holds(self, ratio: float) -> bool:
        return ratio <= self.value if self.op == "<=" else ratio >= self.value

    def __str__(self) -> str:
        return f"{self.op} {self.value:g}"


@dataclass(frozen=True)
class RatioSummary:
    """The median, min and max of one ratio over the rounds, and its verdict against a target."""

    label: str
    median: float
    low: float
    high: float
    target: Target | None

    @property
    def verdict(self) -> str:
        if self.target is None:
            return "reported"
        return "holds" if self.target.holds(self.median) else "MISSES"

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "median": self.median,
            "min": self.low,
            "max": self.high,
            "target": None if self.target is None else str(self.target),
            "verdict": self.verdict,
        }


def summarize_ratio(label: str, values: Sequence[float], target: Target | None) -> RatioSummary:
    """Median, min and max of per-round ratios."""
    return RatioSummary(label, statistics.median(values), min(values), max(values), target)


def format_seconds(seconds: float) -> str:
    """A duration with a unit that keeps three significant digits: ``"412 us"``, ``"3.07 ms"``."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def format_rate(per_second: float) -> str:
    """A rate with three significant digits and a thousands suffix: ``"1.23k/s"``."""
    if per_second >= 1e6:
        return f"{per_second / 1e6:.3g}M/s"
    if per_second >= 1e3:
        return f"{per_second / 1e3:.3g}k/s"
    return f"{per_second:.3g}/s"


def format_ratio(summary: RatioSummary) -> str:
    """``"1.42x [1.30-1.61]"``: median and range over rounds."""
    return f"{summary.median:.3g}x [{summary.low:.3g}-{summary.high:.3g}]"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table with a header rule; columns left-aligned to their widest cell."""
    widths = [len(h) for h in headers]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])
