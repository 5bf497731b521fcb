"""The two profiles of docs/deployment.md, as the demo's settings build them from the
environment, do what they claim: checked through the running connection and channel layer, not
by reading the settings back."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import uuid
from pathlib import Path

import pytest
from channels.layers import get_channel_layer
from django.db import connection, connections

from murmur_conversations import checks


def test_the_demo_settings_pass_the_database_check() -> None:
    assert checks.check_database() == []


@pytest.mark.django_db
def test_sqlite_profile_uses_a_file_wal_and_immediate_transactions() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite profile runs without DATABASE_URL")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone() == ("wal",)
    path = Path(connection.settings_dict["NAME"])
    assert path.is_file()  # one file: other connections and processes see the same data
    # The test runs in a transaction that has written nothing yet. Begun IMMEDIATE, it already
    # holds the write lock, so a writer on another connection is refused at once; a deferred
    # transaction would not have taken it yet.
    other = sqlite3.connect(path, timeout=0)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
        assert other.execute("SELECT count(*) FROM django_migrations").fetchone()[0] > 0
    finally:
        other.close()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgres_profile_uses_psycopg3_through_djangos_pool() -> None:
    import psycopg
    import psycopg_pool
    from django.db.backends.postgresql.base import DatabaseWrapper

    wrapper = connections["default"]
    assert isinstance(wrapper, DatabaseWrapper)
    wrapper.ensure_connection()
    assert isinstance(wrapper.connection, psycopg.Connection)
    pool = wrapper.pool
    assert isinstance(pool, psycopg_pool.ConnectionPool)
    assert pool.max_size == int(os.environ.get("MURMUR_DB_POOL_MAX", "60"))
    requests = pool.get_stats().get("requests_num", 0)
    wrapper.close()  # not persistent: the connection goes back to the pool
    wrapper.ensure_connection()
    assert pool.get_stats()["requests_num"] == requests + 1  # and the next one comes from it


@pytest.mark.redis
async def test_redis_profile_carries_group_messages_over_redis_pubsub() -> None:
    from channels_redis.pubsub import RedisPubSubChannelLayer

    layer = get_channel_layer()
    assert isinstance(layer, RedisPubSubChannelLayer)
    group = f"profile-{uuid.uuid4().hex}"
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    try:
        await layer.group_send(group, {"type": "profile.check", "n": 1})
        assert await asyncio.wait_for(layer.receive(channel), 5) == {
            "type": "profile.check",
            "n": 1,
        }
    finally:
        await layer.group_discard(group, channel)
        await layer.flush()


@pytest.mark.parametrize(
    ("environment", "hosts"),
    [
        ({}, []),
        ({"DJANGO_DEBUG": "1"}, ["127.0.0.1", "localhost", "[::1]"]),
        ({"DJANGO_ALLOWED_HOSTS": "chat.example.com"}, ["chat.example.com"]),
        ({"DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost"}, ["127.0.0.1", "localhost"]),
    ],
)
def test_loopback_hosts_only_with_debug_or_the_environment(
    environment: dict[str, str], hosts: list[str]
) -> None:
    """The demo settings serve the loopback hosts only when DEBUG is on or the environment names
    them (``python3 dev.py demo`` names 127.0.0.1 and localhost), never ``testserver``: a
    production deployment answers its own names only (docs/deployment.md)."""
    import subprocess
    import sys

    code = "import project.settings as s; print(','.join(s.ALLOWED_HOSTS))"
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DJANGO_DEBUG", "DJANGO_ALLOWED_HOSTS")
    }
    env.update(environment)
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert [host for host in out.split(",") if host] == hosts
