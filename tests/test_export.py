"""``manage.py export_conversation`` (docs/formats.md): murmur JSON Lines and OpenAI lists;
export, import, export gives the same bytes."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from murmur_conversations import services
from murmur_conversations.models import Conversation, Message
from tests.import_helpers import (
    cassette_conversation,
    export,
    murmur_lines,
    reimport,
    run,
    write_json,
    write_lines,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def runtime_conversation(conversation: Conversation) -> Conversation:
    """A conversation written by a runtime (not imported): every column and extra keys."""
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": 'Ünïcode ✓ and "quotes"', "lang": "de"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "text": "plan", "signature": "sig"},
                    {"type": "text", "text": "Running."},
                    {"type": "tool_call", "id": "c1", "name": "bash", "input": {"cmd": "ls"}},
                ],
                "model": "m",
            },
            {"role": "tool", "tool_call_id": "c1", "content": "boom", "is_error": True},
            {"role": "assistant", "content": "Done.", "source_id": "hook-1"},
        ],
    )
    return conversation


def test_murmur_export_gives_the_imported_lines_back(tmp_path: Path, user: User) -> None:
    path = write_lines(tmp_path / "log.jsonl", *murmur_lines(), end="\r\n")
    assert run(path, "--owner", user.username)[0] == 0
    record = "".join(line + "\n" for line in murmur_lines())
    assert export(Conversation.objects.get(), "--record-only") == record


def test_murmur_export_shape_of_a_runtime_conversation(runtime_conversation: Conversation) -> None:
    lines = export(runtime_conversation, "--record-only").splitlines()
    ids = list(
        Message.objects.filter(conversation=runtime_conversation)
        .order_by("position")
        .values_list("message_id", flat=True)
    )
    assert lines[0] == f'{{"role":"system","content":"You are terse.","id":"{ids[0]}"}}'
    assert lines[1] == (
        f'{{"role":"user","content":"Ünïcode ✓ and \\"quotes\\"","id":"{ids[1]}","lang":"de"}}'
    )
    assert lines[3] == (
        f'{{"role":"tool","content":"boom","id":"{ids[3]}","tool_call_id":"c1","is_error":true}}'
    )
    assert json.loads(lines[4])["source_id"] == "hook-1"


def test_murmur_round_trip_is_byte_identical(
    runtime_conversation: Conversation, user: User
) -> None:
    first = export(runtime_conversation)
    second = export(reimport(user, first, "murmur"))
    assert second == first


def test_anthropic_import_round_trips_through_murmur(
    corpus: Path, tmp_path: Path, user: User
) -> None:
    path = write_json(
        tmp_path / "chat.json", cassette_conversation(corpus, "anthropic_tool_with_thinking")
    )
    assert run(path, "--owner", user.username)[0] == 0
    first = export(Conversation.objects.get())
    assert export(reimport(user, first, "murmur")) == first


def test_openai_export_and_round_trip(corpus: Path, tmp_path: Path, user: User) -> None:
    messages = cassette_conversation(corpus, "openai_multiple_agent_tool_calls")
    assert run(write_json(tmp_path / "chat.json", messages), "--owner", user.username)[0] == 0
    first = export(Conversation.objects.get(), "--format", "openai")
    assert first.endswith("]\n")
    assert first.count("\n") == 1
    exported = json.loads(first)
    assert [m["role"] for m in exported] == [m["role"] for m in messages]
    assert exported[1]["content"] is None
    assert exported[1]["tool_calls"] == messages[1]["tool_calls"]
    assert exported[2] == {
        "role": "tool",
        "content": "Paris",
        "tool_call_id": messages[2]["tool_call_id"],
    }
    again = export(reimport(user, first, "openai"), "--format", "openai")
    assert again == first


def test_openai_export_of_blocks(runtime_conversation: Conversation, user: User) -> None:
    first = export(runtime_conversation, "--format", "openai")
    exported = json.loads(first)
    assert exported[2] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Running."}],
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"cmd":"ls"}'},
            }
        ],
    }
    assert export(reimport(user, first, "openai"), "--format", "openai") == first


@pytest.mark.parametrize(
    "args",
    [
        [str(uuid.uuid4())],
        ["not-a-uuid"],
        ["4F6A3C2E-0000-4000-8000-000000000000"],
    ],
)
def test_unknown_or_malformed_id_exits_2(args: list[str]) -> None:
    with pytest.raises(CommandError) as info:
        call_command("export_conversation", *args, stdout=io.StringIO())
    assert info.value.returncode == 2


def test_unknown_export_format_exits_2(conversation: Conversation) -> None:
    with pytest.raises(CommandError) as info:
        call_command("export_conversation", str(conversation.pk), "--format", "yaml")
    assert info.value.returncode == 2
