"""Record reads for plug-ins (docs/hooks.md; murmur ``murmur:conversation/read``)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.core import signing
from django.db import connection
from pytest_django import Settings

from murmur_conversations import hooks, services
from murmur_conversations.hooks import HookReadError, MessagePage, read_messages
from murmur_conversations.models import Conversation

pytestmark = pytest.mark.django_db

GRANTED = {
    "HOOKS": {
        "recall": {"capabilities": {"conversation": {"read": True}}},
        "denied": {"capabilities": {"conversation": {"read": False}}},
        "misplaced": {"conversation": {"read": True}},
    }
}


@pytest.fixture(autouse=True)
def grants(settings: Settings) -> None:
    settings.MURMUR_CONVERSATIONS = GRANTED


def append(conversation: Conversation, count: int, start: int = 0) -> None:
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "user", "content": f"m{i}", "id": f"id{i}"}
            for i in range(start, start + count)
        ],
    )


def ids(page: MessagePage) -> list[str]:
    return [m["id"] for m in page.messages]


def test_newest_first_pages_and_cursor(conversation: Conversation) -> None:
    append(conversation, 5)
    page = read_messages(hook="recall", conversation=conversation, limit=2)
    assert ids(page) == ["id4", "id3"]
    assert page.next_cursor == "mc_3"
    assert page.total == 5
    page = read_messages(hook="recall", conversation=conversation.pk, cursor="mc_3", limit=2)
    assert ids(page) == ["id2", "id1"]
    page = read_messages(
        hook="recall", conversation=str(conversation.pk), cursor=page.next_cursor, limit=2
    )
    assert ids(page) == ["id0"]
    assert page.next_cursor is None


def test_message_shape_and_tool_envelope(conversation: Conversation) -> None:
    services.save_messages(
        conversation=conversation,
        messages=[
            {
                "role": "assistant",
                "id": "a",
                "source_id": "src",
                "content": [{"type": "tool_call", "id": "c", "name": "n", "input": {}}],
            },
            {"role": "tool", "id": "t", "tool_call_id": "c", "content": "out", "is_error": True},
        ],
    )
    page = read_messages(hook="recall", conversation=conversation)
    tool, assistant = page.messages
    # content is JSON text of the stored content (jsonb may order keys its own way)
    assert {k: v for k, v in assistant.items() if k not in ("content", "message")} == {
        "id": "a",
        "role": "assistant",
        "source_id": "src",
    }
    assert assistant["message"] == {
        "role": "assistant",
        "content": [{"type": "tool_call", "id": "c", "name": "n", "input": {}}],
        "id": "a",
        "source_id": "src",
    }
    assert tool["message"] == {
        "role": "tool",
        "content": "out",
        "id": "t",
        "tool_call_id": "c",
        "is_error": True,
    }
    assert json.loads(assistant["content"]) == [
        {"type": "tool_call", "id": "c", "name": "n", "input": {}}
    ]
    assert json.loads(tool["content"]) == {
        "__murmur_tool_msg__": True,
        "tool_call_id": "c",
        "is_error": True,
        "body": "out",
    }
    assert tool["source_id"] is None


def test_walk_while_appending_repeats_and_skips_nothing(conversation: Conversation) -> None:
    append(conversation, 7)
    seen, cursor, totals = [], None, []
    while True:
        page = read_messages(hook="recall", conversation=conversation, cursor=cursor, limit=3)
        seen.extend(ids(page))
        totals.append(page.total)
        append(conversation, 2, start=100 + len(seen))  # the runtime appends meanwhile
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [f"id{i}" for i in range(6, -1, -1)]
    assert totals == [7, 9, 11]


@pytest.mark.parametrize("limit", [0, -5, 1])
def test_small_limits_read_one(conversation: Conversation, limit: int) -> None:
    append(conversation, 3)
    assert len(read_messages(hook="recall", conversation=conversation, limit=limit).messages) == 1


def test_limit_is_clamped_to_100(conversation: Conversation) -> None:
    append(conversation, 120)
    page = read_messages(hook="recall", conversation=conversation, limit=1000)
    assert len(page.messages) == 100
    assert page.next_cursor == "mc_20"


def test_no_record_is_an_empty_page(conversation: Conversation) -> None:
    for target in (conversation, uuid.uuid4(), "not-a-uuid"):
        page = read_messages(hook="recall", conversation=target)
        assert (page.messages, page.next_cursor, page.total) == ([], None, 0)
    assert read_messages(hook="recall", conversation=conversation, cursor="mc_0").messages == []


@pytest.mark.parametrize(
    "cursor", ["7", "mc_", "mc_nine", "cur_1", "mc_4", "mc_-1", " mc_1", "mc_1\n", 3, ""]
)
def test_invalid_cursors(conversation: Conversation, cursor: Any) -> None:
    append(conversation, 3)
    with pytest.raises(HookReadError) as info:
        read_messages(hook="recall", conversation=conversation, cursor=cursor)
    assert info.value.code == "invalid-cursor"


@pytest.mark.parametrize("hook", ["denied", "undeclared", "misplaced", None, 5])
def test_not_granted(conversation: Conversation, hook: Any) -> None:
    append(conversation, 1)
    with pytest.raises(HookReadError) as info:
        read_messages(hook=hook, conversation=conversation)
    assert info.value.code == "not-granted"


def test_removing_a_grant_takes_effect_on_next_read(
    conversation: Conversation, settings: Settings
) -> None:
    append(conversation, 2)
    read_messages(hook="recall", conversation=conversation)
    settings.MURMUR_CONVERSATIONS = {"HOOKS": {}}
    with pytest.raises(HookReadError, match="not-granted"):
        read_messages(hook="recall", conversation=conversation)


@pytest.mark.django_db(transaction=True)
def test_unavailable_when_the_database_cannot_be_read(
    conversation: Conversation, tmp_path: Path
) -> None:
    append(conversation, 1)
    original = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = str(tmp_path)  # a directory cannot be opened
    else:
        connection.settings_dict.update(HOST="127.0.0.1", PORT="1")
        connection.settings_dict["OPTIONS"] = {
            k: v for k, v in original["OPTIONS"].items() if k != "pool"
        }
    try:
        with pytest.raises(HookReadError) as info:
            read_messages(hook="recall", conversation=conversation.pk)
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(original)
    assert info.value.code.startswith("unavailable: ")


def test_tokens_round_trip_and_expire(conversation: Conversation) -> None:
    token = hooks.issue_token(hook="recall", conversation=conversation, max_age=60)
    verified = hooks.verify_token(token)
    assert verified == hooks.HookToken(hook="recall", conversation_id=conversation.pk)
    assert hooks.verify_token(token + "x") is None
    assert hooks.verify_token("garbage") is None
    assert hooks.verify_token(None) is None
    forged = signing.TimestampSigner(salt="other").sign_object(
        {"h": "recall", "c": str(conversation.pk), "m": 60}
    )
    assert hooks.verify_token(forged) is None


def test_expired_token_is_refused(
    conversation: Conversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = hooks.issue_token(hook="recall", conversation=conversation, max_age=5)
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 6)  # what signing reads
    assert hooks.verify_token(token) is None


@pytest.mark.parametrize(
    "kwargs",
    [{"max_age": 0}, {"max_age": True}, {"max_age": 10**6}, {"hook": ""}, {"conversation": "nope"}],
)
def test_issue_token_rejects_bad_arguments(
    conversation: Conversation, kwargs: dict[str, Any]
) -> None:
    arguments = {"hook": "recall", "conversation": conversation, "max_age": 60, **kwargs}
    with pytest.raises(ValueError, match=r"max_age|hook name"):
        hooks.issue_token(**arguments)
