#!/usr/bin/env python3
"""Bootstrap and run murmur_conversations: the README's two commands.

    python3 dev.py demo   create .venv, install, migrate, create the demo user, serve on :8000
                          (MURMUR_PORT / MURMUR_HOST choose another address)
    python3 dev.py test   create .venv, install, run the library's and the demo's tests (extra
                          args go to pytest)
    python3 dev.py lint   ruff, mypy, manage.py check, makemigrations --check

Standard library only, so it works on a fresh machine with nothing but Python 3.11+.
Safe to re-run: the environment is reinstalled only when requirements.txt or pyproject.toml change.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("MURMUR_VENV", ROOT / ".venv"))
STAMP = VENV / ".murmur-installed"
HOST = os.environ.get("MURMUR_HOST", "127.0.0.1")
PORT = os.environ.get("MURMUR_PORT", "8000")


def _python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _fingerprint() -> str:
    digest = hashlib.sha256(sys.version.encode())
    for name in ("requirements.txt", "pyproject.toml"):
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()


def _run(*args: str | Path, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(str(a) for a in args), flush=True)
    subprocess.run([str(a) for a in args], cwd=ROOT, check=True, env=env)


def ensure_environment() -> Path:
    """Create .venv and install requirements.txt into it unless it is already current."""
    if sys.version_info < (3, 11):  # noqa: UP036  (runs before the environment exists)
        sys.exit(
            f"murmur_conversations needs Python 3.11 or newer (this is {sys.version.split()[0]})."
        )
    with _environment_lock():
        return _build_environment()


def _environment_lock() -> Any:
    """Hold ``<venv>.lock`` while the environment is checked and built: the demo and the tests
    started together in a fresh clone would otherwise create the same venv and run pip in it at
    once, and break each other. No lock where ``fcntl`` is missing (Windows)."""
    try:
        import fcntl
    except ImportError:
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def locked() -> Iterator[None]:
        with open(f"{VENV}.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
            yield

    return locked()


def _build_environment() -> Path:
    python = _python()
    if not python.exists():
        print(f"Creating {VENV.name} ...", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    fingerprint = _fingerprint()
    if not STAMP.exists() or STAMP.read_text() != fingerprint:
        _run(
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--upgrade",
            "pip",
        )
        _run(
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            "requirements.txt",
        )
        STAMP.write_text(fingerprint)
    return python


def _env(settings: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", settings)
    env["PYTHONPATH"] = str(ROOT)
    return env


def _port_is_free(host: str, port: str) -> bool:
    """Whether a server could listen on ``host:port`` now (a bind test, closed at once)."""
    try:
        family = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, int(port)))
    except (OSError, ValueError, OverflowError):
        return False
    return True


def demo(extra: list[str]) -> None:
    if not _port_is_free(HOST, PORT):
        sys.exit(
            f"Cannot serve the demo on {HOST}:{PORT}: the port is in use (or not a port). "
            f"Pick another one, e.g. MURMUR_PORT=8001 python3 dev.py demo"
        )
    python = ensure_environment()
    env = _env("project.settings")
    # The demo's own address, unless the environment names the hosts (docs/deployment.md).
    env.setdefault("DJANGO_ALLOWED_HOSTS", f"{HOST},localhost")
    _run(python, "manage.py", "migrate", "--noinput", env=env)
    _run(python, "manage.py", "demo_setup", env=env)
    print(f"\nServing the demo on http://{HOST}:{PORT}/  (Ctrl+C stops it)\n", flush=True)
    os.chdir(ROOT)
    os.execve(
        str(python),
        [
            str(python),
            "-m",
            "uvicorn",
            "project.asgi:application",
            "--host",
            HOST,
            "--port",
            PORT,
            "--lifespan",
            "off",  # Channels' ProtocolTypeRouter has no lifespan handler
            *extra,
        ],
        env,
    )


#: The two test sessions: the library's tests on its own small settings, then the demo's on the
#: demo project's settings. Each is its own pytest run: one process has one settings module.
TEST_SESSIONS = (("tests", "tests.settings"), ("project/tests", "project.tests.settings"))
NO_TESTS_COLLECTED = 5  # pytest's exit status


def _session_of(argument: str) -> str | None:
    """The test directory of ``TEST_SESSIONS`` that a path argument (``tests/test_api.py::x``)
    lies in, or None for an option or anything else."""
    candidate = (ROOT / argument.split("::")[0]).resolve()
    for directory, _ in TEST_SESSIONS:
        if candidate.is_relative_to(ROOT / directory) and candidate.exists():
            return directory
    return None


def test(extra: list[str]) -> None:
    """Both sessions, library then demo; ``extra`` goes to both, except that paths go only to the
    session whose directory holds them (a session none of them names is not run). A session that
    collects nothing (``-k`` matching only the other's tests) is not a failure."""
    python = ensure_environment()
    paths = {argument: _session_of(argument) for argument in extra}
    named = {directory for directory in paths.values() if directory}
    codes = []
    for directory, settings in TEST_SESSIONS:
        if named and directory not in named:
            continue
        own = [a for a in extra if paths[a] in (None, directory)]
        targets = [] if directory in named else [directory]
        print(f"== pytest {directory} ({settings})", flush=True)
        result = subprocess.run(
            [str(python), "-m", "pytest", "--ds", settings, *targets, *own],
            cwd=ROOT,
            env=_env(settings),
        )
        codes.append(result.returncode)
    failures = [code for code in codes if code not in (0, NO_TESTS_COLLECTED)]
    if failures:
        sys.exit(failures[0])
    sys.exit(NO_TESTS_COLLECTED if all(code == NO_TESTS_COLLECTED for code in codes) else 0)


def lint(extra: list[str]) -> None:
    python = ensure_environment()
    env = _env("tests.settings")
    _run(python, "-m", "ruff", "check", ".", env=env)
    _run(python, "-m", "ruff", "format", "--check", ".", env=env)
    _run(
        python,
        "-m",
        "mypy",
        "murmur_conversations",
        "tests",
        "project",
        "conftest.py",
        "dev.py",
        env=env,
    )
    _run(python, "manage.py", "check", "--fail-level", "WARNING", env=_env("project.settings"))
    _run(python, "manage.py", "makemigrations", "--check", "--dry-run", env=env)


COMMANDS = {"demo": demo, "test": test, "lint": lint}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]](sys.argv[2:])
