"""``import_conversations`` with missing folders, and ``--follow`` that says only what changed and
stops on SIGTERM with its summary, never half-way through a write (docs/formats.md "Whole
folders", "What every import does")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from murmur_conversations import services
from murmur_conversations.management.commands import import_conversations
from murmur_conversations.management.commands.import_conversations import EXIT_MISSING
from murmur_conversations.models import Conversation, ImportedSource, Message
from tests.agentlog_lines import Claude, Codex, write_jsonl
from tests.helpers import assert_counters_match_rows
from tests.import_helpers import run
from tests.servers import database_environment

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _no_layer_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(import_conversations, "layer_is_process_local", lambda: False)


def claude_home(root: Path, sessions: int = 2) -> list[Path]:
    """``sessions`` Claude Code sessions under ``root/projects``."""
    files = []
    for n in range(sessions):
        c = Claude(session=f"eeeeeeee-0000-4000-8000-00000000000{n}")
        files.append(
            write_jsonl(
                root / "projects" / "-home-dev-garden" / f"{c.session}.jsonl",
                [c.prompt(f"Plan bed {n}"), c.answer(f"msg_{n}", "Planned.")],
            )
        )
    return files


class Passes:
    """A ``follow_wait`` that runs ``steps`` one per pass, then stops as Ctrl-C does."""

    def __init__(self, *steps: Any) -> None:
        self.steps = list(steps)

    def __call__(self) -> None:
        if not self.steps:
            raise KeyboardInterrupt
        self.steps.pop(0)()


@pytest.mark.django_db
def test_missing_folders_are_named_and_the_others_imported(tmp_path: Path, user: User) -> None:
    claude = tmp_path / "claude"
    claude_home(claude)
    codex = tmp_path / "codex" / "sessions"  # never created: this person has no Codex
    code, out, err = run(claude / "projects", codex, "--owner", user.username)
    assert code == EXIT_MISSING
    assert f"{codex}: no such file or folder; not imported" in err
    assert Conversation.objects.count() == 2
    assert "2 file(s)" in out
    code, _out, err = run(
        claude / "projects", codex, "--owner", user.username, "--follow", follow_wait=Passes()
    )
    assert code == EXIT_MISSING, err
    assert f"{codex}: no such file or folder; not imported" in err


@pytest.mark.django_db
def test_follow_on_folders_says_each_file_once_and_then_only_what_changed(
    tmp_path: Path, user: User
) -> None:
    files = claude_home(tmp_path, sessions=3)
    assert run(tmp_path, "--owner", user.username)[0] == 0
    c = Claude(session="eeeeeeee-0000-4000-8000-00000000000f")
    grown = tmp_path / "projects" / "-home-dev-garden" / f"{c.session}.jsonl"
    first = [c.prompt("A new one"), c.answer("msg_new", "Yes.")]
    idle = [lambda: None] * 3
    code, out, err = run(
        tmp_path,
        "--owner",
        user.username,
        "--follow",
        follow_wait=Passes(
            *idle,
            lambda: write_jsonl(grown, first),
            *idle,
            lambda: write_jsonl(grown, [*first, c.answer("msg_more", "More.")]),
            *idle,
        ),
    )
    assert code == 0, err
    said = [line for line in out.splitlines() if not line.startswith(" ")]
    for path in files:  # unchanged: said in the first pass only, not in each of the 10 others
        assert sum(str(path) in line for line in said) == 1, out
    news = [line for line in said if str(grown) in line]
    assert len(news) == 2, out  # imported, then appended: each change once
    assert "1 line(s) appended" in news[1]


@pytest.mark.django_db
def test_sigterm_in_a_wait_ends_a_file_follow_with_its_summary(tmp_path: Path, user: User) -> None:
    c = Codex()
    path = write_jsonl(tmp_path / "rollout.jsonl", [c.meta(), c.message("user", "Water?")])

    def terminate() -> None:
        os.kill(os.getpid(), signal.SIGTERM)

    code, out, err = run(path, "--owner", user.username, "--follow", follow_wait=terminate)
    assert code == 0, err
    assert "1 message(s) added of 1 read" in out
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is taken back


@pytest.mark.django_db
def test_sigterm_during_a_write_lets_the_write_finish_then_stops(
    tmp_path: Path, user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signal lands inside ``save_messages``: the batch is written whole, the follow stops at
    its next wait without reading on."""
    c = Codex()
    path = write_jsonl(
        tmp_path / "rollout.jsonl",
        [c.meta(), c.message("user", "Water?"), c.message("assistant", "Yes, at dawn.")],
    )
    real = services.save_messages
    waits: list[int] = []

    def saving(**kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)
        return real(**kwargs)

    monkeypatch.setattr(services, "save_messages", saving)
    code, out, err = run(
        path, "--owner", user.username, "--follow", follow_wait=lambda: waits.append(1)
    )
    assert code == 0, err
    assert waits == []  # stopped at the first wait, before it
    assert Message.objects.count() == 2
    assert_counters_match_rows(Conversation.objects.get())
    assert "2 message(s) added of 2 read" in out


@pytest.mark.django_db(transaction=True)
def test_a_follow_process_stopped_by_sigterm_prints_its_table_and_keeps_everything(
    tmp_path: Path, user: User
) -> None:
    files = claude_home(tmp_path, sessions=2)
    env = {**database_environment(pool_max=2), "PYTHONUNBUFFERED": "1"}
    follow = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "import_conversations",
            str(tmp_path),
            "--owner",
            user.username,
            "--follow",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follow.stdout is not None
        seen: list[str] = []
        while not all(any(str(f) in line for line in seen) for f in files):  # the first pass
            line = follow.stdout.readline()
            assert line, f"the follow ended early: {follow.stderr.read() if follow.stderr else ''}"
            seen.append(line)
        follow.send_signal(signal.SIGTERM)
        rest, err = follow.communicate(timeout=60)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.communicate()
    assert follow.returncode == 0, err
    assert "2 file(s)" in rest  # the end table
    assert Message.objects.count() == 4
    for conversation in Conversation.objects.all():
        assert_counters_match_rows(conversation)
    for source in ImportedSource.objects.all():  # each file recorded as read to its end
        assert source.offset == Path(source.path).stat().st_size
