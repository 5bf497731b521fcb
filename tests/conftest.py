"""Shared fixtures and the service-dependent skip rules.

Tests marked ``postgres``, ``redis`` or ``browser`` skip with a reason unless ``DATABASE_URL``,
``REDIS_URL`` or ``CHROMIUM_PATH`` is set. With ``MURMUR_REQUIRE_SERVICES=1`` (set by ``.ci/run``)
a skip of such a test whose variable *is* set fails the run.
"""

from __future__ import annotations

import itertools
import os

import pytest
from django.db import connection

SERVICE_MARKERS = {"postgres": "DATABASE_URL", "redis": "REDIS_URL", "browser": "CHROMIUM_PATH"}
_bad_skips: list[str] = []


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker, variable in SERVICE_MARKERS.items():
        if item.get_closest_marker(marker) and not os.environ.get(variable):
            pytest.skip(f"needs {marker}: set {variable} to run it")
        if (
            marker == "postgres"
            and item.get_closest_marker(marker)
            and connection.vendor != "postgresql"
        ):
            pytest.skip("needs the PostgreSQL profile (DATABASE_URL=postgres://...)")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and os.environ.get("MURMUR_REQUIRE_SERVICES") == "1":
        keywords = report.keywords
        for marker, variable in SERVICE_MARKERS.items():
            if marker in keywords and os.environ.get(variable):
                _bad_skips.append(f"{report.nodeid} ({marker})")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _bad_skips:
        print("\nThese service tests skipped although their service was configured:")
        for name in _bad_skips:
            print("  ", name)
        session.exitstatus = 1


_counter = itertools.count(1)


@pytest.fixture
def make_user(django_user_model):
    """Factory: ``make_user(username=None, **fields)`` creates a user with password 'pw'."""

    def make(username: str | None = None, **fields):
        name = username or f"user{next(_counter)}"
        return django_user_model.objects.create_user(username=name, password="pw", **fields)

    return make


@pytest.fixture
def user(make_user):
    return make_user()


@pytest.fixture
def make_conversation(user):
    """Factory: ``make_conversation(owner=user, **kwargs)`` through ``start_conversation``."""
    from murmur_conversations import services

    def make(owner=user, **kwargs):
        return services.start_conversation(owner=owner, **kwargs)

    return make


@pytest.fixture
def conversation(make_conversation):
    return make_conversation(title="Test conversation")
