"""Settings of the demo project (``project.settings``).

Embedded default: SQLite (WAL, busy timeout, immediate transactions) and a process-local channel
layer, one ASGI process. ``DATABASE_URL`` switches to PostgreSQL through psycopg 3 with Django's
connection pool; ``REDIS_URL`` switches the channel layer to channels_redis pub/sub.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import django

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "django-insecure-murmur-demo-only-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "") == "1"
#: The loopback hosts, served only when DEBUG is on or the environment names them (``python3 dev.py
#: demo`` does): a production deployment answers its own names only (docs/deployment.md).
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]"]
ALLOWED_HOSTS = [
    host.strip() for host in os.environ.get("DJANGO_ALLOWED_HOSTS", "").split(",") if host.strip()
] + (LOOPBACK_HOSTS if DEBUG else [])
CSRF_TRUSTED_ORIGINS = [
    origin.strip()
    for origin in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",")
    if origin.strip()
]

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
    "drf_spectacular",
    "murmur_conversations",
    "project.demo",
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

# Content-Security-Policy of every page, the demo's and the admin's (docs/demo.md, "Content
# Security Policy"): scripts, styles, fonts and connections (websockets included) from this origin
# only; images also inline (data:) and from https: sites, because the page creates the <img> of a
# remote image only when the reader clicks it (a header cannot change per click).
CSP_DIRECTIVES: dict[str, list[str]] = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:", "https:"],
    "font-src": ["'self'"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'none'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}
if django.VERSION >= (6, 0):
    MIDDLEWARE.append("django.middleware.csp.ContentSecurityPolicyMiddleware")
    SECURE_CSP = CSP_DIRECTIVES
else:  # Django 5.2: the maintained django-csp (the demo extra installs it)
    MIDDLEWARE.append("csp.middleware.CSPMiddleware")
    CONTENT_SECURITY_POLICY = {"DIRECTIVES": CSP_DIRECTIVES}

ROOT_URLCONF = "project.urls"
ASGI_APPLICATION = "project.asgi.application"

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


def database_from_env() -> dict[str, Any]:
    """The ``default`` database: PostgreSQL from ``DATABASE_URL``, else the embedded SQLite file."""
    url = os.environ.get("DATABASE_URL")
    if url:
        import dj_database_url

        # Django's pool replaces persistent connections (CONN_MAX_AGE must stay 0 under ASGI).
        config: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=0))
        config.setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": int(os.environ.get("MURMUR_DB_POOL_MAX", "60")),
            "timeout": 10,
        }
        return config
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("MURMUR_SQLITE_PATH", str(BASE_DIR / "db.sqlite3")),
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }


DATABASES = {"default": database_from_env()}


def channel_layers_from_env() -> dict[str, Any]:
    """channels_redis pub/sub from ``REDIS_URL`` (several processes), else the app's process-local
    layer, which fans out in linear time (one process; consumers then tail the database).
    ``MURMUR_CHANNEL_PREFIX`` sets the Redis key prefix, so deployments (and parallel test runs)
    sharing one Redis never see each other's messages."""
    url = os.environ.get("REDIS_URL")
    if url:
        return {
            "default": {
                "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                "CONFIG": {
                    "hosts": [url],
                    "prefix": os.environ.get("MURMUR_CHANNEL_PREFIX", "murmur-demo"),
                },
            }
        }
    return {
        "default": {
            "BACKEND": "murmur_conversations.realtime.layers.ProcessLocalChannelLayer",
            "CONFIG": {"capacity": 1000},
        }
    }


CHANNEL_LAYERS = channel_layers_from_env()


def caches_from_env() -> dict[str, Any]:
    """Redis from ``REDIS_URL`` (websocket tickets must be shared by every process that issues or
    redeems them, docs/deployment.md "Tickets"), else Django's local-memory cache (one process)."""
    url = os.environ.get("REDIS_URL")
    if url:
        return {
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": url,
                "KEY_PREFIX": os.environ.get("MURMUR_CHANNEL_PREFIX", "murmur-demo"),
            }
        }
    # Django's default of 300 entries would cull websocket tickets (W035).
    return {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "OPTIONS": {"MAX_ENTRIES": 100_000},
        }
    }


CACHES = caches_from_env()

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# collectstatic target for production; the demo's ASGI handler serves static files from the finders.
STATIC_ROOT = os.environ.get("DJANGO_STATIC_ROOT") or None
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

REST_FRAMEWORK = {
    # The app's views take only authentication and throttling from here (docs/api.md).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # The demo serves the API's OpenAPI schema at /api/schema/.
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "murmur_conversations API",
    "DESCRIPTION": "Owner-scoped conversations of AI agents (docs/api.md).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "ENUM_NAME_OVERRIDES": {
        "ConversationStatusEnum": "murmur_conversations.models.ConversationStatus",
        "ToolStatusEnum": "murmur_conversations.models.ToolStatus",
    },
}

# Share links answer with the demo's read-only page (project/demo/views.py, docs/demo.md).
MURMUR_CONVERSATIONS: dict[str, Any] = {"SHARE_URL": "/shared/{token}/"}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Access logs print query strings: secrets in ?q=, ?tag=, ?since= are redacted first.
    "filters": {"redact": {"()": "murmur_conversations.logfilters.RedactQueryStrings"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact"]}},
    "loggers": {
        "murmur_conversations": {"handlers": ["console"], "level": "INFO"},
        **{
            name: {"handlers": ["console"], "level": "INFO", "propagate": False}
            for name in ("uvicorn.access", "django.server", "django.channels.server")
        },
    },
}
