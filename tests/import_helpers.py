"""Helpers of the importer tests (docs/formats.md): the shared corpus, running
``import_conversations``, writing input files, and parsing text with a registered parser."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

import yaml
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from hypothesis import strategies as st

from murmur_conversations.importers import registry
from murmur_conversations.importers.reading import iter_lines
from murmur_conversations.importers.records import (
    Begin,
    Item,
    ParseContext,
    Parsed,
    Problem,
    SourceLine,
)
from murmur_conversations.models import Conversation, Message

JSON = Any  # a value ``json.loads`` returns

#: Small JSON values of every kind, nested a little.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def run(
    *args: object, stdin: IO[bytes] | None = None, follow_wait: Callable[[], None] | None = None
) -> tuple[int, str, str]:
    """Run ``import_conversations`` with ``args``; return (exit code, stdout, stderr), the
    ``CommandError``'s message appended to stderr."""
    out, err = io.StringIO(), io.StringIO()
    options: dict[str, object] = {"stdin": stdin, "follow_wait": follow_wait}
    options = {k: v for k, v in options.items() if v is not None}
    try:
        call_command("import_conversations", *map(str, args), stdout=out, stderr=err, **options)
    except CommandError as error:
        return error.returncode, out.getvalue(), err.getvalue() + str(error)
    return 0, out.getvalue(), err.getvalue()


def export(conversation: Conversation, *args: str) -> str:
    """What ``export_conversation`` writes for ``conversation`` with ``args``."""
    out = io.StringIO()
    call_command("export_conversation", str(conversation.pk), *args, stdout=out)
    return out.getvalue()


def reimport(user: User, text: str, fmt: str) -> Conversation:
    """Import ``text`` from stdin as ``fmt`` for ``user``; the top-level conversation it created
    (a murmur export brings its children too)."""
    before = set(Conversation.objects.values_list("pk", flat=True))
    code, _, err = run(
        "-", "--owner", user.username, "--format", fmt, stdin=io.BytesIO(text.encode("utf-8"))
    )
    assert (code, err) == (0, "")
    [created] = Conversation.objects.exclude(pk__in=before).filter(parent__isnull=True)
    return created


class Appender:
    """The ``follow_wait`` of a test: each call (the follower reached the end of the file)
    records what is in the database, then appends the next chunk; with none left it interrupts,
    as Ctrl-C would."""

    def __init__(self, path: Path, chunks: Iterable[bytes], deltas: list[tuple[str, str]]) -> None:
        self.path = path
        self.chunks = list(chunks)
        self.deltas = deltas
        self.seen: list[tuple[int, int, int]] = []  # (chunks written, messages, deltas)
        self.written = 0

    def __call__(self) -> None:
        self.seen.append((self.written, Message.objects.count(), len(self.deltas)))
        if not self.chunks:
            raise KeyboardInterrupt
        with self.path.open("ab") as file:
            file.write(self.chunks.pop(0))
        self.written += 1


def follow(path: Path, user: User, wait: Callable[[], None], *extra: str) -> tuple[int, str, str]:
    return run(path, "--owner", user.username, "--follow", *extra, follow_wait=wait)


def write_json(path: Path, value: JSON) -> Path:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False), "utf-8")
    return path


def write_lines(path: Path, *lines: str, end: str = "\n") -> Path:
    path.write_bytes("".join(line + end for line in lines).encode("utf-8"))
    return path


def cassette_conversation(corpus: Path, name: str) -> list[dict[str, JSON]]:
    """The last request's messages plus its response, as a user of the cassette would take them
    (``corpus``: the real-log corpus folder, the ``corpus`` fixture)."""
    data = yaml.safe_load((corpus / "chat_messages" / f"{name}.yaml").read_text("utf-8"))
    last = data["interactions"][-1]
    messages: list[dict[str, JSON]] = last["request"]["parsed_body"]["messages"]
    body = last["response"]["parsed_body"]
    reply = body["choices"][0]["message"] if "choices" in body else body
    return [*messages, reply]


def murmur_lines() -> list[str]:
    """A murmur record of four messages (a tool call and its result among them), one per line."""
    return [
        '{"role":"user","content":[{"type":"text","text":"Summarize today\'s changes."}],'
        '"id":"msg_01a04900754b7183b66c11e744612e2d"}',
        '{"role": "assistant", "content": [{"type": "thinking", "text": "hm", "signature": "s"},'
        ' {"type": "tool_call", "id": "call_1", "name": "git_log", "input": {"n": 3}}],'
        ' "id": "msg_02"}',
        '{"role":"tool","content":"3 commits","tool_call_id":"call_1","is_error":false,'
        '"id":"msg_03","source_id":"hook-7"}',
        '{"role":"assistant","content":[{"type":"text","text":"Three commits, all tests: ✓"}],'
        '"id":"msg_04","model":"m1"}',
    ]


def feed(
    fmt: str, texts: list[str], context: ParseContext | None = None, *, torn_end: bool = False
) -> list[Item]:
    """Every item the ``fmt`` parser yields for these lines (numbered from 1), then at its end;
    with ``torn_end`` the last line lacks its newline."""
    parser = registry.make_parser(fmt, context or ParseContext())
    items: list[Item] = []
    for number, text in enumerate(texts, 1):
        complete = not (torn_end and number == len(texts))
        items.extend(parser.feed(SourceLine(number, text, complete=complete)))
    items.extend(parser.finish())
    return items


def assert_well_formed(items: list[Item]) -> None:
    """What every parser promises (docs/formats.md): items of the documented types only; each
    parsed message has a non-empty string id; every item but a ``Problem`` follows a ``Begin``."""
    begun = False
    for item in items:
        assert isinstance(item, Item)
        if isinstance(item, Begin):
            begun = True
        elif not isinstance(item, Problem):
            assert begun, "every non-problem item follows a Begin"
        if isinstance(item, Parsed):
            assert isinstance(item.message.get("id"), str)
            assert item.message["id"]


def parse(fmt: str, text: str, **context: Any) -> list[Item]:
    """Every item the ``fmt`` parser yields for ``text`` read line by line, then at its end."""
    parser = registry.make_parser(fmt, ParseContext(**context))
    items: list[Item] = []
    for line in iter_lines(io.BytesIO(text.encode("utf-8"))):
        items.extend(parser.feed(line))
    items.extend(parser.finish())
    return items
