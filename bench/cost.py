"""The rows of issue 30's table by CPU (client + PostgreSQL backends) and WAL, each against its goal.

Each comparison runs its sides (ours through the public services, commands and REST route; the
floors and peers) in windows of many operations, interleaved: round ``i`` starts with side ``i mod
n``, so drift and other processes hit every side alike. A window's cost is read by
``bench.meter`` (CPU of this process and of the database's client backends from ``/proc``; WAL
attributed to the bench database). Per-operation values are medians over the rounds; each ratio
is computed per round and reported as median [min-max] with the verdict ``meets`` or ``MISSES``.
The rows are listed in docs/benchmarks.md ("CPU and WAL against the goals").
"""

from __future__ import annotations

import statistics
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import psycopg

from bench import lean, meter, peers, workload
from bench.meter import Meter, Window
from bench.stats import Target, format_table


@dataclass(frozen=True)
class CostSizes:
    """Operations per window for each side, and rounds, per mode."""

    rounds: int
    warmup: int
    ours_writes: int
    floor_writes: int
    ours_turns: int
    floor_turns: int
    ours_pages: int
    floor_pages: int
    import_copies: int
    import_rounds: int


QUICK = CostSizes(2, 1, 30, 80, 8, 20, 15, 40, 2, 2)
FULL = CostSizes(8, 1, 600, 2000, 150, 500, 300, 1000, 30, 4)


@dataclass
class Side:
    """One contender of a comparison: before each window (unmeasured) ``start()`` returns the
    operation the window repeats ``ops`` times. A writer's ``start`` begins a new conversation,
    so every window writes to a conversation of the same age: the conversation row's dead
    versions (every write updates it) pile up between vacuums, and a conversation kept for the
    whole run made later windows dearer than earlier ones, ours and the floor's alike."""

    name: str
    start: Callable[[], Callable[[], object]]
    ops: int


def same(operation: Callable[[], object]) -> Callable[[], Callable[[], object]]:
    """A :class:`Side` ``start`` for an operation that needs nothing new per window."""
    return lambda: operation


def _repeat(operation: Callable[[], object], times: int) -> None:
    for _ in range(times):
        operation()


def interleave(
    gauge: Meter, sides: Sequence[Side], *, rounds: int, warmup: int
) -> dict[str, list[Window]]:
    """Every side's windows: ``warmup`` unrecorded rounds, then ``rounds`` rotating rounds."""
    recorded: dict[str, list[Window]] = {side.name: [] for side in sides}
    for index in range(warmup + rounds):
        offset = index % len(sides)
        for side in [*sides[offset:], *sides[:offset]]:
            operation = side.start()
            window = gauge.measure(partial(_repeat, operation, side.ops), side.ops)
            if index >= warmup:
                recorded[side.name].append(window)
    return recorded


UNITS = {"cpu": "us", "client": "us", "backend": "us", "wal": "B"}


@dataclass
class Row:
    """One line of the table: ours and its floor or peer, the ratio and its goal."""

    label: str
    ours: str
    floor: str
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    target: Target | None = None
    note: str = ""
    failed: bool = False

    @property
    def verdict(self) -> str:
        if self.failed:
            return "FAILED"
        if self.target is None or self.ratio is None:
            return "reported" if self.ratio is not None else "skipped"
        return "meets" if self.target.holds(self.ratio) else "MISSES"

    def cells(self) -> list[str]:
        """The printed cells: row, ours, floor, ratio [min-max], goal, verdict (note)."""
        if self.ratio is None:
            ratio = ""
        elif self.low is None or self.high is None:
            ratio = f"{self.ratio:.3g}"
        else:
            ratio = f"{self.ratio:.3g} [{self.low:.3g}-{self.high:.3g}]"
        verdict = self.verdict + (f" ({self.note})" if self.note else "")
        return [self.label, self.ours, self.floor, ratio, str(self.target or "-"), verdict]

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "ours": self.ours,
            "floor": self.floor,
            "ratio": self.ratio,
            "min": self.low,
            "max": self.high,
            "goal": None if self.target is None else str(self.target),
            "verdict": self.verdict,
            "note": self.note,
        }


HEADERS = ("row", "ours", "floor / peer", "ratio median [min-max]", "goal", "verdict")


def median_per_op(windows: Sequence[Window], metric: str) -> float:
    """The median over windows of ``metric`` per operation (``Window.per_op``)."""
    return statistics.median(window.per_op(metric) for window in windows)


def _value(windows: Sequence[Window], metric: str, scale: float = 1.0) -> str:
    return f"{median_per_op(windows, metric) * scale:,.0f} {UNITS[metric]}"


def ratio_row(
    label: str,
    numerator: Sequence[Window],
    denominator: Sequence[Window],
    metric: str,
    target: Target | None,
    *,
    scale: tuple[float, float] = (1.0, 1.0),
    note: str = "",
) -> Row:
    """``numerator`` over ``denominator`` in ``metric`` per operation, paired round by round;
    ``scale`` multiplies each side's per-operation value first (e.g. per write of a turn)."""
    ratios = [
        (a.per_op(metric) * scale[0]) / (b.per_op(metric) * scale[1])
        for a, b in zip(numerator, denominator, strict=True)
    ]
    return Row(
        label,
        _value(numerator, metric, scale[0]),
        _value(denominator, metric, scale[1]),
        statistics.median(ratios),
        min(ratios),
        max(ratios),
        target,
        note,
    )


@dataclass
class Context:
    """What the rows share: the bench database's parameters, a monitor connection and a user."""

    params: dict[str, Any]
    monitor: psycopg.Connection[Any]
    gauge: Meter
    sizes: CostSizes
    owner: Any
    workdir: str
    sqlite_alias: str | None = None
    rows: list[Row] = field(default_factory=list)
    windows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection[Any]:
        """A new bare psycopg connection to the bench database."""
        return psycopg.connect(**self.params, autocommit=autocommit)

    def run(self, sides: Sequence[Side]) -> dict[str, list[Window]]:
        """``interleave`` the sides with this context's meter and sizes; keeps the windows."""
        recorded = interleave(self.gauge, sides, rounds=self.sizes.rounds, warmup=self.sizes.warmup)
        for name, windows in recorded.items():
            self.windows[name] = [window.as_dict() for window in windows]
        return recorded

    def skip(self, label: str, reason: str) -> None:
        """A row that could not run, with the reason."""
        self.rows.append(Row(label, "", "", note=reason))


# --------------------------------------------------------------------------- writes


def _save(conversation: Any, message: dict[str, Any]) -> None:
    from murmur_conversations import services

    services.save_message(conversation=conversation, message=message)


def _ours_plain(ctx: Context) -> Side:
    from murmur_conversations import services

    def start() -> Callable[[], object]:
        conversation = services.start_conversation(owner=ctx.owner, title="cost plain").pk
        return lambda: _save(conversation, {"role": "user", "content": workload.text()})

    return Side("ours plain append", start, ctx.sizes.ours_writes)


def _ours_turns(ctx: Context) -> Side:
    from bench.write_kinds import message_maker
    from murmur_conversations import services

    make = message_maker()

    def start() -> Callable[[], object]:
        conversation = services.start_conversation(owner=ctx.owner, title="cost turn").pk

        def turn() -> None:
            for kind in ("user", "call", "result", "assistant"):
                _save(conversation, make(kind))

        return turn

    return Side("ours mixed turn", start, ctx.sizes.ours_turns)


def _lean_sides(ctx: Context, conn: psycopg.Connection[Any]) -> tuple[Side, Side]:
    def plain() -> Callable[[], object]:
        writer = lean.start(conn, ctx.owner.pk)
        return lambda: writer.text("user", workload.text())

    def turns() -> Callable[[], object]:
        writer = lean.start(conn, ctx.owner.pk)
        return lambda: lean.turn(writer, workload.text)

    return (
        Side("lean plain append", plain, ctx.sizes.floor_writes),
        Side("lean mixed turn", turns, ctx.sizes.floor_turns),
    )


def writes(ctx: Context) -> None:
    """Plain append and mixed turn: CPU and WAL against the lean floor; plain against
    langchain-postgres; round trips per write."""
    conn = ctx.connect()
    lean.create_tables(conn, trigram=lean.ours_has_trigram(ctx.monitor))
    lean_plain, lean_turns = _lean_sides(ctx, conn)
    sides = [_ours_plain(ctx), lean_plain]
    missing = peers.langchain_available()
    if missing is None:
        langchain_conn = ctx.connect(autocommit=False)
        peers.create_langchain_table(langchain_conn)

        def session() -> Callable[[], object]:
            history = peers.langchain_history(langchain_conn)  # a new session per window
            return lambda: history.add_message(workload.text())

        sides.append(Side("langchain add_message", session, ctx.sizes.floor_writes))
    plain = ctx.run(sides)
    turns = ctx.run([_ours_turns(ctx), lean_turns])
    ours, floor = plain["ours plain append"], plain["lean plain append"]
    ours_turn, floor_turn = turns["ours mixed turn"], turns["lean mixed turn"]
    wal_note = "" if ctx.gauge.walinspect else "whole server's WAL: pg_walinspect missing"
    ctx.rows += [
        ratio_row(
            "plain append, CPU per write / lean floor", ours, floor, "cpu", Target("<=", 1.5)
        ),
        ratio_row(
            "mixed turn, CPU per turn / lean floor", ours_turn, floor_turn, "cpu", Target("<=", 2)
        ),
        ratio_row(
            "plain append, WAL per write / lean floor",
            ours,
            floor,
            "wal",
            Target("<=", 1.5),
            note=wal_note,
        ),
        ratio_row(
            "mixed turn, WAL per write / lean floor",
            ours_turn,
            floor_turn,
            "wal",
            Target("<=", 1.5),
            scale=(0.25, 0.25),
            note=wal_note,
        ),
    ]
    if missing is not None:
        ctx.skip("plain append, CPU / langchain-postgres add_message", missing)
    else:
        ctx.rows.append(
            ratio_row(
                "plain append, CPU / langchain-postgres add_message",
                ours,
                plain["langchain add_message"],
                "cpu",
                Target("<=", 1.5),
            )
        )
    _round_trip_rows(ctx, lean.start(conn, ctx.owner.pk))
    conn.close()


def _round_trip_rows(ctx: Context, writer: lean.LeanWriter) -> None:
    """Round trips per write outside a caller's transaction, counted on the wire."""
    from django.db import connections

    from bench.write_kinds import message_maker
    from murmur_conversations import services

    connection = connections["default"]
    connection.ensure_connection()
    conversation = services.start_conversation(owner=ctx.owner, title="cost trips").pk
    make = message_maker()
    _save(conversation, make("user"))  # warm: first-use reads are not the write's
    with meter.round_trips(connection.connection) as plain:
        for _ in range(5):
            _save(conversation, make("user"))
    with meter.round_trips(connection.connection) as mixed:
        for kind in ("user", "call", "result", "assistant"):
            _save(conversation, make(kind))
    writer.text("user", "warm")
    with meter.round_trips(writer.conn) as floor:
        writer.text("user", workload.text())
    if not plain.count or not mixed.count:  # the writes went through another connection
        ctx.rows.append(
            Row(
                "round trips per write",
                "",
                "",
                note="no round trip seen on Django's default connection",
                failed=True,
            )
        )
        return
    ctx.rows += [
        Row(
            "round trips per write outside a transaction (plain)",
            f"{plain.count / 5:g}",
            f"{floor.count:g}",
            plain.count / 5,
            target=Target("<=", 1),
        ),
        Row(
            "round trips per write, mixed turn (4 writes)",
            f"{mixed.count / 4:g}",
            f"{floor.count:g}",
            mixed.count / 4,
            target=Target("<=", 1),
        ),
    ]


# --------------------------------------------------------------------------- REST page


def _page_fixture(ctx: Context) -> tuple[str, Any]:
    from rest_framework.authtoken.models import Token

    from murmur_conversations import services

    token, _ = Token.objects.get_or_create(user=ctx.owner)
    conversation = services.start_conversation(owner=ctx.owner, title="cost page").pk
    workload.fill_display_rows("default", conversation, 120)
    return token.key, conversation


def _bare_page(conn: psycopg.Connection[Any], key: str, conversation: Any) -> Callable[[], bytes]:
    """The floor: token, then the page with the owner check joined, prepared; orjson."""
    import orjson

    from bench.views import PAGE, floor_page_body, floor_page_sql

    page_sql = floor_page_sql()

    def page() -> bytes:
        token = conn.execute(
            "SELECT user_id FROM authtoken_token WHERE key = %s", (key,), prepare=True
        ).fetchone()
        assert token is not None
        rows = conn.execute(
            page_sql, (conversation, token[0], 2**62, PAGE + 1), prepare=True
        ).fetchall()
        return bytes(orjson.dumps(floor_page_body(rows)))

    return page


def rest_page(ctx: Context) -> None:
    """The REST page of 50 display rows through the test client: client CPU against bare
    psycopg + orjson, and the statements (round trips) one request makes."""
    try:
        import orjson  # noqa: F401
    except ImportError:
        ctx.skip("REST page of 50, client CPU / bare psycopg + orjson", "orjson not installed")
        return
    from django.db import connections
    from django.test import Client

    key, conversation = _page_fixture(ctx)
    client = Client(HTTP_AUTHORIZATION=f"Token {key}")
    url = f"/api/conversations/{conversation}/display-messages/?limit=50"
    answer = client.get(url)
    if answer.status_code != 200 or len(answer.json()["results"]) != 50:
        raise RuntimeError(f"the REST page answered {answer.status_code}: {answer.content[:200]!r}")
    conn = ctx.connect()
    bare = _bare_page(conn, key, conversation)
    windows = ctx.run(
        [
            Side(
                "ours REST page",
                same(lambda: client.get(url)),
                ctx.sizes.ours_pages,
            ),
            Side(
                "bare psycopg + orjson page",
                same(bare),
                ctx.sizes.floor_pages,
            ),
        ]
    )
    connection = connections["default"]
    with meter.round_trips(connection.connection) as trips:
        client.get(url)
    with meter.round_trips(conn) as floor_trips:
        bare()
    conn.close()
    if not trips.count:  # the page was read through another connection
        ctx.rows.append(
            Row(
                "REST page of 50, statements per request",
                "",
                "",
                note="no round trip seen on Django's default connection",
                failed=True,
            )
        )
        return
    ours, floor = windows["ours REST page"], windows["bare psycopg + orjson page"]
    ctx.rows += [
        ratio_row(
            "REST page of 50, client CPU / bare psycopg + orjson",
            ours,
            floor,
            "client",
            Target("<=", 3),
        ),
        ratio_row(
            "REST page of 50, client + backend CPU / bare (reported)", ours, floor, "cpu", None
        ),
        Row(
            "REST page of 50, statements (round trips) per request",
            f"{trips.count}",
            f"{floor_trips.count}",
            float(trips.count),
            target=Target("<=", 2),
        ),
    ]


# --------------------------------------------------------------------------- SQLite


def sqlite_append(ctx: Context) -> None:
    """SQLite plain append against raw ``sqlite3`` writing the same rows in one transaction; CPU
    of this process (SQLite runs in it)."""
    label = "SQLite plain append, CPU / raw sqlite3 (1 transaction)"
    if ctx.sqlite_alias is None:
        ctx.skip(label, "no SQLite database (the run was given --no-sqlite)")
        return
    from django.db import connections

    from bench import django_setup, floors
    from murmur_conversations import services

    django_setup.use_alias(ctx.sqlite_alias)
    try:
        raw = floors.sqlite_connect(str(connections[ctx.sqlite_alias].settings_dict["NAME"]))

        def ours() -> Callable[[], object]:
            conversation = services.start_conversation(owner=None, title="cost sqlite").pk
            return lambda: _save(conversation, {"role": "user", "content": workload.text()})

        def floor() -> Callable[[], object]:
            conversation = services.start_conversation(owner=None, title="cost sqlite floor").pk
            append = floors.sqlite_append_batch(raw, conversation)
            return lambda: append([workload.text()])

        windows = interleave(
            Meter(None),
            [
                Side("ours sqlite append", ours, ctx.sizes.ours_writes),
                Side("raw sqlite3 append", floor, ctx.sizes.floor_writes),
            ],
            rounds=ctx.sizes.rounds,
            warmup=ctx.sizes.warmup,
        )
        raw.close()
    finally:
        django_setup.use_alias("default")
    for name, recorded in windows.items():
        ctx.windows[name] = [window.as_dict() for window in recorded]
    ctx.rows.append(
        ratio_row(
            label,
            windows["ours sqlite append"],
            windows["raw sqlite3 append"],
            "cpu",
            Target("<=", 2),
        )
    )


# --------------------------------------------------------------------------- the run


def run(
    params: dict[str, Any], *, quick: bool, workdir: str, sqlite_alias: str | None
) -> dict[str, Any]:
    """Every cost row; returns ``{"rows", "windows", "notes"}`` (rows as dicts) for the JSON and
    prints nothing. Needs Django set up on the bench database (``django_setup.configure``)."""
    from django.contrib.auth import get_user_model

    from bench import import_cost

    monitor = psycopg.connect(**params, autocommit=True)
    notes = [note for note in [meter.install_walinspect(monitor)] if note]
    owner = get_user_model().objects.create(username=f"bench-cost-{uuid.uuid4().hex[:8]}")
    ctx = Context(
        params, monitor, Meter(monitor), QUICK if quick else FULL, owner, workdir, sqlite_alias
    )
    ctx.notes += notes
    parts: list[tuple[str, Callable[[Context], None]]] = [
        ("writes", writes),
        ("REST page", rest_page),
        ("SQLite", sqlite_append),
        ("imports", import_cost.imports),
    ]
    for name, part in parts:
        started = time.perf_counter()
        try:
            part(ctx)
        except Exception as error:  # reported as a FAILED row; the run then exits 1
            traceback.print_exc()
            ctx.rows.append(
                Row(f"cost: {name}", "", "", note=f"{type(error).__name__}: {error}", failed=True)
            )
        print(f"  cost {name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    if ctx.gauge.walinspect and ctx.gauge.slot is None:
        ctx.notes.append(
            "no free replication slot: a window's WAL may be recycled before it is read"
        )
    if ctx.gauge.unattributed:
        ctx.notes.append(
            f"{ctx.gauge.unattributed} window(s) fell back to the whole server's WAL "
            "(their records were recycled before they were read)"
        )
    monitor.close()
    return {
        "rows": [row.as_dict() for row in ctx.rows],
        "windows": ctx.windows,
        "notes": ctx.notes,
        "table": render(ctx.rows),
        "failed": any(row.failed for row in ctx.rows),
    }


def render(rows: Sequence[Row]) -> str:
    """The printed table of the cost rows."""
    return format_table(HEADERS, [row.cells() for row in rows])
