"""Private servers for fault tests: a throwaway PostgreSQL cluster and a redis-server, each on a
free loopback port in a temporary folder, that a test can stop, start and restart, and that are
always stopped at the end. Each skips the test with a reason when its binaries are missing or
cannot run here."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

START_TIMEOUT = 30  # seconds a server may take to start or stop; a bound, never a synchronisation


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, *, up: bool) -> None:
    """Wait (bounded) until ``127.0.0.1:port`` accepts connections (``up``) or refuses them."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(1)
            accepting = sock.connect_ex(("127.0.0.1", port)) == 0
        if accepting == up:
            return
        time.sleep(0.05)  # polling a condition, bounded by the deadline
    raise AssertionError(f"port {port} did not come {'up' if up else 'down'}")


def _pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name) or ""]
    return found[-1] or None


@dataclass
class PostgresCluster:
    """A running private cluster: ``url`` (its ``DATABASE_URL``, database ``postgres``)."""

    url: str
    pg_ctl: str
    data: str
    options: str
    log: str
    prefix: list[str]

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [*self.prefix, self.pg_ctl, "-D", self.data, *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=START_TIMEOUT,
        )
        assert done.returncode == 0, done.stderr.decode()[-500:]

    def restart(self) -> None:
        """Restart the server (``-m fast``: every session is ended), waiting until it answers."""
        self._run("-o", self.options, "-l", self.log, "-m", "fast", "-w", "restart")

    def stop(self) -> None:
        self._run("-m", "fast", "-w", "stop")

    def start(self) -> None:
        self._run("-o", self.options, "-l", self.log, "-w", "start")


@contextlib.contextmanager
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A throwaway PostgreSQL cluster on a free loopback port, trust authentication, fsync off;
    stopped and deleted at the end. As root it runs as the ``postgres`` system user (initdb
    refuses root)."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("needs the PostgreSQL server binaries (initdb, pg_ctl)")
    prefix: list[str] = []
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        if not runuser:
            pytest.skip("running as root without runuser: cannot start PostgreSQL")
        try:
            import pwd

            account = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run PostgreSQL")
        prefix = [runuser, "-u", "postgres", "--"]
    base = tempfile.mkdtemp(prefix="murmur-pg-")
    data = os.path.join(base, "data")
    if prefix:
        os.chown(base, account.pw_uid, account.pw_gid)
    port = free_port()
    try:
        made = subprocess.run(
            [*prefix, initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=START_TIMEOUT,
        )
        if made.returncode != 0:
            pytest.skip(f"initdb failed here: {made.stderr.decode()[-300:]}")
        cluster = PostgresCluster(
            url=f"postgres://postgres@127.0.0.1:{port}/postgres",
            pg_ctl=pg_ctl,
            data=data,
            options=f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off",
            log=os.path.join(base, "log"),
            prefix=prefix,
        )
        try:
            cluster.start()
        except AssertionError as error:
            pytest.skip(f"PostgreSQL did not start here: {error}")
        yield cluster
    finally:
        if os.path.exists(os.path.join(data, "postmaster.pid")):
            subprocess.run(
                [*prefix, pg_ctl, "-D", data, "-m", "immediate", "stop"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=START_TIMEOUT,
            )
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class RedisServer:
    """A private redis-server: ``url``; :meth:`stop` kills it (a crash, not a clean shutdown),
    :meth:`start` starts it again on the same port (empty: ``--save ""``)."""

    url: str
    port: int
    binary: str
    workdir: str
    running: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self) -> None:
        self.running.append(
            subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.workdir],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )  # fmt: skip
        wait_for_port(self.port, up=True)

    def stop(self) -> None:
        process = self.running.pop()
        process.send_signal(signal.SIGKILL)
        process.wait(START_TIMEOUT)
        wait_for_port(self.port, up=False)


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    """A redis-server on a free loopback port, started; killed at the end."""
    binary = shutil.which("redis-server")
    if not binary:
        pytest.skip("needs redis-server on PATH")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="murmur-redis-")
    server = RedisServer(
        url=f"redis://127.0.0.1:{port}/0", port=port, binary=binary, workdir=workdir
    )
    try:
        server.start()
        yield server
    finally:
        for process in server.running:
            process.kill()
            process.wait(START_TIMEOUT)
        shutil.rmtree(workdir, ignore_errors=True)
