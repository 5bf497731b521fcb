"""Golden fixtures of the write path: what today's code writes, recorded, so that a rewrite is
proven to write the same (issue 30, "Characterise before you delete"; docs/write-path.md "Golden
fixtures").

- ``scenarios.py``: the hand-written scenarios, every kind of write through the public services;
- ``generated.py``: the hypothesis strategy of random sequences; ``sequences.json`` holds the
  sequences it generated when they were recorded, so a replay never depends on hypothesis;
- ``replay.py``: runs a scenario's steps under a frozen clock; ``normalise.py``: what a run is
  reduced to (every app table, the frame log, each step's return value, error and signals);
- ``sqlite/<scenario>.json``, ``postgresql/<scenario>.json``: the recorded outcome, per vendor
  (PostgreSQL's ``jsonb`` orders object keys its own way, and the vendors' search and
  ``COPY`` paths differ; a vendor's file is what that vendor wrote).

``tests/test_golden.py`` replays every scenario and compares; ``python -m tests.golden record``
re-records (see its ``--help``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SEQUENCES = HERE / "sequences.json"


def fixture_path(vendor: str, name: str) -> Path:
    """The fixture of scenario ``name`` on ``vendor`` (``sqlite``, ``postgresql``)."""
    return HERE / vendor / f"{name}.json"


def dump(value: Any) -> str:
    """The fixture text: indented JSON, non-ASCII kept, a newline at the end."""
    return json.dumps(value, indent=1, ensure_ascii=False) + "\n"


def differences(expected: Any, actual: Any, path: str = "") -> Iterator[str]:
    """Where ``actual`` differs from ``expected``: one line per differing value, by its path
    (``state.DisplayMessage.<DisplayMessage 3>.status``)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in expected:
            where = f"{path}.{key}" if path else str(key)
            if key not in actual:
                yield f"{where}: missing (expected {short(expected[key])})"
            else:
                yield from differences(expected[key], actual[key], where)
        for key in actual:
            if key not in expected:
                where = f"{path}.{key}" if path else str(key)
                yield f"{where}: unexpected {short(actual[key])}"
        if list(expected) != list(actual) and set(expected) == set(actual):
            yield f"{path}: keys in another order: {list(actual)} (expected {list(expected)})"
        return
    if isinstance(expected, list) and isinstance(actual, list):
        for index, (e, a) in enumerate(zip(expected, actual, strict=False)):
            yield from differences(e, a, f"{path}[{index}]")
        if len(expected) != len(actual):
            yield (
                f"{path}: {len(actual)} items (expected {len(expected)}); "
                f"extra: {short(actual[len(expected) :] or expected[len(actual) :])}"
            )
        return
    if expected != actual or type(expected) is not type(actual):
        yield f"{path}: {short(actual)} (expected {short(expected)})"


def short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."
