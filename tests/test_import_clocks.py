"""One clock per file (docs/formats.md "Times"): an import dates every row of a file by the log's
own times, lines before the first time taking it, or, when the file has none, every row by its
modification time, with ``metadata.clock`` saying so; never a mix of the two."""

from __future__ import annotations

import io
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from murmur_conversations.importers.base import CLOCK_KEY
from murmur_conversations.models import Conversation, DisplayMessage, Message
from tests.agentlog_lines import iso, write_jsonl
from tests.import_helpers import run

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: A modification time no fixture's own times come near.
MTIME = datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC)


def dated_copy(name: str, root: Path) -> Path:
    """The fixture ``name`` copied under ``root`` (same relative path), modified at ``MTIME``."""
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / name, path)
    os.utime(path, (MTIME.timestamp(), MTIME.timestamp()))
    return path


def times_of(conversation: Conversation) -> list[datetime]:
    """The conversation's row times in write order: record messages by position, then display
    rows by seq."""
    record = Message.objects.filter(conversation=conversation).order_by("position")
    rows = DisplayMessage.objects.filter(conversation=conversation).order_by("seq")
    return [m.created_at for m in record] + [r.created_at for r in rows]


def assert_one_clock_in_order(conversation: Conversation) -> None:
    record = list(
        Message.objects.filter(conversation=conversation)
        .order_by("position")
        .values_list("created_at", flat=True)
    )
    rows = list(
        DisplayMessage.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("created_at", flat=True)
    )
    for times in (record, rows):
        assert times == sorted(times), f"time runs backwards in {conversation.external_id}"
    every = [conversation.created_at, *record, *rows]
    assert conversation.created_at <= min(every)
    on_file_clock = [t == MTIME for t in every]
    if conversation.metadata.get(CLOCK_KEY) == "file":
        assert all(on_file_clock), "a conversation on the file's clock has a line time"
    else:
        assert not any(on_file_clock), "a conversation on the log's clock has the file's time"
    if conversation.parent is not None:
        assert conversation.created_at >= conversation.parent.created_at


FORMATS = sorted(
    str(p.relative_to(FIXTURES))
    for p in FIXTURES.rglob("*")
    if p.is_file() and p.suffix in (".json", ".jsonl")
)


@pytest.mark.parametrize("name", FORMATS)
def test_every_importer_dates_a_file_by_one_clock_in_order(
    name: str, tmp_path: Path, user: User
) -> None:
    code, _out, err = run(dated_copy(name, tmp_path), "--owner", user.username)
    assert code == 0, err
    conversations = list(Conversation.objects.select_related("parent"))
    assert conversations
    for conversation in conversations:
        assert_one_clock_in_order(conversation)


def test_a_stream_json_is_dated_by_its_own_times_before_the_first_one_too(
    tmp_path: Path, user: User
) -> None:
    """The report: the first rows took the file's time, later ones the log's, and the subagent
    was dated months before its parent. Now every row takes the log's clock."""
    then = datetime(2025, 6, 25, 0, 23, 54, tzinfo=UTC)
    session = "4e3453f9-0000-4000-8000-000000000001"
    call = "toolu_01count"

    def assistant(
        message_id: str, *blocks: dict[str, object], parent: str | None = None
    ) -> dict[str, object]:
        message = {"id": message_id, "role": "assistant", "content": list(blocks)}
        return {
            "type": "assistant",
            "message": message,
            "parent_tool_use_id": parent,
            "session_id": session,
        }

    lines = [
        {"type": "system", "subtype": "init", "cwd": "/home/dev/garden", "session_id": session},
        assistant("msg_1", {"type": "text", "text": "I'll count them."}),
        assistant(
            "msg_2", {"type": "tool_use", "id": call, "name": "Task", "input": {"prompt": "count"}}
        ),
        {
            "type": "user",
            "parent_tool_use_id": call,
            "session_id": session,
            "timestamp": iso(then),
            "message": {"role": "user", "content": "count"},
        },
        assistant("msg_3", {"type": "text", "text": "12 files."}, parent=call),
        {
            "type": "user",
            "parent_tool_use_id": None,
            "session_id": session,
            "timestamp": iso(then + timedelta(seconds=7)),
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": "12 files."}],
            },
        },
        assistant("msg_4", {"type": "text", "text": "There are 12."}),
        {"type": "result", "subtype": "success", "is_error": False, "session_id": session},
    ]
    path = write_jsonl(tmp_path / "stream.jsonl", lines)
    os.utime(path, (MTIME.timestamp(), MTIME.timestamp()))
    code, _out, err = run(path, "--owner", user.username, "--format", "claude-code")
    assert code == 0, err
    parent = Conversation.objects.get(parent__isnull=True)
    child = Conversation.objects.get(parent=parent)
    assert parent.created_at == then  # the first line time, not the file's
    assert child.created_at == then
    assert parent.saved_at == then + timedelta(seconds=7)
    for conversation in (parent, child):
        assert_one_clock_in_order(conversation)
        assert CLOCK_KEY not in conversation.metadata


def test_a_file_without_times_says_so_and_stdin_too(tmp_path: Path, user: User) -> None:
    code, _out, err = run(dated_copy("openai/timetable.json", tmp_path), "--owner", user.username)
    assert code == 0, err
    conversation = Conversation.objects.get()
    assert conversation.metadata[CLOCK_KEY] == "file"
    assert set(times_of(conversation)) == {MTIME}
    Conversation.objects.all().delete()
    data = (FIXTURES / "openai" / "timetable.json").read_bytes()
    code, _out, err = run("-", "--owner", user.username, stdin=io.BytesIO(data))
    assert code == 0, err
    assert Conversation.objects.get().metadata[CLOCK_KEY] == "import"
