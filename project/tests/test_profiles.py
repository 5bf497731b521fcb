"""The two profiles of docs/deployment.md are what they claim to be."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection


def test_sqlite_profile_uses_wal_and_immediate_transactions(db):
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite profile runs without DATABASE_URL")
    options = settings.DATABASES["default"]["OPTIONS"]
    assert options["transaction_mode"] == "IMMEDIATE"
    assert options["timeout"] >= 5
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"
    assert settings.DATABASES["default"]["TEST"]["NAME"].endswith(".sqlite3")


@pytest.mark.postgres
def test_postgres_profile_uses_psycopg3_pool(db):
    import psycopg

    assert connection.vendor == "postgresql"
    assert psycopg.__version__.startswith("3")
    pool = settings.DATABASES["default"]["OPTIONS"]["pool"]
    assert pool["max_size"] >= 55
    assert settings.DATABASES["default"]["CONN_MAX_AGE"] == 0


@pytest.mark.redis
def test_redis_profile_uses_channels_redis_pubsub():
    assert (
        settings.CHANNEL_LAYERS["default"]["BACKEND"]
        == "channels_redis.pubsub.RedisPubSubChannelLayer"
    )
