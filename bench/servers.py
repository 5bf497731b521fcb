"""Bench server processes: uvicorn on loopback, pinned to a core, started and stopped by pid.

Every wait is bounded; a server that does not answer in time is stopped and reported, never waited
for forever.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER_CORE = 0
CLIENT_CORE = 1


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinned(command: list[str], core: int) -> list[str]:
    """``command`` under ``taskset -c core`` when there is more than one core and taskset exists."""
    if (os.cpu_count() or 1) > 1 and shutil.which("taskset"):
        return ["taskset", "-c", str(core), *command]
    return command


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Return once something accepts on ``port``; RuntimeError if the process died or time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.1)
    raise RuntimeError(f"server did not listen on {port} within {timeout:.0f} s")


@contextlib.contextmanager
def uvicorn(env: dict[str, str], *, label: str = "server") -> Iterator[int]:
    """Run ``uvicorn bench.asgi:application`` (one process, core ``SERVER_CORE``) with ``env`` on
    top of this environment; yields its port and stops it (SIGTERM, then SIGKILL) afterwards."""
    port = free_port()
    command = pinned(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "bench.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-access-log",
            "--log-level",
            "warning",
            "--ws-max-queue",
            "1024",
        ],
        SERVER_CORE,
    )
    # The server's output goes to a log file (shutdown noise of 1,000 sockets would drown the
    # table); its tail is shown if the server fails to start.
    log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed in the finally below)
        prefix=f"murmur-bench-{label}-", suffix=".log", delete=False
    )
    process = subprocess.Popen(
        command, cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        try:
            wait_for_port(port, process)
        except RuntimeError as error:
            log.flush()
            tail = Path(log.name).read_text(errors="replace")[-1500:]
            raise RuntimeError(f"{error}; server log:\n{tail}") from None
        yield port
    finally:
        stop(process)
        log.close()
        Path(log.name).unlink(missing_ok=True)


def stop(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM ``process`` (by its own pid), SIGKILL after ``timeout`` seconds."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout)


@contextlib.contextmanager
def client_core() -> Iterator[None]:
    """Run this process on ``CLIENT_CORE`` (the load side) for the block, then as before."""
    if (os.cpu_count() or 1) < 2 or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {CLIENT_CORE})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
