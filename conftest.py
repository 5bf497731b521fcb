"""What both test sessions share (the library's ``tests/`` on ``tests.settings``, the demo's
``project/tests/`` on ``project.tests.settings``; ``python3 dev.py test`` runs both): the
service-dependent skip rules and the user and conversation fixtures.

Tests marked ``postgres``, ``redis`` or ``browser`` skip with a reason unless ``DATABASE_URL``,
``REDIS_URL`` or ``CHROMIUM_PATH`` is set. Tests marked ``corpus`` (every test that asks for the
``corpus`` fixture is marked) read the real-log corpus, which is not part of the repository: they
skip with a reason unless ``MURMUR_CORPUS`` names its folder. With ``MURMUR_REQUIRE_SERVICES=1`` (set by ``.ci/run``) a skip of
such a test whose variable *is* set fails the run.
"""

from __future__ import annotations

import inspect
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from django.contrib.auth.models import User
from django.db import connection, connections

from murmur_conversations import services
from murmur_conversations.models import Conversation
from tests.helpers import MakeConversation, MakeUser, corpus_path, corpus_skip_reason

SERVICE_MARKERS = {
    "postgres": "DATABASE_URL",
    "redis": "REDIS_URL",
    "browser": "CHROMIUM_PATH",
    "corpus": "MURMUR_CORPUS",
}
_bad_skips: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "corpus" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.corpus)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("corpus") and corpus_path() is None:
        pytest.skip(corpus_skip_reason())
    for marker, variable in SERVICE_MARKERS.items():
        if marker == "corpus":
            continue
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


@pytest.fixture(autouse=True)
def _release_the_worker_thread_connection(request: pytest.FixtureRequest) -> Iterator[None]:
    """Async tests reach the ORM in asgiref's thread-sensitive worker thread (the services'
    ``a``-prefixed twins, ``sync_to_async``), where no request ever ends: its connection would
    stay checked out of the pool, and PostgreSQL refuses to drop a test database in use. Close it
    after each async test."""
    yield
    if inspect.iscoroutinefunction(request.function):
        SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's test databases, and before they are dropped: on PostgreSQL, the sessions
    other threads of this process still hold on them are ended (a frame-log poller's or an access
    check's worker thread keeps its own connection; ``DROP DATABASE`` refuses a database in use,
    which failed the run's teardown whenever a realtime test ran last)."""
    yield
    with django_db_blocker.unblock():
        for alias in connections:
            db = connections[alias]
            if db.vendor != "postgresql":
                continue
            with db.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            db.close()


_counter = itertools.count(1)


@pytest.fixture
def make_user(django_user_model: type[User]) -> MakeUser:
    """Factory: ``make_user(username=None, **fields)`` creates a user with password 'pw'."""

    def make(username: str | None = None, **fields: Any) -> User:
        name = username or f"user{next(_counter)}"
        return django_user_model.objects.create_user(username=name, password="pw", **fields)

    return make


@pytest.fixture
def user(make_user: MakeUser) -> User:
    return make_user()


@pytest.fixture
def make_conversation(user: User) -> MakeConversation:
    """Factory: ``make_conversation(owner=user, **kwargs)`` through ``start_conversation``."""

    def make(owner: User | None = user, **kwargs: Any) -> Conversation:
        return services.start_conversation(owner=owner, **kwargs)

    return make


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The real-log corpus folder (see ``corpus_path``); a test asking for it is marked ``corpus``
    and skips with a reason naming ``MURMUR_CORPUS`` when the corpus is absent."""
    path = corpus_path()
    if path is None:
        pytest.skip(corpus_skip_reason())
    return path


@pytest.fixture
def conversation(make_conversation: MakeConversation) -> Conversation:
    return make_conversation(title="Test conversation")
