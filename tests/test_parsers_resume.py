"""Parsers that go on from where an earlier import stopped (docs/formats.md "Whole folders"):
for any cut of a log, the first part read and finished, then the rest read with the first part's
resume state, gives every message the whole log gives, once; an answer cut in two keeps its second
part under ``<message.id>:<n>``. No database."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.agentlog_gen import GENERATORS
from murmur_conversations.importers import registry
from murmur_conversations.importers.records import ParseContext, Parsed, SourceLine, resumable
from tests.agentlog_lines import Claude, tool_use

FORMATS = {
    "claude_session": "claude-code",
    "claude_stream": "claude-code",
    "codex_rollout": "codex",
    "codex_exec": "codex",
}


def parse(
    fmt: str, texts: list[str], start: int = 0, resume: dict[str, Any] | None = None
) -> tuple[list[str], dict[str, Any] | None]:
    parser = registry.make_parser(fmt, ParseContext(resume=resume))
    items = []
    for number, text in enumerate(texts, start=start + 1):
        items.extend(parser.feed(SourceLine(number, text)))
    items.extend(parser.finish())
    return [i.message["id"] for i in items if isinstance(i, Parsed)], resumable(parser)


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(sorted(GENERATORS)), cut=st.integers(min_value=0, max_value=60))
def test_a_log_read_in_two_parts_gives_every_message_once(kind: str, cut: int) -> None:
    texts = [json.dumps(line) for line in GENERATORS[kind](1, 6)]
    cut = min(cut, len(texts))
    whole, _ = parse(FORMATS[kind], texts)
    first, state = parse(FORMATS[kind], texts[:cut])
    if state is None:  # nothing to go on from (no key yet): the file is read whole again
        assert first == [] or cut == 0
        return
    second, _ = parse(FORMATS[kind], texts[cut:], start=cut, resume=state)
    both = first + second
    assert len(both) == len(set(both)), "a message given twice"
    extra = set(both) - set(whole)
    assert all(":" in i and i.rsplit(":", 1)[0] in whole for i in extra), extra
    assert set(whole) <= set(both)


def test_an_answer_cut_in_two_keeps_both_parts() -> None:
    c = Claude()
    lines = [
        c.prompt("Read"),
        c.answer("msg_x", "Reading."),
        c.answer("msg_x", tool_use("toolu_x")),
    ]
    texts = [json.dumps(line) for line in lines]
    first, state = parse("claude-code", texts[:2])
    second, _ = parse("claude-code", texts[2:], start=2, resume=state)
    assert first == [lines[0]["uuid"], "msg_x"]
    assert second == ["msg_x:1"]


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_resume_state_is_json(kind: str) -> None:
    texts = [json.dumps(line) for line in GENERATORS[kind](2, 3)]
    _, state = parse(FORMATS[kind], texts)
    assert state is not None
    assert json.loads(json.dumps(state)) == state
