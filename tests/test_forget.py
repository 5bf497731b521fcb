"""Forgetting completely (docs/security.md "What deletion removes"): after a delete or a purge
returns, through any entry point, no table or index of the database holds the conversation's
content (the frame log, the import memory, the search index, Django's admin log included), and
on SQLite neither does the database file nor its write-ahead log."""

from __future__ import annotations

import io
import random
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from murmur_conversations import services
from murmur_conversations.apps import enable_secure_delete
from murmur_conversations.models import (
    CONVERSATION_ID_SOURCE,
    Conversation,
    DeletedSource,
    ImportedSource,
)
from tests.agentlog_lines import Claude, write_jsonl
from tests.helpers import MakeUser
from tests.import_helpers import run

pytestmark = pytest.mark.django_db(transaction=True)

#: Letters no stemmer cuts (no vowels, no trailing s): the word is indexed as planted.
_LETTERS = "bcdfghjklmnpqrtvwxz"


def unique_word() -> str:
    """A word no other test writes: 16 consonants."""
    return "".join(random.choice(_LETTERS) for _ in range(16))


def needle(word: str) -> bytes:
    """What is looked for: the word's last 12 letters (an FTS5 segment stores a term after the
    prefix it shares with the term before it)."""
    return word[-12:].encode()


def plant(owner: User, word: str, tmp_path: Path) -> list[Conversation]:
    """The top-level conversations holding ``word`` through every entry point: the title,
    metadata, a user message, a tool call's arguments and its result, a usage row's model, a
    tag, feedback, a snapshot share, a child conversation, the frame log (on by default) and an
    imported Claude Code log (messages, source records, the import memory's path and title)."""
    conversation = services.start_conversation(
        owner=owner, title=f"plan {word}", metadata={"note": word}
    )
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "user", "content": f"please {word} now"},
            {
                "role": "assistant",
                "content": [{"type": "tool_call", "id": "c1", "name": "sh", "input": {"q": word}}],
                "model": f"model-{word}",
                "usage": {"input_tokens": 3, "output_tokens": 2},
            },
            {"role": "tool", "tool_call_id": "c1", "content": f"found {word}"},
        ],
    )
    services.update_conversation(conversation=conversation, tags=[word])
    row = conversation.display_messages.order_by("seq").first()
    assert row is not None
    services.set_feedback(
        conversation=conversation, display_message=row, user=owner, rating=1, comment=word
    )
    services.create_share(conversation=conversation, created_by=owner)
    child = services.start_conversation(
        owner=owner, title=f"child {word}", parent=conversation, parent_call_id="c1"
    )
    services.save_message(conversation=child, message={"role": "user", "content": word})
    c = Claude()
    log = write_jsonl(
        tmp_path / f"-home-dev-{word}" / f"{c.session}.jsonl",
        [
            c.bookkeeping("ai-title", aiTitle=f"Imported {word}"),
            c.prompt(f"Imported prompt {word}"),
            c.answer("msg_1", f"Imported answer {word}"),
        ],
    )
    assert run(log, "--owner", owner.username)[0] == 0
    assert ImportedSource.objects.filter(owner=owner).exists()
    top = list(Conversation.objects.filter(owner=owner, parent__isnull=True))
    assert len(top) == 2
    return top


def _text(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return str(value).encode("utf-8", "surrogatepass")


def holders(word: str) -> list[str]:
    """Where ``word`` is still found: every model of every installed app (the apps registry),
    every table of the database (introspection: SQLite's FTS tables, PostgreSQL's search
    columns), and on SQLite the database file and its write-ahead log, byte for byte."""
    look = needle(word)
    found: list[str] = []
    for model in apps.get_models():
        for row in model._default_manager.values_list():
            if any(look in _text(value).lower() for value in row):
                found.append(f"model {model._meta.label}")
                break
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            if any(look in _text(value).lower() for row in cursor.fetchall() for value in row):
                found.append(f"table {table}")
    if connection.vendor == "sqlite":
        name = Path(connection.settings_dict["NAME"])
        for path in (name, Path(f"{name}-wal")):
            if path.exists() and look in path.read_bytes():
                found.append(f"file {path.name}")
    return found


def _service(owner: User, top: list[Conversation]) -> None:
    for conversation in top:
        services.delete_conversation(conversation=conversation)


def _rest(owner: User, top: list[Conversation]) -> None:
    client = APIClient()
    client.force_authenticate(owner)
    for conversation in top:
        assert client.delete(f"/api/conversations/{conversation.pk}/").status_code == 204


def _admin(owner: User, top: list[Conversation]) -> None:
    staff = User.objects.create_superuser("forget-staff", password="pw")
    client = Client()
    client.force_login(staff)
    base = "/admin/murmur_conversations/conversation/"
    response = client.post(f"{base}{top[0].pk}/delete/", {"post": "yes"}, follow=True)
    assert response.status_code == 200
    action = {
        "action": "delete_selected",
        "_selected_action": [str(c.pk) for c in top[1:]],
        "post": "yes",
    }
    assert client.post(base, action, follow=True).status_code == 200


def _purge(owner: User, top: list[Conversation]) -> None:
    assert services.purge_conversations(older_than=timedelta(0)) == (3, False)


def _erasure(owner: User, top: list[Conversation]) -> None:
    call_command("purge_conversations", "--owner", owner.username, stdout=io.StringIO())


ROUTES: dict[str, Callable[[User, list[Conversation]], None]] = {
    "service": _service,
    "rest": _rest,
    "admin": _admin,
    "purge": _purge,
    "erasure": _erasure,
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_nothing_of_a_deleted_conversation_is_left_anywhere(
    route: str, make_user: MakeUser, tmp_path: Path
) -> None:
    owner = make_user()
    word = unique_word()
    top = plant(owner, word, tmp_path)
    before = holders(word)
    assert "model murmur_conversations.FrameLogEntry" in before  # the test sees what it plants
    assert "model murmur_conversations.ImportedSource" in before
    ROUTES[route](owner, top)
    assert not Conversation.objects.filter(owner=owner).exists()
    assert holders(word) == []
    # What is left: the source identity of the import and the conversation's id, each a hash;
    # never a path, a title or the id itself.
    tombstones = list(DeletedSource.objects.filter(owner=owner).values_list("source", "key_hash"))
    assert [source for source, _hash in tombstones if source != CONVERSATION_ID_SOURCE] == [
        "claude-code"
    ]
    ids = {hashed for source, hashed in tombstones if source == CONVERSATION_ID_SOURCE}
    assert {DeletedSource.key_of(str(c.pk)) for c in top} <= ids
    assert all(len(hashed) == 64 for _source, hashed in tombstones)
    assert not ImportedSource.objects.filter(owner=owner).exists()


def test_a_deleted_child_leaves_nothing_in_its_parents_frame_log(make_user: MakeUser) -> None:
    owner = make_user()
    word = unique_word()
    parent = services.start_conversation(owner=owner, title="parent")
    child = services.start_conversation(owner=owner, title=f"child {word}", parent=parent)
    services.save_message(conversation=child, message={"role": "user", "content": "hi"})
    assert "model murmur_conversations.FrameLogEntry" in holders(word)
    services.delete_conversation(conversation=child)
    assert holders(word) == []
    assert Conversation.objects.get(pk=parent.pk).child_count == 0


def test_every_sqlite_connection_zeroes_what_it_frees() -> None:
    """The app's ``connection_created`` receiver turns ``secure_delete`` on (whatever the SQLite
    library's default: here it is turned off first)."""
    if connection.vendor != "sqlite":
        pytest.skip("secure_delete is SQLite's")
    connection.close()
    with connection.cursor() as cursor:  # a new connection: the receiver ran
        cursor.execute("PRAGMA secure_delete")
        assert cursor.fetchone() == (1,)
        cursor.execute("PRAGMA secure_delete = OFF")
        enable_secure_delete(sender=type(connection), connection=connection)
        cursor.execute("PRAGMA secure_delete")
        assert cursor.fetchone() == (1,)
