"""Smoke tests of the benchmark's service rows: parsing, id rewriting, skips (no load, no servers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import import_row
from bench.harness import Benchmark, Skip, Variant, run_benchmark
from bench.http_row import parse_wrk, wrk_missing
from bench.import_row import replicate, rewrite_ids

WRK_OUTPUT = """Running 1s test @ http://127.0.0.1:8000/x
  1 threads and 8 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     6.02ms  512.00us  12.00ms   90.00%
  Latency Distribution
     50%    5.90ms
     75%    6.20ms
     90%    6.80ms
     99%    1.20s
  166 requests in 1.00s, 1.20MB read
  Non-2xx or 3xx responses: 2
Requests/sec:    166.25
Transfer/sec:      1.20MB
"""


def test_parse_wrk_reads_rate_percentiles_and_bad_answers() -> None:
    result = parse_wrk(WRK_OUTPUT)
    assert result.requests_per_s == 166.25
    assert result.p50_s == pytest.approx(0.0059)
    assert result.p99_s == pytest.approx(1.2)
    assert (result.requests, result.bad_responses, result.socket_errors) == (166, 2, 0)
    with pytest.raises(ValueError, match="no Requests/sec"):
        parse_wrk("connection refused")


def test_missing_wrk_is_a_reason_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    assert "wrk is not installed" in (wrk_missing() or "")


def test_rewrite_ids_is_consistent_within_a_copy_and_new_across_copies() -> None:
    line = b'{"uuid":"5877060c-0a35-4f68-90a6-fdaa3727859a","parentUuid":"5877060c-0a35-4f68-90a6-fdaa3727859a","id":"toolu_01AB"}'
    one, two = rewrite_ids(line, 1), rewrite_ids(line, 2)
    first = json.loads(one)
    assert first["uuid"] == first["parentUuid"] != "5877060c-0a35-4f68-90a6-fdaa3727859a"
    assert first["id"] == "toolu_01ABc1"
    assert one != two
    assert rewrite_ids(line, 1) == one


def test_rewrite_ids_keeps_keys_that_look_like_ids() -> None:
    """A Codex rollout's ``"call_id"`` key stays a key (its value is rewritten), so the copies
    keep their calls paired with their outputs."""
    line = b'{"payload":{"type":"function_call","call_id":"call_gL2iTwQb","rs_1":"rs_9"}}'
    payload = json.loads(rewrite_ids(line, 3))["payload"]
    assert payload["call_id"] == "call_gL2iTwQbc3"
    assert payload["rs_1"] == "rs_9c3"


def test_replicate_reaches_the_size(tmp_path: Path) -> None:
    source = tmp_path / "s.jsonl"
    source.write_bytes(b'{"sessionId":"5877060c-0a35-4f68-90a6-fdaa3727859a"}\n' * 100)
    files = replicate(source, tmp_path / "out", 0.02)
    assert sum((tmp_path / "out" / f).stat().st_size for f in files) >= 20_000
    assert len({(tmp_path / "out" / f).read_bytes() for f in files}) == len(files)


def test_the_import_row_reads_murmur_corpus_and_skips_without_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("BENCH_CORPUS", raising=False)
    monkeypatch.setenv("MURMUR_CORPUS", str(tmp_path))
    assert import_row.corpus_dir() == tmp_path
    monkeypatch.delenv("MURMUR_CORPUS")
    monkeypatch.setenv("BENCH_CORPUS", str(tmp_path))  # the older name still works
    assert import_row.corpus_dir() == tmp_path
    monkeypatch.setenv("MURMUR_CORPUS", str(tmp_path / "missing"))  # the new name wins
    assert import_row.corpus_dir() is None
    result, skips = import_row.import_rate({}, str(tmp_path), megabytes=1, rounds=1)
    assert result is None
    assert [(s.what, s.reason) for s in skips] == [
        ("whole row", "no real-log corpus (set MURMUR_CORPUS)")
    ]


def test_measuring_variants_record_their_own_value() -> None:
    values = iter([0.5, 0.25, 0.125])
    benchmark = Benchmark("b", "", "req", [Variant("v", lambda: next(values), 1, measures=True)])
    result = run_benchmark(benchmark, rounds=2, warmup=1)
    assert result.rounds["v"] == [[0.25], [0.125]]


def test_skip_rows_say_why() -> None:
    assert Skip("http", "whole row", "wrk is not installed").row()[1] == (
        "whole row: skipped (wrk is not installed)"
    )
    assert "FAILED" in Skip("ws", "whole row", "boom", failed=True).row()[1]
