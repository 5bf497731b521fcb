"""A deletion also remembers the conversation's own id (hashed, ``CONVERSATION_ID_SOURCE``): an
import that names a deleted conversation by id (a frontend list's ``metadata.conversationId``,
``--conversation-id``, a murmur export's conversation line) is refused like one of a deleted
source, unless ``--restore-deleted`` (docs/formats.md "Deleted conversations stay deleted")."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.models import User

from murmur_conversations import services
from murmur_conversations.management.commands import import_conversations
from murmur_conversations.models import CONVERSATION_ID_SOURCE, Conversation, DeletedSource
from tests.import_helpers import export, run

pytestmark = pytest.mark.django_db

WOMBAT = {
    "id": "chat-WOMBAT",
    "messages": [
        {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "WOMBATPLANT first"}]},
        {"id": "m2", "role": "assistant", "parts": [{"type": "text", "text": "WOMBATPLANT reply"}]},
    ],
}
SESSION = "6f1c3c1e-8a7b-4c2d-9e0f-1a2b3c4d5e6f"


@pytest.fixture(autouse=True)
def shared_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(import_conversations, "layer_is_process_local", lambda: False)


def _import(user: User, text: str, *args: str) -> tuple[int, str, str]:
    return run("-", "--owner", user.username, *args, stdin=io.BytesIO(text.encode()))


def _claude_code(user: User) -> Conversation:
    lines = [
        {
            "sessionId": SESSION,
            "type": "user",
            "message": {"role": "user", "content": "WOMBATPLANT question"},
            "uuid": "q",
            "timestamp": "2026-01-01T00:00:00Z",
        },
        {
            "sessionId": SESSION,
            "type": "assistant",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "text", "text": "WOMBATPLANT answer"}],
            },
            "uuid": "a",
            "parentUuid": "q",
            "timestamp": "2026-01-01T00:00:01Z",
        },
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    assert _import(user, text, "--format", "claude-code")[0] == 0
    return Conversation.objects.get(owner=user)


def test_a_frontend_posting_a_deleted_conversation_again_is_refused(user: User) -> None:
    assert _import(user, json.dumps(WOMBAT), "--format", "vercel-ui")[0] == 0
    conversation = Conversation.objects.get(owner=user)
    exported = export(conversation, "--format", "vercel-ui")
    assert str(conversation.pk) in exported
    services.delete_conversation(conversation=conversation)
    hashed = DeletedSource.key_of(str(conversation.pk))
    assert DeletedSource.objects.filter(source=CONVERSATION_ID_SOURCE, key_hash=hashed).exists()
    code, _out, err = _import(user, exported, "--format", "vercel-ui")
    assert code == 0
    assert "--restore-deleted" in err
    assert not Conversation.objects.filter(owner=user).exists()
    code, _out, err = _import(user, exported, "--format", "vercel-ui", "--restore-deleted")
    assert (code, err) == (0, "")
    [back] = Conversation.objects.filter(owner=user)
    assert back.title == "WOMBATPLANT first"
    # Restored on purpose: the same list again goes into it, not refused.
    code, _out, err = _import(user, exported, "--format", "vercel-ui")
    assert (code, err) == (0, "")
    assert list(Conversation.objects.filter(owner=user)) == [back]


@pytest.mark.parametrize("fmt", ["vercel-ui", "ag-ui", "murmur"])
def test_an_export_of_a_deleted_claude_code_conversation_is_refused(user: User, fmt: str) -> None:
    conversation = _claude_code(user)
    exported = export(conversation, "--format", fmt)
    services.delete_conversation(conversation=conversation)
    code, _out, err = _import(user, exported, "--format", fmt)
    assert code == 0
    assert err.count("--restore-deleted") == 1, err
    assert not Conversation.objects.filter(owner=user).exists()
    code, _out, err = _import(user, exported, "--format", fmt, "--restore-deleted")
    assert (code, err) == (0, "")
    [back] = Conversation.objects.filter(owner=user)
    code, _out, err = _import(user, exported, "--format", fmt)
    assert "--restore-deleted" not in err
    assert list(Conversation.objects.filter(owner=user)) == [back]


def test_a_conversation_id_naming_a_deleted_conversation_is_refused(user: User) -> None:
    conversation = _claude_code(user)
    services.delete_conversation(conversation=conversation)
    body = json.dumps([{"role": "user", "content": "something else"}])
    code, _out, err = _import(
        user, body, "--format", "openai", "--conversation-id", str(conversation.pk)
    )
    assert code == 0
    assert "--restore-deleted" in err
    assert not Conversation.objects.filter(owner=user).exists()


def test_the_id_of_another_owners_deleted_conversation_is_not_refused(
    user: User, make_user: object
) -> None:
    conversation = _claude_code(user)
    exported = export(conversation, "--format", "vercel-ui")
    services.delete_conversation(conversation=conversation)
    other = make_user()  # type: ignore[operator]
    code, _out, err = _import(other, exported, "--format", "vercel-ui")
    assert (code, err) == (0, "")
    assert Conversation.objects.filter(owner=other).count() == 1
