"""The pure parsers and line reading (``murmur_conversations.importers``): no database. Fuzzed with
hypothesis: whatever the lines, a parser yields items and never raises."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from murmur_conversations.importers import registry
from murmur_conversations.importers.anthropic import convert as anthropic_convert
from murmur_conversations.importers.reading import NotUTF8, check_utf8, iter_lines
from murmur_conversations.importers.records import (
    Begin,
    Kept,
    Parsed,
    Problem,
    SourceLine,
    canonical_json,
    excerpt,
    imported_id,
    key_of_messages,
)
from tests.import_helpers import assert_well_formed, json_values, parse


def test_canonical_json_and_ids() -> None:
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    message = {"role": "user", "content": "hi"}
    import hashlib

    expected = hashlib.sha256(canonical_json(["k", 3, message]).encode()).hexdigest()[:32]
    assert imported_id("k", 3, message) == "imp_" + expected


def test_key_covers_messages_up_to_the_first_assistant() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    reply = {"role": "assistant", "content": "a"}
    later = {"role": "user", "content": "more"}
    assert key_of_messages([*messages, reply, later]) == key_of_messages([*messages, reply])
    assert key_of_messages(messages) != key_of_messages([*messages, reply])


def test_line_reading() -> None:
    data = b'\xef\xbb\xbf{"a":1}\r\n\r\n  \n{"b":2}'
    lines = list(iter_lines(io.BytesIO(data)))
    assert lines == [
        SourceLine(1, '{"a":1}', complete=True),
        SourceLine(4, '{"b":2}', complete=False),
    ]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"a":"\xe9"}\n', "byte 0xe9 at offset 6"),
        (b"\xff\xfe{\x00", "UTF-16"),
        (b"ok\n" * 30000 + b"\xc3", "at offset 90000"),
    ],
)
def test_check_utf8_refuses_whole(data: bytes, reason: str) -> None:
    with pytest.raises(NotUTF8, match=reason):
        check_utf8(io.BytesIO(data))


def test_excerpt_is_short_and_escaped() -> None:
    assert excerpt("a\x00b") == "a\\x00b"
    assert len(excerpt("x" * 500)) == 80


def test_anthropic_split_keeps_block_order_and_links_by_id() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
            {
                "type": "tool_result",
                "tool_use_id": "t2",
                "content": [{"type": "text", "text": "x"}],
                "is_error": True,
            },
            {"type": "text", "text": "and then?"},
        ],
    }
    assert anthropic_convert(message) == [
        {"role": "tool", "content": "ok", "tool_call_id": "t1", "is_error": False},
        {
            "role": "tool",
            "content": [{"type": "text", "text": "x"}],
            "tool_call_id": "t2",
            "is_error": True,
        },
        {"role": "user", "content": [{"type": "text", "text": "and then?"}]},
    ]


def test_openai_jsonl_holds_items_until_the_key_is_known() -> None:
    text = '{"role":"user","content":"a"}\nnope\n{"role":"assistant","content":"b"}\n{"x":1}\n'
    begin, first, problem, second, kept = parse("openai", text)
    assert isinstance(begin, Begin) and isinstance(first, Parsed) and isinstance(problem, Problem)
    assert isinstance(second, Parsed) and isinstance(kept, Kept)
    assert (problem.line, problem.excerpt) == (2, "nope")
    key = begin.key
    assert first.message["id"] == imported_id(key, 0, {"role": "user", "content": "a"})
    assert second.message["id"] == imported_id(key, 2, {"role": "assistant", "content": "b"})
    assert kept.unknown


def test_a_document_that_is_not_json_falls_back_to_lines() -> None:
    text = '{"role":"user",\n{"role":"assistant","content":"b"}\n'
    problem, begin, parsed = parse("openai", text)
    assert isinstance(problem, Problem) and isinstance(begin, Begin) and isinstance(parsed, Parsed)
    assert problem.line == 1


def test_murmur_unknown_records_before_any_message() -> None:
    text = '{"type":"header"}\n{"role":"user","content":"hi","id":"m1"}\n'
    items = parse("murmur", text)
    assert items[0] == Begin("m1")
    assert [type(i).__name__ for i in items[1:]] == ["Kept", "Parsed", "Kept"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"role":"user","content":"a","id":"m"}\n', "murmur"),
        ('{"role":"user","content":"a"}\n', "openai"),
        (
            '{"role":"user","content":"a"}\n{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{}}]}\n',
            "anthropic",
        ),
        ('[{"role":"user","content":"a"}]', "openai"),
        ('{\n "system": "s",\n "messages": []\n}\n', "anthropic"),
        ('{"format":"flowchart-v1","data":{}}', "agentfootprint"),
        ('{"what":1}\n', None),
        ('{"schema_version":1,"payload_type":"turn.input.user","payload":{}}\n', "muse"),
        ('{"type":"user","sessionId":"s","uuid":"u","message":{}}\n', "claude-code"),
        ('{"type":"thread.started","thread_id":"t"}\n', "codex"),
        ('{"timestamp":"x","type":"session_meta","payload":{"id":"t"}}\n', "codex"),
        ("[1,\n", None),
    ],
)
def test_detection(text: str, expected: str | None) -> None:
    lines = iter_lines(io.BytesIO(text.encode()))
    detected, head = registry.detect(lines)
    assert detected == expected
    assert [line.text for line in head] == [
        line.text for line in iter_lines(io.BytesIO(text.encode()))
    ]


message_like = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", 3])},
    optional={
        "content": json_values,
        "id": st.text(max_size=5) | st.integers(),
        "tool_calls": json_values,
        "toolCalls": json_values,
        "type": st.sampled_from(["message", "x"]),
    },
)
line_text = st.one_of(
    st.text(max_size=40),
    json_values.map(json.dumps),
    message_like.map(json.dumps),
)


@settings(max_examples=60, deadline=None)
@given(
    fmt=st.sampled_from(sorted(registry.PARSERS)),
    lines=st.lists(line_text, max_size=6),
    conversation_id=st.none() | st.just("fixed"),
)
def test_parsers_never_raise(fmt: str, lines: list[str], conversation_id: str | None) -> None:
    text = "\n".join(line.replace("\n", " ") for line in lines)
    assert_well_formed(parse(fmt, text, conversation_id=conversation_id))


@settings(max_examples=40, deadline=None)
@given(lines=st.lists(line_text, max_size=6))
def test_detection_never_raises_and_keeps_every_line(lines: list[str]) -> None:
    text = "\n".join(line.replace("\n", " ") for line in lines)
    expected = [line.text for line in iter_lines(io.BytesIO(text.encode("utf-8", "surrogatepass")))]
    source = iter_lines(io.BytesIO(text.encode("utf-8", "surrogatepass")))
    detected, head = registry.detect(source)
    assert detected in (None, *registry.FORMAT_NAMES)
    assert [line.text for line in [*head, *source]] == expected
