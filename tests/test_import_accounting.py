"""Every line accounted for (docs/formats.md "Every line accounted for"): whatever a log holds,
each line read is imported, kept as a source record, or refused on stderr with its number and
reason; the summary's counts add up to the lines read; the import exits 1 when anything was
refused; nothing is dropped silently and nothing crashes.

The fuzzing starts from real-shaped logs (tests/fixtures: one per format and kind) and mutates
their values: wrong JSON types, nulls, numbers, arrays, objects, nesting, missing keys, lines that
are not objects.
"""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_conversations.importers import registry
from murmur_conversations.importers.base import run_import
from murmur_conversations.importers.ledger import IMPORTED, KEPT, REFUSED, Ledger
from murmur_conversations.importers.records import (
    Begin,
    Item,
    Kept,
    Notice,
    Parsed,
    Problem,
    Rated,
    SourceLine,
    ToolUpdate,
)
from murmur_conversations.models import Conversation
from tests.import_helpers import JSON, export, feed, run

FIXTURES = Path(__file__).resolve().parent / "fixtures"

#: Real-shaped logs of every format, as (format, file name, text).
JSONL_SOURCES = {
    "murmur": ("murmur", "murmur/garden/ctx-0001/conversation.jsonl"),
    "muse": ("muse", "muse/notes_run.jsonl"),
    "claude-session": (
        "claude-code",
        "claude_code/3c6d9e10-2b6f-4c1a-9f0e-4a8b2c6d1e01.jsonl",
    ),
    "claude-stream": ("claude-code", "claude_code/stream_json.jsonl"),
    "codex-rollout": (
        "codex",
        "codex/rollout-2025-11-20T08-00-00-0190d1e2-0000-7a00-8b00-c0de00000001.jsonl",
    ),
    "codex-exec": ("codex", "codex/exec.jsonl"),
}
DOCUMENT_SOURCES = {
    "openai": ("openai", "openai/timetable.json"),
    "anthropic": ("anthropic", "anthropic/bike_trip.json"),
    "agentfootprint": ("agentfootprint", "agentfootprint/conversation.json"),
    "agentfootprint-paused": ("agentfootprint", "agentfootprint/paused.json"),
}


def jsonl_lines(name: str) -> tuple[str, list[Any]]:
    """The format and the parsed lines of a JSON Lines source; OpenAI and Anthropic lists are
    also given one message per line."""
    if name in JSONL_SOURCES:
        fmt, path = JSONL_SOURCES[name]
        text = (FIXTURES / path).read_text("utf-8")
        return fmt, [json.loads(t) for t in text.splitlines() if t.strip()]
    fmt, path = DOCUMENT_SOURCES[name.removesuffix("-lines")]
    document = json.loads((FIXTURES / path).read_text("utf-8"))
    messages = document if isinstance(document, list) else document["messages"]
    return fmt, messages


LINE_SOURCES = [*JSONL_SOURCES, "openai-lines", "anthropic-lines"]

# ------------------------------------------------------------------------------ mutations

#: What a value is replaced with: other JSON types, nesting, or the key left out.
REPLACEMENTS: list[Any] = [None, 0, -1.5, True, "text", [], {}, "[wrap]", "{wrap}", "delete"]


def paths(value: JSON, prefix: tuple[Any, ...] = (), depth: int = 0) -> list[tuple[Any, ...]]:
    """Every key path into ``value`` (objects and the first items of arrays), four levels deep."""
    found: list[tuple[Any, ...]] = []
    if depth >= 4:
        return found
    children = (
        list(value.items())
        if isinstance(value, dict)
        else list(enumerate(value[:3]))
        if isinstance(value, list)
        else []
    )
    for key, child in children:
        found.append((*prefix, key))
        found.extend(paths(child, (*prefix, key), depth + 1))
    return found


def mutate(value: JSON, path: tuple[Any, ...], replacement: Any) -> JSON:
    """``value`` with the value at ``path`` replaced (``[wrap]``, ``{wrap}``: nested one level
    deeper; ``delete``: the key left out)."""
    value = copy.deepcopy(value)
    holder = value
    for key in path[:-1]:
        holder = holder[key]
    key = path[-1]
    if replacement == "delete":
        del holder[key]
    elif replacement == "[wrap]":
        holder[key] = [holder[key]]
    elif replacement == "{wrap}":
        holder[key] = {"k": holder[key]}
    else:
        holder[key] = copy.deepcopy(replacement)
    return value


@st.composite
def mutated(draw: st.DrawFn, values: list[JSON], *, document: bool = False) -> list[JSON]:
    """``values`` with one to three of them mutated at a drawn path, or replaced whole by
    something that is not an object (not for a document's top level)."""
    values = copy.deepcopy(values)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(values) - 1))
        keys = paths(values[at])
        if not keys or draw(st.integers(0, 9)) == 0:
            values[at] = draw(st.sampled_from([[1, 2], "line", 7, None, [values[at]]]))
            continue
        path = draw(st.sampled_from(keys))
        values[at] = mutate(values[at], path, draw(st.sampled_from(REPLACEMENTS)))
    return values


# ------------------------------------------------------------------------------ the parsers

#: Items that import something from their line.
IMPORTING = (Parsed, ToolUpdate, Notice, Rated)


def fates(items: list[Item], line: int) -> set[str]:
    """What the items of a parse did with ``line``: ``imported``, ``refused``, ``unknown`` (kept
    as an unknown record, counted by kind in the summary), ``kept``."""
    out: set[str] = set()
    for item in items:
        if getattr(item, "line", None) != line:
            continue
        if isinstance(item, IMPORTING):
            out.add("imported")
        elif isinstance(item, Problem) and item.refused:
            out.add("refused")
        elif isinstance(item, Kept):
            out.add("unknown" if item.unknown else "kept")
    return out


def texts_of(values: list[JSON]) -> list[str]:
    return [json.dumps(v, ensure_ascii=False) for v in values]


LINE_FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.mark.parametrize("name", LINE_SOURCES)
@LINE_FUZZ
@given(data=st.data())
def test_a_line_that_imports_given_a_value_of_another_type_is_refused_or_still_imported(
    name: str, data: st.DataObject
) -> None:
    """A line that imports something in its real shape, with one value changed to another JSON
    type (not null, which stands for a key left out), is imported, refused with its number, or
    kept as an unknown record (counted by kind): never only kept, its message lost in silence.
    Every line of the source is named by an item; nothing raises."""
    fmt, values = jsonl_lines(name)
    texts = texts_of(values)
    before = feed(fmt, texts)
    importing = [n for n in range(1, len(texts) + 1) if "imported" in fates(before, n)]
    at = data.draw(st.sampled_from(importing))
    keys = paths(values[at - 1])
    path = data.draw(st.sampled_from(keys))
    original = mutate(values[at - 1], path, "[wrap]")
    holder = original
    for key in path[:-1]:
        holder = holder[key]
    kind = type(holder[path[-1]][0])
    choices: list[Any] = [0, -1.5, True, "text", [], {}]
    others = [r for r in choices if not isinstance(r, kind)]
    if kind is int:  # True is an int to Python, not to JSON
        others = [r for r in others if r is not True] + [True]
    wraps = [w for w, same in (("[wrap]", list), ("{wrap}", dict)) if kind is not same]
    replacement = data.draw(st.sampled_from([*others, *wraps]))
    changed = list(texts)
    changed[at - 1] = json.dumps(mutate(values[at - 1], path, replacement), ensure_ascii=False)
    after = feed(fmt, changed)
    assert fates(after, at) & {"imported", "refused", "unknown"}, (path, replacement)
    for number in range(1, len(changed) + 1):
        assert fates(after, number), f"line {number} named by no item"


# ------------------------------------------------------------------------------ the command

SUMMARY = re.compile(
    r"; (\d+) (line|message)\(s\) read: (\d+) imported, (\d+) kept as source records"
    r"(?:, (\d+) not kept)?, (\d+) refused"
)
NOT_REFUSALS = ("imported without its usage",)


def summary_counts(out: str) -> dict[str, int]:
    found = SUMMARY.search(out)
    assert found is not None, out
    read, unit, imported, kept, not_kept, refused = found.groups()
    return {
        "read": int(read),
        "imported": int(imported),
        "kept": int(kept),
        "not_kept": int(not_kept or 0),
        "refused": int(refused),
        "document": unit == "message",
    }


def refusals(err: str, path: Path) -> tuple[set[str], list[str]]:
    """The lines (``12``) or messages (``item 3``, ``system``) stderr refuses, and the other
    refusals (of the whole source, or of a write)."""
    named: set[str] = set()
    other: list[str] = []
    prefix = f"{path}"
    for line in err.splitlines():
        if not line.startswith(prefix) or any(text in line for text in NOT_REFUSALS):
            continue
        rest = line[len(prefix) :]
        found = re.match(r":(\d+): |: (item \d+|system): ", rest)
        if found:
            named.add(found.group(1) or found.group(2))
        else:
            other.append(rest)
    return named, other


def assert_accounted(
    path: Path, fmt: str, user: User, lines_in_file: int | None, *extra: str
) -> None:
    """Import ``path`` as ``fmt`` (with ``extra`` options) and check the invariant of
    docs/formats.md "Every line accounted for"."""
    code, out, err = run(path, "--owner", user.username, "--format", fmt, *extra)
    named, other = refusals(err, path)
    if any("refused whole" in o for o in other):
        assert code == 2
        return
    counts = summary_counts(out)
    assert counts["read"] == (
        counts["imported"] + counts["kept"] + counts["not_kept"] + counts["refused"]
    )
    if lines_in_file is not None and not counts["document"]:
        assert counts["read"] == lines_in_file
    assert len(named) == counts["refused"], (named, counts, err)
    if code == 2:
        assert counts["imported"] == 0 or "no usable line" in err
    else:
        assert code == (1 if named or other else 0), (code, err)
    for conversation in Conversation.objects.filter(owner=user):
        assert conversation.record_length >= 0


COMMAND_FUZZ = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.mark.django_db
@pytest.mark.parametrize("name", LINE_SOURCES)
@COMMAND_FUZZ
@given(data=st.data())
def test_every_line_of_a_mutated_log_is_imported_kept_or_refused(
    name: str, data: st.DataObject, user: User, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``import_conversations`` of a mutated log: the lines read are the file's lines, they add
    up to imported + kept + not kept + refused, each refused line is named on stderr with its
    number, and the exit code is 1 exactly when something was refused (2 when nothing was
    usable)."""
    fmt, values = jsonl_lines(name)
    changed = data.draw(mutated(values))
    path = tmp_path_factory.mktemp("accounting") / "log.jsonl"
    path.write_text("".join(json.dumps(v, ensure_ascii=False) + "\n" for v in changed), "utf-8")
    assert_accounted(path, fmt, user, len(changed))


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(DOCUMENT_SOURCES))
@COMMAND_FUZZ
@given(data=st.data())
def test_every_message_of_a_mutated_document_is_imported_kept_or_refused(
    name: str, data: st.DataObject, user: User, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The same for one-document sources (a JSON array, a request body, an envelope), counted by
    their messages: each refused message is named on stderr (``item N``, ``system``)."""
    fmt, path = DOCUMENT_SOURCES[name]
    document = json.loads((FIXTURES / path).read_text("utf-8"))
    [changed] = data.draw(mutated([document]))
    target = tmp_path_factory.mktemp("accounting") / "log.json"
    target.write_text(json.dumps(changed, indent=2, ensure_ascii=False), "utf-8")
    assert_accounted(target, fmt, user, None)


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])  # agentfootprint takes envelopes only
@pytest.mark.parametrize("document", [[], {"messages": []}])
def test_a_document_without_messages_is_refused_by_name(
    fmt: str, document: Any, user: User, tmp_path: Path
) -> None:
    """A one-document source with no message at all (an empty list) is one refusal that stderr
    names, like any other refused line, not a refusal counted without a reason."""
    target = tmp_path / "log.json"
    target.write_text(json.dumps(document), "utf-8")
    code, out, err = run(target, "--owner", user.username, "--format", fmt)
    assert f"{target}:1: the document holds no message" in err, err
    assert refusals(err, target)[0] == {"1"}
    counts = summary_counts(out)
    assert (counts["read"], counts["refused"], counts["imported"]) == (1, 1, 0)
    assert code == 2 and not Conversation.objects.filter(owner=user).exists()


FRONTENDS = ["vercel-ui", "ag-ui", "openai-items"]


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", FRONTENDS)
@COMMAND_FUZZ
@given(data=st.data())
def test_every_message_of_a_mutated_frontend_list_is_imported_kept_or_refused(
    fmt: str, data: st.DataObject, user: User, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The same for the frontend shapes, starting from the export of a real-shaped conversation
    (the murmur fixture) in that shape."""
    _, path = JSONL_SOURCES["murmur"]
    code, _, err = run(FIXTURES / path, "--owner", user.username)
    assert (code, err) == (0, "")
    conversation = Conversation.objects.get(owner=user, source="murmur")
    document = json.loads(export(conversation, "--format", fmt))
    [changed] = data.draw(mutated([document]))
    target = tmp_path_factory.mktemp("accounting") / "list.json"
    target.write_text(json.dumps(changed, indent=2, ensure_ascii=False), "utf-8")
    assert_accounted(target, fmt, user, None, "--conversation-id", "fuzzed")


# ------------------------------------------------------------------------------ issue 31, item 7


def _set(value: dict[str, Any], path: str, replacement: Any) -> dict[str, Any]:
    keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
    changed: dict[str, Any] = mutate(value, tuple(keys), replacement)
    return changed


def _first(values: list[dict[str, Any]], **where: Any) -> int:
    def matches(value: dict[str, Any]) -> bool:
        for dotted, wanted in where.items():
            found: Any = value
            for key in dotted.split("__"):
                found = found.get(key) if isinstance(found, dict) else None
            if found != wanted:
                return False
        return True

    return next(i for i, v in enumerate(values) if matches(v))


#: The silent drops the security test found: (source, the line to break, the path, its new
#: value, what stderr says).
BROKEN: list[tuple[str, dict[str, Any], str, Any, str]] = [
    ("claude-session", {"type": "user"}, "message", "hello", "message is a string, not an object"),
    ("claude-session", {"type": "assistant"}, "message", None, "message is null, not an object"),
    ("claude-stream", {"type": "assistant"}, "message", [1], "message is an array, not an object"),
    ("codex-exec", {"type": "item.completed"}, "item", 3, "item is a number, not an object"),
    ("codex-exec", {"type": "item.completed"}, "item.id", 7, "item.id is a number, not a string"),
    ("codex-exec", {"type": "item.started"}, "item.type", {}, "item.type is an object, not a"),
    ("codex-exec", {"type": "item.completed"}, "type", 5, "type is a number, not a string"),
    (
        "muse",
        {"payload_type": "run.terminal.completed"},
        "payload.text",
        42,
        "payload.text is a number, not a string",
    ),
    (
        "muse",
        {"payload_type": "task.lifecycle.started"},
        "payload.event.task_kind",
        ["tool.read"],
        "payload.event.task_kind is an array, not a string",
    ),
    ("murmur", {"role": "assistant"}, "role", 1, "role is a number, not a string"),
    ("murmur", {"role": "assistant"}, "id", 12, "id is a number, not a string"),
    ("anthropic-lines", {"role": "assistant"}, "role", True, "role is true, not a string"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "where", "path", "value", "reason"), BROKEN)
def test_a_line_with_a_wrong_type_is_refused_with_its_number(
    name: str, where: dict[str, Any], path: str, value: Any, reason: str, user: User, tmp_path: Path
) -> None:
    fmt, values = jsonl_lines(name)
    at = _first(values, **{k.replace(".", "__"): v for k, v in where.items()})
    values[at] = _set(values[at], path, value)
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(v) + "\n" for v in values), "utf-8")
    code, out, err = run(log, "--owner", user.username, "--format", fmt)
    assert code == 1
    assert f"{log}:{at + 1}: {reason}" in err
    counts = summary_counts(out)
    assert counts["refused"] == 1
    assert counts["read"] == len(values)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        ("system", 5, "system: system is a number, not a string or a list"),
        ("system", False, "system: system is false, not a string or a list"),
        ("messages.0.role", 3, "item 0: role is a number, not a string"),
        ("messages.1.content", 3, "item 1: message 'content' must be a string or a list"),
    ],
)
def test_a_request_body_with_a_wrong_type_is_refused_by_message(
    path: str, value: Any, reason: str, user: User, tmp_path: Path
) -> None:
    """An Anthropic request body: a ``system`` that is not text, a message's ``role`` or
    ``content`` of the wrong type, is refused and named; the other messages land."""
    document = json.loads((FIXTURES / "anthropic/bike_trip.json").read_text("utf-8"))
    body = tmp_path / "body.json"
    body.write_text(json.dumps(_set(document, path, value)), "utf-8")
    code, out, err = run(body, "--owner", user.username)  # --format auto
    assert code == 1
    assert f"{body}: {reason}" in err
    assert summary_counts(out)["refused"] == 1


# ------------------------------------------------------------------------------ detection


@pytest.mark.parametrize("given_id", [None, 0, 12.5, True, [], {}])
def test_a_murmur_line_whose_id_is_not_a_string_is_told_as_murmur(given_id: Any) -> None:
    """``--format auto``: a murmur record whose ``id`` is null or not a string is still murmur
    (its parser then refuses it, or makes up an id for null), never an OpenAI list."""
    lines = [
        {"role": "user", "content": "hi", "id": given_id},
        {"role": "assistant", "content": "hello", "id": "msg_02"},
    ]
    sources = [SourceLine(n, json.dumps(v)) for n, v in enumerate(lines, 1)]
    assert registry.detect(iter(sources))[0] == "murmur"
    assert registry.detect(iter(sources[:1]))[0] == "murmur"
    assert registry.detect_live(iter(sources))[0] == "murmur"


@pytest.mark.django_db
def test_a_murmur_record_with_a_number_id_is_refused_not_read_as_openai(user: User) -> None:
    text = (
        '{"role":"user","content":"hi","id":7}\n'
        '{"role":"assistant","content":"hello","id":"msg_02"}\n'
        '{"role":"user","content":"and?","id":null}\n'
    )
    code, out, err = run("-", "--owner", user.username, stdin=io.BytesIO(text.encode()))
    assert code == 1
    assert "<stdin>:1: id is a number, not a string" in err
    assert "(murmur)" in out
    assert "3 line(s) read: 2 imported, 0 kept as source records, 1 refused" in out


# ------------------------------------------------------------------------------ the ledger


class _Forgetful:
    """A parser that reads line 1 and says nothing of line 2: a parser bug the writer catches."""

    def feed(self, line: SourceLine) -> list[Item]:
        if line.number == 1:
            return [Begin("k"), Parsed({"id": "m1", "role": "user", "content": "hi"}, 1)]
        return []

    def finish(self) -> list[Item]:
        return []


@pytest.mark.django_db
def test_a_line_a_parser_says_nothing_of_is_refused_not_dropped(user: User) -> None:
    problems: list[Problem] = []
    outcome = run_import(
        lines=[SourceLine(1, "{}"), SourceLine(2, '{"x": 1}')],
        parser=_Forgetful(),
        source="murmur",
        owner=user,
        report=problems.append,
    )
    assert [(p.line, p.reason) for p in problems] == [
        (2, "nothing was read from this line (not a record this format reads)")
    ]
    assert (outcome.lines.read, outcome.lines.imported, outcome.lines.refused) == (2, 1, 1)
    assert outcome.problems == 1


def test_the_ledger_keeps_the_strongest_fate_and_adds_up() -> None:
    ledger = Ledger()
    for line in (3, 4, 5, 7):  # 6 is a blank line: never read
        ledger.read(line)
    ledger.mark(3, None, KEPT)
    ledger.mark(3, None, IMPORTED)
    ledger.mark(4, None, REFUSED)
    ledger.mark(4, None, KEPT)
    ledger.mark(5, None, KEPT)
    ledger.not_kept(5)
    assert ledger.unaccounted() == [7]
    ledger.mark(7, None, KEPT)
    counts = ledger.counts()
    assert (counts.read, counts.imported, counts.kept, counts.not_kept, counts.refused) == (
        4,
        1,
        1,
        1,
        1,
    )
