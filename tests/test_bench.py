"""Smoke test of the benchmark runner's statistics, interleaving and table (no database, no peers)."""

from __future__ import annotations

import pytest

from bench.harness import TABLE_HEADERS, Benchmark, RatioSpec, Variant, result_rows, run_benchmark
from bench.stats import (
    Target,
    format_rate,
    format_seconds,
    format_table,
    percentile,
    round_ratios,
    summarize_ratio,
    summarize_variant,
)


def test_percentile_interpolates_and_refuses_nothing() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0], 0) == 1.0
    assert percentile([1.0, 2.0, 3.0], 100) == 3.0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_round_ratios_pair_rounds_by_index() -> None:
    ours = [[2.0, 2.0], [3.0, 5.0]]
    floor = [[1.0, 1.0], [2.0, 2.0]]
    assert round_ratios(ours, floor, statistic="mean", kind="time") == [2.0, 2.0]
    assert round_ratios(ours, floor, statistic="p50", kind="throughput") == [0.5, 0.5]
    with pytest.raises(ValueError, match="same number of rounds"):
        round_ratios(ours, floor[:1], statistic="mean", kind="time")


def test_ratio_summary_and_verdicts() -> None:
    summary = summarize_ratio("ours / floor", [1.2, 1.6, 1.4], Target("<=", 1.3))
    assert (summary.median, summary.low, summary.high) == (1.4, 1.2, 1.6)
    assert summary.verdict == "MISSES"
    assert summarize_ratio("x", [0.95], Target(">=", 0.9)).verdict == "holds"
    assert summarize_ratio("x", [0.95], None).verdict == "reported"
    assert summary.as_dict()["target"] == "<= 1.3"


def test_variant_summary_throughput_counts_items() -> None:
    summary = summarize_variant([[0.01, 0.03], [0.02, 0.02]], items_per_op=100)
    assert summary.operations == 4
    assert summary.mean_of_rounds == pytest.approx(0.02)
    assert summary.items_per_second == pytest.approx(5000)


def test_formatting() -> None:
    assert format_seconds(0.000412) == "412 us"
    assert format_seconds(0.00307) == "3.07 ms"
    assert format_seconds(2.5) == "2.5 s"
    assert format_rate(1234) == "1.23k/s"
    assert format_rate(12) == "12/s"
    table = format_table(("a", "bb"), [["xxx", "y"]])
    assert table.splitlines() == ["a    bb", "---  --", "xxx  y"]


def test_run_benchmark_interleaves_rounds_after_warmup() -> None:
    calls: list[str] = []
    benchmark = Benchmark(
        name="fake",
        description="two fake variants",
        unit="op",
        variants=[
            Variant("a", lambda: calls.append("a"), operations=2),
            Variant("b", lambda: calls.append("b"), operations=1),
        ],
        ratios=[RatioSpec("a / b", "a", "b"), RatioSpec("skipped", "a", "missing")],
    )
    result = run_benchmark(benchmark, rounds=3, warmup=1)
    # Round order rotates: a first, then b first, then a first, then b first.
    assert "".join(calls) == "aab" + "baa" + "aab" + "baa"
    assert [len(r) for r in result.rounds["a"]] == [2, 2, 2]
    assert [r.label for r in result.ratios] == ["a / b"]
    rows = result_rows(result)
    assert len(rows) == 3
    assert all(len(row) == len(TABLE_HEADERS) for row in rows)
    assert result.as_dict()["variants"]["a"]["operations"] == 6
