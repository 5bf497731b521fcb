"""A deleted conversation stays deleted (docs/formats.md "Deleted conversations stay deleted"):
its deletion is remembered by source identity (owner, format, key), not by path, without its
content, and every way back in (stdin, a copy, a folder, ``--follow``) is refused with a message
naming ``--restore-deleted``, which brings it back on purpose. Bare message lists are exempt."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest
from django.contrib.auth.models import User

from murmur_conversations import services
from murmur_conversations.importers import registry
from murmur_conversations.management.commands import import_conversations
from murmur_conversations.models import (
    CONTENT_KEYED_SOURCES,
    CONVERSATION_ID_SOURCE,
    DeletedSource,
    ImportedSource,
    Message,
)
from tests.agentlog_lines import Claude, write_jsonl
from tests.import_helpers import run

pytestmark = pytest.mark.django_db

SECRET = "plumtree-harvest"


@pytest.fixture(autouse=True)
def shared_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(import_conversations, "layer_is_process_local", lambda: False)


def interrupt() -> NoReturn:
    raise KeyboardInterrupt


def session_log(folder: Path) -> Path:
    c = Claude()
    return write_jsonl(
        folder / f"{c.session}.jsonl",
        [
            c.bookkeeping("ai-title", aiTitle=f"About {SECRET}"),
            c.prompt(f"Tell me about {SECRET}"),
            c.answer("msg_1", "Here it is."),
        ],
    )


def imported_then_deleted(tmp_path: Path, user: User) -> Path:
    log = session_log(tmp_path / "original")
    assert run(log, "--owner", user.username)[0] == 0
    for conversation in user.murmur_conversations.all():
        services.delete_conversation(conversation=conversation)
    assert not user.murmur_conversations.exists()
    return log


def _stdin(log: Path, tmp: Path, user: User) -> tuple[int, str, str]:
    return run("-", "--owner", user.username, stdin=io.BytesIO(log.read_bytes()))


def _copy(log: Path, tmp: Path, user: User) -> tuple[int, str, str]:
    copy = tmp / "elsewhere" / "renamed.jsonl"
    copy.parent.mkdir()
    shutil.copy(log, copy)
    return run(copy, "--owner", user.username)


def _folder(log: Path, tmp: Path, user: User) -> tuple[int, str, str]:
    folder = tmp / "backup" / "deep"
    folder.mkdir(parents=True)
    shutil.copy(log, folder / log.name)
    return run(tmp / "backup", "--owner", user.username)


def _same_path(log: Path, tmp: Path, user: User) -> tuple[int, str, str]:
    return run(log, "--owner", user.username, "--reread")


def _follow_file(log: Path, tmp: Path, user: User) -> tuple[int, str, str]:
    return run(log, "--owner", user.username, "--follow", follow_wait=interrupt)


def _follow_stdin(log: Path, tmp: Path, user: User) -> tuple[int, str, str]:
    return run("-", "--owner", user.username, "--follow", stdin=io.BytesIO(log.read_bytes()))


def _follow_folder(log: Path, tmp: Path, user: User) -> tuple[int, str, str]:
    return run(log.parent, "--owner", user.username, "--follow", follow_wait=interrupt)


ROUTES: dict[str, Callable[[Path, Path, User], tuple[int, str, str]]] = {
    "stdin": _stdin,
    "copy": _copy,
    "folder": _folder,
    "same path reread": _same_path,
    "follow file": _follow_file,
    "follow stdin": _follow_stdin,
    "follow folder": _follow_folder,
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_every_way_back_in_is_refused_and_says_how_to_restore(
    route: str, tmp_path: Path, user: User
) -> None:
    log = imported_then_deleted(tmp_path, user)
    code, _out, err = ROUTES[route](log, tmp_path, user)
    assert code == 0, err  # the deletion was meant: not an error of the source
    assert "was deleted" in err and "--restore-deleted" in err
    assert not user.murmur_conversations.exists()
    assert not Message.objects.exists()
    assert not ImportedSource.objects.filter(owner=user).exists()  # no memory of the file


def test_restore_deleted_brings_it_back_on_purpose(tmp_path: Path, user: User) -> None:
    log = imported_then_deleted(tmp_path, user)
    code, _, err = run("-", "--owner", user.username, "--restore-deleted", stdin=io.BytesIO(log.read_bytes()))  # fmt: skip
    assert (code, err) == (0, "")
    [again] = user.murmur_conversations.all()
    assert SECRET in again.title and Message.objects.filter(conversation=again).count() == 2
    # Back, it imports again as usual, and a second deletion is remembered again.
    code, _, err = run(log, "--owner", user.username)
    assert (code, err) == (0, "")
    services.delete_conversation(conversation=again)
    code, _, err = run(log, "--owner", user.username, "--reread")
    assert code == 0 and "--restore-deleted" in err and not user.murmur_conversations.exists()


def test_the_memory_of_a_deletion_keeps_no_content(tmp_path: Path, user: User) -> None:
    imported_then_deleted(tmp_path, user)
    [tombstone] = DeletedSource.objects.filter(owner=user, source="claude-code").values()
    text = json.dumps(list(DeletedSource.objects.filter(owner=user).values()), default=str)
    assert SECRET not in text and Claude().session not in text
    assert tombstone["source"] == "claude-code"
    assert tombstone["key_hash"] == DeletedSource.key_of(Claude().session)


def test_a_deletion_is_per_owner(tmp_path: Path, user: User, django_user_model: type[User]) -> None:
    log = imported_then_deleted(tmp_path, user)
    other = django_user_model.objects.create_user("someone-else")
    code, _, err = run(log, "--owner", other.username)
    assert (code, err) == (0, "")
    assert other.murmur_conversations.count() == 1


def test_subagent_logs_of_a_deleted_session_are_refused_too(tmp_path: Path, user: User) -> None:
    c = Claude()
    session = write_jsonl(
        tmp_path / f"{c.session}.jsonl", [c.prompt("Plan it"), c.answer("msg_1", "Planned.")]
    )
    assert run(session, "--owner", user.username)[0] == 0
    [conversation] = user.murmur_conversations.all()
    services.delete_conversation(conversation=conversation)
    sub = Claude()
    agent = write_jsonl(
        tmp_path / c.session / "subagents" / "agent-a1.jsonl",
        [sub.prompt("Count", isSidechain=True, agentId="a1", sessionId=c.session)],
    )
    code, _, err = run(agent, "--owner", user.username)
    assert code == 0 and "its parent conversation was deleted" in err
    assert not user.murmur_conversations.exists()


def test_a_bare_message_list_has_no_identity_and_is_exempt(tmp_path: Path, user: User) -> None:
    """Its key is made from its messages: remembering it would keep a fingerprint of them."""
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": SECRET}, {"role": "assistant", "content": "ok"}]))  # fmt: skip
    assert run(path, "--owner", user.username)[0] == 0
    [conversation] = user.murmur_conversations.all()
    services.delete_conversation(conversation=conversation)
    # Only its id is remembered (a hash of a random id: nothing of the content).
    [tombstone] = DeletedSource.objects.all()
    assert tombstone.source == CONVERSATION_ID_SOURCE
    assert run(path, "--owner", user.username)[0] == 0
    assert user.murmur_conversations.count() == 1
    assert set(registry.FORMAT_NAMES) >= CONTENT_KEYED_SOURCES
