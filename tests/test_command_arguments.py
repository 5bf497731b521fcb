"""Every management command of the app answers an odd argument value with a ``CommandError``
(a message and an exit status), never a traceback: each option that takes a value, and each
positional argument, is given hostile values (argparse's ``--``, empty, NUL, a lone surrogate as
bytes that are not UTF-8 decode to, huge numbers, negative ones, a very long string)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command, get_commands, load_command_class

pytestmark = pytest.mark.django_db

APP = "murmur_conversations"
COMMANDS = sorted(name for name, app in get_commands().items() if app == APP)
HOSTILE = ("--", "", "\x00", "\udcff", "-1", "0", "9" * 40, "nan", "x" * 300, "2026-13-45")
#: Arguments that make a command runnable, so the hostile one is what is tested.
BASE: dict[str, dict[str, str]] = {
    "import_conversations": {"paths": "missing.jsonl", "--owner": "frank"},
    "export_conversation": {"conversation": "0190aaaa-0000-7000-8000-000000000000"},
    "capture_report": {"folders": "."},  # the test's own empty folder, not $HOME's
}


def _arguments(command: str) -> list[tuple[str, str | None]]:
    """``(dest, option string or None for a positional)`` of each argument that takes a value
    (Django's shared options left out)."""
    parser = load_command_class(APP, command).create_parser("manage.py", command)
    found = []
    for action in parser._actions:
        if action.nargs == 0 or action.dest in _DJANGO_OPTIONS:
            continue
        found.append((action.dest, action.option_strings[-1] if action.option_strings else None))
    return found


_DJANGO_OPTIONS = frozenset(
    {"help", "version", "verbosity", "settings", "pythonpath", "traceback", "no_color"}
    | {"force_color", "skip_checks"}
)
CASES = [
    (command, dest, option)
    for command in COMMANDS
    for dest, option in _arguments(command)
    if option != "--follow-wait"
]


def test_every_command_of_the_app_is_covered() -> None:
    assert {"import_conversations", "purge_conversations", "export_conversation"} <= set(COMMANDS)
    assert {c for c, _d, _o in CASES} == set(COMMANDS)


@pytest.mark.parametrize(("command", "dest", "option"), CASES)
def test_hostile_argument_values_give_a_command_error(
    command: str,
    dest: str,
    option: str | None,
    make_user: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    make_user("frank")  # type: ignore[operator]
    monkeypatch.chdir(tmp_path)
    for value in HOSTILE:
        given = {**BASE.get(command, {})}
        given[option or dest] = value
        args: list[str] = []
        for name, text in given.items():
            args.extend([f"{name}={text}"] if name.startswith("--") else [text])
        with contextlib.suppress(CommandError):
            call_command(command, *args, stdout=io.StringIO(), stderr=io.StringIO())
