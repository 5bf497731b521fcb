"""``manage.py import_conversations`` (docs/formats.md): message lists, murmur records and
agentfootprint envelopes; keys, ids, idempotency, owner scoping, bad files and exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from murmur_conversations.importers.records import canonical_json
from murmur_conversations.management.commands.import_conversations import EXIT_MISSING
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    SourceRecord,
    ToolCall,
)
from tests.helpers import MakeUser, assert_counters_match_rows
from tests.import_helpers import (
    JSON,
    cassette_conversation,
    murmur_lines,
    run,
    write_json,
    write_lines,
)

pytestmark = pytest.mark.django_db


def sha256(value: JSON) -> str:
    import hashlib

    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def only_conversation(**filters: object) -> Conversation:
    [conversation] = Conversation.objects.filter(**filters)
    return conversation


def record(conversation: Conversation) -> list[Message]:
    return list(Message.objects.filter(conversation=conversation).order_by("position"))


# --------------------------------------------------------------------------- the cassettes


@pytest.mark.parametrize("fmt", ["openai", "auto"])
def test_openai_cassette_imports(corpus: Path, tmp_path: Path, user: User, fmt: str) -> None:
    messages = cassette_conversation(corpus, "openai_multiple_agent_tool_calls")
    path = write_json(tmp_path / "chat.json", messages)
    code, out, err = run(path, "--owner", user.username, "--format", fmt)
    assert (code, err) == (0, "")
    assert "(openai)" in out
    conversation = only_conversation(owner=user, source="openai")
    first_assistant = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    assert conversation.external_id == sha256(messages[: first_assistant + 1])
    assert conversation.title == "What is the capital of France?"
    rows = record(conversation)
    assert [m.role for m in rows] == [m["role"] for m in messages]
    assert rows[0].message_id == "imp_" + sha256([conversation.external_id, 0, messages[0]])[:32]
    calls = {c.call_id: c for c in ToolCall.objects.filter(conversation=conversation)}
    assert set(calls) == {
        "pyd_ai_504f8147f83f44f3a5f14d87bfd01bda",
        "call_SkEQ3ZGSJC8m6AvaIGNuuKdm",
    }
    assert {c.status for c in calls.values()} == {"completed"}
    assert calls["call_SkEQ3ZGSJC8m6AvaIGNuuKdm"].arguments == {"country": "England"}
    results = DisplayMessage.objects.filter(conversation=conversation, content_type="tool_result")
    assert {r.content["content"] for r in results} == {"Paris", "London"}
    assert all(r.tool_call is not None and not r.metadata.get("orphan") for r in results)
    assert rows[-1].content == "The capital of England is London."
    assert_counters_match_rows(conversation)


@pytest.mark.parametrize("fmt", ["anthropic", "auto"])
def test_anthropic_cassette_imports(corpus: Path, tmp_path: Path, user: User, fmt: str) -> None:
    messages = cassette_conversation(corpus, "anthropic_tool_with_thinking")
    path = write_json(tmp_path / "chat.json", messages)
    code, out, err = run(path, "--owner", user.username, "--format", fmt)
    assert (code, err) == (0, "")
    assert "(anthropic)" in out
    conversation = only_conversation(owner=user, source="anthropic")
    rows = record(conversation)
    assert [m.role for m in rows] == ["user", "assistant", "tool", "assistant"]
    assert rows[-1].message_id == messages[-1]["id"]
    assert rows[-1].extra["stop_reason"] == "end_turn"
    thinking = rows[1].content[0]
    original = messages[1]["content"][0]
    assert thinking == {
        "type": "thinking",
        "text": original["thinking"],
        "signature": original["signature"],
    }
    assert rows[2].tool_call_id == "toolu_01YGzqpRE16Vricda3Aqcejo"
    call = ToolCall.objects.get(conversation=conversation)
    assert (call.call_id, call.name, call.status) == (
        "toolu_01YGzqpRE16Vricda3Aqcejo",
        "get_user_country",
        "completed",
    )
    types = list(
        DisplayMessage.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("content_type", flat=True)
    )
    assert types == ["text", "thinking", "text", "tool_call", "tool_result", "text"]
    assert_counters_match_rows(conversation)


def test_importing_twice_adds_nothing_and_owners_are_separate(
    corpus: Path, tmp_path: Path, make_user: MakeUser
) -> None:
    alice, bob = make_user(), make_user()
    path = write_json(
        tmp_path / "chat.json", cassette_conversation(corpus, "anthropic_tool_with_thinking")
    )
    assert run(path, "--owner", alice.username)[0] == 0
    conversation = only_conversation(owner=alice)
    before = (conversation.last_event_seq, Message.objects.count(), DisplayMessage.objects.count())
    code, out, _ = run(path, "--owner", alice.username)
    assert code == 0
    assert "unchanged since the last import" in out  # docs/formats.md "Whole folders"
    code, out, _ = run(path, "--owner", alice.username, "--reread")
    assert code == 0
    assert "0 message(s) added of 4 read" in out
    conversation.refresh_from_db()
    after = (conversation.last_event_seq, Message.objects.count(), DisplayMessage.objects.count())
    assert after == before
    assert run(path, "--owner", bob.username)[0] == 0
    theirs = only_conversation(owner=bob)
    assert theirs.pk != conversation.pk
    assert theirs.external_id == conversation.external_id
    assert len(record(theirs)) == len(record(conversation)) == 4


def test_open_call_at_the_end_is_interrupted_then_completed_by_a_longer_log(
    corpus: Path, tmp_path: Path, user: User
) -> None:
    full = cassette_conversation(corpus, "openai_multiple_agent_tool_calls")
    head = full[:2]  # the user question and the call, no result yet
    code, out, _ = run(write_json(tmp_path / "a.json", head), "--owner", user.username)
    assert code == 0
    assert "1 open call(s) interrupted" in out
    call = ToolCall.objects.get()
    assert (call.status, call.interrupt_reason) == ("interrupted", "log_ended")
    assert run(write_json(tmp_path / "b.json", full), "--owner", user.username)[0] == 0
    call.refresh_from_db()
    assert call.status == "completed"
    assert Conversation.objects.count() == 1
    assert len(record(Conversation.objects.get())) == len(full)


def test_jsonl_message_list_with_conversation_id(corpus: Path, tmp_path: Path, user: User) -> None:
    lines = [
        json.dumps(m) for m in cassette_conversation(corpus, "openai_multiple_agent_tool_calls")
    ]
    path = write_lines(tmp_path / "chat.jsonl", *lines)
    assert run(path, "--owner", user.username, "--conversation-id", "chat-1")[0] == 0
    conversation = only_conversation(owner=user)
    assert (conversation.source, conversation.external_id) == ("openai", "chat-1")
    assert len(record(conversation)) == len(lines)


def test_anthropic_request_body_with_system_prompt(tmp_path: Path, user: User) -> None:
    body = {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
        ],
    }
    path = write_json(tmp_path / "body.json", body)
    assert run(path, "--owner", user.username)[0] == 0
    conversation = only_conversation(source="anthropic")
    assert [(m.role, m.content) for m in record(conversation)] == [
        ("system", "Be brief."),
        ("user", "Hi"),
        ("assistant", [{"type": "text", "text": "Hello"}]),
    ]
    assert conversation.external_id == sha256(body["messages"])


# --------------------------------------------------------------------------- murmur records


def test_murmur_record_key_from_path_and_raw_lines_kept(tmp_path: Path, user: User) -> None:
    folder = tmp_path / "rec-9" / "ctx-2"
    folder.mkdir(parents=True)
    path = write_lines(folder / "conversation.jsonl", *murmur_lines())
    code, out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    assert "(murmur)" in out
    conversation = only_conversation(source="murmur")
    assert conversation.external_id == "rec-9/ctx-2"
    rows = record(conversation)
    assert [m.message_id for m in rows] == [
        "msg_01a04900754b7183b66c11e744612e2d",
        "msg_02",
        "msg_03",
        "msg_04",
    ]
    assert (rows[2].source_id, rows[3].extra) == ("hook-7", {"model": "m1"})
    assert ToolCall.objects.get().status == "completed"
    raws = dict(SourceRecord.objects.values_list("source_key", "raw"))
    assert raws["msg_02"] == murmur_lines()[1]


def test_murmur_key_falls_back_to_conversation_id_then_first_id(tmp_path: Path, user: User) -> None:
    path = write_lines(tmp_path / "log.jsonl", *murmur_lines())
    assert run(path, "--owner", user.username, "--format", "murmur")[0] == 0
    assert only_conversation().external_id == "msg_01a04900754b7183b66c11e744612e2d"
    assert run(path, "--owner", user.username, "--conversation-id", "mine")[0] == 0
    assert Conversation.objects.filter(external_id="mine").exists()


def test_stdin(user: User) -> None:
    data = "\n".join(murmur_lines()).encode("utf-8") + b"\n"
    code, out, _ = run("-", "--owner", user.username, stdin=io.BytesIO(data))
    assert code == 0
    assert "<stdin> (murmur)" in out
    assert Message.objects.count() == 4


def test_dry_run_writes_nothing(tmp_path: Path, user: User) -> None:
    path = write_lines(tmp_path / "log.jsonl", *murmur_lines(), '{"kind":"marker"}')
    code, out, _ = run(path, "--owner", user.username, "--dry-run")
    assert code == 0
    assert "4 message(s) readable, 1 unknown record(s)" in out
    assert not Conversation.objects.exists()
    assert not SourceRecord.objects.exists()


# --------------------------------------------------------------------------- bad files


def test_bom_crlf_and_blank_lines(tmp_path: Path, user: User) -> None:
    body = "\r\n\r\n".join(murmur_lines()) + "\r\n\r\n"
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + body.encode("utf-8"))
    code, _, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    assert Message.objects.count() == 4
    assert SourceRecord.objects.get(source_key="msg_02").raw == murmur_lines()[1]


def test_malformed_middle_line_is_reported_and_the_rest_lands(tmp_path: Path, user: User) -> None:
    lines = murmur_lines()
    path = write_lines(
        tmp_path / "log.jsonl", lines[0], '{"role": "user", "content": nope}', *lines[1:]
    )
    code, _, err = run(path, "--owner", user.username)
    assert code == 1
    assert f"{path}:2: not JSON" in err
    assert '{"role": "user", "content": nope}' in err
    assert Message.objects.count() == 4


def test_torn_last_line(tmp_path: Path, user: User) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(("\n".join(murmur_lines()) + '\n{"role":"user","cont').encode("utf-8"))
    code, _, err = run(path, "--owner", user.username)
    assert code == 1
    assert f"{path}:5: torn last line" in err
    assert Message.objects.count() == 4


def test_last_line_without_newline_is_fine(tmp_path: Path, user: User) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes("\n".join(murmur_lines()).encode("utf-8"))
    assert run(path, "--owner", user.username)[0] == 0
    assert Message.objects.count() == 4


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ('{"role":"user","content":"café","id":"m1"}\n'.encode("latin-1"), "not UTF-8 (byte 0xe9"),
        ('{"role":"user","content":"hi","id":"m1"}\n'.encode("utf-16"), "UTF-16"),
    ],
)
def test_wrong_encoding_is_refused_whole(
    tmp_path: Path, user: User, data: bytes, reason: str
) -> None:
    good = write_lines(tmp_path / "good.jsonl", *murmur_lines())
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(
        b'{"role":"user","content":"fine","id":"m0"}\n' * 3 + data
        if reason.startswith("not")
        else data
    )
    code, _, err = run(bad, "--owner", user.username)
    assert code == 2
    assert reason in err
    assert not Conversation.objects.exists()
    code, _, err = run(good, bad, "--owner", user.username)
    assert code == 1
    assert Message.objects.count() == 4


def test_unknown_record_types_are_kept_counted_and_not_partial(tmp_path: Path, user: User) -> None:
    lines = murmur_lines()
    marker = '{"type":"compaction-marker","at":3}'
    path = write_lines(tmp_path / "log.jsonl", lines[0], marker, *lines[1:])
    code, out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    assert "1 unknown record(s) kept" in out
    kept = SourceRecord.objects.get(record_type="compaction-marker")
    assert (kept.raw, kept.line_number) == (marker, 2)
    assert run(path, "--owner", user.username)[0] == 0
    assert SourceRecord.objects.count() == 5


def test_invalid_message_is_refused_alone(tmp_path: Path, user: User) -> None:
    lines = murmur_lines()
    path = write_lines(
        tmp_path / "log.jsonl", lines[0], '{"role":"user","content":42,"id":"bad"}', *lines[1:]
    )
    code, _, err = run(path, "--owner", user.username)
    assert code == 1
    assert ":2: message 'content' must be a string or a list of blocks" in err
    assert not Message.objects.filter(message_id="bad").exists()
    assert not SourceRecord.objects.filter(source_key="bad").exists()
    assert Message.objects.count() == 4


@pytest.mark.parametrize(
    "text",
    ["", "\n\n  \n", "[1, 2]\n", '"just a string"\n'],
)
def test_nothing_usable_exits_2(tmp_path: Path, user: User, text: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text, "utf-8")
    code, _, _ = run(path, "--owner", user.username, "--format", "openai")
    assert code == 2
    assert not Message.objects.exists()


def test_undetectable_format(tmp_path: Path, user: User) -> None:
    path = write_lines(tmp_path / "x.jsonl", '{"what": 1}')
    code, _, err = run(path, "--owner", user.username)
    assert code == 2
    assert "cannot tell the format: none of the first 1 line(s)" in err
    assert "pass --format" in err


# --------------------------------------------------------------------------- agentfootprint


def envelope(fmt: str = "conversation-v1", **data: JSON) -> dict[str, JSON]:
    history = [
        {"role": "user", "content": "Book a table"},
        {
            "role": "assistant",
            "content": "Checking.",
            "toolCalls": [{"id": "t1", "name": "find_table", "args": {"people": 2}}],
        },
        {"role": "tool", "content": "19:00 free", "toolCallId": "t1", "toolName": "find_table"},
        {
            "role": "user",
            "content": "Remember: the user is vegetarian",
            "injectedBy": {"injectionId": "i1", "flavor": "memory", "iteration": 1},
        },
    ]
    conversation = {"version": 1, "runId": "r1", "history": history, "checkpointedAt": 1}
    if fmt == "flowchart-v1":
        payload = {"checkpoint": {"pausedStageId": "x"}, "conversation": conversation, **data}
    else:
        payload = {**conversation, **data}
    return {"format": fmt, "savedAt": 1700000000000, "data": payload}


def test_agentfootprint_conversation(tmp_path: Path, user: User) -> None:
    path = write_json(tmp_path / "session.json", envelope())
    code, out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    assert "(agentfootprint)" in out
    conversation = only_conversation(source="agentfootprint")
    rows = record(conversation)
    assert [m.role for m in rows] == ["user", "assistant", "tool", "user"]
    assert rows[1].content == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_call", "id": "t1", "name": "find_table", "input": {"people": 2}},
    ]
    assert rows[3].extra["injected"] is True
    assert ToolCall.objects.get().status == "completed"
    notice = DisplayMessage.objects.get(message=rows[3])
    assert (notice.message_type, notice.metadata) == ("system", {"injected": True})
    assert conversation.transcript_count == 2
    assert SourceRecord.objects.get(conversation=conversation).record_type == "conversation-v1"
    assert run(path, "--owner", user.username)[0] == 0
    assert Message.objects.count() == 4


def test_agentfootprint_paused_run_sets_the_pending_ask(tmp_path: Path, user: User) -> None:
    ask = {"question": "Which time?", "tool": "ask_user", "pauseData": {"options": [1, 2]}}
    path = write_json(tmp_path / "paused.json", envelope("flowchart-v1", pending=ask))
    assert run(path, "--owner", user.username)[0] == 0
    conversation = only_conversation(source="agentfootprint")
    assert (conversation.status, conversation.pending_ask) == ("paused", ask)
    assert conversation.format == "flowchart-v1"
    answered = write_json(tmp_path / "answered.json", envelope())
    assert run(answered, "--owner", user.username)[0] == 0
    conversation.refresh_from_db()
    assert (conversation.status, conversation.pending_ask) == ("idle", None)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (
            {"format": "session-v4", "savedAt": 0, "data": {}},
            "unknown envelope format 'session-v4'",
        ),
        (
            {"format": "conversation-v1", "savedAt": 0, "data": {}},
            "missing required field: history",
        ),
        (
            {"format": "flowchart-v1", "data": {"conversation": {"history": []}}},
            "missing required field: pending",
        ),
        (
            {
                "format": "flowchart-v1",
                "data": {"conversation": {"history": []}, "pending": {"question": 1}},
            },
            "data.pending.question must be a string",
        ),
    ],
)
def test_agentfootprint_refusals_name_the_problem(
    tmp_path: Path, user: User, value: JSON, reason: str
) -> None:
    path = write_json(tmp_path / "env.json", value)
    code, _, err = run(path, "--owner", user.username, "--format", "agentfootprint")
    assert code == 2
    assert reason in err
    assert not Conversation.objects.exists()


# --------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--owner", "nobody"], "no user with username 'nobody'"),
        (["--owner", "{user}", "--format", "yaml"], "unknown --format 'yaml'"),
        (["-", "--owner", "{user}", "--follow"], "--follow takes exactly one source"),
        (["{path}", "--owner", "{user}", "--follow"], "--follow takes exactly one source"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, user: User, args: list[str], message: str) -> None:
    path = write_lines(tmp_path / "log.jsonl", *murmur_lines())
    args = [a.format(user=user.username, path=path) for a in args]
    code, _, err = run(path, *args)
    assert code == 2
    assert message in err
    assert not Conversation.objects.exists()


def test_a_missing_path_is_named_and_the_rest_imported(tmp_path: Path, user: User) -> None:
    """Some PATHs missing: the others are imported, each missing one named, exit 3; all missing:
    exit 2, nothing imported (docs/formats.md "What every import does")."""
    missing = tmp_path / "missing.jsonl"
    code, _, err = run(missing, tmp_path / "gone", "--owner", user.username)
    assert code == 2
    assert "no such file or folder; nothing was imported" in err
    assert not Conversation.objects.exists()
    good = write_lines(tmp_path / "log.jsonl", *murmur_lines())
    code, _out, err = run(good, missing, "--owner", user.username)
    assert code == EXIT_MISSING == 3
    assert f"{missing}: no such file or folder; not imported" in err
    assert "1 PATH(s) not found" in err
    assert Conversation.objects.count() == 1


def test_owner_is_matched_on_username_field(tmp_path: Path, make_user: MakeUser) -> None:
    ada = make_user(username="ada")
    path = write_lines(tmp_path / "log.jsonl", *murmur_lines())
    assert run(path, "--owner", "ada")[0] == 0
    assert only_conversation().owner == ada


@pytest.mark.parametrize(
    ("relative", "forced", "detected"),
    [
        ("codex_exec_jsonl/failed_command.jsonl", "muse", "codex"),
        ("muse_exec_jsonl/echo_basic.jsonl", "codex", "muse"),
        ("muse_exec_jsonl/echo_basic.jsonl", "claude-code", "muse"),
        ("muse_exec_jsonl/echo_basic.jsonl", "openai", "muse"),
    ],
)
def test_a_plainly_wrong_forced_format_is_refused_whole(
    corpus: Path, user: User, relative: str, forced: str, detected: str
) -> None:
    code, _, err = run(corpus / relative, "--owner", user.username, "--format", forced)
    assert code == 2
    assert f"looks like {detected}, not {forced}" in err
    assert not Conversation.objects.exists()


def test_a_forced_format_that_fits_still_imports(corpus: Path, user: User) -> None:
    path = corpus / "codex_exec_jsonl" / "failed_command.jsonl"
    code, _, _ = run(path, "--owner", user.username, "--format", "codex")
    assert code == 0
    assert Conversation.objects.count() == 1
