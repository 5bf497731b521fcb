"""``manage.py capture_report`` (docs/capture.md): the sessions Claude Code deletes within the
window, by modification time plus ``cleanupPeriodDays`` read from a test's own ``$HOME``, and
whether each was imported (to its current end), or deleted here on purpose."""

from __future__ import annotations

import io
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from murmur_conversations import services
from murmur_conversations.importers import capture
from murmur_conversations.models import Conversation, ImportedSource
from tests.agentlog_lines import Claude, Codex, tool_use, write_jsonl
from tests.import_helpers import run

pytestmark = pytest.mark.django_db

DAY = 86400
SOON = "1a1a1a1a-0000-4000-8000-000000000001"
LATER = "2b2b2b2b-0000-4000-8000-000000000002"
OVERDUE = "3c3c3c3c-0000-4000-8000-000000000003"


def report(*args: object) -> tuple[int, str, str]:
    """Run ``capture_report`` with ``args``: (exit code, stdout, stderr with the error)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("capture_report", *map(str, args), stdout=out, stderr=err)
    except CommandError as error:
        return error.returncode, out.getvalue(), err.getvalue() + str(error)
    return 0, out.getvalue(), err.getvalue()


def as_json(*args: object) -> tuple[int, dict[str, Any]]:
    code, out, _err = report(*args, "--json")
    return code, json.loads(out)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder of the test's own, with no Claude Code settings yet."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return folder


def settings(home: Path, value: object) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"theme": "dark", "cleanupPeriodDays": value}))


def session(home: Path, session_id: str, age_days: float) -> Path:
    """A Claude Code session file under ``~/.claude/projects``, last modified ``age_days`` ago."""
    log = Claude(session=session_id)
    path = home / ".claude" / "projects" / "-home-dev-garden-planner" / f"{session_id}.jsonl"
    write_jsonl(
        path,
        [
            log.prompt("Which beds get the tomatoes?"),
            log.answer("msg_1", "Beds two and three.", tool_use("call_1")),
            log.result("call_1", "bed-2 bed-3"),
        ],
    )
    age(path, age_days)
    return path


def age(path: Path, days: float) -> None:
    moment = int(time.time() - days * DAY)  # whole seconds: the report shows seconds
    os.utime(path, (moment, moment))


def imported(path: Path, owner: User) -> None:
    code, _out, err = run(path, "--owner", owner.username)
    assert (code, err) == (0, "")


def paths(found: dict[str, Any]) -> dict[str, bool]:
    return {Path(s["path"]).name: s["captured"] for s in found["sessions"]}


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice")


@pytest.fixture
def bob() -> User:
    return User.objects.create_user("bob")


def test_lists_the_uncaptured_session_in_the_window_and_exits_1(home: Path, alice: User) -> None:
    settings(home, 10)
    soon = session(home, SOON, 5)  # deleted in 5 days
    session(home, LATER, 1)  # in 9 days: outside the 7-day window
    overdue = session(home, OVERDUE, 12)  # past its date, still there
    imported(overdue, alice)

    code, out, err = report()

    assert code == 1
    assert "1 session(s) at risk are not captured" in err
    assert "claude-code: deletes a session 10 day(s) after its last change" in out
    assert f"cleanupPeriodDays 10 in {home / '.claude' / 'settings.json'}" in out
    assert "codex: Codex deletes no session file automatically; none at risk" in out
    assert f"{home / '.codex' / 'sessions'}: not found" in out
    assert f"NO        {soon} (not imported)" in out
    assert f"now (overdue)         yes       {overdue} (imported)" in out
    assert LATER not in out

    code, found = as_json()
    assert code == 1
    assert found["retention"]["claude-code"]["days"] == 10
    assert found["retention"]["codex"]["days"] is None
    assert found["uncaptured"] == 1
    assert paths(found) == {f"{OVERDUE}.jsonl": True, f"{SOON}.jsonl": False}
    [first, second] = found["sessions"]
    assert (first["overdue"], second["overdue"]) == (True, False)
    expected = os.stat(soon).st_mtime + 10 * DAY
    assert second["deletes_at"] == capture.iso(datetime.fromtimestamp(expected, UTC))

    imported(soon, alice)
    code, out, err = report()
    assert (code, err) == (0, "")
    assert "0 not captured" in out


def test_the_window_and_an_unset_setting(home: Path, alice: User) -> None:
    session(home, SOON, 25)  # the default 30 days: deleted in 5
    session(home, LATER, 20)  # in 10
    code, found = as_json()
    assert code == 1
    assert found["retention"]["claude-code"]["days"] == capture.CLAUDE_DEFAULT_DAYS
    assert "settings.json not found" in found["retention"]["claude-code"]["origin"]
    assert paths(found) == {f"{SOON}.jsonl": False}

    code, found = as_json("--days", 11)
    assert paths(found) == {f"{SOON}.jsonl": False, f"{LATER}.jsonl": False}
    code, found = as_json("--days", 0)
    assert (code, found["sessions"]) == (0, [])

    settings(home, 99999)  # the common workaround: nothing at risk
    code, found = as_json("--days", 11)
    assert (code, found["sessions"]) == (0, [])


def test_a_settings_file_without_the_key_is_the_default(home: Path) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"theme": "dark"}')
    session(home, SOON, 25)
    code, out, err = report()
    assert code == 1
    assert "Claude Code's default of 30 days (cleanupPeriodDays unset)" in out
    assert "warning" not in err


@pytest.mark.parametrize("text", ["{not json", "[30]", '{"cleanupPeriodDays": "ten"}'])
def test_an_unreadable_setting_warns_and_uses_the_default(home: Path, text: str) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    session(home, SOON, 25)
    code, out, err = report()
    assert code == 1
    assert err.startswith(f"warning: {path}: ")
    assert "Claude Code's default of 30 days" in err
    assert f"{SOON}.jsonl (not imported)" in out


def test_a_file_appended_to_after_its_import_is_not_captured(home: Path, alice: User) -> None:
    settings(home, 10)
    path = session(home, SOON, 5)
    imported(path, alice)
    log = Claude(session=SOON)
    with path.open("a", encoding="utf-8") as stream:
        stream.write(json.dumps(log.prompt("And the beans?")) + "\n")
    age(path, 5)
    size = path.stat().st_size
    [record] = ImportedSource.objects.all()

    code, out, _err = report()
    assert code == 1
    assert f"{path} (imported up to byte {record.offset} of {size})" in out

    imported(path, alice)  # reads on from where it ended
    assert report()[0] == 0


def test_a_replaced_file_is_not_captured(home: Path, alice: User) -> None:
    settings(home, 10)
    path = session(home, SOON, 5)
    imported(path, alice)
    text = path.read_text().replace("tomatoes", "potatoes")
    path.write_text(text)
    age(path, 5)
    code, out, _err = report()
    assert (code, f"{path} (changed since its import)" in out) == (1, True)


def test_owner_scopes_what_counts_as_captured(home: Path, alice: User, bob: User) -> None:
    settings(home, 10)
    path = session(home, SOON, 5)
    imported(path, alice)
    assert report()[0] == 0
    assert report("--owner", "alice")[0] == 0
    code, out, _err = report("--owner", "bob")
    assert code == 1
    assert f"{path} (not imported)" in out


def test_a_session_deleted_here_on_purpose_counts_as_handled(
    home: Path, alice: User, bob: User
) -> None:
    settings(home, 10)
    path = session(home, SOON, 5)
    imported(path, alice)
    [conversation] = Conversation.objects.filter(owner=alice)
    services.delete_conversation(conversation=conversation)
    assert not ImportedSource.objects.exists()  # the deletion forgot the path

    code, out, _err = report()
    assert code == 0
    assert f"{path} (deleted here)" in out
    assert report("--owner", "alice")[0] == 0
    assert report("--owner", "bob")[0] == 1
    assert not Conversation.objects.exists()  # the check wrote nothing


def test_folders_given_are_read_and_told_by_their_files(
    home: Path, tmp_path: Path, alice: User
) -> None:
    settings(home, 10)
    folder = tmp_path / "elsewhere"
    claude = Claude(session=SOON)
    claude_file = write_jsonl(folder / "a" / "one.jsonl", [claude.prompt("Beds?")])
    codex = Codex()
    codex_file = write_jsonl(
        folder / "b" / "rollout.jsonl", [codex.meta(), codex.message("user", "Beds?")]
    )
    other = write_jsonl(folder / "c.jsonl", [{"role": "user", "content": "Beds?"}])
    for path in (claude_file, codex_file, other):
        age(path, 400)
    session(home, LATER, 5)  # in the default folder, not read when folders are given

    code, found = as_json(folder)
    assert code == 1
    assert found["folders"] == [str(folder)]
    assert found["files"] == 3
    assert [s["path"] for s in found["sessions"]] == [str(claude_file)]
    assert found["sessions"][0]["overdue"] is True

    code, found = as_json(claude_file)
    assert paths(found) == {"one.jsonl": False}


def test_default_folders_follow_the_cli_environment(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "claude-config"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(elsewhere))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    code, found = as_json()
    assert found["folders"] == []
    assert found["missing"] == [str(elsewhere / "projects"), str(tmp_path / "codex-home/sessions")]
    assert (code, found["files"]) == (0, 0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--days", "-1"), "--days must be from 0 to 36600, not -1"),
        (("--days", "soon"), "--days must be a whole number of days, not 'soon'"),
        (("--owner", "nobody"), "--owner names an existing user"),
        (("/no/such/folder",), "/no/such/folder: no such folder or file"),
    ],
)
def test_bad_arguments_exit_2(home: Path, args: tuple[str, ...], message: str) -> None:
    code, _out, err = report(*args)
    assert code == 2
    assert message in err


def test_subagent_logs_are_listed_and_captured_with_their_session(home: Path, alice: User) -> None:
    settings(home, 10)
    session_file = session(home, SOON, 5)
    side = Claude(session=SOON)
    agent = write_jsonl(
        session_file.with_suffix("") / "subagents" / "agent-a7f3.jsonl",
        [
            side.prompt("Count the packets", isSidechain=True, agentId="a7f3"),
            side.answer("msg_s1", "Twelve", isSidechain=True, agentId="a7f3"),
        ],
    )
    for path in (session_file, agent):
        age(path, 5)
    code, found = as_json()
    assert code == 1
    assert paths(found) == {session_file.name: False, agent.name: False}

    imported(session_file, alice)  # brings its subagent log along
    code, found = as_json()
    assert code == 0
    assert paths(found) == {session_file.name: True, agent.name: True}
