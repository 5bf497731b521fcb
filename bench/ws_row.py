"""Save -> websocket receive, and fan-out to N clients (docs/benchmarks.md), per channel layer.

One uvicorn process per layer (core 0) serves ``bench.asgi``: the app's process-local default,
channels_redis core and channels_redis pub/sub (a private Redis prefix). For each fan-out size N a
conversation has N sockets open (``ws/conversations/<id>/?ticket=``), held by this process on core
1. An operation is one save: ``POST bench/save/<id>/`` (``services.save_message`` in the server,
so every layer sees its own process's write) with a unique marker as the text; it ends when every
socket received a frame holding the marker, or after ``RECEIVE_TIMEOUT`` (the rest count as lost).
The value recorded is the time from sending the save to the last socket's receipt, t(N); the
write (the POST's own round trip) is kept beside it. The floor is ``bench.ws_floor``: bare
``websockets.broadcast`` of a frame one client sends, no Django, no layer, no database.

The tail lines (default layer only): N sockets on N different conversations stay open and idle
for :data:`TAIL_SECONDS`; the server's own counts (``GET bench/queries/``, every statement it
ran, and those of its frame-log poller) give the database reads per ``DB_TAIL_INTERVAL``.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
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

RECEIVE_TIMEOUT = 5.0
#: Seconds the tail lines count the idle server's queries; the default DB_TAIL_INTERVAL.
TAIL_SECONDS = 4.0
TAIL_INTERVAL = 0.25
CONNECT_CONCURRENCY = 25
LAYERS = {
    "default (process-local)": "local",
    "redis core": "redis-core",
    "redis pub/sub": "redis-pubsub",
}


@dataclass
class Fanout:
    """N open sockets of one conversation (or floor path) and the save in flight."""

    size: int
    sockets: list[Any] = field(default_factory=list)
    readers: list[asyncio.Task[None]] = field(default_factory=list)
    marker: str = ""
    got: dict[int, float] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    lost: int = 0
    writes: list[float] = field(default_factory=list)
    firsts: list[float] = field(default_factory=list)

    async def read(self, index: int, socket: Any) -> None:
        async for message in socket:
            marker = self.marker
            if marker and index not in self.got and marker in message:
                self.got[index] = time.perf_counter()
                if len(self.got) == self.size:
                    self.done.set()

    def arm(self) -> str:
        self.marker = "mark-" + uuid.uuid4().hex
        self.got = {}
        self.done = asyncio.Event()
        return self.marker

    async def finish(self, sent: float) -> float:
        """Wait for every socket; the time from ``sent`` to the last receipt (lost ones count
        at the timeout)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.done.wait(), RECEIVE_TIMEOUT)
        self.lost += self.size - len(self.got)
        self.marker = ""
        if not self.got:
            return RECEIVE_TIMEOUT
        self.firsts.append(min(self.got.values()) - sent)
        return (
            max(self.got.values()) if len(self.got) == self.size else time.perf_counter()
        ) - sent


async def _open(urls: list[str], fanout: Fanout) -> None:
    """Open one socket per address (each carries its own single-use ticket)."""
    from websockets.asyncio.client import connect

    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)

    async def one(index: int) -> None:
        async with gate:
            socket = await connect(urls[index], open_timeout=60, ping_interval=None, max_size=2**22)
        fanout.sockets.append(socket)
        fanout.readers.append(asyncio.ensure_future(fanout.read(index, socket)))

    await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(fanout.size))), 180)


async def _close(fanout: Fanout) -> None:
    for task in fanout.readers:
        task.cancel()
    await asyncio.gather(*(s.close() for s in fanout.sockets), return_exceptions=True)


def redis_missing(url: str) -> str | None:
    """None when Redis answers a PING at ``url``, else why the Redis layers are skipped."""
    try:
        import channels_redis  # noqa: F401
        import redis
    except ImportError as error:
        return f"channels_redis is not installed ({error})"
    try:
        redis.Redis.from_url(url, socket_timeout=2).ping()
    except Exception as error:
        return f"Redis does not answer at {url} ({error})"
    return None


def ws_fanout(
    env: dict[str, str], fanouts: tuple[int, ...], *, saves: int, rounds: int, warmup: int
) -> tuple[BenchmarkResult, list[Skip]]:
    """The row; returns its result and the layers skipped."""
    import httpx
    from django.contrib.auth import get_user_model

    from murmur_conversations import services
    from murmur_conversations.tickets import issue_ticket

    skips: list[Skip] = []
    redis_url = "redis://127.0.0.1:6379/0"
    prefix = f"murmur-bench-{uuid.uuid4().hex[:8]}"
    layers = dict(LAYERS)
    missing = redis_missing(redis_url)
    if missing:
        for name in ("redis core", "redis pub/sub"):
            del layers[name]
            skips.append(Skip("ws: save -> receive", name, missing))
    user, _ = get_user_model().objects.get_or_create(username="bench-ws")
    loop = asyncio.new_event_loop()
    ports: dict[str, int] = {}
    fanouts_by: dict[str, Fanout] = {}
    variants: list[Variant] = []
    with contextlib.ExitStack() as stack, servers.client_core():
        stack.callback(loop.close)
        http = httpx.AsyncClient(timeout=30)
        stack.callback(lambda: loop.run_until_complete(http.aclose()))
        for name, kind in layers.items():
            port = stack.enter_context(
                servers.uvicorn(
                    {
                        **env,
                        "BENCH_CHANNEL_LAYER": kind,
                        "BENCH_REDIS_URL": redis_url,
                        "BENCH_REDIS_PREFIX": prefix,
                    }
                )
            )
            ports[name] = port
            for size in fanouts:
                conversation = services.start_conversation(owner=user, title=f"ws {kind} {size}")
                fanout = Fanout(size)
                base = f"ws://127.0.0.1:{port}/ws/conversations/{conversation.pk}/?ticket="
                urls = [base + issue_ticket(user=user, session_key=None) for _ in range(size)]
                loop.run_until_complete(_open(urls, fanout))
                stack.callback(loop.run_until_complete, _close(fanout))
                save_url = f"http://127.0.0.1:{port}/bench/save/{conversation.pk}/"
                fanouts_by[f"{name} @{size}"] = fanout
                variants.append(
                    Variant(
                        f"{name} @{size}", _ours(loop, http, save_url, fanout), saves, measures=True
                    )
                )
        floor_port = servers.free_port()
        floor = subprocess.Popen(
            servers.pinned([sys.executable, "-m", "bench.ws_floor", str(floor_port)], 0),
            cwd=servers.ROOT,
        )
        stack.callback(lambda: servers.stop(floor))
        servers.wait_for_port(floor_port, floor)
        for size in fanouts:
            fanout = Fanout(size)
            url = f"ws://127.0.0.1:{floor_port}/g{size}"
            loop.run_until_complete(_open([url] * size, fanout))
            trigger = Fanout(1)
            loop.run_until_complete(_open([url], trigger))
            stack.callback(loop.run_until_complete, _close(trigger))
            stack.callback(loop.run_until_complete, _close(fanout))
            fanouts_by[f"bare websockets @{size}"] = fanout
            variants.append(
                Variant(
                    f"bare websockets @{size}",
                    _floor(loop, trigger.sockets[0], fanout),
                    saves,
                    measures=True,
                )
            )
        ratios = _ratios(list(layers), fanouts)
        benchmark = Benchmark(
            name="ws: save -> receive",
            description=(
                f"one save, then every one of N sockets (N = {', '.join(map(str, fanouts))}) "
                "receives its frame; value = t(N), send to last receipt; one uvicorn per layer "
                "on core 0, sockets on core 1"
            ),
            unit="save",
            variants=variants,
            ratios=ratios,
        )
        for fanout in fanouts_by.values():
            fanout.lost = 0  # connecting and snapshots are not part of the measurement
        result = run_benchmark(benchmark, rounds=rounds, warmup=warmup)
        local = "default (process-local)"
        if local in ports:
            size = max(fanouts)
            counts = loop.run_until_complete(_tail_queries(http, ports[local], user, size))
            _add_tail_lines(result, local, size, counts)
    _add_checks(result, fanouts_by, list(layers), min(fanouts), rounds)
    return result, skips


async def _tail_queries(http: Any, port: int, user: Any, size: int) -> dict[str, float | None]:
    """Open ``size`` sockets on as many new conversations, let them idle; the server's queries
    (all, and its poller's) per tail interval."""
    from asgiref.sync import sync_to_async
    from websockets.asyncio.client import connect

    from murmur_conversations import services
    from murmur_conversations.tickets import issue_ticket

    def create() -> list[str]:
        return [
            f"ws://127.0.0.1:{port}/ws/conversations/"
            f"{services.start_conversation(owner=user, title=f'tail {i}').pk}/"
            for i in range(size)
        ]

    urls = await sync_to_async(create)()
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)
    sockets: list[Any] = []

    async def one(url: str) -> None:
        async with gate:
            ticket = issue_ticket(user=user, session_key=None)  # fresh: a ticket lives a minute
            socket = await connect(
                f"{url}?ticket={ticket}", open_timeout=60, ping_interval=None, max_size=2**22
            )
            sockets.append(socket)
            await asyncio.wait_for(socket.recv(), 60)  # the snapshot: its reads are done

    try:
        await asyncio.wait_for(asyncio.gather(*(one(url) for url in urls)), 300)
        await asyncio.sleep(1.0)  # the last sockets' tails started
        before = (await http.get(f"http://127.0.0.1:{port}/bench/queries/")).json()
        await asyncio.sleep(TAIL_SECONDS)
        after = (await http.get(f"http://127.0.0.1:{port}/bench/queries/")).json()
    finally:
        await asyncio.gather(*(s.close() for s in sockets), return_exceptions=True)
    intervals = TAIL_SECONDS / TAIL_INTERVAL
    poller = (
        None if before.get("poller") is None else (after["poller"] - before["poller"]) / intervals
    )
    return {"all": (after["queries"] - before["queries"]) / intervals, "poller": poller}


def _add_tail_lines(
    result: BenchmarkResult, name: str, size: int, counts: dict[str, float | None]
) -> None:
    """The tail lines: frame-log poller reads per interval (target <= 1) and every query the idle
    server ran per interval (user re-checks included), N sockets on N conversations."""
    label = f"{name}: {size} sockets on {size} conversations, idle"
    if counts["poller"] is not None:
        result.ratios.append(
            summarize_ratio(
                f"{label}: tail queries per interval (count, not x)",
                [counts["poller"]],
                Target("<=", 1),
            )
        )
    all_queries = counts["all"]
    assert all_queries is not None
    result.ratios.append(
        summarize_ratio(f"{label}: all queries per interval (count, not x)", [all_queries], None)
    )
    result.extra["tail_queries_per_interval"] = counts


def _ours(loop: asyncio.AbstractEventLoop, http: Any, url: str, fanout: Fanout) -> Any:
    def run() -> float:
        async def save() -> float:
            marker = fanout.arm()
            sent = time.perf_counter()
            response = await http.post(url, content=marker)
            fanout.writes.append(time.perf_counter() - sent)
            if response.status_code != 204:
                raise RuntimeError(f"save answered {response.status_code}")
            return await fanout.finish(sent)

        return loop.run_until_complete(save())

    return run


def _floor(loop: asyncio.AbstractEventLoop, trigger: Any, fanout: Fanout) -> Any:
    def run() -> float:
        async def send() -> float:
            marker = fanout.arm()
            sent = time.perf_counter()
            await trigger.send(marker)
            return await fanout.finish(sent)

        return loop.run_until_complete(send())

    return run


def _ratios(layers: list[str], fanouts: tuple[int, ...]) -> list[RatioSpec]:
    small, large = sorted(fanouts)[-2:]
    specs = []
    for name in layers:
        specs.append(
            RatioSpec(
                f"{name}: t({large}) / t({small})",
                f"{name} @{large}",
                f"{name} @{small}",
                "p50",
                "time",
                Target("<=", 12) if name.startswith("default") and large >= 1000 else None,
            )
        )
        for size in fanouts:
            specs.append(
                RatioSpec(
                    f"{name} / bare websockets @{size}",
                    f"{name} @{size}",
                    f"bare websockets @{size}",
                    "p50",
                    "time",
                )
            )
    return specs


def _add_checks(
    result: BenchmarkResult,
    fanouts: dict[str, Fanout],
    layers: list[str],
    single: int,
    rounds: int,
) -> None:
    """Receive p50 minus write p50 at the smallest fan-out (ms, target <= 2) and lost messages."""
    for name in layers:
        fanout = fanouts[f"{name} @{single}"]
        per_round = len(fanout.writes) // max(1, rounds + 1)
        differences = []
        latencies = result.rounds[f"{name} @{single}"]
        writes = fanout.writes[-rounds * per_round :] if per_round else []
        for index, round_latencies in enumerate(latencies):
            chunk = writes[index * per_round : (index + 1) * per_round]
            if chunk:
                differences.append(
                    (statistics.median(round_latencies) - statistics.median(chunk)) * 1000
                )
        if differences:
            result.ratios.append(
                summarize_ratio(
                    f"{name}: receive p50 - write p50 @{single} (ms, not x)",
                    differences,
                    Target("<=", 2),
                )
            )
    lost = sum(f.lost for f in fanouts.values())
    result.ratios.append(
        summarize_ratio("lost messages, all variants (count, not x)", [lost], Target("<=", 0))
    )
    result.extra["lost"] = {name: f.lost for name, f in fanouts.items()}
    result.extra["write_s"] = {name: f.writes for name, f in fanouts.items() if f.writes}
