"""Every import format on small logs of our own (tests/fixtures/, docs/formats.md), so a bare clone
tests the importers without the real-log corpus: per file the hand-counted record messages, tool
calls by status, tool results paired with their call, notices, source records and unknown records;
importing again adds nothing; exporting, importing the export and exporting again gives the same
bytes. The fixtures are invented, in the shapes real logs take (see tests/fixtures/README.md)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from murmur_conversations.importers.records import key_of_messages
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    SourceRecord,
    ToolCall,
)
from tests.helpers import MakeUser, assert_counters_match_rows
from tests.import_helpers import export, reimport, run

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CLAUDE_SESSION = "claude_code/3c6d9e10-2b6f-4c1a-9f0e-4a8b2c6d1e01.jsonl"
CODEX_ROLLOUT = "codex/rollout-2025-11-20T08-00-00-0190d1e2-0000-7a00-8b00-c0de00000001.jsonl"


@dataclass(frozen=True)
class Expected:
    """What one fixture imports to, counted by hand from the file."""

    source: str  # the format name, also Conversation.source
    key: str | None  # Conversation.external_id (None: checked by its own test)
    messages: int  # record messages
    calls: dict[str, int]  # tool calls by status
    results: int  # tool results, each paired with its call
    records: int  # source records
    unknown: int = 0  # unknown records among them
    notices: int = 0  # system/error display rows
    injected: int = 0  # record messages marked injected
    transcript: int = 0  # transcript entries
    open_calls: int = 0  # calls interrupted because the log ended
    read: int | None = None  # messages read, when a duplicate makes it more than `messages`
    status: str = "idle"
    extra: dict[str, object] = field(default_factory=dict)
    #: the child conversations of subagents, in the order they began: (record messages, tool
    #: calls by status, source records, the launching call id or "")
    children: tuple[tuple[int, dict[str, int], int, str], ...] = ()

    @property
    def all_messages(self) -> int:
        """Record messages of the conversation and its children."""
        return self.messages + sum(child[0] for child in self.children)


EXPECTED = {
    # user, three tool calls and two results, the answer once (deltas are previews); one failed
    # reminder task is an error notice; one line of an unknown payload type.
    "muse/notes_run.jsonl": Expected(
        "muse",
        "5a1e0c3d-7b44-4e0e-9c1a-5d2e8f6b1c01",
        messages=7,
        calls={"completed": 1, "failed": 1, "cancelled": 1},
        results=2,
        records=38,
        unknown=1,
        notices=1,
        transcript=2,
    ),
    # eight messages (one line repeated: de-duplicated by id), one line that is not a message
    "murmur/garden/ctx-0001/conversation.jsonl": Expected(
        "murmur",
        "garden/ctx-0001",
        messages=8,
        calls={"completed": 1, "failed": 1},
        results=2,
        records=9,
        unknown=1,
        transcript=4,
        read=9,
    ),
    # main chain: one response split over three lines merged, four tool results (one an
    # error), an isMeta line and a <system-reminder> line injected, a second root, and every other
    # line type kept; a subagent's sidechain is a child of the session, linked to the Task call
    # whose prompt its first line repeats.
    CLAUDE_SESSION: Expected(
        "claude-code",
        "3c6d9e10-2b6f-4c1a-9f0e-4a8b2c6d1e01",
        messages=13,
        calls={"completed": 3, "failed": 1},
        results=4,
        records=21,
        unknown=1,
        injected=2,
        transcript=6,
        children=((4, {"completed": 1}, 4, "toolu_fixture_task"),),
    ),
    # thinking + text + the Agent call merged by message.id, its result, the answer; the
    # subagent's lines (parent_tool_use_id) are its child; the result line ends the run.
    "claude_code/stream_json.jsonl": Expected(
        "claude-code",
        "9b2f4e71-0c3a-4d5e-8f60-71829304a5b6",
        messages=3,
        calls={"completed": 1},
        results=1,
        records=11,
        transcript=2,
        children=((3, {"completed": 1}, 3, "toolu_stream_agent"),),
    ),
    # response_item lines only (event_msg echoes kept, not read): developer and environment
    # context injected, reasoning, a function call, an MCP call whose output is JSON text, a
    # custom tool call; the log ends on a call without output.
    CODEX_ROLLOUT: Expected(
        "codex",
        "0190d1e2-0000-7a00-8b00-c0de00000001",
        messages=14,
        calls={"completed": 3, "interrupted": 1},
        results=3,
        records=26,
        unknown=1,
        injected=2,
        transcript=4,
        open_calls=1,
    ),
    # items upserted by id: a command that succeeds, one that fails (exit 1), a file change
    "codex/exec.jsonl": Expected(
        "codex",
        "0190e2f3-1111-7b22-8c33-d4e5f6071829",
        messages=9,
        calls={"completed": 2, "failed": 1},
        results=3,
        records=12,
        transcript=2,
    ),
    # two parallel calls (one with a client-minted id) and their results; a last call unanswered
    "openai/timetable.json": Expected(
        "openai",
        None,
        messages=8,
        calls={"completed": 2, "interrupted": 1},
        results=2,
        records=0,
        transcript=3,
        open_calls=1,
    ),
    # a request body: top-level system, a signed thinking block, a user turn holding a result
    # and text, an error result, the response appended with its id
    "anthropic/bike_trip.json": Expected(
        "anthropic",
        None,
        messages=8,
        calls={"completed": 1, "failed": 1},
        results=2,
        records=0,
        transcript=4,
    ),
    # a useChat request body: an image file part, step-start parts, signed reasoning, one tool
    # part with an output and one with an error, text after the tools
    "vercel_ui/trip_planner.json": Expected(
        "vercel-ui",
        "chat-trip-0001",
        messages=6,
        calls={"completed": 1, "failed": 1},
        results=2,
        records=0,
        transcript=4,
    ),
    # a RunAgentInput: system, a reasoning message before its assistant message, toolCalls, a
    # tool message with an error, a user message with an image part
    "ag_ui/support_thread.json": Expected(
        "ag-ui",
        "thread-support-0001",
        messages=7,
        calls={"completed": 1, "failed": 1},
        results=2,
        records=0,
        transcript=4,
    ),
    # Conversations items with OpenAI's own ids: each item its own message
    "openai_items/refund_items.json": Expected(
        "openai-items",
        None,
        messages=5,
        calls={"completed": 1},
        results=1,
        records=0,
        transcript=2,
    ),
    "agentfootprint/conversation.json": Expected(
        "agentfootprint",
        None,
        messages=6,
        calls={"completed": 1},
        results=1,
        records=1,
        injected=1,
        transcript=3,
    ),
    # a paused run: its question becomes the pending ask; the asking call is left open
    "agentfootprint/paused.json": Expected(
        "agentfootprint",
        None,
        messages=3,
        calls={"interrupted": 1},
        results=0,
        records=1,
        transcript=1,
        open_calls=1,
        status="paused",
    ),
    # an OTLP JSON export (two lines, tests/otlp_helpers.agent_run(3)): three model calls under
    # one invoke_agent span, each repeating the history (system, user, then the turns so far),
    # two bash executions; kept once each: 7 messages, the transcript the user's and three
    # assistant texts; the conversation is keyed by the trace id (no gen_ai.conversation.id).
    "otlp/agent_run.jsonl": Expected(
        source="otlp-json",
        key="c2199acec14b05e8a0f225a14da5ab6d",
        messages=7,
        calls={"completed": 2},
        results=2,
        records=0,
        transcript=4,
    ),
}

#: Formats that --format auto never picks (the test below imports every fixture with auto):
#: OTLP protobuf frames are binary, tested in tests/test_import_otlp.py.
NOT_DETECTED = {"otlp-proto"}


def counts(conversation: Conversation) -> dict[str, object]:
    """The counts an ``Expected`` states, read from the database."""
    statuses: dict[str, int] = {}
    for call in ToolCall.objects.filter(conversation=conversation):
        statuses[call.status] = statuses.get(call.status, 0) + 1
    messages = Message.objects.filter(conversation=conversation)
    rows = DisplayMessage.objects.filter(conversation=conversation)
    return {
        "messages": messages.count(),
        "calls": statuses,
        "results": rows.filter(content_type="tool_result").count(),
        "records": SourceRecord.objects.filter(conversation=conversation).count(),
        "notices": rows.filter(message_type="system", content_type="error").count(),
        "injected": sum(1 for m in messages if m.extra.get("injected")),
        "transcript": conversation.transcript_count,
    }


def test_every_fixture_is_listed_and_every_format_has_one() -> None:
    on_disk = {p.relative_to(FIXTURES).as_posix() for p in FIXTURES.rglob("*.json*")}
    assert on_disk == set(EXPECTED)
    from murmur_conversations.importers.registry import FORMAT_NAMES

    assert {e.source for e in EXPECTED.values()} == set(FORMAT_NAMES) - NOT_DETECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_imports_with_hand_counted_rows(name: str, user: User) -> None:
    expected = EXPECTED[name]
    code, out, err = run(FIXTURES / name, "--owner", user.username)  # --format auto
    assert (code, err) == (0, "")
    read = expected.read if expected.read is not None else expected.all_messages
    with_children = f" and {len(expected.children)} child(ren)" if expected.children else ""
    assert (
        f"({expected.source}): 1 conversation(s){with_children}, {expected.all_messages} message(s) "
        f"added of {read} read, {expected.unknown} unknown record(s) kept, "
        f"{expected.open_calls} open call(s) interrupted, 0 refused"
    ) in out
    conversation = Conversation.objects.get(owner=user, parent__isnull=True)
    assert conversation.source == expected.source
    if expected.key is not None:
        assert conversation.external_id == expected.key
    assert conversation.status == expected.status
    assert counts(conversation) == {
        "messages": expected.messages,
        "calls": expected.calls,
        "results": expected.results,
        "records": expected.records,
        "notices": expected.notices,
        "injected": expected.injected,
        "transcript": expected.transcript,
    }
    # every result is paired with its call: linked, neither orphan nor late
    for row in DisplayMessage.objects.filter(conversation=conversation, content_type="tool_result"):
        assert row.tool_call is not None, row.content
        assert row.tool_call.call_id == row.content["tool_call_id"]
        assert not row.metadata.get("orphan") and not row.metadata.get("late")
    # a call cut off by the end of the log says so
    for call in ToolCall.objects.filter(conversation=conversation, status="interrupted"):
        assert call.interrupt_reason == "log_ended"
    assert_counters_match_rows(conversation)
    children = list(conversation.children.order_by("parent_created_event_seq", "created_at"))
    found = [
        (c.record_length, counts(c)["calls"], counts(c)["records"], c.parent_call_id)
        for c in children
    ]
    assert found == list(expected.children)
    for child in children:
        assert child.owner_id == user.pk
        assert_counters_match_rows(child)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_imported_again_adds_nothing(name: str, user: User) -> None:
    assert run(FIXTURES / name, "--owner", user.username)[0] == 0
    conversation = Conversation.objects.get(owner=user, parent__isnull=True)
    before = (conversation.last_event_seq, counts(conversation), DisplayMessage.objects.count())
    code, out, err = run(FIXTURES / name, "--owner", user.username)
    assert (code, err) == (0, "")
    assert "unchanged since the last import" in out  # docs/formats.md "Whole folders"
    code, out, err = run(FIXTURES / name, "--owner", user.username, "--reread")
    assert (code, err) == (0, "")
    assert " 0 message(s) added of " in out
    conversation.refresh_from_db()
    after = (conversation.last_event_seq, counts(conversation), DisplayMessage.objects.count())
    assert after == before
    assert Conversation.objects.count() == 1 + len(EXPECTED[name].children)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_export_round_trips(name: str, make_user: MakeUser) -> None:
    owner, other = make_user(), make_user()
    assert run(FIXTURES / name, "--owner", owner.username)[0] == 0
    conversation = Conversation.objects.get(owner=owner, parent__isnull=True)
    first = export(conversation)
    assert len(export(conversation, "--record-only").splitlines()) == EXPECTED[name].messages
    copy = reimport(other, first, "murmur")
    assert export(copy) == first
    assert copy.child_count == len(EXPECTED[name].children)
    as_openai = export(conversation, "--format", "openai")
    assert export(reimport(other, as_openai, "openai"), "--format", "openai") == as_openai


# --------------------------------------------------------------------------- per format


def test_muse_answer_once_calls_by_key_or_by_name_and_the_failed_reminder(user: User) -> None:
    path = FIXTURES / "muse/notes_run.jsonl"
    assert run(path, "--owner", user.username)[0] == 0
    conversation = Conversation.objects.get()
    assert conversation.title == "List the notes folder, then spell-check every note in it."
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    deltas = [x["payload"]["text"] for x in lines if x["payload_type"] == "run.output.delta"]
    record = list(Message.objects.order_by("position"))
    assert record[-1].content == [{"type": "text", "text": "".join(deltas)}]
    texts = DisplayMessage.objects.filter(message_type="assistant", content_type="text")
    assert texts.count() == 1  # the deltas are never stored
    calls = {c.name: c for c in ToolCall.objects.all()}
    # named by its idempotency key
    assert calls["list_dir"].call_id == "call_0190b1e2c3d4e5f60718293a4b5c6d01"
    assert calls["list_dir"].result == "groceries.md\nideas.md"
    # no key: the task id is the call id, the result found by tool name and order
    spell = calls["spell_check"]
    assert (spell.call_id, spell.status) == ("f1a00003-aaaa-4bbb-8ccc-000000000003", "failed")
    result = Message.objects.get(tool_call_id=spell.call_id)
    assert result.is_error is True
    assert result.extra["muse_call_id"] == "call_0190b1e2c3d4e5f60718293a4b5c6d02"
    assert result.extra["edit_facts"]["path"] == "ideas.md"
    assert calls["read_file"].status == "cancelled"
    [notice] = DisplayMessage.objects.filter(content_type="error")
    assert notice.metadata["task_kind"] == "reminder.agent.plugin:notes-helper:tidy-reminder"
    assert notice.content["text"].endswith("gave no answer within 1 step(s)")


def test_murmur_lines_come_back_byte_for_byte(user: User) -> None:
    path = FIXTURES / "murmur/garden/ctx-0001/conversation.jsonl"
    assert run(path, "--owner", user.username)[0] == 0
    lines = path.read_text("utf-8").splitlines()
    messages = [line for line in dict.fromkeys(lines) if '"role"' in line]
    assert export(Conversation.objects.get(), "--record-only") == "".join(
        line + "\n" for line in messages
    )
    hooked = Message.objects.get(source_id="hook:garden-memory")
    assert hooked.role == "user"
    thinking = DisplayMessage.objects.get(content_type="thinking")
    assert thinking.content["signature"] == "c2lnbmVkLWJ5LXVz"
    image = Message.objects.get(message_id="msg_0190c0de00017000800000000000a008")
    assert image.content[0]["type"] == "image"


def test_claude_session_main_chain_merges_and_keeps_the_sidechain(user: User) -> None:
    path = FIXTURES / CLAUDE_SESSION
    assert run(path, "--owner", user.username)[0] == 0
    top = Conversation.objects.get(parent__isnull=True)
    ids = list(
        Message.objects.filter(conversation=top)
        .order_by("position")
        .values_list("message_id", flat=True)
    )
    assert ids == [
        "u-0001",
        "u-0002",
        "msg_fixture_A1",
        "u-0006",
        "u-0007",
        "msg_fixture_A2",
        "u-0013",
        "msg_fixture_A3",
        "u-0015",
        "u-0016",
        "msg_fixture_A4",
        "u-0019",
        "msg_fixture_A5",
    ]
    merged = Message.objects.get(message_id="msg_fixture_A1")
    assert [b["type"] for b in merged.content] == ["text", "tool_call", "tool_call"]
    assert merged.extra["model"] == "claude-fixture-1"
    assert {m.message_id for m in Message.objects.filter(extra__injected=True)} == {
        "u-0002",
        "u-0016",
    }
    failed = ToolCall.objects.get(status="failed")
    assert failed.name == "Edit"
    assert Message.objects.get(tool_call_id=failed.call_id).is_error is True
    # the sidechain is a child of the session, launched by the Task call with its prompt
    [child] = top.children.all()
    assert (child.external_id, child.parent_call_id) == (
        f"{top.external_id}/s-0009",
        "toolu_fixture_task",
    )
    sidechain = [json.loads(r.raw).get("uuid") for r in child.source_records.order_by("id")]
    assert sidechain == ["s-0009", "s-0010", "s-0011", "s-0012"]
    assert ToolCall.objects.get(call_id="toolu_fixture_side").conversation == child
    assert child.title == "Find duplicate recipes"  # the Task call's description
    # docs/formats.md "Titles": the fixture's summary of this session outranks the first prompt
    assert top.title == "Tidy the recipe index"


def test_claude_stream_json_thinking_subagent_and_result(user: User) -> None:
    assert run(FIXTURES / "claude_code/stream_json.jsonl", "--owner", user.username)[0] == 0
    top = Conversation.objects.get(parent__isnull=True)
    first = Message.objects.filter(conversation=top).order_by("position").first()
    assert first is not None
    assert first.message_id == "msg_stream_A1"
    assert [b["type"] for b in first.content] == ["thinking", "text", "tool_call"]
    thinking = DisplayMessage.objects.get(content_type="thinking")
    assert thinking.content["signature"] == "Zml4dHVyZS1zaWduYXR1cmU="
    call = ToolCall.objects.get(conversation=top)
    assert (call.name, call.call_id, call.status) == ("Agent", "toolu_stream_agent", "completed")
    [child] = top.children.all()
    assert (child.parent_call_id, child.title) == ("toolu_stream_agent", "Check links")
    subagent = [json.loads(r.raw) for r in child.source_records.all()]
    assert [line.get("parent_tool_use_id") for line in subagent] == [call.call_id] * 3
    assert SourceRecord.objects.filter(record_type="result", conversation=top).count() == 1


def test_codex_rollout_injected_reasoning_and_argument_shapes(user: User) -> None:
    assert run(FIXTURES / CODEX_ROLLOUT, "--owner", user.username)[0] == 0
    record = list(Message.objects.order_by("position"))
    assert [m.extra.get("injected", False) for m in record[:3]] == [True, True, False]
    assert record[3].content == [{"type": "thinking", "text": "Look at the argument parser."}]
    calls = {c.call_id: c for c in ToolCall.objects.all()}
    assert calls["call_fixture_exec1"].arguments == {"cmd": "grep -n version src/cli.py"}
    assert calls["call_fixture_mcp1"].name == "mcp__files__read"
    assert calls["call_fixture_patch"].arguments.startswith("*** Begin Patch")
    assert (calls["call_fixture_exec2"].status, calls["call_fixture_exec2"].interrupt_reason) == (
        "interrupted",
        "log_ended",
    )
    assert Conversation.objects.get().title == "Why does `cli --version` print nothing?"


def test_codex_rollout_that_grows_completes_its_open_call(tmp_path: Path, user: User) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_bytes((FIXTURES / CODEX_ROLLOUT).read_bytes())
    assert run(path, "--owner", user.username)[0] == 0
    output = {
        "timestamp": "2025-11-20T08:09:00.000Z",
        "type": "response_item",
        "payload": {
            "type": "function_call_output",
            "call_id": "call_fixture_exec2",
            "output": "3 passed",
        },
    }
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(output) + "\n")
    code, out, _ = run(path, "--owner", user.username)
    assert code == 0
    assert "1 message(s) added" in out
    assert ToolCall.objects.get(call_id="call_fixture_exec2").status == "completed"
    assert Conversation.objects.count() == 1


def test_codex_exec_upserts_items_and_fails_the_nonzero_exit(user: User) -> None:
    assert run(FIXTURES / "codex/exec.jsonl", "--owner", user.username)[0] == 0
    calls = {c.call_id: c for c in ToolCall.objects.all()}
    assert {k: (c.name, c.status) for k, c in calls.items()} == {
        "item_2": ("command_execution", "completed"),
        "item_3": ("command_execution", "failed"),
        "item_4": ("file_change", "completed"),
    }
    failed = Message.objects.get(tool_call_id="item_3")
    assert (failed.is_error, failed.extra["exit_code"]) == (True, 1)
    assert failed.content == "rm: build/cache: Permission denied\n"


def test_openai_key_ids_and_parallel_calls(user: User) -> None:
    path = FIXTURES / "openai/timetable.json"
    messages = json.loads(path.read_text("utf-8"))
    assert run(path, "--owner", user.username)[0] == 0
    conversation = Conversation.objects.get()
    assert conversation.external_id == key_of_messages(messages)
    assert conversation.title == messages[1]["content"]
    calls = {c.call_id: c for c in ToolCall.objects.all()}
    assert calls["cl_minted_0001"].arguments == {"line": "L2"}
    assert calls["call_fixture_after"].status == "interrupted"
    last_answer = Message.objects.get(position=6)
    assert last_answer.extra == {"refusal": None, "annotations": []}


def test_openai_longer_copy_lands_in_the_same_conversation(tmp_path: Path, user: User) -> None:
    messages = json.loads((FIXTURES / "openai/timetable.json").read_text("utf-8"))
    head = tmp_path / "head.json"
    head.write_text(json.dumps(messages[:3]), "utf-8")
    code, out, _ = run(head, "--owner", user.username)
    assert code == 0
    assert "2 open call(s) interrupted" in out
    assert run(FIXTURES / "openai/timetable.json", "--owner", user.username)[0] == 0
    assert Conversation.objects.count() == 1
    statuses = dict(ToolCall.objects.values_list("call_id", "status"))
    assert statuses["call_fixture_times"] == statuses["cl_minted_0001"] == "completed"


def test_anthropic_system_thinking_and_split_user_turn(user: User) -> None:
    path = FIXTURES / "anthropic/bike_trip.json"
    body = json.loads(path.read_text("utf-8"))
    assert run(path, "--owner", user.username)[0] == 0
    record = list(Message.objects.order_by("position"))
    assert [(m.role, m.tool_call_id) for m in record] == [
        ("system", ""),
        ("user", ""),
        ("assistant", ""),
        ("tool", "toolu_fixture_route"),
        ("user", ""),
        ("assistant", ""),
        ("tool", "toolu_fixture_elev"),
        ("assistant", ""),
    ]
    assert record[0].content == body["system"]
    original = body["messages"][1]["content"][0]
    assert record[2].content[0] == {
        "type": "thinking",
        "text": original["thinking"],
        "signature": original["signature"],
    }
    assert record[6].is_error is True
    assert record[-1].message_id == "msg_fixture_bike_answer"
    assert record[-1].extra["stop_reason"] == "end_turn"
    conversation = Conversation.objects.get()
    assert conversation.external_id == key_of_messages(body["messages"][:2])


def test_agentfootprint_history_injected_and_the_paused_run(user: User) -> None:
    assert run(FIXTURES / "agentfootprint/conversation.json", "--owner", user.username)[0] == 0
    record = list(Message.objects.order_by("position"))
    assert record[2].content == [
        {"type": "text", "text": "Searching the calendar."},
        {
            "type": "tool_call",
            "id": "tc_fixture_1",
            "name": "find_room",
            "input": {"people": 6, "day": "friday", "slot": "morning"},
        },
    ]
    assert "thinkingBlocks" in record[2].extra
    assert record[4].extra["injected"] is True
    notice = DisplayMessage.objects.get(message=record[4])
    assert notice.message_type == "system"
    assert run(FIXTURES / "agentfootprint/paused.json", "--owner", user.username)[0] == 0
    paused = Conversation.objects.get(status="paused")
    assert paused.pending_ask is not None
    assert paused.pending_ask["question"] == "Oak or Elm?"
    assert paused.format == "flowchart-v1"


# --------------------------------------------------------------------------- live streams


@pytest.mark.parametrize(
    ("name", "messages", "deltas"),
    [
        ("muse/notes_run.jsonl", 7, 5),  # three answer deltas, two tool outputs
        ("claude_code/stream_json.jsonl", 3, 0),
        ("codex/exec.jsonl", 9, 0),
    ],
)
def test_fixture_followed_from_stdin(
    monkeypatch: pytest.MonkeyPatch, user: User, name: str, messages: int, deltas: int
) -> None:
    from murmur_conversations import signals
    from murmur_conversations.management.commands import import_conversations

    monkeypatch.setattr(import_conversations, "layer_is_process_local", lambda: False)
    sent: list[tuple[str, str]] = []

    def receive(sender: object, *, stream_id: str, text: str, **kwargs: object) -> None:
        sent.append((stream_id, text))

    signals.delta.connect(receive)
    try:
        stdin = io.BytesIO((FIXTURES / name).read_bytes())
        code, _, err = run("-", "--owner", user.username, "--follow", stdin=stdin)
    finally:
        signals.delta.disconnect(receive)
    assert (code, err) == (0, "")
    conversation = Conversation.objects.get(parent__isnull=True)
    assert Message.objects.filter(conversation=conversation).count() == messages
    assert len(sent) == deltas
    assert_counters_match_rows(conversation)
    imported = counts(conversation)
    assert imported["calls"] == EXPECTED[name].calls
    # live, a subagent runs while its lines come and is done when its call's result comes
    for child in conversation.children.all():
        assert_counters_match_rows(child)
        assert child.status == "idle"
        assert child.record_length == EXPECTED[name].children[0][0]
