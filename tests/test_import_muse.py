"""``muse exec --json`` journals (docs/formats.md): every corpus
file with hand-counted messages, calls, notices and source records; the answer stored once; tool
results linked to their task; failed tasks and failed runs; bad lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    SourceRecord,
    ToolCall,
)
from tests.helpers import assert_counters_match_rows
from tests.import_helpers import JSON, run, write_lines

pytestmark = pytest.mark.django_db

MUSE = "muse_exec_jsonl"

# file -> (record messages, {status: calls}, error notices, source records, stream.id), counted by
# hand: user = turn.input.user, answer = run.terminal.completed, one call + result per tool task,
# one error notice per failed task that is not a tool.
CORPUS_FILES = {
    "echo_basic.jsonl": (2, {}, 4, 33, "6fbeab95-439f-4d74-878c-debcd879c148"),
    "preset_native_basic.jsonl": (2, {}, 4, 33, None),
    "meta_basic.jsonl": (2, {}, 0, 36, "bbc5207f-d419-4bc7-adf6-c75acee1cffd"),
    "meta_tool_use.jsonl": (6, {"completed": 2}, 0, 91, "4129220b-75b8-4ac1-9be1-19d42ecebf6e"),
}


def lines_of(corpus: Path, name: str) -> list[str]:
    return (corpus / MUSE / name).read_text("utf-8").splitlines()


def counts(conversation: Conversation) -> tuple[int, dict[str, int], int, int]:
    statuses: dict[str, int] = {}
    for call in ToolCall.objects.filter(conversation=conversation):
        statuses[call.status] = statuses.get(call.status, 0) + 1
    errors = DisplayMessage.objects.filter(conversation=conversation, content_type="error")
    return (
        Message.objects.filter(conversation=conversation).count(),
        statuses,
        errors.count(),
        SourceRecord.objects.filter(conversation=conversation).count(),
    )


@pytest.mark.parametrize("name", sorted(CORPUS_FILES))
def test_muse_corpus_file(corpus: Path, user: User, name: str) -> None:
    messages, calls, errors, records, key = CORPUS_FILES[name]
    code, out, err = run(corpus / MUSE / name, "--owner", user.username)
    assert (code, err) == (0, "")
    assert "(muse): 1 conversation(s)" in out
    assert "0 unknown record(s)" in out
    conversation = Conversation.objects.get(owner=user)
    assert conversation.source == "muse"
    if key is not None:
        assert conversation.external_id == key
    assert counts(conversation) == (messages, calls, errors, records)
    assert conversation.status == "idle"  # failed tasks never fail a completed run
    results = DisplayMessage.objects.filter(conversation=conversation, content_type="tool_result")
    assert all(r.tool_call_id is not None and not r.metadata for r in results)
    assert_counters_match_rows(conversation)
    before = (conversation.last_event_seq, counts(conversation))
    assert run(corpus / MUSE / name, "--owner", user.username)[0] == 0
    conversation.refresh_from_db()
    assert (conversation.last_event_seq, counts(conversation)) == before


def test_answer_comes_from_the_terminal_once_and_calls_link_by_call_id(
    corpus: Path, user: User
) -> None:
    assert run(corpus / MUSE / "meta_tool_use.jsonl", "--owner", user.username)[0] == 0
    conversation = Conversation.objects.get()
    assert conversation.title.startswith("Create a file named hello.txt")
    record = list(Message.objects.order_by("position"))
    assert [(m.role, m.tool_call_id) for m in record] == [
        ("user", ""),
        ("assistant", ""),
        ("tool", "call_019fd4203b157e23b3e5051ad373b4fe"),
        ("assistant", ""),
        ("tool", "call_019fd4203ee27112816b23d93c0d72b3"),
        ("assistant", ""),
    ]
    deltas = [
        json.loads(line)["payload"]["text"]
        for line in lines_of(corpus, "meta_tool_use.jsonl")
        if '"payload_type":"run.output.delta"' in line
    ]
    answer = record[-1].content[0]["text"]
    assert answer == "".join(deltas)
    texts = DisplayMessage.objects.filter(content_type="text", message_type="assistant")
    assert [row.content["text"] for row in texts] == [answer]  # never stored twice
    calls = {c.call_id: c for c in ToolCall.objects.all()}
    assert {c.name for c in calls.values()} == {"write_file", "read_file"}
    write = calls["call_019fd4203b157e23b3e5051ad373b4fe"]
    assert write.result == "wrote 6 bytes to /tmp/muse-meta-corpus/ws/hello.txt"
    assert write.started_at is not None
    assert record[2].extra["edit_facts"] == {
        "added": 1,
        "path": "hello.txt",
        "tool_name": "write_file",
    }
    assert record[1].extra["task_id"] == "1d48dee1-09fa-4807-93b6-6bc819909c87"


def test_failed_tasks_are_error_notices_not_a_failed_run(corpus: Path, user: User) -> None:
    assert run(corpus / MUSE / "echo_basic.jsonl", "--owner", user.username)[0] == 0
    errors = DisplayMessage.objects.filter(content_type="error").order_by("seq")
    assert [e.metadata["task_kind"] for e in errors] == [
        "reminder.agent.plugin:tbh-reminders:skill-reminder",
        "reminder.agent.plugin:tbh-reminders:scope-reminder",
        "reminder.agent.plugin:tbh-reminders:goal-reminder",
        "reminder.agent.plugin:tbh-reminders:verify-reminder",
    ]
    assert (
        errors[0]
        .content["text"]
        .endswith("failed: model did not reach a terminal state within 2 step(s)")
    )
    assert all(e.message_type == "system" for e in errors)
    assert Conversation.objects.get().status == "idle"


def envelope(
    sequence: int,
    payload_type: str,
    payload: dict[str, JSON],
    stream: str = "s-1",
    run_id: str = "r-1",
) -> str:
    """One journal line in the shape of docs/formats.md (keys in native order)."""
    return json.dumps(
        {
            "schema_version": 1,
            "id": f"env-{sequence}",
            "stream": {"kind": "session", "id": stream},
            "sequence": sequence,
            "recorded_at": 1780531400000000 + sequence,
            "record_type": "event",
            "durability": "durable",
            "causation_id": run_id,
            "payload_type": payload_type,
            "payload_schema_version": 1,
            "payload": {"command_id": run_id, "run_stream": {"kind": "run", "id": run_id}}
            | payload,
        }
    )


def task(sequence: int, task_id: str, kind: str, **event: JSON) -> str:
    return envelope(
        sequence,
        f"task.lifecycle.{kind}",
        {"task_id": task_id, "event": {"kind": kind, "task_id": task_id, **event}},
    )


def prompt(sequence: int, text: str = "do it") -> str:
    return envelope(sequence, "turn.input.user", {"kind": "turn_input_user", "prompt": text})


def test_failed_terminal_is_the_runs_error(tmp_path: Path, user: User) -> None:
    path = write_lines(
        tmp_path / "failed.jsonl",
        prompt(1),
        envelope(
            2,
            "run.terminal.failed",
            {"kind": "run_terminal", "terminal": "failed", "reason": "unauthorized", "text": None},
        ),
    )
    code, _out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    conversation = Conversation.objects.get()
    assert conversation.status == "error"
    [error] = DisplayMessage.objects.filter(content_type="error")
    assert error.content == {
        "text": "unauthorized",
        "error_type": "failed",
        "stop_reason": "failed",
    }
    assert Message.objects.count() == 1  # no answer text: nothing stored for it
    seq = conversation.last_event_seq
    assert run(path, "--owner", user.username)[0] == 0
    conversation.refresh_from_db()
    assert conversation.last_event_seq == seq
    assert DisplayMessage.objects.filter(content_type="error").count() == 1


def test_tool_task_lifecycle_without_idempotency_keys(tmp_path: Path, user: User) -> None:
    lines = [
        prompt(1),
        task(2, "t-read", "proposed", task_kind="tool.read_file"),
        task(3, "t-read", "started"),
        task(4, "t-bash", "proposed", task_kind="tool.bash"),
        task(5, "t-bash", "started"),
        task(6, "t-bash", "failed", reason="exit status 2"),
        task(7, "t-skip", "proposed", task_kind="tool.bash"),
        task(8, "t-skip", "rejected", reason="skip_if_running"),
        task(9, "t-read", "completed"),
        # no task_id: matched by tool name and order (the "tool.result task_id gap")
        envelope(
            10,
            "tool.result",
            {
                "kind": "tool_result",
                "call_id": "call_x",
                "text": "contents",
                "correlation_facts": {"tool_name": "read_file", "outcome": "success"},
            },
        ),
        envelope(
            11,
            "tool.result",
            {
                "kind": "tool_result",
                "call_id": "call_nobody",
                "text": "?",
                "correlation_facts": {"tool_name": "write_file", "outcome": "failure"},
            },
        ),
        task(12, "t-open", "proposed", task_kind="tool.bash"),
        task(13, "t-open", "started"),
    ]
    path = write_lines(tmp_path / "tools.jsonl", *lines)
    code, out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    assert "1 open call(s) interrupted" in out
    calls = {c.call_id: c for c in ToolCall.objects.all()}
    assert {k: (c.name, c.status) for k, c in calls.items()} == {
        "t-read": ("read_file", "completed"),
        "t-bash": ("bash", "failed"),
        "t-skip": ("bash", "cancelled"),
        "t-open": ("bash", "interrupted"),
    }
    assert calls["t-bash"].error == "exit status 2"
    assert calls["t-read"].result == "contents"
    assert calls["t-open"].interrupt_reason == "log_ended"
    result = Message.objects.get(tool_call_id="t-read")
    assert result.extra["muse_call_id"] == "call_x"
    orphan = DisplayMessage.objects.get(content_type="tool_result", tool_call=None)
    assert orphan.content["tool_call_id"] == "call_nobody"
    assert orphan.content["is_error"] is True
    assert orphan.metadata == {"orphan": True}


def test_a_completed_tool_task_without_result_is_completed_at_the_end(
    tmp_path: Path, user: User
) -> None:
    path = write_lines(
        tmp_path / "tools.jsonl",
        prompt(1),
        task(2, "t-1", "proposed", task_kind="tool.write_file"),
        task(3, "t-1", "scheduled", idempotency_key="tool:call_a"),
        task(4, "t-1", "started"),
        task(5, "t-1", "completed"),
    )
    assert run(path, "--owner", user.username)[0] == 0
    call = ToolCall.objects.get()
    assert (call.call_id, call.status) == ("call_a", "completed")


def test_bad_and_unknown_lines(tmp_path: Path, user: User) -> None:
    path = write_lines(
        tmp_path / "bad.jsonl",
        prompt(1, "hello"),
        "not json",
        envelope(3, "turn.input.user", {"kind": "turn_input_user", "prompt": 7}),
        envelope(4, "run.reasoning.delta", {"text": "hmm"}),
        json.dumps({"what": "no envelope"}),
        envelope(
            6,
            "run.terminal.completed",
            {"kind": "run_terminal", "terminal": "completed", "text": "done"},
        ),
        '{"schema_version":1,"payload_type":"run.out',
        end="\n",
    )
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # a torn last line
    code, out, err = run(path, "--owner", user.username)
    assert code == 1
    assert "bad.jsonl:2: not JSON" in err
    assert "bad.jsonl:3: turn.input.user without a string payload.prompt" in err
    assert "bad.jsonl:7: torn last line" in err
    assert "2 unknown record(s) kept" in out
    assert [m.role for m in Message.objects.order_by("position")] == ["user", "assistant"]
    # every line that parses is kept, but a refused line keeps nothing (docs/formats.md "Every
    # line accounted for"): not the refused prompt's
    assert SourceRecord.objects.count() == 4


def test_sessions_are_conversations_and_conversation_id_overrides(
    tmp_path: Path, user: User
) -> None:
    path = write_lines(
        tmp_path / "two.jsonl",
        envelope(1, "turn.input.user", {"prompt": "first"}, stream="a"),
        envelope(1, "turn.input.user", {"prompt": "second"}, stream="b"),
    )
    assert run(path, "--owner", user.username)[0] == 0
    assert sorted(Conversation.objects.values_list("external_id", "title")) == [
        ("a", "first"),
        ("b", "second"),
    ]
    assert run(path, "--owner", user.username, "--conversation-id", "one")[0] == 0
    assert Message.objects.filter(conversation__external_id="one").count() == 2
