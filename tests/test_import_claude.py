"""Claude Code session transcripts and ``stream-json`` output (docs/formats.md, "Claude
Code"): every corpus file with hand-counted messages, calls and source records, per conversation
(the session and its subagents' child conversations); lines merged by ``message.id``; injected
lines; errors."""

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

SESSION = "claude_code_session/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
REDACTED = "claude_code_session/agent-history__real_sessions__claude__session-01.jsonl"
STREAM = "claude_code_stream_json/explore_count_files.jsonl"

# file -> (record messages, {status: calls}, injected, source records, key) of the top-level
# conversation, counted by hand from the main-chain lines: assistant lines merged per message.id,
# one tool message per tool_result; then the same of each child, in the order they began.
CORPUS_FILES = {
    SESSION: (25, {"completed": 11, "failed": 2}, 1, 31, "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"),
    REDACTED: (2, {}, 0, 5, "06090cb1-3e64-433a-bc7e-a621c0f596d2"),
    STREAM: (3, {"completed": 1}, 0, 21, "4e3453f9-129a-4da9-bc25-a287453d58d9"),
}
CHILDREN = {
    SESSION: [
        # the two sidechains, linked by the Task prompt their first line repeats
        ("6340ddef-f656-4b72-a065-82390f637678", "toolu_014YF9TXhDRR7BnpasNJ7gjC", 6,
         {"completed": 2}, 7),
        ("83e2917c-8940-4df6-a5a5-f2514f0d08c5", "toolu_01LKfUwrsnof18CpWZQcJH44", 14,
         {"completed": 5, "failed": 1}, 15),
    ],
    REDACTED: [],
    # parent_tool_use_id names the Agent call
    STREAM: [("toolu_01RmLUJdhjTMn56TnF9cMamW", "toolu_01RmLUJdhjTMn56TnF9cMamW", 3,
              {"completed": 1}, 3)],
}  # fmt: skip


def counts(conversation: Conversation) -> tuple[int, dict[str, int], int, int]:
    statuses: dict[str, int] = {}
    for call in ToolCall.objects.filter(conversation=conversation):
        statuses[call.status] = statuses.get(call.status, 0) + 1
    messages = Message.objects.filter(conversation=conversation)
    return (
        messages.count(),
        statuses,
        sum(1 for m in messages if m.extra.get("injected")),
        SourceRecord.objects.filter(conversation=conversation).count(),
    )


def lines_of(corpus: Path, name: str) -> list[JSON]:
    return [json.loads(line) for line in (corpus / name).read_text("utf-8").splitlines()]


@pytest.mark.parametrize("name", sorted(CORPUS_FILES))
def test_claude_corpus_file(corpus: Path, user: User, name: str) -> None:
    messages, calls, injected, records, key = CORPUS_FILES[name]
    code, out, err = run(corpus / name, "--owner", user.username)
    assert (code, err) == (0, "")
    assert "(claude-code): 1 conversation(s)" in out
    assert "0 unknown record(s)" in out
    conversation = Conversation.objects.get(owner=user, parent__isnull=True)
    assert (conversation.source, conversation.external_id) == ("claude-code", key)
    assert counts(conversation) == (messages, calls, injected, records)
    children = list(conversation.children.order_by("parent_created_event_seq"))
    assert [(c.external_id, c.parent_call_id, *counts(c)[:2], counts(c)[3]) for c in children] == [
        (f"{key}/{agent}", call, *rest) for agent, call, *rest in CHILDREN[name]
    ]
    everything = [conversation, *children]
    for each in everything:
        results = DisplayMessage.objects.filter(conversation=each, content_type="tool_result")
        assert all(r.tool_call_id is not None and not r.metadata for r in results)
        assert each.status == "idle"
        assert_counters_match_rows(each)
    before = [(c.last_event_seq, counts(c)) for c in everything]
    assert run(corpus / name, "--owner", user.username)[0] == 0
    for each in everything:
        each.refresh_from_db()
    assert [(c.last_event_seq, counts(c)) for c in everything] == before
    assert Conversation.objects.count() == len(everything)


def test_session_follows_the_main_chain_and_merges_split_responses(
    corpus: Path, user: User
) -> None:
    assert run(corpus / SESSION, "--owner", user.username)[0] == 0
    lines = lines_of(corpus, SESSION)
    main = [line for line in lines if line["type"] in ("user", "assistant")]
    sidechain = [line for line in main if line["isSidechain"]]
    assert len(sidechain) == 22  # two subagent chains (roots on lines 16 and 26)
    top = Conversation.objects.get(parent__isnull=True)
    record = list(Message.objects.filter(conversation=top).order_by("position"))
    ids = [m.message_id for m in record]
    # the main chain in parentUuid order: each line's parent came before it
    expected: list[str] = []
    for line in main:
        if line["isSidechain"]:
            continue
        if line["type"] == "assistant":
            mid = line["message"]["id"]
            if mid not in expected:
                expected.append(mid)
        else:
            expected.append(line["uuid"])
    assert ids == expected
    seen = {None}
    for line in main:
        if not line["isSidechain"]:
            assert line["parentUuid"] in seen
            seen.add(line["uuid"])
    merged = Message.objects.get(message_id="msg_01XU4B1nvSytVjiR8jEYREvX")
    assert [(b["type"], b["name"]) for b in merged.content] == [
        ("tool_call", "Task"),
        ("tool_call", "Task"),
        ("tool_call", "TodoWrite"),
    ]
    assert merged.extra["model"].startswith("claude")
    sidechain_uuids = {line["uuid"] for line in sidechain}
    assert not sidechain_uuids & set(ids)
    kept = {json.loads(r.raw)["uuid"] for r in SourceRecord.objects.filter(conversation=top)}
    assert not sidechain_uuids & kept
    # each sidechain is the record and source records of its child, in file order
    for child in top.children.all():
        root = child.external_id.rsplit("/", 1)[1]
        chain = [root]
        for line in sidechain:
            if line["parentUuid"] in chain:
                chain.append(line["uuid"])
        stored = SourceRecord.objects.filter(conversation=child).order_by("line_number")
        assert [json.loads(r.raw)["uuid"] for r in stored] == chain
        first = Message.objects.get(conversation=child, position=1)
        assert (first.message_id, first.role) == (root, "user")


def test_session_errors_and_injected_lines(corpus: Path, user: User) -> None:
    assert run(corpus / SESSION, "--owner", user.username)[0] == 0
    top = Conversation.objects.get(parent__isnull=True)
    failed = ToolCall.objects.filter(conversation=top, status="failed").order_by("name")
    assert [c.name for c in failed] == ["Edit", "Task"]
    # the subagent's failed Bash is its own conversation's
    [bash] = ToolCall.objects.filter(status="failed").exclude(conversation=top)
    assert (bash.name, bash.conversation.parent_id) == ("Bash", top.pk)
    result = Message.objects.get(tool_call_id="toolu_018t5jce2ZNoGr2ADsHGQife")
    assert result.is_error is True
    meta = Message.objects.get(message_id="e3b9327b-507e-4eca-b3cd-6a1fdabfc1fc")
    assert meta.extra["injected"] is True
    notice = DisplayMessage.objects.get(message=meta)
    assert (notice.message_type, notice.content_type) == ("system", "notification")
    conversation = top
    # docs/formats.md "Titles": the slash command typed, without its wrappers
    assert conversation.title.startswith("/orchestrator @CLAUDE.md ")
    # the slash command typed (its expansion is injected) and the 3 assistant messages with text
    assert conversation.transcript_count == 1 + 3


def test_stream_json_subagent_is_a_child_and_the_result_line_ends_the_run(
    corpus: Path, user: User
) -> None:
    assert run(corpus / STREAM, "--owner", user.username)[0] == 0
    top = Conversation.objects.get(parent__isnull=True)
    record = list(Message.objects.filter(conversation=top).order_by("position"))
    first = record[0]
    assert first.message_id == "msg_01QoWnPzFoQtmAvhRBUjxU4j"
    assert [b["type"] for b in first.content] == ["thinking", "text", "tool_call"]
    thinking = DisplayMessage.objects.get(content_type="thinking")
    assert thinking.content["signature"]
    call = ToolCall.objects.get(conversation=top)
    assert (call.name, call.call_id) == ("Agent", "toolu_01RmLUJdhjTMn56TnF9cMamW")
    assert record[-1].content[0]["text"].startswith("There are **21**")
    types = sorted(r.record_type for r in SourceRecord.objects.filter(conversation=top))
    assert types.count("result") == 1
    assert types.count("user") == 1  # the result of the Agent call
    [child] = top.children.all()
    assert child.parent_call_id == call.call_id
    assert child.title == "Count .rs files in directory"  # the Agent call's description
    lines = [json.loads(r.raw) for r in SourceRecord.objects.filter(conversation=child)]
    assert [line.get("parent_tool_use_id") for line in lines] == [call.call_id] * 3
    assert [m.role for m in child.messages.order_by("position")] == ["user", "assistant", "tool"]
    assert ToolCall.objects.get(conversation=child).name == "Bash"


def test_stream_json_error_result_is_the_runs_error(
    corpus: Path, tmp_path: Path, user: User
) -> None:
    lines = (corpus / STREAM).read_text("utf-8").splitlines()
    last = json.loads(lines[-1])
    last.update(subtype="error_max_turns", is_error=True, result="")
    path = write_lines(tmp_path / "err.jsonl", *lines[:-1], json.dumps(last))
    assert run(path, "--owner", user.username)[0] == 0
    conversation = Conversation.objects.get(parent__isnull=True)
    assert conversation.status == "error"
    [error] = DisplayMessage.objects.filter(content_type="error")
    assert error.content["error_type"] == "error_max_turns"
    assert Message.objects.filter(conversation=conversation).count() == 3
    assert run(path, "--owner", user.username)[0] == 0
    assert DisplayMessage.objects.filter(content_type="error").count() == 1


def line(kind: str, uuid: str, parent: str | None, session: str = "s-1", **fields: JSON) -> str:
    return json.dumps(
        {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": session, **fields}
    )


def test_sessions_split_and_bad_lines(tmp_path: Path, user: User) -> None:
    path = write_lines(
        tmp_path / "mixed.jsonl",
        line("user", "u1", None, message={"role": "user", "content": "hi"}),
        "{oops",
        line("assistant", "a1", "u1", message={"id": "m1", "role": "assistant", "content": []}),
        line("user", "u2", None, session="s-2", message={"role": "user", "content": "other"}),
        line(
            "user", "u3", None, session="s-2", isMeta=True, message={"role": "user", "content": "x"}
        ),
        line("mystery", "z1", None),
        json.dumps([1]),
    )
    code, out, err = run(path, "--owner", user.username)
    assert code == 1
    assert "mixed.jsonl:2: not JSON" in err
    assert "mixed.jsonl:7: a JSON list, not an object" in err
    assert "1 unknown record(s) kept" in out
    by_key = {
        c.external_id: [(m.message_id, m.extra.get("injected", False)) for m in c.messages.all()]
        for c in Conversation.objects.all()
    }
    assert by_key == {
        "s-1": [("u1", False), ("m1", False)],
        "s-2": [("u2", False), ("u3", True)],
    }


def test_lines_without_a_session_id_take_the_file_stem(tmp_path: Path, user: User) -> None:
    path = write_lines(
        tmp_path / "abc-123.jsonl",
        json.dumps({"type": "summary", "summary": "s", "leafUuid": "x"}),
        json.dumps({"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}}),
    )
    assert run(path, "--owner", user.username, "--format", "claude-code")[0] == 0
    conversation = Conversation.objects.get()
    assert conversation.external_id == "abc-123"
    assert SourceRecord.objects.count() == 2
