"""``dev.py``, the README's two commands: what a new user meets before anything is installed."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

import dev


def test_demo_on_a_busy_port_says_how_to_pick_another(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_install() -> None:
        raise AssertionError("nothing is installed or migrated for a demo that cannot serve")

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        monkeypatch.setattr(dev, "HOST", "127.0.0.1")
        monkeypatch.setattr(dev, "PORT", str(busy.getsockname()[1]))
        monkeypatch.setattr(dev, "ensure_environment", no_install)
        with pytest.raises(SystemExit) as stopped:
            dev.demo([])
    assert "port is in use" in str(stopped.value.code)
    assert "MURMUR_PORT=" in str(stopped.value.code)


@pytest.mark.parametrize("port", ["http", "-1", "70000"])
def test_demo_on_a_port_that_is_not_one_says_so(monkeypatch: pytest.MonkeyPatch, port: str) -> None:
    monkeypatch.setattr(dev, "PORT", port)
    with pytest.raises(SystemExit) as stopped:
        dev.demo([])
    assert "MURMUR_PORT=" in str(stopped.value.code)


def test_a_second_command_waits_while_the_first_builds_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The demo and the tests started together in a fresh clone built one venv at once and broke
    each other's pip: the environment is built under a lock another process cannot take."""
    monkeypatch.setattr(dev, "VENV", tmp_path / ".venv")
    probe = (
        "import fcntl, sys\n"
        "with open(sys.argv[1], 'a') as f:\n"
        "    try:\n"
        "        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "    except BlockingIOError:\n"
        "        sys.exit(3)\n"
    )
    lock = f"{dev.VENV}.lock"
    with dev._environment_lock():
        held = subprocess.run([sys.executable, "-c", probe, lock], check=False)
    free = subprocess.run([sys.executable, "-c", probe, lock], check=False)
    assert (held.returncode, free.returncode) == (3, 0)
