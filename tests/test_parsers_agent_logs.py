"""The muse and Claude Code parsers and the live line reader, without a database. Fuzzed with
hypothesis on lines shaped like theirs: whatever arrives, a parser yields items and never raises."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from murmur_conversations.importers.reading import follow_lines
from murmur_conversations.importers.records import (
    Begin,
    Delta,
    Kept,
    ParseContext,
    Parsed,
    Problem,
)
from tests.import_helpers import JSON, assert_well_formed, feed, json_values, parse


def test_muse_deltas_are_previews_and_the_answer_comes_once(corpus: Path) -> None:
    lines = (corpus / "muse_exec_jsonl" / "meta_basic.jsonl").read_text("utf-8").splitlines()
    items = feed("muse", lines)
    assert isinstance(items[0], Begin)
    assert [i.text for i in items if isinstance(i, Delta)] == ["Four"]
    messages = [i.message for i in items if isinstance(i, Parsed)]
    assert [(m["role"], m["content"][0]["text"]) for m in messages] == [
        ("user", "What is 2+2? Answer in one word."),
        ("assistant", "Four"),
    ]
    assert sum(isinstance(i, Kept) for i in items) == len(lines)


def test_muse_ids_are_stable_however_the_journal_is_cut(corpus: Path) -> None:
    lines = (corpus / "muse_exec_jsonl" / "meta_tool_use.jsonl").read_text("utf-8").splitlines()
    whole = [i.message["id"] for i in feed("muse", lines) if isinstance(i, Parsed)]
    cut = [i.message["id"] for i in feed("muse", lines[:40]) if isinstance(i, Parsed)]
    assert whole[: len(cut)] == cut
    assert len(set(whole)) == len(whole) == 6


def test_claude_stream_subagent_lines_are_a_child_conversation(corpus: Path) -> None:
    lines = (corpus / "claude_code_stream_json" / "explore_count_files.jsonl").read_text("utf-8")
    items = parse("claude-code", lines)
    session = "4e3453f9-129a-4da9-bc25-a287453d58d9"
    call = "toolu_01RmLUJdhjTMn56TnF9cMamW"
    where: list[tuple[str | None, int | None]] = []
    key: str | None = None
    for item in items:
        if isinstance(item, Begin):
            key = item.key
            if item.parent is not None:
                assert (item.parent, item.call_id) == (session, call)
        elif isinstance(item, Parsed):
            where.append((key, item.line))
    child = f"{session}/{call}"
    # the Agent call's answer is written before its subagent begins
    assert where == [
        (session, 12),
        (child, 16),
        (child, 18),
        (child, 19),
        (session, 22),
        (session, 23),
    ]
    assert all(not isinstance(i, Problem) for i in items)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"a\nb\n", [("a", True), ("b", True)]),
        (b"a\n\nb", [("a", True), ("b", False)]),
        (b"", []),
    ],
)
def test_follow_lines_from_a_pipe(data: bytes, expected: list[tuple[str, bool]]) -> None:
    refused: list[object] = []
    lines = follow_lines(io.BytesIO(data), wait=None, refuse=lambda *a: refused.append(a))
    assert [(line.text, line.complete) for line in lines] == expected
    assert refused == []


def test_follow_lines_waits_then_reads_appends_and_stops_on_interrupt() -> None:
    stream = io.BytesIO()
    stream.write(b"one\ntw")
    stream.seek(0)
    appends = [b"o\n\xff\n", b"three"]

    def wait() -> None:
        if not appends:
            raise KeyboardInterrupt
        position = stream.tell()
        stream.seek(0, io.SEEK_END)
        stream.write(appends.pop(0))
        stream.seek(position)

    refused = []
    lines = list(follow_lines(stream, wait=wait, refuse=lambda n, r, raw: refused.append((n, raw))))
    assert [(line.number, line.text, line.complete) for line in lines] == [
        (1, "one", True),
        (2, "two", True),
        (4, "three", False),
    ]
    assert refused == [(3, b"\xff\n")]


envelope_like = st.fixed_dictionaries(
    {
        "payload_type": st.sampled_from(
            [
                "turn.input.user",
                "run.lifecycle.started",
                "run.output.delta",
                "run.terminal.completed",
                "run.terminal.failed",
                "task.lifecycle.proposed",
                "task.lifecycle.started",
                "task.lifecycle.failed",
                "task.lifecycle.scheduled",
                "tool.result",
                "x.y",
            ]
        ),
        "schema_version": st.just(1),
    },
    optional={
        "stream": st.fixed_dictionaries({"id": st.sampled_from(["s", "t", ""])}) | json_values,
        "sequence": st.integers(-1, 5) | json_values,
        "payload": st.fixed_dictionaries(
            {},
            optional={
                "prompt": json_values,
                "text": json_values,
                "terminal": json_values,
                "task_id": st.sampled_from(["a", "b"]) | json_values,
                "call_id": st.sampled_from(["c", ""]) | json_values,
                "event": st.fixed_dictionaries(
                    {"kind": st.sampled_from(["proposed", "started", "failed", "x"])},
                    optional={
                        "task_kind": st.sampled_from(["tool.bash", "model.x"]) | json_values,
                        "idempotency_key": st.sampled_from(["tool:c", "tool:"]) | json_values,
                        "reason": json_values,
                    },
                )
                | json_values,
                "correlation_facts": json_values,
            },
        )
        | json_values,
    },
)
claude_like = st.fixed_dictionaries(
    {
        # any JSON value too: an unhashable "type" once raised TypeError in a set lookup
        "type": st.sampled_from(["user", "assistant", "system", "result", "summary", "zzz"])
        | json_values
    },
    optional={
        "sessionId": st.sampled_from(["s", ""]) | json_values,
        "session_id": st.sampled_from(["s", "t"]),
        "uuid": st.sampled_from(["u1", "u2"]) | json_values,
        "isSidechain": st.booleans(),
        "isMeta": json_values,
        "parent_tool_use_id": st.none() | st.just("t"),
        "subtype": st.sampled_from(["success", "error"]) | json_values,
        "is_error": json_values,
        "message": st.fixed_dictionaries(
            {},
            optional={
                "id": st.sampled_from(["m1", "m2"]) | json_values,
                "role": json_values,
                "content": json_values
                | st.lists(
                    st.fixed_dictionaries(
                        {"type": st.sampled_from(["text", "tool_use", "tool_result", "thinking"])},
                        optional={
                            "text": json_values,
                            "id": json_values,
                            "tool_use_id": json_values,
                            "is_error": json_values,
                            "content": json_values,
                        },
                    ),
                    max_size=3,
                ),
            },
        )
        | json_values,
    },
)


@settings(max_examples=60, deadline=None)
@given(
    fmt=st.sampled_from(["muse", "claude-code"]),
    lines=st.lists(
        envelope_like.map(json.dumps) | claude_like.map(json.dumps) | st.text(max_size=20),
        max_size=8,
    ),
    conversation_id=st.none() | st.just("fixed"),
)
def test_agent_log_parsers_never_raise(
    fmt: str, lines: list[str], conversation_id: str | None
) -> None:
    texts = [line.replace("\n", " ") or "x" for line in lines]
    items = feed(fmt, texts, ParseContext(conversation_id=conversation_id))
    assert_well_formed(items)
    kept = [i for i in items if isinstance(i, Kept)]
    problems = [i for i in items if isinstance(i, Problem) and i.line is not None]
    # every line is kept or reported (a line can be both: kept, and its payload refused)
    assert {i.line for i in kept} | {p.line for p in problems} == set(range(1, len(texts) + 1))


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"cmd": ["ls"]}', {"cmd": ["ls"]}),
        ('{"x": NaN}', '{"x": NaN}'),  # not JSON: kept as the text, as for OpenAI arguments
        ("[" * 100_000, "[" * 100_000),  # too deep to read: kept, never a RecursionError
        ("not json", "not json"),
    ],
)
def test_codex_rollout_arguments_are_parsed_or_kept_as_text(arguments: str, expected: JSON) -> None:
    call = {"type": "function_call", "name": "shell", "arguments": arguments, "call_id": "c1"}
    lines = [
        {"type": "session_meta", "payload": {"id": "s1"}},
        {"type": "response_item", "payload": call},
    ]
    items = parse("codex", "\n".join(json.dumps(line) for line in lines) + "\n")
    [parsed] = [item for item in items if isinstance(item, Parsed)]
    assert parsed.message["content"][0]["input"] == expected
