"""The cost meter of the benchmark (bench.meter, bench.cost, bench.lean, bench.import_cost):
that it measures what it says, on a real PostgreSQL server. No timing is asserted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection

from bench import cost, import_cost, lean, meter
from bench.django_setup import pg_params
from bench.meter import Meter, Window
from bench.stats import Target
from murmur_conversations import services


def _params() -> dict[str, Any]:
    settings = connection.settings_dict
    return pg_params(
        f"postgres://{settings['USER'] or 'postgres'}:{settings['PASSWORD'] or ''}@"
        f"{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}/{settings['NAME']}"
    )


def test_stat_lines_give_utime_plus_stime_after_the_command_name() -> None:
    fields = " ".join(["S"] + ["0"] * 10 + ["250", "50"] + ["0"] * 30)
    line = f"4242 (post gres) (x)) {fields}".encode()
    assert meter.parse_stat_cpu(line) == 300 / meter.CLOCK_TICKS
    with pytest.raises(ValueError, match="not a /proc"):
        meter.parse_stat_cpu(b"garbage")
    assert meter.process_cpu_seconds(2**22 + 12345) is None  # no such process


def test_windows_rotate_and_ratios_pair_rounds() -> None:
    order: list[str] = []

    starts: list[str] = []

    def side(name: str) -> cost.Side:
        def start() -> Any:
            starts.append(name)
            return lambda: order.append(name)

        return cost.Side(name, start, 2)

    sides = [side("a"), side("b")]
    windows = cost.interleave(Meter(None), sides, rounds=2, warmup=1)
    assert order == ["a", "a", "b", "b", "b", "b", "a", "a", "a", "a", "b", "b"]
    assert starts == ["a", "b", "b", "a", "a", "b"]  # once before each window
    assert [len(windows["a"]), len(windows["b"])] == [2, 2]
    assert windows["a"][0].wal_bytes is None and windows["a"][0].ops == 2

    def window(cpu: float) -> Window:
        return Window(ops=10, client_s=cpu, backend_s=0.0, wal_bytes=None, lsn_bytes=None)

    row = cost.ratio_row(
        "x", [window(3), window(5)], [window(1), window(1)], "cpu", Target("<=", 4)
    )
    assert (row.ratio, row.low, row.high, row.verdict) == (4, 3, 5, "meets")
    assert cost.ratio_row("x", [window(9)], [window(1)], "cpu", Target("<=", 4)).verdict == "MISSES"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_backend_cpu_of_an_expensive_statement_is_attributed_to_its_backend() -> None:
    params = _params()
    with (
        psycopg.connect(**params, autocommit=True) as monitor,
        psycopg.connect(**params, autocommit=True) as busy,
        psycopg.connect(**params, autocommit=True) as idle,
    ):
        busy_pid, idle_pid = busy.info.backend_pid, idle.info.backend_pid
        window = Meter(monitor).measure(
            lambda: busy.execute("SELECT count(*) FROM generate_series(1, 4000000)"), 1
        )
        assert window.backends[busy_pid] > 0
        assert window.backends.get(idle_pid, 0.0) < window.backends[busy_pid]
        assert window.backend_s >= window.backends[busy_pid]
        assert monitor.info.backend_pid not in window.backends
        assert window.per_op("cpu") == pytest.approx((window.client_s + window.backend_s) * 1e6)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_wal_of_an_insert_is_measured_and_attributed_to_the_database() -> None:
    with psycopg.connect(**_params(), autocommit=True) as conn:
        conn.execute("CREATE TABLE bench_meter_wal (body text)")
        try:
            walinspect_missing = meter.install_walinspect(conn)
            gauge = Meter(conn)
            window = gauge.measure(
                lambda: conn.execute(
                    "INSERT INTO bench_meter_wal SELECT repeat(md5(g::text), 32) "
                    "FROM generate_series(1, 200) AS g"
                ),
                1,
            )
        finally:
            conn.execute("DROP TABLE bench_meter_wal")
    assert window.lsn_bytes is not None and window.lsn_bytes > 200 * 1024
    if walinspect_missing is None:
        assert gauge.walinspect and gauge.slot is not None and gauge.unattributed == 0
        assert window.wal_bytes is not None
        assert 200 * 1024 < window.wal_bytes <= window.lsn_bytes
        assert window.per_op("wal") == window.wal_bytes


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_round_trips_are_counted_on_the_wire() -> None:
    with psycopg.connect(**_params(), autocommit=True) as conn:
        with meter.round_trips(conn) as alone:
            conn.execute("SELECT 1")
        with meter.round_trips(conn) as wrapped, conn.transaction():
            conn.execute("SELECT 1")
    assert (alone.count, wrapped.count) == (1, 3)  # BEGIN, the statement, COMMIT


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_lean_floor_writes_a_turn_in_one_statement_per_message() -> None:
    with psycopg.connect(**_params(), autocommit=True) as conn:
        try:
            lean.create_tables(conn, trigram=False)
            writer = lean.start(conn, None)
            lean.turn(writer, lambda: "some words")
            with meter.round_trips(conn) as trips:
                writer.text("user", "again")
            counters = conn.execute(
                "SELECT record_length, last_seq, last_event_seq FROM lean.conversation"
            ).fetchone()
            statuses = conn.execute(
                "SELECT content_type, status FROM lean.display ORDER BY seq"
            ).fetchall()
            indexes = conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = 'lean' ORDER BY indexname"
            ).fetchall()
        finally:
            conn.execute("DROP SCHEMA IF EXISTS lean CASCADE")
    assert trips.count == 1
    assert counters == (5, 6, 5)
    assert statuses == [
        ("text", "completed"),
        ("text", "completed"),
        ("tool_call", "completed"),
        ("tool_result", "completed"),
        ("text", "completed"),
        ("text", "completed"),
    ]
    definitions = " ".join(row[0] for row in indexes)
    assert "gin (search)" in definitions and "(owner_id, saved_at DESC, id DESC)" in definitions
    assert len(indexes) == 7  # three primary keys, two unique, the sidebar, the full-text GIN


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_import_floor_copies_exactly_the_rows_ours_wrote(
    tmp_path: Path, django_user_model: Any
) -> None:
    owner = django_user_model.objects.create(username="floor-owner")
    conversation = services.start_conversation(owner=owner, title="rows")
    services.save_message(conversation=conversation.pk, message={"role": "user", "content": "hi"})
    log = tmp_path / "log.jsonl"
    log.write_text('{"a": 1}\n\n{"b": 2}\n')
    with psycopg.connect(**_params(), autocommit=True) as conn:
        tables = import_cost.read_rows(conn, owner)
        try:
            import_cost.create_floor_tables(conn, tables)
            assert import_cost.floor_import(conn, [str(log)], tables) == 2
            copied = {
                table: conn.execute(
                    f'SELECT count(*) FROM {import_cost.FLOOR_SCHEMA}."{table}"'
                ).fetchall()[0][0]
                for table, _columns, _rows in tables
            }
        finally:
            conn.execute(f"DROP SCHEMA IF EXISTS {import_cost.FLOOR_SCHEMA} CASCADE")
    written = {table: len(rows) for table, _columns, rows in tables}
    assert copied == written
    assert written["murmur_conversations_conversation"] == 1
    assert written["murmur_conversations_message"] == 1
    assert written["murmur_conversations_displaymessage"] == 1
