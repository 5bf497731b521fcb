"""The write path writes what it wrote when the golden fixtures were recorded (issue 30,
"Characterise before you delete"): every scenario of ``tests/golden/scenarios.py`` (every kind of
write through the public services, each implementation it had when they were recorded: the
general path, ``fastpath``, ``fasttools``, ``fastlite``, ``singles``, ``COPY``; an import of every fixture
format) and every recorded hypothesis sequence (``tests/golden/sequences.json``) is replayed under
a frozen clock on the database of the run, and its outcome (each step's return value or error
class and the signals it sent; afterwards every table of the app, the frame log included, with
ids, uuids and times normalised: ``tests/golden/normalise.py``) must equal the vendor's fixture
(``tests/golden/<vendor>/<scenario>.json``). A failure lists each differing value by its path,
e.g. ``state.ToolCall.<ToolCall 2>.status: "pending" (expected "completed")``.

Re-recording after an intended change (docs/write-path.md "Golden fixtures"):

    python -m tests.golden record                 # SQLite, every scenario
    DATABASE_URL=postgres://... python -m tests.golden record
    python -m tests.golden record -k orphans      # some scenarios (pytest's -k; "generated":
                                                  # the hypothesis sequences)

then read ``git diff tests/golden`` (each changed value is a change of behaviour) and list the
re-recorded scenarios, and why each changed, in the commit message. ``--regenerate`` draws new
hypothesis sequences (only when the operations they draw from changed).

Why the vendors' fixtures differ: PostgreSQL's ``jsonb`` keeps no key order (shorter keys first),
so ``extra``, ``content``, ``metadata``, the frame log's parsed frames keep the order each vendor
returns; everything else a difference between ``sqlite/`` and ``postgresql/`` shows is a
difference of behaviour between the vendors today.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction

from murmur_conversations.models import Hold
from murmur_conversations.services import writing
from tests.golden import SEQUENCES, differences, dump, fixture_path
from tests.golden.normalise import app_models
from tests.golden.replay import play
from tests.golden.scenarios import SCENARIOS

pytestmark = pytest.mark.django_db(transaction=True)
RECORD = os.environ.get("MURMUR_GOLDEN_RECORD") == "1"
GROUPS = 3  # tests the hypothesis sequences are shared among


def sequences() -> dict[str, list[dict[str, Any]]]:
    """The recorded hypothesis sequences, by name (``generated_07``)."""
    if not SEQUENCES.exists():
        return {}
    found = json.loads(SEQUENCES.read_text())
    return {f"generated_{index:02d}": steps for index, steps in enumerate(found)}


def all_scenarios() -> dict[str, list[dict[str, Any]]]:
    """The hand-written scenarios and the recorded hypothesis sequences, by name."""
    return SCENARIOS | sequences()


def wipe() -> None:
    """Delete every row of the app's tables and every user, in one transaction: between two
    scenarios of one test, far cheaper than the flush of every table between two tests."""
    with transaction.atomic():
        Hold.objects.all().delete()  # PROTECTs its conversation
        for model in app_models():
            model._default_manager.all().delete()
        User.objects.all().delete()


def check(name: str, steps: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replay scenario ``name`` (or record it): how its outcome differs from its fixture."""
    path = fixture_path(connection.vendor, name)
    with monkeypatch.context() as patch:
        # the frame log prunes itself every 256th logged write: count from the scenario's start
        patch.setattr(writing, "_logged_writes", itertools.count(1), raising=False)
        outcome = json.loads(json.dumps(play(steps, patch)))
    if RECORD:
        path.parent.mkdir(exist_ok=True)
        path.write_text(dump({"scenario": name, "steps": steps, "outcome": outcome}))
        return []
    if not path.exists():
        return [f"no fixture {path.name} for {connection.vendor}: record it"]
    recorded = json.loads(path.read_text())
    if recorded["steps"] != steps:
        return [f"scenario {name} changed since it was recorded: record it"]
    return list(differences(recorded["outcome"], outcome))


def report(name: str, found: list[str]) -> str:
    shown = "\n  ".join(found[:40]) + ("\n  ..." if len(found) > 40 else "")
    return f"{name} on {connection.vendor}: {len(found)} differences\n  {shown}"


@pytest.mark.parametrize(("name", "steps"), list(SCENARIOS.items()))
def test_scenario_writes_what_it_wrote_when_recorded(
    name: str, steps: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    found = check(name, steps, monkeypatch)
    if found:
        pytest.fail(report(name, found))


@pytest.mark.parametrize("group", range(GROUPS))
def test_generated_sequences_write_what_they_wrote_when_recorded(
    group: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hypothesis sequences, a third of them per test (one flush of the database per test
    is most of a sequence's time), the database emptied between two of them."""
    failures = []
    for index, (name, steps) in enumerate(sequences().items()):
        if index % GROUPS == group:
            found = check(name, steps, monkeypatch)
            if found:
                failures.append(report(name, found))
            wipe()
    if failures:
        pytest.fail("\n".join(failures))


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
