"""The benchmark's raw writers against the real schema, and the database defaults they rely on.

``python -m bench`` seeds and measures with hand-written SQL (``bench/floors.py``,
``bench/admin_scale.py``, ``bench/import_worker.py``, ``bench/workload.py``,
``bench/search_row.py``). Such SQL names only the columns it knows of; a column added later is
filled by the database default that every NOT NULL column with a constant default carries
(``db_default``, docs/write-path.md "Writers outside the ORM"). These tests run each raw writer at
a tiny size on the test database and read the rows back through the ORM, so a new column without a
database default fails here rather than in the benchmark.
"""

from __future__ import annotations

import json
import sys
import types
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.models import NOT_PROVIDED, Field
from django.db.models.expressions import Value
from django.db.models.functions import Now

from bench import admin_scale, floors, import_worker, search_row, workload
from murmur_conversations import services
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    SourceRecord,
    ToolCall,
)
from murmur_conversations.search import parse_query, search_hits

_CONSTANT_CALLABLES: dict[Any, Any] = {dict: {}, list: [], str: ""}


def _expected_db_default(field: Field[Any, Any]) -> Any:
    """What ``field.db_default`` must be given its Python ``default``; ``NOT_PROVIDED`` when the
    default is computed per row (ids) and the database cannot mirror it portably."""
    default = field.default
    if default in _CONSTANT_CALLABLES:
        return _CONSTANT_CALLABLES[default]
    if callable(default):
        if getattr(default, "__name__", "") == "now":
            return Now()
        return NOT_PROVIDED
    return default


def _app_fields() -> Iterator[tuple[str, Field[Any, Any]]]:
    for model in apps.get_app_config("murmur_conversations").get_models():
        for field in model._meta.concrete_fields:
            yield f"{model.__name__}.{field.name}", field


def test_every_not_null_default_is_also_a_database_default() -> None:
    missing = []
    for name, field in _app_fields():
        if field.null or not field.has_default():
            continue
        expected = _expected_db_default(field)
        if expected is NOT_PROVIDED:
            continue
        actual = field.db_default
        if isinstance(expected, Now):
            ok = isinstance(actual, Now)
        else:
            value = actual.value if isinstance(actual, Value) else actual
            ok = actual is not NOT_PROVIDED and value == expected
        if not ok:
            missing.append(f"{name}: default={field.default!r} db_default={actual!r}")
    assert missing == [], "NOT NULL columns whose default the database does not know:\n" + (
        "\n".join(missing)
    )


def test_no_nullable_column_has_a_database_default() -> None:
    # A nullable column's default is NULL in SQL too; a db_default there would hide a writer's
    # forgotten value behind a guess.
    assert [name for name, field in _app_fields() if field.null and field.has_db_default()] == []


@pytest.mark.django_db
def test_a_raw_insert_naming_only_the_key_gives_a_whole_conversation() -> None:
    pk = uuid.uuid4()
    table = Conversation._meta.db_table
    value = pk if connection.vendor == "postgresql" else pk.hex
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} (id) VALUES (%s)", [value])
    conversation = Conversation.objects.get(pk=pk)
    assert (conversation.title, conversation.metadata, conversation.tags) == ("", {}, [])
    assert (conversation.status, conversation.pending_ask_event_seq, conversation.archived) == (
        "idle",
        0,
        False,
    )
    assert conversation.created_at is not None and conversation.saved_at is not None


def _insert_bare_conversation() -> uuid.UUID:
    pk = uuid.uuid4()
    value = pk if connection.vendor == "postgresql" else pk.hex
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {Conversation._meta.db_table} (id) VALUES (%s)", [value])
    return pk


@pytest.mark.django_db(transaction=True)
def test_the_defaults_migration_goes_both_ways_and_keeps_the_rows(user: User) -> None:
    kept = services.start_conversation(owner=user, title="kept across the rebuilds")
    services.save_message(conversation=kept, message={"role": "user", "content": "findable"})
    try:
        call_command("migrate", "murmur_conversations", "0007_share", verbosity=0)
        with pytest.raises(IntegrityError):
            _insert_bare_conversation()
    finally:
        call_command("migrate", "murmur_conversations", verbosity=0)
    assert Conversation.objects.filter(pk=_insert_bare_conversation()).exists()
    kept.refresh_from_db()
    assert (kept.title, kept.record_length) == ("kept across the rebuilds", 1)
    hits, _ = search_hits(Conversation.objects.filter(owner=user), parse_query("findable"))
    assert [hit.conversation_id for hit in hits] == [kept.pk]


def _check_counters(conversation_id: uuid.UUID) -> Conversation:
    conversation = Conversation.objects.get(pk=conversation_id)
    records = Message.objects.filter(conversation=conversation).count()
    displays = DisplayMessage.objects.filter(conversation=conversation).count()
    assert conversation.record_length == records
    assert conversation.last_seq == displays
    return conversation


@pytest.mark.django_db(transaction=True)
def test_the_workload_and_search_fills(user: User) -> None:
    conversation = services.start_conversation(owner=user, title="fill")
    workload.fill_display_rows("default", conversation.pk, 5)
    assert DisplayMessage.objects.filter(conversation=conversation).count() == 5
    ids = search_row.fill("default", user.pk, 4)
    assert DisplayMessage.objects.filter(conversation_id__in=ids).count() == 4


@pytest.mark.django_db(transaction=True)
def test_the_sqlite_floor_writes_whole_rows(user: User) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite floor runs on the SQLite profile (without DATABASE_URL)")
    conversation = services.start_conversation(owner=user, title="floor")
    raw = floors.sqlite_connect(str(connection.settings_dict["NAME"]))
    try:
        append = floors.sqlite_append_batch(raw, conversation.pk)
        append(["one"])
        append(["two", "three"])
        page = floors.sqlite_page_keyset(raw, conversation.pk, 10)(10**9)
    finally:
        raw.close()
    assert [row["content"]["text"] for row in page] == ["three", "two", "one"]
    _check_counters(conversation.pk)


def _pg_url() -> str:
    settings = connection.settings_dict
    return (
        f"postgres://{settings['USER'] or 'postgres'}:{settings['PASSWORD'] or ''}@"
        f"{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}/{settings['NAME']}"
    )


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_postgres_floors_write_whole_rows(user: User) -> None:
    import psycopg

    from bench.django_setup import pg_params

    conversation = services.start_conversation(owner=user, title="floor")
    with psycopg.connect(**pg_params(_pg_url()), autocommit=True) as raw:
        floors.pg_append_one(raw, conversation.pk)("one")
        floors.pg_append_batch_executemany(raw, conversation.pk)(["two", "three"])
        floors.pg_append_batch_copy(raw, conversation.pk)(["four", "five"])
        page = floors.pg_page_keyset(raw, conversation.pk, 10)(10**9)
    assert [row["content"]["text"] for row in page] == ["five", "four", "three", "two", "one"]
    _check_counters(conversation.pk)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_admin_scale_seed_writes_whole_rows(user: User) -> None:
    with connection.cursor() as cursor:
        admin_scale.seed(cursor, 3, 4, user.pk)
    assert Conversation.objects.count() == 3
    for conversation in Conversation.objects.all():
        assert conversation.pending_ask_event_seq == 0 and conversation.tags == []
        assert Message.objects.filter(conversation=conversation).count() == 4
        assert DisplayMessage.objects.filter(conversation=conversation).count() == 2
        assert ToolCall.objects.filter(conversation=conversation).count() == 1


@pytest.fixture
def orjson_or_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """orjson is a benchmark peer (bench/requirements.txt), not a test dependency: without it the
    import floor parses with the standard library, which leaves its SQL the same."""
    try:
        import orjson  # noqa: F401
    except ImportError:
        stand_in = types.ModuleType("orjson")
        stand_in.loads = json.loads  # type: ignore[attr-defined]
        stand_in.dumps = lambda value: json.dumps(value).encode()  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "orjson", stand_in)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("orjson_or_stand_in")
def test_the_import_floor_writes_whole_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "session.jsonl"
    lines = [
        {"type": "user", "message": {"role": "user", "content": "hello"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text"}]}},
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines) + "\n")
    monkeypatch.setenv("BENCH_DATABASE_URL", _pg_url())
    import_worker.orjson_copy([str(log)], None)
    conversation = Conversation.objects.get(source="floor")
    assert conversation.record_length == 2 and conversation.pending_ask_event_seq == 0
    assert Message.objects.filter(conversation=conversation).count() == 2
    assert SourceRecord.objects.filter(conversation=conversation).count() == 2
