"""Settings of the demo's tests: ``project.settings`` (the environment chooses SQLite or
PostgreSQL, the process-local layer or Redis, as for the demo) with the test database named by
``MURMUR_TEST_DB_SUFFIX``, so several runs share a machine without sharing a database.

Server processes started by these tests run on this module too (``tests/servers.py``).
"""

from __future__ import annotations

import os

from project.settings import *  # noqa: F403
from project.settings import BASE_DIR, DATABASES

_suffix = os.environ.get("MURMUR_TEST_DB_SUFFIX", "")
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory: tests that start a server process share the database with it.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / f"test-db-demo{_suffix}.sqlite3")}
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_murmur_demo{_suffix}"}

# MD5 first keeps the many test users fast; the demo's own hasher still checks stored passwords.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
LOGGING = {"version": 1, "disable_existing_loggers": False}
# The demo's tests reach it on the loopback addresses and as Django's test client.
ALLOWED_HOSTS = [*ALLOWED_HOSTS, "127.0.0.1", "localhost", "[::1]", "testserver"]  # noqa: F405
