"""The write path writes what it wrote when the golden fixtures were recorded (issue 30,
"Characterise before you delete"): every scenario of ``tests/golden/scenarios.py`` (every kind of
write through the public services, each of today's implementations of it: the general path,
``fastpath``, ``fasttools``, ``fastlite``, ``singles``, ``COPY``; an import of every fixture
format) and every recorded hypothesis sequence (``tests/golden/sequences.json``) is replayed under
a frozen clock on the database of the run, and its outcome (each step's return value or error
class and the signals it sent; afterwards every table of the app, the frame log included, with
ids, uuids and times normalised: ``tests/golden/normalise.py``) must equal the vendor's fixture
(``tests/golden/<vendor>/<scenario>.json``). A failure lists each differing value by its path,
e.g. ``state.ToolCall.<ToolCall 2>.status: "pending" (expected "completed")``.

Re-recording after an intended change (docs/write-path.md "Golden fixtures"):

    python -m tests.golden record                 # SQLite, every scenario
    DATABASE_URL=postgres://... python -m tests.golden record
    python -m tests.golden record -k orphans      # some scenarios (pytest's -k)

then read ``git diff tests/golden`` (each changed value is a change of behaviour) and list the
re-recorded scenarios, and why each changed, in the commit message. ``--regenerate`` draws new
hypothesis sequences (only when the operations they draw from changed).

Why the vendors' fixtures differ: PostgreSQL's ``jsonb`` keeps no key order (shorter keys first),
so ``extra``, ``content``, ``metadata``, the frame log's parsed frames keep the order each vendor
returns; everything else a difference between ``sqlite/`` and ``postgresql/`` shows is a
difference of behaviour between the vendors today.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from django.db import connection

from tests.golden import SEQUENCES, differences, dump, fixture_path
from tests.golden.replay import play
from tests.golden.scenarios import SCENARIOS

pytestmark = pytest.mark.django_db(transaction=True)
RECORD = os.environ.get("MURMUR_GOLDEN_RECORD") == "1"


def all_scenarios() -> dict[str, list[dict[str, Any]]]:
    """The hand-written scenarios and the recorded hypothesis sequences, by name."""
    found = dict(SCENARIOS)
    if SEQUENCES.exists():
        for index, steps in enumerate(json.loads(SEQUENCES.read_text())):
            found[f"generated_{index:02d}"] = steps
    return found


@pytest.mark.parametrize(("name", "steps"), list(all_scenarios().items()))
def test_scenario_writes_what_it_wrote_when_recorded(
    name: str, steps: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = fixture_path(connection.vendor, name)
    outcome = json.loads(json.dumps(play(steps, monkeypatch)))
    if RECORD:
        path.parent.mkdir(exist_ok=True)
        path.write_text(dump({"scenario": name, "steps": steps, "outcome": outcome}))
        return
    assert path.exists(), f"no fixture {path.name} for {connection.vendor}: record it"
    recorded = json.loads(path.read_text())
    assert recorded["steps"] == steps, f"scenario {name} changed since it was recorded: record it"
    found = list(differences(recorded["outcome"], outcome))
    if found:
        shown = "\n  ".join(found[:40]) + ("\n  ..." if len(found) > 40 else "")
        pytest.fail(f"{name} on {connection.vendor}: {len(found)} differences\n  {shown}")


def test_every_fixture_has_its_scenario() -> None:
    """A fixture whose scenario is gone is stale: delete it or restore the scenario."""
    names = set(all_scenarios())
    vendor = fixture_path(connection.vendor, "x").parent
    stale = sorted(p.stem for p in vendor.glob("*.json") if p.stem not in names)
    assert not stale, f"fixtures without a scenario on {connection.vendor}: {stale}"


def test_the_vendors_differ_only_in_key_order() -> None:
    """Where both vendors are recorded, their outcomes are equal but for the order of object keys
    (PostgreSQL's ``jsonb``): any other difference is a difference of behaviour between them,
    to be named here with its reason."""
    for sqlite in sorted(fixture_path("sqlite", "x").parent.glob("*.json")):
        postgresql = fixture_path("postgresql", sqlite.stem)
        if not postgresql.exists():
            continue
        found = [
            line
            for line in differences(
                json.loads(sqlite.read_text())["outcome"],
                json.loads(postgresql.read_text())["outcome"],
            )
            if "keys in another order" not in line
        ]
        assert not found, f"{sqlite.stem}: sqlite and postgresql differ:\n  " + "\n  ".join(found)
