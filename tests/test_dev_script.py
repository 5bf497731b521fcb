"""``dev.py``, the README's two commands: what a new user meets before anything is installed."""

from __future__ import annotations

import socket

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
