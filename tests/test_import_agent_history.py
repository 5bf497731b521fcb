"""Claude Code and Codex logs as current versions write them (docs/formats.md): detection past
bookkeeping lines, replayed turns stored once, every Codex item read or counted, the logs' own
times and titles. Our own small fixtures (``tests.agentlog_lines``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    SourceRecord,
    ToolCall,
)
from murmur_conversations.projection import transcript_entry
from murmur_conversations.representations import iso as as_api
from tests.agentlog_lines import START, Claude, Codex, iso, tool_use, write_jsonl
from tests.helpers import assert_counters_match_rows, corpus_logs
from tests.import_helpers import JSON, run

pytestmark = pytest.mark.django_db


def transcript(conversation: Conversation) -> list[tuple[str, str]]:
    return [
        (m.role, entry["content"])
        for m in Message.objects.filter(conversation=conversation).order_by("position")
        if (
            entry := transcript_entry(
                role=m.role, content=m.content, tool_call_id=m.tool_call_id, extra=m.extra
            )
        )
    ]


# ------------------------------------------------------------------------------ 1. detection

FIRST_LINES: dict[str, Callable[[Claude], dict[str, Any]]] = {
    "summary": lambda c: {
        "type": "summary",
        "summary": "Earlier work",
        "leafUuid": "5d4e0a5e-0000-4000-8000-000000000001",
    },
    "file-history-snapshot": lambda c: {
        "type": "file-history-snapshot",
        "messageId": "m0",
        "isSnapshotUpdate": False,
        "snapshot": {"messageId": "m0", "trackedFileBackups": {}, "timestamp": iso(START)},
    },
    "ai-title": lambda c: c.bookkeeping("ai-title", aiTitle="Raised beds"),
    "custom-title": lambda c: c.bookkeeping("custom-title", customTitle="Raised beds"),
    "agent-name": lambda c: c.bookkeeping("agent-name", agentName="gardener"),
    "attachment": lambda c: c.line(
        "attachment", attachment={"type": "companion_intro", "name": "Sprout", "species": "fern"}
    ),
}


@pytest.mark.parametrize("kind", sorted(FIRST_LINES))
def test_a_session_starting_with_bookkeeping_is_detected(
    tmp_path: Path, user: User, kind: str
) -> None:
    c = Claude()
    lines = [
        FIRST_LINES[kind](c),
        c.prompt("Build a raised bed"),
        c.answer("msg_1", "Here is a plan."),
    ]
    path = write_jsonl(tmp_path / f"{kind}.jsonl", lines)
    code, out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    assert "(claude-code): 1 conversation(s), 2 message(s) added" in out
    forced = write_jsonl(tmp_path / "forced" / f"{kind}.jsonl", lines)
    assert run(forced, "--owner", user.username, "--format", "claude-code")[0] == 0
    assert Conversation.objects.get(owner=user).external_id == c.session


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"type":"summary","summary":"x","leafUu', "line 1: torn last line"),
        (
            b'{"type": "user", "sessionId": }\n{"type":"user"}\n',
            "line 1: not JSON (Expecting value at column 31)",
        ),
        (b"\n\n[1, 2]\n[3]\n", "line 3: a JSON list, not an object"),
    ],
)
def test_an_undetectable_file_names_its_bad_line(
    tmp_path: Path, user: User, content: bytes, reason: str
) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_bytes(content)
    code, _, err = run(path, "--owner", user.username)
    assert code == 2
    assert f"cannot tell the format: {reason}" in err


# ------------------------------------------------------------------------------ 3. replayed turns


def replayed_session() -> tuple[Claude, list[dict[str, Any]]]:
    """One turn (a prompt; ``msg_01`` with text and ``toolu_01`` over two lines; the result;
    ``msg_02``), the same turn written again by a resumed session (new line uuids, same ids), a new
    turn."""
    c = Claude()
    turn = [
        c.prompt("Check the soil moisture log", promptId="prompt-1"),
        c.answer("msg_01", "Let me read the log."),
        c.answer("msg_01", tool_use("toolu_01", command="cat moisture.csv")),
        c.result("toolu_01", "bed,pct\nnorth,31"),
        c.answer("msg_02", "The north bed is at 31%."),
    ]
    replay = [
        c.prompt("Check the soil moisture log", promptId="prompt-1"),
        c.answer("msg_01", "Let me read the log."),
        c.answer("msg_01", tool_use("toolu_01", command="cat moisture.csv")),
        c.result("toolu_01", "bed,pct\nnorth,31"),
        c.answer("msg_02", "The north bed is at 31%."),
    ]
    new_turn = [c.prompt("Water it tonight", promptId="prompt-2"), c.answer("msg_03", "Scheduled.")]
    return c, turn + replay + new_turn


def test_a_replayed_turn_is_stored_once(tmp_path: Path, user: User) -> None:
    _c, lines = replayed_session()
    path = write_jsonl(tmp_path / "resumed.jsonl", lines)
    code, _out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    conversation = Conversation.objects.get(owner=user)
    record = list(Message.objects.filter(conversation=conversation).order_by("position"))
    assert [m.message_id for m in record] == [
        lines[0]["uuid"],
        "msg_01",
        lines[3]["uuid"],
        "msg_02",
        lines[10]["uuid"],
        "msg_03",
    ]
    assert not any(m.message_id.startswith("imp_") for m in record)
    merged = record[1]
    assert [b["type"] for b in merged.content] == ["text", "tool_call"]
    assert not DisplayMessage.objects.filter(
        conversation=conversation, metadata__late=True
    ).exists()
    assert ToolCall.objects.get(conversation=conversation).status == "completed"
    assert transcript(conversation) == [
        ("user", "Check the soil moisture log"),
        ("assistant", "Let me read the log."),
        ("assistant", "The north bed is at 31%."),
        ("user", "Water it tonight"),
        ("assistant", "Scheduled."),
    ]
    assert SourceRecord.objects.filter(conversation=conversation).count() == len(lines)
    assert_counters_match_rows(conversation)


def test_a_replay_appended_after_an_import_is_stored_once(tmp_path: Path, user: User) -> None:
    _c, lines = replayed_session()
    path = write_jsonl(tmp_path / "resumed.jsonl", lines[:5])
    assert run(path, "--owner", user.username)[0] == 0
    write_jsonl(path, lines)  # the resumed session appended its replay and a new turn
    code, out, _ = run(path, "--owner", user.username)
    assert code == 0
    assert "7 line(s) appended since the last import" in out
    assert "1 replayed result(s) dropped" in out
    conversation = Conversation.objects.get(owner=user)
    assert len(transcript(conversation)) == 5
    assert not DisplayMessage.objects.filter(
        conversation=conversation, metadata__late=True
    ).exists()
    assert Message.objects.filter(conversation=conversation, role="tool").count() == 1


def test_a_replayed_result_in_a_later_read_is_dropped(tmp_path: Path, user: User) -> None:
    """Read whole again (no resume state), the replayed result's call already has its result in
    the database: the writer drops it instead of storing a late result."""
    _c, lines = replayed_session()
    path = write_jsonl(tmp_path / "resumed.jsonl", lines[:5])
    assert run(path, "--owner", user.username)[0] == 0
    only_replay = write_jsonl(tmp_path / "replay-only.jsonl", lines[5:])
    code, out, _ = run(only_replay, "--owner", user.username)
    assert code == 0
    assert "1 replayed result(s) dropped" in out
    conversation = Conversation.objects.get(owner=user)
    assert Message.objects.filter(conversation=conversation, role="tool").count() == 1
    assert not DisplayMessage.objects.filter(
        conversation=conversation, metadata__late=True
    ).exists()


def test_results_between_the_lines_of_one_answer_wait_for_it(tmp_path: Path, user: User) -> None:
    """Claude Code writes one line per content block; a result may come before the next block of
    the same message.id: one message, and each call before its result."""
    c = Claude()
    lines = [
        c.prompt("Read both files"),
        c.answer("msg_p", tool_use("toolu_a", command="cat a")),
        c.result("toolu_a", "A"),
        c.answer("msg_p", tool_use("toolu_b", command="cat b")),
        c.result("toolu_b", "B"),
        c.answer("msg_q", "Both read."),
    ]
    path = write_jsonl(tmp_path / "parallel.jsonl", lines)
    assert run(path, "--owner", user.username)[0] == 0
    record = list(Message.objects.order_by("position"))
    assert [(m.role, m.message_id) for m in record] == [
        ("user", lines[0]["uuid"]),
        ("assistant", "msg_p"),
        ("tool", lines[2]["uuid"]),
        ("tool", lines[4]["uuid"]),
        ("assistant", "msg_q"),
    ]
    assert [b["id"] for b in record[1].content] == ["toolu_a", "toolu_b"]
    assert set(ToolCall.objects.values_list("status", flat=True)) == {"completed"}
    assert not DisplayMessage.objects.filter(metadata__orphan=True).exists()


def test_a_compaction_summary_is_a_notice_not_a_turn(tmp_path: Path, user: User) -> None:
    c = Claude()
    lines = [
        c.prompt("Plan the beds"),
        c.answer("msg_1", "Planned."),
        c.system(
            "compact_boundary",
            content="Conversation compacted",
            compactMetadata={"trigger": "auto", "preTokens": 160000},
        ),
        c.line(
            "user",
            isCompactSummary=True,
            isVisibleInTranscriptOnly=True,
            message={
                "role": "user",
                "content": "This session is being continued from a previous conversation.",
            },
        ),
        c.prompt("Now the herbs"),
    ]
    path = write_jsonl(tmp_path / "compacted.jsonl", lines)
    assert run(path, "--owner", user.username)[0] == 0
    conversation = Conversation.objects.get(owner=user)
    assert transcript(conversation) == [
        ("user", "Plan the beds"),
        ("assistant", "Planned."),
        ("user", "Now the herbs"),
    ]
    api = APIClient()
    api.force_authenticate(user)
    summary = api.get(f"/api/conversations/{conversation.pk}/").json()
    assert summary["message_count"] == 3
    summary_message = Message.objects.get(message_id=lines[3]["uuid"])
    assert summary_message.extra["notice"] == "compaction_summary"
    notices = DisplayMessage.objects.filter(
        conversation=conversation, message_type="system"
    ).order_by("seq")
    assert [(n.content_type, n.message_id is None) for n in notices] == [
        ("notification", True),  # the compaction, outside the record
        ("notification", False),  # the summary, in the record
    ]


# ------------------------------------------------------------------------------ 4. Codex


def test_codex_rollout_reads_every_item_kind(tmp_path: Path, user: User) -> None:
    x = Codex()
    lines = [
        x.meta(),
        x.message("user", "Find frost dates and list the beds"),
        x.item(
            type="local_shell_call",
            call_id="call_sh",
            status="completed",
            action={"type": "exec", "command": ["ls", "beds"], "timeout_ms": 1000},
        ),
        x.item(type="function_call_output", call_id="call_sh", output="north\nsouth"),
        x.item(
            type="web_search_call",
            id="ws_1",
            status="completed",
            action={"type": "search", "query": "last frost date zone 7"},
        ),
        x.item(type="tool_search_call", execution="server", arguments={"query": "calendar"}),
        x.item(
            type="tool_search_output",
            execution="server",
            status="completed",
            tools=[{"name": "calendar.add"}],
        ),
        x.item(type="seed_catalog_lookup", query="tomato"),
        x.message("assistant", "Frost ends mid-April; beds: north, south."),
    ]
    path = write_jsonl(tmp_path / "rollout-2025-05-04T10-00-00-x.jsonl", lines)
    code, out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    assert "1 unknown record(s) kept" in out
    assert "unknown kinds: response_item.seed_catalog_lookup x1" in out
    conversation = Conversation.objects.get(owner=user)
    calls = {c.name: c for c in ToolCall.objects.filter(conversation=conversation)}
    assert {name: call.status for name, call in calls.items()} == {
        "local_shell": "completed",
        "web_search": "completed",
        "tool_search": "completed",
    }
    assert calls["local_shell"].arguments["command"] == ["ls", "beds"]
    assert calls["web_search"].arguments["query"] == "last frost date zone 7"
    results = DisplayMessage.objects.filter(conversation=conversation, content_type="tool_result")
    assert results.count() == 2 and not results.filter(metadata__orphan=True).exists()
    assert SourceRecord.objects.filter(conversation=conversation).count() == len(lines)
    assert_counters_match_rows(conversation)
    before = conversation.last_event_seq
    assert run(path, "--owner", user.username, "--reread")[0] == 0
    conversation.refresh_from_db()
    assert conversation.last_event_seq == before


# ------------------------------------------------------------------------------ 5. times and titles


def test_conversations_and_messages_carry_the_logs_times(tmp_path: Path, user: User) -> None:
    c = Claude()
    lines = [
        c.bookkeeping("mode", mode="normal"),
        c.prompt("Sketch the beds"),
        c.answer("msg_1", "Sketched."),
        c.system("turn_duration", durationMs=900),
    ]
    path = write_jsonl(tmp_path / "timed.jsonl", lines)
    assert run(path, "--owner", user.username)[0] == 0
    conversation = Conversation.objects.get(owner=user)
    first, second = START, START + timedelta(seconds=1)
    assert (conversation.created_at, conversation.saved_at) == (first, second)
    assert [m.created_at for m in Message.objects.order_by("position")] == [first, second]
    assert {r.created_at for r in DisplayMessage.objects.all()} == {first, second}
    api = APIClient()
    api.force_authenticate(user)
    [row] = api.get("/api/conversations/").json()["results"]
    assert (row["created_at"], row["saved_at"]) == (as_api(first), as_api(second))
    rows = api.get(f"/api/conversations/{conversation.pk}/display-messages/").json()["results"]
    assert sorted(r["created_at"] for r in rows) == [as_api(first), as_api(second)]


def test_the_sidebar_orders_imports_by_their_logs_not_by_import_order(
    tmp_path: Path, user: User
) -> None:
    older, newer = (
        Claude(session="aaaaaaaa-0000-4000-8000-000000000001"),
        Claude(session="bbbbbbbb-0000-4000-8000-000000000002", start=START + timedelta(days=3)),
    )
    newer_path = write_jsonl(
        tmp_path / "newer.jsonl", [newer.prompt("Newer work"), newer.answer("msg_n", "ok")]
    )
    older_path = write_jsonl(
        tmp_path / "older.jsonl", [older.prompt("Older work"), older.answer("msg_o", "ok")]
    )
    assert run(newer_path, "--owner", user.username)[0] == 0
    assert run(older_path, "--owner", user.username)[0] == 0  # imported last, happened first
    api = APIClient()
    api.force_authenticate(user)
    titles = [r["title"] for r in api.get("/api/conversations/").json()["results"]]
    assert titles == ["Newer work", "Older work"]


def test_a_reimport_or_an_older_append_never_moves_saved_at_back(
    tmp_path: Path, user: User
) -> None:
    c = Claude()
    lines = [c.prompt("One"), c.answer("msg_1", "ok"), c.prompt("Two"), c.answer("msg_2", "ok")]
    path = write_jsonl(tmp_path / "s.jsonl", lines)
    assert run(path, "--owner", user.username)[0] == 0
    conversation = Conversation.objects.get(owner=user)
    saved = conversation.saved_at
    assert saved == START + timedelta(seconds=3)
    late = c.prompt("Three (clock went back)")
    late["timestamp"] = iso(START - timedelta(days=1))
    write_jsonl(path, [*lines, late])
    assert run(path, "--owner", user.username)[0] == 0
    assert run(path, "--owner", user.username, "--reread")[0] == 0
    conversation.refresh_from_db()
    assert conversation.saved_at == saved
    assert Message.objects.get(content="Three (clock went back)").created_at == START - timedelta(
        days=1
    )


def test_codex_rollout_times(tmp_path: Path, user: User) -> None:
    x = Codex()
    path = write_jsonl(
        tmp_path / "r.jsonl", [x.meta(), x.message("user", "Hi"), x.message("assistant", "Hello")]
    )
    assert run(path, "--owner", user.username)[0] == 0
    conversation = Conversation.objects.get(owner=user)
    assert conversation.created_at == START
    assert conversation.saved_at == START + timedelta(seconds=2)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ([], "/review src/beds.py"),
        (
            [{"type": "summary", "summary": "Reviewing the beds module", "leafUuid": "LEAF"}],
            "Reviewing the beds module",
        ),
        (
            [
                {
                    "type": "summary",
                    "summary": "Another session's summary",
                    "leafUuid": "not-in-this-file",
                }
            ],
            "/review src/beds.py",
        ),
        (["AI"], "Bed module review"),
        (["AI", "CUSTOM"], "My review"),
        (["CUSTOM", "AI"], "My review"),
    ],
)
def test_claude_titles_by_rank(
    tmp_path: Path, user: User, extra: list[JSON], expected: str
) -> None:
    c = Claude()
    lines = [
        c.line(
            "user",
            message={
                "role": "user",
                "content": (
                    "<command-message>review is running…</command-message>\n"
                    "<command-name>/review</command-name>\n<command-args>src/beds.py</command-args>"
                ),
            },
        ),
        c.answer("msg_1", "Reviewing."),
    ]
    for item in extra:
        if item == "AI":
            lines.append(c.bookkeeping("ai-title", aiTitle="Bed module review"))
        elif item == "CUSTOM":
            lines.append(c.bookkeeping("custom-title", customTitle="My review"))
        else:
            lines.insert(
                0,
                {**item, "leafUuid": c.parent if item["leafUuid"] == "LEAF" else item["leafUuid"]},
            )
    path = write_jsonl(tmp_path / "t.jsonl", lines)
    assert run(path, "--owner", user.username)[0] == 0
    assert Conversation.objects.get(owner=user).title == expected


def test_a_title_a_person_set_is_kept(tmp_path: Path, user: User) -> None:
    from murmur_conversations import services

    c = Claude()
    lines = [c.prompt("Plan"), c.answer("msg_1", "ok")]
    path = write_jsonl(tmp_path / "t.jsonl", lines)
    assert run(path, "--owner", user.username)[0] == 0
    conversation = Conversation.objects.get(owner=user)
    services.update_conversation(conversation=conversation, title="Renamed in the app")
    write_jsonl(path, [*lines, c.bookkeeping("ai-title", aiTitle="Generated later")])
    assert run(path, "--owner", user.username)[0] == 0
    conversation.refresh_from_db()
    assert conversation.title == "Renamed in the app"


def test_an_appended_title_of_a_higher_rank_replaces_the_imported_one(
    tmp_path: Path, user: User
) -> None:
    c = Claude()
    lines = [c.prompt("Plan the beds"), c.answer("msg_1", "ok")]
    path = write_jsonl(tmp_path / "t.jsonl", lines)
    assert run(path, "--owner", user.username)[0] == 0
    write_jsonl(path, [*lines, c.bookkeeping("ai-title", aiTitle="Bed planning"), c.prompt("More")])
    assert run(path, "--owner", user.username)[0] == 0
    assert Conversation.objects.get(owner=user).title == "Bed planning"
    lines2 = [
        *lines,
        c.bookkeeping("ai-title", aiTitle="Bed planning"),
        c.prompt("More"),
        c.prompt("Even more"),
    ]
    write_jsonl(path, lines2)  # a later prompt never replaces a generated title
    assert run(path, "--owner", user.username)[0] == 0
    assert Conversation.objects.get(owner=user).title == "Bed planning"


def test_logs_without_a_prompt_are_titled_by_what_they_carry(tmp_path: Path, user: User) -> None:
    session = "5b6c7d8e-9f00-4a1b-8c2d-3e4f5a6b7c8d"
    stream = write_jsonl(
        tmp_path / "stream.jsonl",
        [
            {
                "type": "system",
                "subtype": "init",
                "session_id": session,
                "cwd": "/home/dev/garden-planner",
            },
            {
                "type": "assistant",
                "session_id": session,
                "parent_tool_use_id": None,
                "uuid": "u1",
                "message": {
                    "id": "msg_1",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Counted 12 beds."}],
                },
            },
            {
                "type": "result",
                "subtype": "success",
                "session_id": session,
                "is_error": False,
                "result": "Counted 12 beds.",
            },
        ],
    )
    exec_stream = write_jsonl(
        tmp_path / "exec.jsonl",
        [
            {"type": "thread.started", "thread_id": "0199aabb-ccdd-7eef-8001-123456789abc"},
            {
                "type": "item.completed",
                "item": {"id": "item_0", "type": "agent_message", "text": "Watered the north bed."},
            },
            {
                "type": "turn.completed",
                "usage": {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1},
            },
        ],
    )
    no_answer = write_jsonl(
        tmp_path / "init.jsonl",
        [
            {"type": "system", "subtype": "init", "session_id": "6c", "cwd": "/home/dev/orchard"},
            {
                "type": "result",
                "subtype": "error_during_execution",
                "session_id": "6c",
                "is_error": True,
            },
        ],
    )
    assert run(stream, exec_stream, no_answer, "--owner", user.username)[0] == 0
    titles = set(Conversation.objects.filter(owner=user).values_list("title", flat=True))
    assert titles == {"Counted 12 beds.", "Watered the north bed.", "/home/dev/orchard"}


def test_a_file_of_bookkeeping_lines_only_makes_no_empty_conversation(
    tmp_path: Path, user: User
) -> None:
    """Older Claude Code versions leave files holding only ``summary`` lines of other sessions."""
    pointer = write_jsonl(
        tmp_path / "3f1e0c2a-0000-4000-8000-00000000000a.jsonl",
        [
            {
                "type": "summary",
                "summary": "Bed layout",
                "leafUuid": "11111111-0000-4000-8000-000000000001",
            },
            {
                "type": "summary",
                "summary": "Seed order",
                "leafUuid": "11111111-0000-4000-8000-000000000002",
            },
        ],
    )
    code, out, _err = run(pointer, "--owner", user.username)
    assert code == 2  # nothing to import
    assert "2 bookkeeping line(s) of a conversation without messages not kept" in out
    assert not Conversation.objects.exists()


def test_the_admin_transcript_shows_each_rows_time(
    tmp_path: Path, admin_client: Client, admin_user: User
) -> None:
    from django.urls import reverse

    c = Claude()
    path = write_jsonl(tmp_path / "a.jsonl", [c.prompt("Plan"), c.answer("msg_1", "Planned.")])
    assert run(path, "--owner", admin_user.username)[0] == 0
    conversation = Conversation.objects.get(owner=admin_user)
    page = admin_client.get(
        reverse("admin:murmur_conversations_conversation_change", args=[conversation.pk])
    ).content.decode()
    assert '<time class="murmur-time" datetime="2025-05-04T10:00:00+00:00">' in page
    assert '<time class="murmur-time" datetime="2025-05-04T10:00:01+00:00">' in page


# ------------------------------------------------------------------------------ the corpus

CORPUS_LOGS = corpus_logs()


@pytest.mark.parametrize("name", CORPUS_LOGS)
def test_every_agent_log_of_the_corpus_imports_pairs_and_round_trips(
    corpus: Path, name: str, user: User
) -> None:
    """docs/formats.md: exit 0, no unknown record, every result linked to its call (a call
    without a result only where the log ends), read whole again as a no-op, and export, import,
    export gives the same bytes."""
    from tests.import_helpers import export, reimport

    path = corpus / name
    code, out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    assert "0 unknown record(s)" in out
    for conversation in Conversation.objects.filter(owner=user):
        results = DisplayMessage.objects.filter(
            conversation=conversation, content_type="tool_result"
        )
        assert not results.filter(metadata__orphan=True).exists()
        assert not results.filter(metadata__late=True).exists()
        assert not ToolCall.objects.filter(
            conversation=conversation, status__in=("pending", "executing")
        ).exists()
        assert conversation.created_at <= conversation.saved_at
        assert_counters_match_rows(conversation)
    seqs = dict(Conversation.objects.filter(owner=user).values_list("pk", "last_event_seq"))
    assert run(path, "--owner", user.username, "--reread")[0] == 0
    assert dict(Conversation.objects.filter(owner=user).values_list("pk", "last_event_seq")) == seqs
    for conversation in list(Conversation.objects.filter(owner=user)):
        first = export(conversation)
        again = reimport(user, first, "murmur")
        assert export(again) == first


def test_the_corpus_is_read(corpus: Path) -> None:
    assert len(sorted(corpus.glob("*/*.jsonl"))) >= 11


def test_a_followed_session_shows_each_result_at_once(
    tmp_path: Path, user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Live (``--follow``): a result closes the answer it answers at once; the next block of the
    same answer is stored as its continuation (docs/formats.md "Claude Code")."""
    from murmur_conversations.management.commands import import_conversations
    from tests.import_helpers import Appender, follow

    monkeypatch.setattr(import_conversations, "layer_is_process_local", lambda: False)
    c = Claude()
    lines = [
        c.prompt("Read both files"),
        c.answer("msg_p", tool_use("toolu_a", command="cat a")),
        c.result("toolu_a", "A"),
        c.answer("msg_p", tool_use("toolu_b", command="cat b")),
        c.result("toolu_b", "B"),
        c.answer("msg_q", "Both read."),
    ]
    path = write_jsonl(tmp_path / "live.jsonl", lines[:3])
    chunks = [
        write_jsonl(tmp_path / f"c{n}.jsonl", [line]).read_bytes()
        for n, line in enumerate(lines[3:])
    ]
    appender = Appender(path, chunks, [])
    code, _, err = follow(path, user, appender)
    assert code == 0, err
    # after the first three lines the result of toolu_a was there, before any later line
    assert appender.seen[0][1] == 3
    assert list(Message.objects.order_by("position").values_list("message_id", flat=True)) == [
        lines[0]["uuid"],
        "msg_p",
        lines[2]["uuid"],
        "msg_p:1",
        lines[4]["uuid"],
        "msg_q",
    ]
    assert set(ToolCall.objects.values_list("status", flat=True)) == {"completed"}
