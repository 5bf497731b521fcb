"""Real processes for tests: the environment that points a child process (a server, a worker, a
management command) at the test database on this run's own settings (and, on Redis, at a private
channel prefix shared with this process), and a uvicorn process serving the settings'
``ASGI_APPLICATION`` on loopback."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings as django_settings
from django.db import connection
from pytest_django import Settings

from tests.realtime_helpers import layer_settings

ROOT = Path(__file__).resolve().parent.parent


def database_environment(*, pool_max: int = 8, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """Environment for a child process on this run's settings (``tests.settings`` or the demo's)
    using the test database: ``MURMUR_SQLITE_PATH`` or ``DATABASE_URL`` with a pool of at most
    ``pool_max`` connections; no Redis."""
    dropped = ("REDIS_URL", "DATABASE_URL", "MURMUR_SQLITE_PATH", *drop)
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(DJANGO_SETTINGS_MODULE=django_settings.SETTINGS_MODULE, PYTHONWARNINGS="ignore")
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        env["MURMUR_SQLITE_PATH"] = str(db["NAME"])
    else:
        auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
        env["DATABASE_URL"] = f"postgres://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
        env["MURMUR_DB_POOL_MAX"] = str(pool_max)
    return env


def child_environment(
    settings: Settings, *, prefix: str, drop: tuple[str, ...] = (), **extra: str
) -> dict[str, str]:
    """``database_environment()`` plus ``extra``, and on Redis a private channel prefix
    (``prefix`` + random) that this process's channel layer (``settings``) uses too."""
    env = database_environment(drop=drop)
    env.update(extra)
    settings.CHANNEL_LAYERS = layers = layer_settings(prefix)
    config = layers["default"].get("CONFIG", {})
    if "hosts" in config:
        env["REDIS_URL"], env["MURMUR_CHANNEL_PREFIX"] = config["hosts"][0], config["prefix"]
    return env


@contextlib.contextmanager
def uvicorn_server(
    env: dict[str, str], log_path: Path, *, scheme: str, timeout: float
) -> Iterator[str]:
    """``<scheme>://127.0.0.1:<port>`` of a uvicorn process serving ``ASGI_APPLICATION`` on a
    socket bound here (clients may connect at once: the kernel queues them until the server
    accepts), stopped at the end, also on failure; its log is printed then (pytest shows it only
    for a failed test)."""
    module, _, name = django_settings.ASGI_APPLICATION.rpartition(".")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        f"{module}:{name}",
        "--fd",
        str(sock.fileno()),
        "--lifespan",
        "off",
        "--log-level",
        "warning",
    ]
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            pass_fds=[sock.fileno()],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    sock.close()
    try:
        yield f"{scheme}://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)
        print(log_path.read_text())
