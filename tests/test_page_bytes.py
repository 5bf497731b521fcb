"""The REST pages answer byte for byte what they answered before their reads were fused into one
statement and their bodies written by ``jsonenc.encode`` (tests/page_bytes/).

The fixture was recorded from the earlier implementation (``MURMUR_RECORD_PAGE_BYTES=1`` rewrites
it; nothing else does). The conversation has a fixed id and fixed times, so cursors and times are
the same on every run; only the display rows' own ids (database sequences) are written as
``#<seq>`` in the fixture, and a cursor's timestamp and signature (``django.core.signing``: they
change with the clock) as ``<signed>`` after its payload, which is compared. PostgreSQL answers with the keys of stored JSON objects in ``jsonb``
order, hence one fixture per database vendor.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from murmur_conversations import services
from murmur_conversations.models import Conversation, DisplayMessage, Message
from tests.api_helpers import token_client, url

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parent / "page_bytes"
OWN = uuid.UUID("0b5c1c3e-8a51-4d59-9f0e-5b0c2f1a7e01")
EMPTY = uuid.UUID("0b5c1c3e-8a51-4d59-9f0e-5b0c2f1a7e02")
FOREIGN = uuid.UUID("0b5c1c3e-8a51-4d59-9f0e-5b0c2f1a7e03")
MISSING = uuid.UUID("0b5c1c3e-8a51-4d59-9f0e-5b0c2f1a7e04")
WHEN = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
ROUND = datetime(2026, 3, 4, 5, 6, 8, tzinfo=UTC)
_SIGNED = re.compile(rb'("next_cursor":"[A-Za-z0-9_-]+):[A-Za-z0-9_-]+:[A-Za-z0-9_-]+"')

#: Text and values whose JSON spelling differs between encoders: small and large floats, a big
#: integer, U+2028/U+2029 (escaped by DRF's renderer), control characters, non-ASCII, emoji.
ODD = {
    "small": 1e-05,
    "tiny": 2.5e-07,
    "large": 1e16,
    "plain": 0.1,
    "whole": 3.0,
    "big": 2**70,
    "negative": -17,
    "separators": "a\u2028b\u2029c",
    "controls": '\x01\x1f\t\n\r"\\/\x7f',
    "text": "héllo wörld ✓ 🎉",
    "nested": [[{"deep": [None, True, False]}]],
}


def _messages() -> list[dict[str, Any]]:
    return [
        {"id": "m1", "role": "user", "content": "hello é\u2028 ✓"},
        {
            "id": "m2",
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "text", "text": "let me look 0.00001 1e5"},
                {"type": "tool_call", "id": "c1", "name": "lookup", "input": ODD},
            ],
        },
        {"id": "m3", "role": "tool", "tool_call_id": "c1", "content": json.dumps(ODD)},
        {"id": "m4", "role": "assistant", "content": None},
        {"id": "m5", "role": "user", "content": "🎉" * 3},
        {"id": "m6", "role": "assistant", "content": 'done\n\ttabbed "quoted"'},
    ]


def _build(user: User, other: User) -> dict[int, int]:
    """The conversations, with fixed times; returns ``{display row pk: seq}`` of ``OWN``."""
    own = services.start_conversation(owner=user, title="pages ✓", conversation_id=OWN)
    services.save_messages(conversation=own, messages=_messages())
    services.start_conversation(owner=user, title="empty", conversation_id=EMPTY)
    foreign = services.start_conversation(owner=other, title="theirs", conversation_id=FOREIGN)
    services.save_messages(conversation=foreign, messages=[{"role": "user", "content": "no"}])
    rows = list(DisplayMessage.objects.filter(conversation_id=OWN).order_by("seq"))
    services.set_feedback(
        conversation=own, display_message=rows[0], user=user, rating=1, comment="good ✓"
    )
    DisplayMessage.objects.filter(seq__lte=3).update(created_at=WHEN, updated_at=WHEN)
    DisplayMessage.objects.filter(seq__gt=3).update(created_at=ROUND, updated_at=ROUND)
    Message.objects.update(created_at=WHEN)
    Conversation.objects.update(created_at=WHEN, saved_at=WHEN)
    return {row.pk: row.seq for row in DisplayMessage.objects.filter(conversation_id=OWN)}


def _walk(client: Any, path: str, params: dict[str, Any]) -> list[tuple[int, bytes]]:
    """Every page of a listing, following ``next_cursor`` from the first."""
    answers = []
    query = dict(params)
    while True:
        response = client.get(path, query)
        answers.append((response.status_code, response.content))
        cursor = response.json().get("next_cursor") if response.status_code == 200 else None
        if not cursor or len(answers) > 20:
            return answers
        query = {**params, "cursor": cursor}


def _answers(user: User) -> dict[str, list[tuple[int, bytes]]]:
    client = token_client(user)
    own = url(OWN, "display-messages/")
    return {
        "display, 3 a page": _walk(client, own, {"limit": 3}),
        "display, default page": _walk(client, own, {}),
        "display, since 0, 2 a page": _walk(client, own, {"since": 0, "limit": 2}),
        "display, since 4": _walk(client, own, {"since": 4}),
        "display, since far ahead": _walk(client, own, {"since": 10**6}),
        "record, 2 a page": _walk(client, url(OWN, "record/"), {"limit": 2}),
        "empty display": _walk(client, url(EMPTY, "display-messages/"), {}),
        "empty record": _walk(client, url(EMPTY, "record/"), {}),
        "foreign display": _walk(client, url(FOREIGN, "display-messages/"), {}),
        "foreign since": _walk(client, url(FOREIGN, "display-messages/"), {"since": 0}),
        "foreign record": _walk(client, url(FOREIGN, "record/"), {}),
        "missing display": _walk(client, url(MISSING, "display-messages/"), {}),
        "malformed display": _walk(client, url("nope", "display-messages/"), {}),
        "bad cursor": _walk(client, own, {"cursor": "nope"}),
        "bad since": _walk(client, own, {"since": "x"}),
    }


def _spelled(answers: dict[str, list[tuple[int, bytes]]], seqs: dict[int, int]) -> dict[str, Any]:
    """The answers as the fixture stores them: bodies as text, row ids as ``#<seq>``."""
    out: dict[str, Any] = {}
    for name, pages in answers.items():
        spelled = []
        for status, content in pages:
            for pk, seq in seqs.items():
                content = content.replace(f'"id":"{pk}"'.encode(), f'"id":"#{seq}"'.encode())
            content = _SIGNED.sub(rb'\1:<signed>"', content)
            spelled.append([status, content.decode("utf-8")])
        out[name] = spelled
    return out


def test_pages_answer_the_recorded_bytes(django_user_model: type[User]) -> None:
    user = django_user_model.objects.create_user("reader")
    other = django_user_model.objects.create_user("other")
    seqs = _build(user, other)
    got = _spelled(_answers(user), seqs)
    fixture = FIXTURES / f"{connection.vendor}.json"
    if os.environ.get("MURMUR_RECORD_PAGE_BYTES") == "1":
        FIXTURES.mkdir(parents=True, exist_ok=True)
        fixture.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n", "utf-8")
    expected = json.loads(fixture.read_text("utf-8"))
    assert got.keys() == expected.keys()
    for name in expected:
        assert got[name] == expected[name], name
    not_found = got["missing display"]
    for name in ("foreign display", "foreign since", "foreign record", "malformed display"):
        assert got[name] == not_found, name
