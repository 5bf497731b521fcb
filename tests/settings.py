"""Settings of the library's test suite: the apps murmur_conversations needs and nothing of the
demo project (whose tests run on ``project.settings``, under ``project/tests/``).

Two profiles, as in docs/deployment.md. By default SQLite, in one file for the whole run (tests
that open several connections or start server processes see the same data), with immediate
transactions and WAL, and the app's process-local channel layer. ``DATABASE_URL``
(``postgres://user:password@host:port/name``) selects PostgreSQL through psycopg 3 with Django's
connection pool; ``REDIS_URL`` selects channels_redis pub/sub.

``MURMUR_TEST_DB_SUFFIX`` names the test database (``test-db<suffix>.sqlite3``,
``test_murmur<suffix>``) and ``MURMUR_CHANNEL_PREFIX`` the Redis prefix, so several runs share a
machine without sharing data. A server process started by a test (``tests/servers.py``) runs on
these settings too and is pointed at the test database by ``MURMUR_SQLITE_PATH`` or
``DATABASE_URL``, its pool sized by ``MURMUR_DB_POOL_MAX``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent
_SUFFIX = os.environ.get("MURMUR_TEST_DB_SUFFIX", "")

SECRET_KEY = "murmur-conversations-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "testserver"]
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "rest_framework.authtoken",
    # The API's OpenAPI schema (docs/api.md) is checked against its responses.
    "drf_spectacular",
    "murmur_conversations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # An outage answers 503 + Retry-After, never 500 (docs/deployment.md "Outages").
    "murmur_conversations.middleware.OutageMiddleware",
]

ROOT_URLCONF = "tests.urls"
ASGI_APPLICATION = "tests.asgi.application"
STATIC_URL = "static/"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def postgres_database(url: str) -> dict[str, Any]:
    """The ``default`` database for ``postgres://user:password@host:port/name``: psycopg 3 with
    Django's pool (persistent connections stay off under ASGI, docs/deployment.md)."""
    parts = urlsplit(url)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        "CONN_MAX_AGE": 0,
        "OPTIONS": {
            "pool": {
                "min_size": 1,
                # Far above the server's max_connections on purpose: each async test's event
                # loop is closed at its end, and a connection a worker thread of that loop's
                # executor held (an access check runs there) is never handed back, so the pool
                # counts it out for ever (it holds no server connection); a 60 let an order
                # with ~60 websocket tests before a threaded one time out (PoolTimeout).
                "max_size": int(os.environ.get("MURMUR_DB_POOL_MAX", "1000")),
                "timeout": 10,
            }
        },
        "TEST": {"NAME": f"test_murmur{_SUFFIX}"},
    }


def sqlite_database() -> dict[str, Any]:
    """The ``default`` database on SQLite: immediate transactions, WAL; outside a test run (a
    server process, ``makemigrations --check``) the file ``MURMUR_SQLITE_PATH``, else memory."""
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("MURMUR_SQLITE_PATH", ":memory:"),
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
        "TEST": {"NAME": str(BASE_DIR / f"test-db{_SUFFIX}.sqlite3")},
    }


_DATABASE_URL = os.environ.get("DATABASE_URL")
DATABASES = {"default": postgres_database(_DATABASE_URL) if _DATABASE_URL else sqlite_database()}

_REDIS_URL = os.environ.get("REDIS_URL")
CHANNEL_LAYERS: dict[str, Any] = {
    "default": (
        {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {
                "hosts": [_REDIS_URL],
                "prefix": os.environ.get("MURMUR_CHANNEL_PREFIX", "murmur-tests"),
            },
        }
        if _REDIS_URL
        else {
            "BACKEND": "murmur_conversations.realtime.layers.ProcessLocalChannelLayer",
            "CONFIG": {"capacity": 1000},
        }
    )
}


def test_caches() -> dict[str, Any]:
    """``CACHES``: websocket tickets are issued by the test process and redeemed by server
    processes it starts, so the cache must be shared (docs/deployment.md "Tickets"): Redis when
    ``REDIS_URL`` is set (keys under a prefix of the run's suffix), else files in a folder of the
    run."""
    if _REDIS_URL:
        return {
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": _REDIS_URL,
                # Not the channel prefix: server processes get a private one per test.
                "KEY_PREFIX": f"murmur-test-cache{_SUFFIX}",
            }
        }
    return {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": os.path.join(tempfile.gettempdir(), f"murmur-test-cache{_SUFFIX}"),
            "OPTIONS": {"MAX_ENTRIES": 100_000},  # Django's 300 would cull tickets (W035)
        }
    }


CACHES = test_caches()

REST_FRAMEWORK = {
    # The app's views take only authentication and throttling from here (docs/api.md).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "SERVE_INCLUDE_SCHEMA": False,
    "ENUM_NAME_OVERRIDES": {
        "ConversationStatusEnum": "murmur_conversations.models.ConversationStatus",
        "ToolStatusEnum": "murmur_conversations.models.ToolStatus",
    },
}

MURMUR_CONVERSATIONS: dict[str, Any] = {}

# Fast hashing: the suite creates many users; security of test passwords is not in question.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}
