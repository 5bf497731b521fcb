"""Whole folders, incrementally (docs/formats.md "Whole folders"): recursion with a format per
file, subagent logs imported as children of their session, the end table, unchanged files skipped unparsed, appended files read
from where the last import ended, replaced files read whole, ``--follow`` on folders."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

import pytest
from django.contrib.auth.models import User

from murmur_conversations import services
from murmur_conversations.importers import registry
from murmur_conversations.importers.records import Item, ParseContext, Parser, SourceLine
from murmur_conversations.management.commands import import_conversations
from murmur_conversations.models import (
    Conversation,
    ImportedSource,
    Message,
    ToolCall,
)
from tests.agentlog_lines import Claude, Codex, tool_use, write_jsonl
from tests.helpers import MakeUser, assert_counters_match_rows
from tests.import_helpers import run

pytestmark = pytest.mark.django_db


def history(root: Path) -> tuple[Path, Path]:
    """A home with Claude Code projects and Codex sessions of our own."""
    c = Claude()
    session = write_jsonl(
        root / "claude" / "projects" / "-home-dev-garden" / f"{c.session}.jsonl",
        [
            c.bookkeeping("ai-title", aiTitle="Garden beds"),
            c.prompt("Plan the beds"),
            c.answer("msg_1", "Planned."),
        ],
    )
    sub = Claude()
    write_jsonl(
        root
        / "claude"
        / "projects"
        / "-home-dev-garden"
        / c.session
        / "subagents"
        / "agent-a1.jsonl",
        [sub.prompt("Count packets", isSidechain=True, agentId="a1", sessionId=c.session)],
    )
    write_jsonl(  # an older version's subagent log, beside the sessions
        root / "claude" / "projects" / "-home-dev-garden" / "agent-3f9a1c2e.jsonl",
        [sub.prompt("Count seeds", isSidechain=True, agentId="3f9a1c2e", sessionId=c.session)],
    )
    (root / "claude" / "projects" / "-home-dev-garden" / "notes.txt").write_text("not a log")
    write_jsonl(  # a name like a subagent's, but not one: imported
        root / "claude" / "projects" / "-home-dev-garden" / "agent-history-export.jsonl",
        [Claude(session="ffffffff-0000-4000-8000-00000000000f").prompt("Exported history")],
    )
    x = Codex()
    rollout = write_jsonl(
        root / "codex" / "sessions" / "2025" / "05" / "04" / "rollout-2025-05-04T10-00-00-x.jsonl",
        [x.meta(), x.message("user", "List the beds"), x.message("assistant", "North, south.")],
    )
    return session, rollout


def test_a_folder_imports_every_file_in_its_own_format(tmp_path: Path, user: User) -> None:
    history(tmp_path)
    write_jsonl(tmp_path / "codex" / "sessions" / "settings.jsonl", [{"theme": "dark"}])
    code, out, err = run(
        tmp_path / "claude" / "projects", tmp_path / "codex" / "sessions", "--owner", user.username
    )
    assert code == 1  # settings.jsonl is not a log: refused, everything else imported
    assert "settings.jsonl: refused whole: cannot tell the format" in err
    assert "6 file(s)" in out
    table = out[out.index("6 file(s)") :]
    assert "imported   claude-code" in table and "imported   codex" in table
    assert "refused    -" in table and "skipped" not in table
    # subagent logs come after the other files of their folder, their session first
    rows = [line.split()[-1] for line in table.splitlines()[2:]]
    assert rows.index(next(r for r in rows if r.endswith("agent-3f9a1c2e.jsonl"))) > rows.index(
        next(r for r in rows if r.endswith("agent-history-export.jsonl"))
    )
    top = Conversation.objects.filter(owner=user, parent__isnull=True)
    titles = sorted(top.values_list("title", flat=True))
    assert titles == ["Exported history", "Garden beds", "List the beds"]
    # docs/formats.md "Subagents": each subagent log is a child of the session its lines name
    garden = top.get(title="Garden beds")
    children = garden.children.order_by("title")
    assert [(c.title, c.external_id) for c in children] == [
        ("Count packets", f"{garden.external_id}/a1"),
        ("Count seeds", f"{garden.external_id}/3f9a1c2e"),
    ]
    assert ImportedSource.objects.filter(owner=user).count() == 5  # the refused one is not kept


def test_a_rerun_skips_unchanged_files_without_parsing_them(
    tmp_path: Path, user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    history(tmp_path)
    assert run(tmp_path, "--owner", user.username)[0] == 0
    before = [(c.pk, c.last_event_seq) for c in Conversation.objects.order_by("pk")]

    def no_parsing(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError("an unchanged file was parsed")

    monkeypatch.setattr(registry, "make_parser", no_parsing)
    code, out, err = run(tmp_path, "--owner", user.username)
    assert (code, err) == (0, "")
    assert "5 unchanged" in out
    assert out.count("  unchanged  ") == 5
    assert [(c.pk, c.last_event_seq) for c in Conversation.objects.order_by("pk")] == before


def feed_counter(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Counts the lines each parser is fed and keeps the resume state it was given."""
    seen: dict[str, list[Any]] = {"lines": [], "resume": []}
    real = registry.make_parser

    def counting(name: str, context: ParseContext) -> Parser:
        parser = real(name, context)
        seen["resume"].append(context.resume)
        feed = parser.feed

        def fed(line: SourceLine) -> list[Item]:
            seen["lines"].append(line.number)
            return feed(line)

        monkeypatch.setattr(parser, "feed", fed)
        return parser

    monkeypatch.setattr(registry, "make_parser", counting)
    return seen


@pytest.mark.parametrize("fmt", ["claude", "codex"])
def test_an_appended_file_is_read_from_where_the_last_import_ended(
    tmp_path: Path, user: User, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    session, rollout = history(tmp_path)
    path = session if fmt == "claude" else rollout
    assert run(path, "--owner", user.username)[0] == 0
    lines_before = len(path.read_bytes().splitlines())
    if fmt == "claude":
        c = Claude()
        for _ in range(3):
            c.line("x")  # the next lines come after the first three
        more = [
            c.prompt("Add herbs"),
            c.answer("msg_2", tool_use("toolu_h")),
            c.result("toolu_h", "ok"),
        ]
    else:
        x = Codex()
        for _ in range(3):
            x.line("x", {})
        more = [
            x.message("user", "Add herbs"),
            x.item(type="function_call", name="exec", arguments="{}", call_id="c1"),
            x.item(type="function_call_output", call_id="c1", output="ok"),
        ]
    with path.open("ab") as file:
        file.write(write_jsonl(tmp_path / "more.jsonl", more).read_bytes())
    seen = feed_counter(monkeypatch)
    code, out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    assert seen["lines"] == [lines_before + 1, lines_before + 2, lines_before + 3]
    assert seen["resume"][0]["key"]
    assert "3 line(s) appended since the last import" in out
    [conversation] = Conversation.objects.filter(owner=user, parent__isnull=True)
    assert Message.objects.filter(conversation=conversation).count() == 5
    assert ToolCall.objects.get(conversation=conversation).status == "completed"
    source = ImportedSource.objects.get(owner=user, path=str(path.resolve()))
    assert (source.offset, source.line) == (path.stat().st_size, lines_before + 3)
    assert_counters_match_rows(conversation)


@pytest.mark.parametrize("grown", [False, True], ids=["unchanged", "grown"])
def test_a_deleted_conversation_stays_deleted_until_restored(
    tmp_path: Path, user: User, grown: bool
) -> None:
    """Deleting what a file was imported into, then importing the file again (grown or not, and
    with ``--reread``), adds nothing and says so on stderr; ``--restore-deleted`` imports it whole
    again (docs/formats.md "Deleted conversations stay deleted")."""
    session, _ = history(tmp_path)
    assert run(session, "--owner", user.username)[0] == 0
    [conversation] = Conversation.objects.filter(owner=user, parent__isnull=True)
    whole = Message.objects.filter(conversation=conversation).count()
    services.delete_conversation(conversation=conversation)
    if grown:
        c = Claude()
        for _ in range(3):
            c.line("x")
        more = [c.prompt("Add herbs"), c.answer("msg_2", "Done")]
        with session.open("ab") as file:
            file.write(write_jsonl(tmp_path / "more.jsonl", more).read_bytes())
    for extra in ((), ("--reread",)):
        code, _out, err = run(session, "--owner", user.username, *extra)
        assert code == 0
        assert "was deleted" in err and "--restore-deleted" in err
        assert not Conversation.objects.filter(owner=user).exists()
        assert not ImportedSource.objects.filter(owner=user).exists()
    assert run(session, "--owner", user.username, "--restore-deleted")[0] == 0
    [again] = Conversation.objects.filter(owner=user, parent__isnull=True)
    assert Message.objects.filter(conversation=again).count() == whole + (2 if grown else 0)
    assert_counters_match_rows(again)


def test_an_answer_split_across_two_imports_keeps_both_parts(tmp_path: Path, user: User) -> None:
    c = Claude()
    first = [c.prompt("Read two files"), c.answer("msg_s", tool_use("toolu_a"))]
    second = [
        c.answer("msg_s", tool_use("toolu_b")),
        c.result("toolu_a", "A"),
        c.result("toolu_b", "B"),
    ]
    path = write_jsonl(tmp_path / "s.jsonl", first)
    assert run(path, "--owner", user.username)[0] == 0
    write_jsonl(path, [*first, *second])
    assert run(path, "--owner", user.username)[0] == 0
    assert list(Message.objects.order_by("position").values_list("message_id", flat=True)) == [
        first[0]["uuid"],
        "msg_s",
        "msg_s:1",
        second[1]["uuid"],
        second[2]["uuid"],
    ]
    assert set(ToolCall.objects.values_list("status", flat=True)) == {"completed"}


def test_a_replaced_or_truncated_file_is_read_whole_again(
    tmp_path: Path, user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, _ = history(tmp_path)
    assert run(session, "--owner", user.username)[0] == 0
    c = Claude(session="cccccccc-0000-4000-8000-000000000003")
    write_jsonl(session, [c.prompt("Other project")])  # shorter, another head
    seen = feed_counter(monkeypatch)
    code, out, _ = run(session, "--owner", user.username)
    assert code == 0
    assert seen["lines"] == [1] and seen["resume"] == [None]
    assert "changed since the last import, read whole again" in out
    assert Conversation.objects.filter(owner=user, parent__isnull=True).count() == 2


def test_a_torn_last_line_is_read_again_once_complete(tmp_path: Path, user: User) -> None:
    c = Claude()
    whole = [c.prompt("Plan"), c.answer("msg_1", "Planned.")]
    path = write_jsonl(tmp_path / "live.jsonl", whole)
    text = path.read_bytes()
    torn_at = len(text) - 20
    path.write_bytes(text[:torn_at])
    code, _, err = run(path, "--owner", user.username)
    assert code == 1 and "torn last line" in err
    assert ImportedSource.objects.get(owner=user).line == 1
    path.write_bytes(text)
    code, out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    assert "1 line(s) appended since the last import" in out
    assert Message.objects.count() == 2


def test_a_refused_line_makes_the_next_run_read_the_file_again(tmp_path: Path, user: User) -> None:
    c = Claude()
    path = write_jsonl(
        tmp_path / "bad.jsonl", [c.prompt("Plan"), "{not json", c.answer("msg_1", "ok")]
    )
    assert run(path, "--owner", user.username)[0] == 1
    assert not ImportedSource.objects.exists()
    code, _, err = run(path, "--owner", user.username)
    assert code == 1 and "bad.jsonl:2: not JSON" in err  # reported again, not skipped


def test_what_was_read_is_kept_per_owner_and_goes_with_the_owner(
    tmp_path: Path, make_user: MakeUser
) -> None:
    history(tmp_path)
    alice, bob = make_user(), make_user()
    assert run(tmp_path, "--owner", alice.username)[0] == 0
    code, out, _ = run(tmp_path, "--owner", bob.username)
    assert code == 0 and "unchanged" not in out  # bob's import does not reuse alice's
    assert ImportedSource.objects.filter(owner=bob).count() == 5
    alice.delete()
    assert ImportedSource.objects.filter(owner_id=alice.pk).count() == 0
    assert ImportedSource.objects.count() == 5


def test_many_files_end_with_a_table_per_status(tmp_path: Path, user: User) -> None:
    for n in range(25):
        c = Claude(session=f"dddddddd-0000-4000-8000-{n:012d}")
        write_jsonl(
            tmp_path / f"s{n:02d}.jsonl", [c.prompt(f"Bed {n}"), c.answer(f"msg_{n}", "ok")]
        )
    write_jsonl(tmp_path / "zz-bad.jsonl", [{"theme": "dark"}])
    code, out, _ = run(tmp_path, "--owner", user.username)
    assert code == 1
    assert "26 file(s)" in out
    assert "  imported       25 file(s)" in out
    assert "  refused         1 file(s)" in out
    assert "zz-bad.jsonl" in out.split("refused or with refused lines:")[1]
    assert "(claude-code): 1 conversation(s)" not in out  # no line per file beyond the table
    assert Conversation.objects.filter(owner=user).count() == 25


def test_the_progress_bar_shows_files_lines_and_rate_on_a_terminal(
    tmp_path: Path, user: User, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    history(tmp_path)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert run(tmp_path, "--owner", user.username)[0] == 0
    shown = capsys.readouterr().err
    assert "import" in shown and "B/s" in shown and "file 5/5" in shown and "lines" in shown


def test_stdin_beside_a_folder(tmp_path: Path, user: User) -> None:
    history(tmp_path / "home")
    x = Codex(session="019a1b2c-3d4e-7f60-8a9b-000000000009")
    data = write_jsonl(
        tmp_path / "piped.jsonl", [x.meta(), x.message("user", "Piped")]
    ).read_bytes()
    code, out, _ = run(tmp_path / "home", "-", "--owner", user.username, stdin=io.BytesIO(data))
    assert code == 0
    assert "<stdin> (codex): 1 conversation(s)" in out
    assert Conversation.objects.filter(owner=user, parent__isnull=True).count() == 4


class FolderWatcher:
    """The ``follow_wait`` of a folder: each call (a pass ended) runs the next step; with none
    left it interrupts, as Ctrl-C would."""

    def __init__(self, steps: Iterable[Callable[[], None]]) -> None:
        self.steps = list(steps)

    def __call__(self) -> None:
        if not self.steps:
            raise KeyboardInterrupt
        self.steps.pop(0)()


def test_follow_on_a_folder_picks_up_new_and_growing_files(
    tmp_path: Path, user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(import_conversations, "layer_is_process_local", lambda: False)
    history(tmp_path)
    c = Claude(session="eeeeeeee-0000-4000-8000-000000000005")
    new = tmp_path / "claude" / "projects" / "-home-dev-garden" / f"{c.session}.jsonl"
    first = [c.prompt("A new session"), c.answer("msg_n", tool_use("toolu_n"))]
    statuses: list[str] = []

    def appear() -> None:
        write_jsonl(new, first)

    def grow() -> None:
        statuses.append(ToolCall.objects.get(call_id="toolu_n").status)  # open between passes
        write_jsonl(new, [*first, c.answer("msg_m", "Still working.")])

    def look() -> None:
        statuses.append(ToolCall.objects.get(call_id="toolu_n").status)

    code, out, err = run(
        tmp_path,
        "--owner",
        user.username,
        "--follow",
        follow_wait=FolderWatcher([appear, grow, look]),
    )
    assert (code, err) == (0, ""), err
    assert statuses == ["pending", "pending"]
    assert ToolCall.objects.get(call_id="toolu_n").status == "interrupted"  # the last pass
    conversation = Conversation.objects.get(external_id=c.session)
    assert Message.objects.filter(conversation=conversation).count() == 3
    assert f"{c.session}.jsonl" in out
    assert "1 call(s) still open when the follow ended: interrupted" in out


def test_a_nul_in_a_title_does_not_cost_the_file_its_bookmark(user: User, tmp_path: Path) -> None:
    """The first prompt (the title, also in ImportedSource.titles) holding a NUL: the import
    remembers where it ended (PostgreSQL's jsonb refuses a NUL; the titles take the bad-text
    rule as the messages do), so the next run skips the unchanged file."""
    claude = Claude()
    path = write_jsonl(tmp_path / "s.jsonl", [claude.prompt("hello\x00world")])
    code, _out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    [source] = ImportedSource.objects.filter(owner=user)
    assert [title for title, _ in source.titles.values()] == ["hello\ufffdworld"]
    code, out, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "") and "unchanged since the last import" in out
