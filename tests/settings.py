"""Settings for the test suite: the demo project's, with test-only tweaks.

SQLite tests use a file database for the whole run (docs/deployment.md), so tests that open
several connections work. ``DATABASE_URL`` and ``REDIS_URL`` select PostgreSQL and Redis.
"""

from __future__ import annotations

import os

from project.settings import *  # noqa: F403
from project.settings import BASE_DIR, DATABASES

# MURMUR_TEST_DB_SUFFIX lets several test runs share a machine without sharing a database.
_suffix = os.environ.get("MURMUR_TEST_DB_SUFFIX", "")
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / f"test-db{_suffix}.sqlite3")}
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_murmur{_suffix}"}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}
