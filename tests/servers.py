"""Real server processes for tests: the environment that points a child process at the test
database (and, on Redis, at a private channel prefix shared with this process), and a uvicorn
process serving ``project.asgi:application`` on loopback."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
LOCAL_LAYER = {"BACKEND": "murmur_conversations.realtime.layers.ProcessLocalChannelLayer"}


def child_environment(settings, *, prefix: str, drop: tuple[str, ...] = (), **extra) -> dict:
    """Environment for a child process serving the test database; on Redis a private channel
    prefix (``prefix`` + random) that this process's channel layer (``settings``) uses too."""
    dropped = ("REDIS_URL", "DATABASE_URL", *drop)
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(DJANGO_SETTINGS_MODULE="project.settings", PYTHONWARNINGS="ignore", **extra)
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        env["MURMUR_SQLITE_PATH"] = str(db["NAME"])
    else:
        auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
        env["DATABASE_URL"] = f"postgres://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
        env["MURMUR_DB_POOL_MAX"] = "8"
    redis_url = os.environ.get("REDIS_URL")
    if redis_url:
        channel_prefix = f"{prefix}-{uuid.uuid4().hex}"
        env["REDIS_URL"], env["MURMUR_CHANNEL_PREFIX"] = redis_url, channel_prefix
        settings.CHANNEL_LAYERS = {
            "default": {
                "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                "CONFIG": {"hosts": [redis_url], "prefix": channel_prefix},
            }
        }
    else:
        settings.CHANNEL_LAYERS = {"default": LOCAL_LAYER}
    return env


@contextlib.contextmanager
def uvicorn_server(env: dict, log_path: Path, *, scheme: str, timeout: float) -> Iterator[str]:
    """``<scheme>://127.0.0.1:<port>`` of a uvicorn process on a socket bound here (clients may
    connect at once: the kernel queues them until the server accepts), stopped at the end, also on
    failure; its log is printed then (pytest shows it only for a failed test)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "project.asgi:application",
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
