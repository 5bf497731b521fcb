"""Django settings of the bench: the in-process runner, the uvicorn servers it starts and its
import workers all read them, configured through environment variables set by the runner.

``BENCH_DATABASE_URL`` (PostgreSQL, alias ``default``, and ``pg_noindex``: a second database,
``<name>_noindex``, without the full-text index); ``BENCH_SQLITE_PATH`` adds the SQLite track's
alias ``sqlite`` (and ``sqlite_noindex``, ``<path>.noindex``); ``BENCH_ADMIN_DATABASES`` (``small,large`` database names) adds the
admin row's aliases ``admin_small`` and ``admin_large``; ``BENCH_DB_POOL=1`` gives ``default``
Django's connection pool (servers: ASGI closes unpooled connections after every request);
``BENCH_CHANNEL_LAYER`` is ``local`` (the app's process-local default), ``redis-core`` or
``redis-pubsub`` with ``BENCH_REDIS_URL`` and ``BENCH_REDIS_PREFIX``. Every query goes to the alias
chosen by ``django_setup.use_alias`` (``ActiveDatabaseRouter``).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from bench.django_setup import DEFAULT_URL, pg_params

DEBUG = False
SECRET_KEY = "bench-only-not-a-secret"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "bench.urls"
ASGI_APPLICATION = "bench.asgi.application"
STATIC_URL = "static/"
LOGGING_CONFIG = None
# Websocket tickets are issued by the runner and redeemed by the servers it starts: a cache they
# share (docs/deployment.md "Tickets").
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": os.path.join(tempfile.gettempdir(), f"murmur-bench-cache-{os.getuid()}"),
        # The websocket row issues 1,000 tickets at once: Django's default of 300 entries culled
        # 700 of them (their sockets closed 4401 and counted as lost).
        "OPTIONS": {"MAX_ENTRIES": 1_000_000},
    }
}

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
    "murmur_conversations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # An outage answers 503 + Retry-After, never 500 (docs/deployment.md "Outages").
    "murmur_conversations.middleware.OutageMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

# Every API variant (ours and the stock DRF views) authenticates the same way: a DRF token.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"],
    "DEFAULT_THROTTLE_CLASSES": [],
}
MURMUR_CONVERSATIONS: dict[str, Any] = {}


def _postgres(params: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": params["dbname"],
        "USER": params["user"],
        "PASSWORD": params["password"],
        "HOST": params["host"],
        "PORT": str(params["port"]),
        **extra,
    }


def _databases() -> dict[str, Any]:
    pg = pg_params(os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL))
    default = _postgres(pg)
    if os.environ.get("BENCH_DB_POOL") == "1":
        default["OPTIONS"] = {"pool": {"min_size": 1, "max_size": 8, "timeout": 10}}
    databases = {
        "default": default,
        # The same database with server-side binding (prepared statements): a prototype of a
        # configuration change, measured beside the default.
        "pg_ssb": _postgres(pg, OPTIONS={"server_side_binding": True}, TEST={"MIRROR": "default"}),
    }
    # The same schema without the full-text index (docs/search.md), to measure what keeping it
    # costs the append paths in the same run.
    databases["pg_noindex"] = _postgres({**pg, "dbname": f"{pg['dbname']}_noindex"})
    sqlite_path = os.environ.get("BENCH_SQLITE_PATH")
    if sqlite_path:  # the embedded default of the README
        sqlite = {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": sqlite_path,
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
        databases["sqlite"] = sqlite
        databases["sqlite_noindex"] = {**sqlite, "NAME": f"{sqlite_path}.noindex"}
    admin = os.environ.get("BENCH_ADMIN_DATABASES")
    if admin:
        small, large = admin.split(",")
        databases["admin_small"] = _postgres({**pg, "dbname": small})
        databases["admin_large"] = _postgres({**pg, "dbname": large})
    return databases


def _channel_layers() -> dict[str, Any]:
    kind = os.environ.get("BENCH_CHANNEL_LAYER", "local")
    redis = {
        "hosts": [os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")],
        "prefix": os.environ.get("BENCH_REDIS_PREFIX", "murmur-bench"),
    }
    if kind == "redis-core":
        return {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": redis}}
    if kind == "redis-pubsub":
        return {
            "default": {
                "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                "CONFIG": redis,
            }
        }
    return {
        "default": {
            "BACKEND": "murmur_conversations.realtime.layers.ProcessLocalChannelLayer",
            "CONFIG": {"capacity": 1000},
        }
    }


DATABASES = _databases()
DATABASE_ROUTERS = ["bench.django_setup.ActiveDatabaseRouter"]
CHANNEL_LAYERS = _channel_layers()
