"""A deleted conversation's identity is its key as stored (``validation.source_key``), whatever
text the key holds: a hostile key (a lone surrogate, NUL, control characters, bytes that are not
UTF-8) is repaired once, before it is stored, hashed or looked up, so it is refused after a
deletion like any other and never stops an import (docs/formats.md "Deleted conversations stay
deleted")."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_conversations import selectors, services
from murmur_conversations.importers import base
from murmur_conversations.management.commands import import_conversations
from murmur_conversations.models import Conversation, DeletedSource
from murmur_conversations.validation import source_key
from tests.import_helpers import run

pytestmark = pytest.mark.django_db

_USERS = itertools.count()
#: Any code point, surrogates included, and often the ones that need repair.
_HOSTILE = st.one_of(
    st.sampled_from("\x00\ud800\udbff\udc00\udfff\x01\x1f\x7f\n\u2028"),
    st.characters(codec=None, exclude_categories=()),
)


@pytest.fixture(autouse=True)
def shared_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(import_conversations, "layer_is_process_local", lambda: False)


def claude_log(session: str, text: str = "hi") -> bytes:
    """A two-line Claude Code session keyed ``session`` (JSON escapes keep any code point)."""
    lines: list[dict[str, Any]] = [
        {
            "sessionId": session,
            "type": "user",
            "message": {"role": "user", "content": text},
            "uuid": "q",
            "timestamp": "2026-01-01T00:00:00Z",
        },
        {
            "sessionId": session,
            "type": "assistant",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "text", "text": "hello"}],
            },
            "uuid": "a",
            "parentUuid": "q",
            "timestamp": "2026-01-01T00:00:01Z",
        },
    ]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _import(user: User, body: bytes, *args: str) -> tuple[int, str, str]:
    return run("-", "--owner", user.username, *args, stdin=io.BytesIO(body))


def _delete_all(user: User) -> None:
    for conversation in Conversation.objects.filter(owner=user, parent__isnull=True):
        services.delete_conversation(conversation=conversation)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(key=st.text(_HOSTILE, min_size=1, max_size=300))
def test_any_key_deleted_then_imported_again_is_refused(key: str) -> None:
    user = User.objects.create_user(f"keys{next(_USERS)}")
    body = claude_log(key)
    code, _out, err = _import(user, body)
    assert code == 0, err
    [stored] = Conversation.objects.filter(owner=user)
    assert stored.external_id == source_key(key)
    _delete_all(user)
    assert selectors.deleted_source(owner=user, source="claude-code", external_id=key)
    code, _out, err = _import(user, body)
    assert code == 0, err
    assert "--restore-deleted" in err
    assert not Conversation.objects.filter(owner=user).exists()


def test_the_stored_key_is_hashed_for_the_tombstone(user: User) -> None:
    """NUL is stored as U+FFFD: the deletion hashes the stored key, the lookup the same value."""
    assert _import(user, claude_log("a\x00b"))[0] == 0
    _delete_all(user)
    assert DeletedSource.objects.filter(key_hash=DeletedSource.key_of("a\ufffdb")).exists()
    _code, _out, err = _import(user, claude_log("a\x00b"))
    assert "--restore-deleted" in err
    assert not Conversation.objects.filter(owner=user).exists()


def test_a_hostile_key_in_a_folder_stops_no_other_file(tmp_path: Path, user: User) -> None:
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(claude_log("\ud800", "first"))
    (folder / "b.jsonl").write_bytes(claude_log("good-session", "second"))
    code, _out, err = run(folder, "--owner", user.username)
    assert code == 0, err
    assert "Traceback" not in err
    assert Conversation.objects.filter(owner=user).count() == 2
    _delete_all(user)
    code, _out, err = run(folder, "--owner", user.username)
    assert err.count("--restore-deleted") == 2
    assert not Conversation.objects.filter(owner=user).exists()


@pytest.mark.parametrize("fmt", ["vercel-ui", "ag-ui", "openai-items"])
def test_a_hostile_conversation_id_in_a_frontend_body(user: User, fmt: str) -> None:
    metadata = {"conversationId": "\ud800x"}
    if fmt == "vercel-ui":
        body: Any = {
            "messages": [
                {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}], **{}},
            ]
        }
        body["messages"][0]["metadata"] = metadata
    elif fmt == "ag-ui":
        body = {"messages": [{"id": "m1", "role": "user", "content": "hi", "metadata": metadata}]}
    else:
        body = [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "hi"}],
                "metadata": metadata,
            }
        ]
    raw = json.dumps(body).encode()
    code, _out, err = _import(user, raw, "--format", fmt)
    assert code == 0, err
    [stored] = Conversation.objects.filter(owner=user)
    _delete_all(user)
    code, _out, err = _import(user, raw, "--format", fmt)
    assert "--restore-deleted" in err, err
    assert stored.external_id == source_key("\ud800x")


def test_a_conversation_id_that_is_not_utf8(user: User) -> None:
    given_id = b"sess-\xff".decode("utf-8", "surrogateescape")  # as argv decodes such bytes
    code, _out, err = _import(user, claude_log("ignored"), "--conversation-id", given_id)
    assert code == 0, err
    [stored] = Conversation.objects.filter(owner=user)
    assert stored.external_id == "sess-\ufffd"
    _delete_all(user)
    code, _out, err = _import(user, claude_log("ignored"), "--conversation-id", given_id)
    assert "--restore-deleted" in err
    assert not Conversation.objects.filter(owner=user).exists()


def test_follow_says_a_deleted_file_once_and_reads_it_once(
    tmp_path: Path, user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two files of deleted sessions (one with a hostile key) followed over several passes: each
    refusal is said once, and an unchanged refused file is not parsed again."""
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(claude_log("\ud800", "first"))
    (folder / "b.jsonl").write_bytes(claude_log("good-session", "second"))
    assert run(folder, "--owner", user.username)[0] == 0
    _delete_all(user)
    parsed: list[str] = []
    real = base.run_import

    def counting(**kwargs: Any) -> Any:
        parsed.append(kwargs["source"])
        return real(**kwargs)

    monkeypatch.setattr("murmur_conversations.importers.sources.run_import", counting)
    passes = iter(range(4))

    def wait() -> None:
        if next(passes, None) is None:
            raise KeyboardInterrupt

    code, out, err = run(folder, "--owner", user.username, "--follow", follow_wait=wait)
    assert code == 0, err
    assert "Traceback" not in err
    assert err.count("--restore-deleted") == 2, err
    assert out.count("--restore-deleted") == 2, out  # the end table, one row a file
    assert len(parsed) == 2
    assert not Conversation.objects.filter(owner=user).exists()
