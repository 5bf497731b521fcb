"""A message whose ``usage`` the counters cannot read is imported without it (docs/formats.md
"Usage"): the record keeps the value under ``usage_unread``, the counters do not count it, the
line is reported and not refused, and every other line lands as it would have. The kind, not one
input: every way ``usage.read_usage`` refuses a usage object, in every fixture that carries
usage (Claude Code session and stream-json, Anthropic list)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from murmur_conversations.models import Conversation, Message
from tests.helpers import MakeUser
from tests.import_helpers import run

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CARRYING_USAGE = [
    "claude_code/3c6d9e10-2b6f-4c1a-9f0e-4a8b2c6d1e01.jsonl",
    "claude_code/stream_json.jsonl",
    "anthropic/bike_trip.json",
]
#: Each way a usage object is unreadable (tests/test_usage.py names the errors).
UNREADABLE: list[Any] = [
    "12 tokens",
    {"input_tokens": -1},
    {"input_tokens": 1.5},
    {"output_tokens": "3"},
    {"output_tokens": 2**60},
    {"prompt_tokens_details": 3},
    {"input_tokens": 5, "cached_input_tokens": 6},
]


def _spoil(value: Any, bad: Any) -> tuple[Any, int]:
    """``value`` with every ``usage`` object replaced by ``bad``, and how many were."""
    if isinstance(value, dict):
        count = 0
        out = {}
        for key, item in value.items():
            if key == "usage" and isinstance(item, dict):
                out[key], count = bad, count + 1
            else:
                out[key], found = _spoil(item, bad)
                count += found
        return out, count
    if isinstance(value, list):
        pairs = [_spoil(item, bad) for item in value]
        return [p[0] for p in pairs], sum(p[1] for p in pairs)
    return value, 0


def _write(name: str, bad: Any, folder: Path) -> tuple[Path, int]:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    if name.endswith(".json"):
        spoiled, count = _spoil(json.loads(text), bad)
        out = json.dumps(spoiled)
    else:
        lines = []
        count = 0
        for line in text.splitlines():
            value, found = _spoil(json.loads(line), bad)
            lines.append(json.dumps(value))
            count += found
        out = "\n".join(lines) + "\n"
    path = folder / Path(name).name
    path.write_text(out, encoding="utf-8")
    return path, count


def _records(owner: User) -> list[tuple[str, str, str]]:
    """The owner's record messages, by the source's conversation key then position (a log's
    conversations may share a creation time)."""
    return list(
        Message.objects.filter(conversation__owner=owner)
        .order_by("conversation__external_id", "position")
        .values_list("conversation__external_id", "role", "message_id")
    )


@pytest.mark.parametrize("name", CARRYING_USAGE)
@pytest.mark.parametrize("bad", UNREADABLE, ids=lambda bad: json.dumps(bad)[:30])
def test_an_unreadable_usage_costs_the_message_nothing(
    name: str, bad: Any, make_user: MakeUser, tmp_path: Path
) -> None:
    good, spoiled = make_user(), make_user()
    assert run(FIXTURES / name, "--owner", good.username)[0] == 0
    path, count = _write(name, bad, tmp_path)
    assert count > 0
    code, out, err = run(path, "--owner", spoiled.username)
    assert code == 0, err
    assert "imported without its usage, which is not counted" in err
    assert "message(s) without their unreadable usage" in out
    assert _records(spoiled) == _records(good)  # every message landed, in order
    kept = [
        extra["usage_unread"]
        for extra in Message.objects.filter(conversation__owner=spoiled).values_list(
            "extra", flat=True
        )
        if "usage_unread" in extra
    ]
    assert kept and all(value == bad for value in kept)
    for conversation in Conversation.objects.filter(owner=spoiled):
        assert conversation.input_tokens == conversation.output_tokens == 0
