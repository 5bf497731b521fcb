"""Where the time of a write goes: the profile of a plain append, and every kind of save side by side.

``profile`` (PostgreSQL) measures the CPU time of the stages of one plain ``save_message`` on
its own, each as a variant: normalisation (``normalize_message``: checks, text repair,
redaction), row building (the statement's parameters), parameter binding (psycopg turning them
into the wire format), the statement's round trip, building the returned instances, the signals
(the realtime receivers building their frames) and the broadcast hand-off (``publish``). The sum
of the Python stages is compared with the budget of 0.1 ms per plain message.

``kinds`` times each kind of write (user text, assistant text, assistant with one tool call, a
tool result, ``update_tool_status``, ``set_status``, a synthetic row) and reports how many SQL
statements each sends (``BEGIN``/``COMMIT`` and savepoints included: round trips), beside the
track's one-statement floor; on PostgreSQL also the mixed workload (a quarter of each of the
first four kinds) against langchain-postgres ``add_message``.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench import floors, peers, workload
from bench.harness import Benchmark, BenchmarkResult, RatioSpec, Variant
from bench.paths import Sizes, Track, frame_log_off
from bench.stats import Target, summarize_ratio

#: Python per plain message, the budget of docs/write-path.md ("Python out of the way").
BUDGET_SECONDS = 0.0001
BUDGET = "budget 0.1 ms"


def _conversation(title: str) -> uuid.UUID:
    from murmur_conversations import services

    return services.start_conversation(owner=None, title=title).pk


# --------------------------------------------------------------------------- profile


def _stage(work: Callable[[], object], repeat: int = 20) -> Callable[[], float]:
    """A measuring operation: the mean CPU seconds of this thread in ``work`` over ``repeat``
    calls (``thread_time``: time the thread waited for a core on a busy machine, or for the
    database, is not Python's cost)."""

    def operation() -> float:
        start = time.thread_time()
        for _ in range(repeat):
            work()
        return (time.thread_time() - start) / repeat

    return operation


def profile(track: Track, sizes: Sizes) -> Benchmark | None:
    """The stages of a plain append on PostgreSQL (None on SQLite: its short append,
    ``services/backends/sqlite.py``, is timed and its statements counted by ``kinds``)."""
    if not track.is_postgres:
        return None
    from django.db import connections
    from django.utils import timezone
    from psycopg._queries import PostgresQuery
    from psycopg.adapt import Transformer

    from murmur_conversations import services
    from murmur_conversations.conf import app_settings
    from murmur_conversations.messages import normalize_message
    from murmur_conversations.realtime.broadcast import get_broadcaster
    from murmur_conversations.services import applying, statements
    from murmur_conversations.services.backends import Applied, postgres
    from murmur_conversations.services.plan import plan_append
    from murmur_conversations.services.writing import announce

    conv = _conversation("bench profile")
    limit = app_settings.max_content_bytes
    message = {"role": "user", "content": workload.text()}
    normalized = normalize_message(message, max_content_bytes=limit)
    now = timezone.now()

    def row_building() -> dict[str, Any]:
        return postgres.parameters(plan_append(conv, [normalized], [now]))

    planned = plan_append(conv, [normalized], [now])
    params = postgres.parameters(planned)
    sql = postgres.append_sql(False, False, False)
    connection = connections[track.alias]
    connection.ensure_connection()
    transformer = Transformer(connection.connection)
    saved = services.save_message(conversation=conv, message=message)
    stored = saved[0].conversation
    applied = Applied(
        conversation={f.attname: getattr(stored, f.attname) for f in stored._meta.concrete_fields},
        record_pks=[saved[0].message_id],
        display_pks=[saved[0].pk],
    )

    def rebuild() -> object:
        conversation = applying.conversation_instance(track.alias, applied.conversation)
        return conversation, applying.display_instances(track.alias, conversation, planned, applied)

    conversation, rows = rebuild()  # type: ignore[misc]
    broadcaster = get_broadcaster()

    def round_trip() -> None:
        fresh = plan_append(conv, [normalize_message(message, max_content_bytes=limit)], [now])
        statements.run(track.alias, sql, postgres.parameters(fresh))

    def whole() -> None:
        services.save_message(conversation=conv, message=message | {"content": "x"})

    # Outside a transaction the signals run at once. The frame log's INSERT is a round trip (its
    # cost is the ``frame log on / off`` line of ``append 1``), not Python: it is left out here.
    signals = frame_log_off(
        lambda: announce(conversation, track.alias, conversation.last_event_seq, created=rows)
    )

    group = f"murmur.bench.{uuid.uuid4().hex}"
    frame = {"type": "murmur.events", "event_seq": 1, "frames": []}
    stages = [
        ("normalise", lambda: normalize_message(message, max_content_bytes=limit)),
        ("row building", row_building),
        ("parameter binding", lambda: PostgresQuery(transformer).convert(sql, params)),
        ("instances", rebuild),
        ("signals (receivers, frames, hand-off; frame log apart)", signals),
        ("broadcast hand-off", lambda: broadcaster.publish(group, frame)),
    ]
    ops = max(10, sizes.append_ops // 4)
    variants = [
        Variant(f"stage: {name}", _stage(work), ops, measures=True) for name, work in stages
    ]
    python_stages = [work for _name, work in stages]

    def python_total() -> None:
        for work in python_stages:
            work()

    variants += [
        Variant("python, all stages", _stage(python_total), ops, measures=True),
        Variant(BUDGET, lambda: BUDGET_SECONDS, ops, measures=True),
        Variant(
            "statement: build, bind, execute, fetch (psycopg), cpu",
            _stage(round_trip, 5),
            ops,
            measures=True,
        ),
        Variant("round trip of the statement (+ its python), wall", round_trip, ops),
        Variant("whole save_message, wall", whole, ops),
        Variant("whole save_message, cpu", _stage(whole, 5), ops, measures=True),
    ]
    ratios = [
        RatioSpec("python / budget", "python, all stages", BUDGET, "p50", "time", Target("<=", 1)),
        RatioSpec("python / whole save_message", "python, all stages", "whole save_message", "p50"),
    ]
    return Benchmark(
        name=f"{track.name}: profile of append 1",
        description="CPU time of the stages of one plain save_message, each alone (mean of 20 calls)",
        unit="op",
        variants=variants,
        ratios=ratios,
    )


# --------------------------------------------------------------------------- every kind


def message_maker() -> Callable[[str], dict[str, Any]]:
    """Messages of the four kinds of the mixed workload, with tool calls and results paired."""
    counter = itertools.count()
    pending: list[str] = []

    def make(kind: str) -> dict[str, Any]:
        n = next(counter)
        if kind == "user":
            return {"role": "user", "content": workload.text()}
        if kind == "assistant":
            return {"role": "assistant", "content": workload.text()}
        if kind == "call":
            call_id = f"call_{uuid.uuid4().hex}"
            pending.append(call_id)
            return {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": workload.text()},
                    {
                        "type": "tool_call",
                        "id": call_id,
                        "name": "bash",
                        "input": {"cmd": f"ls {n}"},
                    },
                ],
            }
        call_id = pending.pop() if pending else f"orphan_{n}"
        return {"role": "tool", "tool_call_id": call_id, "content": workload.text()}

    return make


KINDS = ("user text", "assistant text", "assistant with one tool call", "tool result")
_KIND_KEYS = {
    "user text": "user",
    "assistant text": "assistant",
    "assistant with one tool call": "call",
    "tool result": "result",
}


def _kind_operations(alias: str) -> dict[str, Callable[[], object]]:
    """One operation per kind of write, each on its own conversation."""
    from murmur_conversations import services

    operations: dict[str, Callable[[], object]] = {}
    for kind in KINDS[:3]:
        conv, make, key = _conversation(f"bench kind {kind}"), message_maker(), _KIND_KEYS[kind]
        operations[kind] = lambda conv=conv, make=make, key=key: services.save_message(
            conversation=conv, message=make(key)
        )
    result_conv, make = _conversation("bench kind tool result"), message_maker()
    for _ in range(50):  # open calls for every result the run saves, 100 per batch, unmeasured
        services.save_messages(
            conversation=result_conv, messages=[make("call") for _ in range(100)]
        )
    operations["tool result"] = lambda: services.save_message(
        conversation=result_conv, message=make("result")
    )
    status_conv = _conversation("bench kind update_tool_status")
    statuses = itertools.cycle(["running", "idle"])
    tool_conv = _conversation("bench kind tool status")
    call_ids: list[str] = []

    def update_tool_status() -> None:
        if not call_ids:  # cards to start, 200 at a time (one of 40-odd calls is not measured)
            batch = [make_call() for _ in range(200)]
            services.save_messages(conversation=tool_conv, messages=[m for m, _ in batch])
            call_ids.extend(cid for _, cid in batch)
        services.update_tool_status(
            conversation=tool_conv,
            status="executing",
            tool_info={"call_id": call_ids.pop(), "display_text": "ls"},
        )

    def make_call() -> tuple[dict[str, Any], str]:
        call_id = f"st_{uuid.uuid4().hex}"
        return (
            {
                "role": "assistant",
                "content": [{"type": "tool_call", "id": call_id, "name": "bash", "input": {}}],
            },
            call_id,
        )

    synthetic_conv = _conversation("bench kind synthetic")
    operations["update_tool_status"] = update_tool_status
    operations["set_status"] = lambda: services.set_status(
        conversation=status_conv, status=next(statuses)
    )
    operations["synthetic message"] = lambda: services.save_synthetic_message(
        conversation=synthetic_conv,
        message_type="system",
        content_type="notification",
        content={"text": workload.text()},
    )
    return operations


def statement_counts(alias: str, operations: dict[str, Callable[[], object]]) -> dict[str, int]:
    """The SQL statements one call of each operation sends (BEGIN, COMMIT, savepoints included)."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    counts = {}
    for kind, operation in operations.items():
        operation()  # warm: first-use reads (content types, settings) are not the write's
        with CaptureQueriesContext(connections[alias]) as captured:
            operation()
        counts[kind] = len(captured.captured_queries)
    return counts


def kinds(track: Track, sizes: Sizes) -> Benchmark:
    """Each kind of write, p50 beside the one-statement floor, and the mixed workload."""
    operations = _kind_operations(track.alias)
    counts = statement_counts(track.alias, operations)
    floor_conv = _conversation("bench kinds floor")
    if track.is_postgres:
        pg_floor = floors.pg_append_one(track.raw, floor_conv)  # type: ignore[arg-type]
        floor_name = "raw psycopg, 1 statement"

        def floor() -> None:
            pg_floor(workload.text())
    else:
        sqlite_floor = floors.sqlite_append_batch(track.raw, floor_conv)  # type: ignore[arg-type]
        floor_name = "raw sqlite3, 1 transaction"

        def floor() -> None:
            sqlite_floor([workload.text()])

    ops = sizes.append_ops
    variants = [Variant(kind, operation, ops) for kind, operation in operations.items()]
    variants.append(Variant(floor_name, floor, ops))
    mixed_kinds = itertools.cycle(["user", "assistant", "call", "result"])
    mixed_conv = _conversation("bench mixed")
    make = message_maker()

    from murmur_conversations import services

    def mixed() -> None:
        services.save_message(conversation=mixed_conv, message=make(next(mixed_kinds)))

    variants.append(Variant("mixed workload (a quarter each)", mixed, ops))
    ratios = [
        RatioSpec(f"{kind} p50 / floor p50", kind, floor_name, "p50", "time") for kind in operations
    ]
    if track.langchain is not None:
        history = peers.langchain_history(track.langchain)
        variants.append(
            Variant("langchain add_message", lambda: history.add_message(workload.text()), ops)
        )
        ratios.append(
            RatioSpec(
                "mixed throughput / langchain",
                "mixed workload (a quarter each)",
                "langchain add_message",
                "mean",
                "throughput",
                Target(">=", 0.9),
            )
        )
    benchmark = Benchmark(
        name=f"{track.name}: every kind",
        description="one call per kind of write, committed; statements per call beside each",
        unit="call",
        variants=variants,
        ratios=ratios,
    )
    benchmark.statement_counts = counts  # type: ignore[attr-defined]
    return benchmark


#: The goal in statements per call, per kind (PostgreSQL; SQLite reports its counts).
STATEMENT_GOALS = {
    "user text": 1,
    "assistant text": 1,
    "assistant with one tool call": 1,
    "tool result": 1,
    "update_tool_status": 1,
    "set_status": 1,
    "synthetic message": 1,
}


def add_statement_counts(result: BenchmarkResult, is_postgres: bool) -> None:
    """Append the statement counts of a ``kinds`` result as ``count, not x`` rows."""
    counts: dict[str, int] = getattr(result.benchmark, "statement_counts", {})
    for kind, count in counts.items():
        goal = STATEMENT_GOALS.get(kind)
        result.ratios.append(
            summarize_ratio(
                f"{kind}: statements per call (count, not x)",
                [float(count)],
                Target("<=", goal) if is_postgres and goal is not None else None,
            )
        )
    result.extra["statements"] = counts
