"""What a window of work cost: CPU of this process plus its PostgreSQL backends, WAL, round trips.

Wall time is noise on a shared machine; CPU time is not, because time spent waiting for a core is
nobody's CPU. A *window* runs some operations and reads, before and after:

- **client CPU**: ``time.process_time()`` of this process (every thread: the write path, the
  channel layer's hand-off, the driver);
- **backend CPU**: ``utime + stime`` of every PostgreSQL client backend connected to the measured
  database (``pg_stat_activity``, the monitor's own backend left out), read from
  ``/proc/<pid>/stat`` in clock ticks (``os.sysconf("SC_CLK_TCK")``, 10 ms on Linux by default:
  windows must run for seconds to be precise). The server must be local. A backend that ends
  inside the window takes its CPU with it (counted in ``Window.lost_backends``); one that starts
  inside is counted from zero;
- **WAL**: the distance between ``pg_current_wal_flush_lsn()`` before and after (every commit of
  the window is flushed by then), and, when the ``pg_walinspect`` extension is installed in the
  measured database, the bytes of the WAL records in that range that touch the measured database
  (a block of one of its relations) or commit, abort or prepare one of those records'
  transactions: other databases on the same server write WAL too, and only this attributed figure
  leaves them out. A temporary replication slot of the monitor's session keeps each window's WAL
  on the server until it is read; a window whose records were recycled all the same (no free
  slot) has no attributed figure and is counted in ``Meter.unattributed``.

Round trips are counted on the wire: :func:`round_trips` traces a psycopg connection's protocol
(libpq ``PQtrace``) and counts the server's ``ReadyForQuery`` messages, one per completed
exchange, so ``BEGIN``, ``COMMIT``, savepoints and statements run on the raw driver all count.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def parse_stat_cpu(stat: bytes) -> float:
    """CPU seconds (``utime + stime``) from the text of a ``/proc/<pid>/stat`` file. The command
    name (field 2) may hold spaces and parentheses, so fields are counted after its last ``)``.
    Raises ValueError on text that is not a stat line."""
    end = stat.rfind(b")")
    fields = stat[end + 2 :].split()
    if end < 0 or len(fields) < 13:
        raise ValueError("not a /proc/<pid>/stat line")
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def process_cpu_seconds(pid: int) -> float | None:
    """CPU seconds process ``pid`` has used so far (``/proc/<pid>/stat``), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            return parse_stat_cpu(stream.read())
    except (FileNotFoundError, ProcessLookupError):
        return None


@dataclass(frozen=True)
class Window:
    """What one window of ``ops`` operations cost: seconds of CPU, bytes of WAL."""

    ops: int
    client_s: float
    backend_s: float
    wal_bytes: int | None  # attributed to the measured database; None without pg_walinspect
    lsn_bytes: int | None  # the whole server's WAL over the window; None without a database
    lost_backends: int = 0
    backends: dict[int, float] = field(default_factory=dict)  # pid -> CPU seconds in the window

    @property
    def cpu_s(self) -> float:
        """Client plus backend CPU seconds."""
        return self.client_s + self.backend_s

    def per_op(self, metric: str) -> float:
        """``metric`` per operation: ``cpu``, ``client`` and ``backend`` in microseconds, ``wal``
        in bytes (the attributed figure, else the server's). Raises ValueError for others."""
        if metric == "cpu":
            return self.cpu_s * 1e6 / self.ops
        if metric == "client":
            return self.client_s * 1e6 / self.ops
        if metric == "backend":
            return self.backend_s * 1e6 / self.ops
        if metric == "wal":
            wal = self.wal_bytes if self.wal_bytes is not None else self.lsn_bytes
            if wal is None:
                raise ValueError("this window measured no WAL")
            return wal / self.ops
        raise ValueError(f"unknown metric {metric!r}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "ops": self.ops,
            "client_s": self.client_s,
            "backend_s": self.backend_s,
            "wal_bytes": self.wal_bytes,
            "lsn_bytes": self.lsn_bytes,
            "lost_backends": self.lost_backends,
        }


_BACKENDS = """SELECT pid FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()
    AND backend_type IN ('client backend', 'parallel worker')"""


class Meter:
    """Measures windows of work. ``monitor`` is an autocommit psycopg connection to the measured
    PostgreSQL database (None: client CPU only, as for SQLite); it runs no measured work."""

    def __init__(self, monitor: psycopg.Connection[Any] | None) -> None:
        self.monitor = monitor
        self.walinspect = False
        self.database_oid = 0
        if monitor is not None:
            row = monitor.execute(
                "SELECT oid, EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_walinspect') "
                "FROM pg_database WHERE datname = current_database()"
            ).fetchone()
            assert row is not None
            self.database_oid, self.walinspect = int(row[0]), bool(row[1])
        self.slot = self._reserve_wal() if self.walinspect else None
        self.unattributed = 0  # windows whose WAL records could not be read (see ``_wal``)

    def _reserve_wal(self) -> str | None:
        """A temporary physical replication slot of the monitor's session, so that the server
        keeps every WAL segment of a window until it is read (a checkpoint in the window, which
        another database's ``DROP DATABASE`` forces, would otherwise recycle them). None when
        the server has no free slot."""
        assert self.monitor is not None
        name = f"murmur_bench_meter_{self.monitor.info.backend_pid}"
        try:
            self.monitor.execute(
                "SELECT pg_create_physical_replication_slot(%s, true, true)", (name,)
            )
        except psycopg.Error:
            return None
        return name

    def _backend_cpu(self) -> dict[int, float]:
        if self.monitor is None:
            return {}
        pids = [row[0] for row in self.monitor.execute(_BACKENDS).fetchall()]
        cpu = {pid: process_cpu_seconds(pid) for pid in pids}
        return {pid: seconds for pid, seconds in cpu.items() if seconds is not None}

    def _lsn(self) -> str | None:
        if self.monitor is None:
            return None
        row = self.monitor.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        assert row is not None
        return str(row[0])

    def _wal(self, start: str | None, end: str | None) -> tuple[int | None, int | None]:
        if self.monitor is None or start is None or end is None:
            return None, None
        row = self.monitor.execute(
            "SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)::bigint", (end, start)
        ).fetchone()
        assert row is not None
        lsn_bytes = int(row[0])
        if not self.walinspect or lsn_bytes == 0:
            return (0 if self.walinspect else None), lsn_bytes
        mine = rf"rel \d+/{self.database_oid}/"
        try:
            row = self._attributed(start, end, mine)
        except psycopg.Error:  # the window's WAL was recycled before it was read
            self.unattributed += 1
            return None, lsn_bytes
        if self.slot is not None:
            self.monitor.execute(
                "SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (self.slot, end)
            )
        return row, lsn_bytes

    def _attributed(self, start: str, end: str, mine: str) -> int:
        assert self.monitor is not None
        row = self.monitor.execute(
            """WITH r AS (SELECT xid, record_length, resource_manager, block_ref
                FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn)),
            x AS (SELECT DISTINCT xid FROM r WHERE block_ref ~ %(mine)s AND xid <> '0')
            SELECT coalesce(sum(record_length), 0)::bigint FROM r
            WHERE block_ref ~ %(mine)s
                OR (resource_manager = 'Transaction' AND xid IN (SELECT xid FROM x))""",
            {"start": start, "end": end, "mine": mine},
        ).fetchone()
        assert row is not None
        return int(row[0])

    def measure(self, work: Callable[[], object], ops: int) -> Window:
        """Run ``work`` (which does ``ops`` operations) in one window and return its cost."""
        before = self._backend_cpu()
        lsn = self._lsn()
        if self.slot is not None and lsn is not None:  # keep this window's WAL, not older
            self.monitor.execute(  # type: ignore[union-attr]
                "SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (self.slot, lsn)
            )
        client = time.process_time()
        work()
        client = time.process_time() - client
        end_lsn = self._lsn()
        after = self._backend_cpu()
        lost = len(set(before) - set(after))
        spent = {pid: seconds - before.get(pid, 0.0) for pid, seconds in after.items()}
        wal, lsn_bytes = self._wal(lsn, end_lsn)
        return Window(ops, client, sum(spent.values()), wal, lsn_bytes, lost, spent)


def install_walinspect(conn: psycopg.Connection[Any]) -> str | None:
    """Create ``pg_walinspect`` in ``conn``'s database; None if it is there, else why not."""
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
    except psycopg.Error as error:
        if not conn.autocommit:
            conn.rollback()
        return f"pg_walinspect unavailable ({type(error).__name__}): WAL is the whole server's"
    return None


_READY = re.compile(rb"^B\t\d+\tReadyForQuery", re.MULTILINE)


@dataclass
class TripCount:
    """Filled when a :func:`round_trips` block ends."""

    count: int = 0


@contextmanager
def round_trips(conn: psycopg.Connection[Any]) -> Iterator[TripCount]:
    """Count the round trips ``conn`` makes inside the block (libpq protocol trace: one server
    ``ReadyForQuery`` per completed exchange)."""
    counted = TripCount()
    with tempfile.TemporaryFile() as trace:
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield counted
        finally:
            conn.pgconn.untrace()
        trace.seek(0)
        counted.count = len(_READY.findall(trace.read()))
