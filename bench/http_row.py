"""HTTP page requests/s (docs/benchmarks.md): wrk against one uvicorn process, variants in interleaved rounds.

The server (``servers.uvicorn``, core 0) serves ``bench.urls``; wrk (Debian's package) runs on
core 1 with one thread and a few keep-alive connections for a fixed time per operation. Every
variant answers the same question, the page of 50 display rows at a depth of a conversation the
token's user owns (see ``bench.views``); each URL is checked once (200, 50 rows) before timing. An
operation is one wrk run; the value recorded is seconds per request (1 / requests/s), so the
``p50`` column is the median of those and ``throughput`` is requests/s. wrk's own latency
percentiles go to the JSON (``extra``).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from bench import servers, workload
from bench.harness import Benchmark, BenchmarkResult, RatioSpec, Variant, run_benchmark
from bench.stats import Target

WRK_CONNECTIONS = 8


def wrk_missing() -> str | None:
    """None when wrk is on PATH, else why the row is skipped."""
    if shutil.which("wrk") is None:
        return "wrk is not installed (apt-get install -y wrk)"
    return None


_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def _seconds(text: str) -> float:
    match = re.fullmatch(r"([0-9.]+)(us|ms|s|m)", text.strip())
    if match is None:
        raise ValueError(f"not a wrk duration: {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


@dataclass(frozen=True)
class WrkResult:
    """What one wrk run measured."""

    requests_per_s: float
    p50_s: float | None
    p99_s: float | None
    requests: int
    bad_responses: int
    socket_errors: int


def parse_wrk(output: str) -> WrkResult:
    """Read ``wrk --latency`` output; ValueError when it holds no ``Requests/sec`` line."""
    rate = re.search(r"Requests/sec:\s+([0-9.]+)", output)
    if rate is None:
        raise ValueError(f"no Requests/sec in wrk output: {output[-300:]!r}")
    percentiles = dict(re.findall(r"^\s+(50|99)(?:\.000)?%\s+(\S+)", output, re.MULTILINE))
    total = re.search(r"([0-9]+) requests in", output)
    bad = re.search(r"Non-2xx or 3xx responses:\s+([0-9]+)", output)
    errors = re.search(
        r"Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)", output
    )
    return WrkResult(
        requests_per_s=float(rate.group(1)),
        p50_s=_seconds(percentiles["50"]) if "50" in percentiles else None,
        p99_s=_seconds(percentiles["99"]) if "99" in percentiles else None,
        requests=int(total.group(1)) if total else 0,
        bad_responses=int(bad.group(1)) if bad else 0,
        socket_errors=sum(map(int, errors.groups())) if errors else 0,
    )


def run_wrk(url: str, token: str, seconds: int) -> WrkResult:
    """One wrk run (core ``CLIENT_CORE``), bounded by a timeout; RuntimeError on any bad answer."""
    command = servers.pinned(
        [
            "wrk",
            "-t1",
            f"-c{WRK_CONNECTIONS}",
            f"-d{seconds}s",
            "--latency",
            "-H",
            f"Authorization: Token {token}",
            url,
        ],
        servers.CLIENT_CORE,
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 30, check=True)
    result = parse_wrk(done.stdout)
    if result.bad_responses or result.socket_errors:
        raise RuntimeError(f"wrk saw {result.bad_responses} bad answers for {url}")
    return result


def _check(url: str, token: str) -> None:
    """The URL answers 200 with a page of 50 rows (no variant may win by answering less)."""
    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = json.loads(response.read())
    if len(body["results"]) != 50:
        raise RuntimeError(f"{url} answered {len(body['results'])} rows, not 50")


def _one_request_seconds(url: str, token: str) -> float:
    """Seconds one GET of ``url`` takes (wall clock), for a variant too slow for a wrk run."""
    start = time.perf_counter()
    _check(url, token)
    return time.perf_counter() - start


def _drf_cursor(position: int) -> str:
    """A DRF ``CursorPagination`` cursor resuming before ``position`` (what its links carry)."""
    return base64.b64encode(urlencode({"p": str(position)}).encode()).decode()


def _label(depth: int) -> str:
    return f"{depth // 1_000_000}M" if depth >= 1_000_000 else f"{depth // 1000}k" if depth else "0"


def _fixture(depth: int) -> tuple[str, Any, int]:
    """A user with a token and a conversation of ``depth + 50`` display rows it owns."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from murmur_conversations import services

    user, _ = get_user_model().objects.get_or_create(username="bench-http")
    token, _ = Token.objects.get_or_create(user=user)
    conversation = services.start_conversation(owner=user, title="bench http")
    last_seq = depth + 50
    workload.fill_display_rows("default", conversation.pk, last_seq)
    return token.key, conversation.pk, last_seq


def http_page(
    env: dict[str, str], depths: tuple[int, ...], *, seconds: int, rounds: int, warmup: int
) -> BenchmarkResult:
    """The row: every variant at depth 0, and ours, LimitOffset and the floors at the deepest."""
    from murmur_conversations.api.pagination import CursorBinding

    deepest = max(depths)
    token, conversation, last_seq = _fixture(deepest)
    paths: dict[str, str] = {}
    for depth in sorted({0, deepest}):
        label, before = _label(depth), last_seq - depth + 1
        query = (
            ""
            if depth == 0
            else "&cursor=" + CursorBinding("display", str(conversation)).sign([before])
        )
        paths[f"ours @{label}"] = (
            f"/api/conversations/{conversation}/display-messages/?limit=50{query}"
        )
        paths[f"DRF cursor @{label}"] = f"/bench/drf-cursor/{conversation}/" + (
            "" if depth == 0 else "?cursor=" + _drf_cursor(before)
        )
        paths[f"DRF LimitOffset @{label}"] = (
            f"/bench/drf-limit-offset/{conversation}/?limit=50&offset={depth}"
        )
        paths[f"JsonResponse @{label}"] = f"/bench/plain-json/{conversation}/?before={before}"
        paths[f"raw SQL + orjson @{label}"] = f"/bench/raw-orjson/{conversation}/?before={before}"
    extra: dict[str, list[dict[str, Any]]] = {name: [] for name in paths}
    with servers.uvicorn(env) as port:
        base = f"http://127.0.0.1:{port}"
        for path in paths.values():
            _check(base + path, token)

        def operation(name: str, url: str) -> Any:
            def run() -> float:
                result = run_wrk(url, token, seconds)
                extra[name].append(result.__dict__)
                if not result.requests:
                    # No request finished within the run (DRF LimitOffset deep in a large table
                    # on a loaded machine): one request on its own gives the time instead.
                    return _one_request_seconds(url, token)
                return 1.0 / result.requests_per_s

            return run

        variants = [
            Variant(name, operation(name, base + path), 1, measures=True)
            for name, path in paths.items()
        ]
        ratios = []
        for depth in sorted({0, deepest}):
            label = _label(depth)
            ratios += [
                RatioSpec(
                    f"ours req/s / JsonResponse @{label}",
                    f"ours @{label}",
                    f"JsonResponse @{label}",
                    kind="throughput",
                    target=Target(">=", 0.75) if depth == 0 else None,
                ),
                RatioSpec(
                    f"ours req/s / DRF cursor @{label}",
                    f"ours @{label}",
                    f"DRF cursor @{label}",
                    kind="throughput",
                    target=Target(">=", 1.2) if depth == 0 else None,
                ),
                RatioSpec(
                    f"ours req/s / DRF LimitOffset @{label}",
                    f"ours @{label}",
                    f"DRF LimitOffset @{label}",
                    kind="throughput",
                    target=Target(">=", 10) if depth >= 1_000_000 else None,
                ),
                RatioSpec(
                    f"ours req/s / raw SQL + orjson @{label}",
                    f"ours @{label}",
                    f"raw SQL + orjson @{label}",
                    kind="throughput",
                ),
            ]
        benchmark = Benchmark(
            name="http: page of 50",
            description=(
                f"GET the newest-first page of 50 display rows at depth "
                f"{', '.join(_label(d) for d in sorted({0, deepest}))} over loopback; wrk -t1 "
                f"-c{WRK_CONNECTIONS} -d{seconds}s on core 1, one uvicorn process on core 0; "
                "p50/p95 columns are seconds per request (1 / req/s)"
            ),
            unit="req",
            variants=variants,
            ratios=ratios,
        )
        result = run_benchmark(benchmark, rounds=rounds, warmup=warmup)
    result.extra["wrk_runs"] = extra
    return result
