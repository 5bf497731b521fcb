"""The page reads of ``reading`` (one fixed statement on a raw cursor) give byte for byte what the
ORM reads gave: ``display_row`` and ``record_row`` of model instances, for stored rows of every
kind (tool-call cards, results, null content, unicode, feedback), and the REST pages and the
plug-in read answer exactly as the ORM-built pages did, cursors included."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import signing
from django.db import connection
from django.db.models import Q
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pytest_django import Settings

from murmur_conversations import jsonenc, reading, services
from murmur_conversations.api.pagination import CursorBinding
from murmur_conversations.hooks import hook_message, read_messages
from murmur_conversations.models import Conversation, DisplayMessage, Message
from murmur_conversations.representations import display_row, record_row
from murmur_conversations.selectors import feedback_for
from tests.api_helpers import token_client, url
from tests.helpers import MakeConversation

pytestmark = pytest.mark.django_db

GRANTED = {"HOOKS": {"recall": {"capabilities": {"conversation": {"read": True}}}}}

TEXT = st.text(max_size=12)
KINDS = st.sampled_from(["user", "blocks", "null_calls", "result", "system", "robot", "null"])


def _messages(kinds: list[str], texts: list[str]) -> list[dict[str, Any]]:
    """Messages of the drawn kinds: text, blocks with a card, null content with OpenAI calls,
    results of the last call (or of none), system, an unknown role, null content."""
    messages: list[dict[str, Any]] = []
    last_call = "none"
    for index, (kind, text) in enumerate(zip(kinds, texts, strict=True)):
        call = f"c{index}"
        if kind == "user":
            messages.append({"role": "user", "content": text})
        elif kind == "blocks":
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": text, "signature": "s"},
                        {"type": "text", "text": text + "é"},
                        {"type": "tool_call", "id": call, "name": "bash", "input": {"c": text}},
                    ],
                }
            )
            last_call = call
        elif kind == "null_calls":
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call,
                            "type": "function",
                            "function": {"name": "now", "arguments": text},
                        }
                    ],
                }
            )
            last_call = call
        elif kind == "result":
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": last_call,
                    "content": text,
                    "is_error": index % 2 == 1,
                }
            )
        elif kind == "system":
            messages.append({"role": "system", "content": [{"type": "text", "text": text}]})
        elif kind == "robot":
            messages.append({"role": "robot", "content": text, "name": "r2"})
        else:
            messages.append({"role": "user", "content": None})
    return messages


def _fill(conversation: Conversation, user: User, messages: list[dict[str, Any]]) -> None:
    if messages:
        services.save_messages(conversation=conversation, messages=messages)
    services.save_synthetic_message(
        conversation=conversation,
        message_type="system",
        content_type="notification",
        content={"text": "☃ notice"},
    )
    row = (
        DisplayMessage.objects.filter(conversation=conversation, message__isnull=False)
        .order_by("-seq")
        .first()
    )
    if row is None:
        return
    services.set_feedback(
        conversation=conversation, display_message=row, user=user, rating=-1, comment="ünï"
    )


def _bytes(rows: list[dict[str, Any]]) -> str:
    return jsonenc.dumps(rows)


def _same_body(response: Any, expected: dict[str, Any]) -> None:
    """The response's body is ``expected`` byte for byte, the cursor's signature aside (signed
    cursors carry the time they were signed): both cursors hold the same payload."""
    got = dict(response.json())
    cursors = (got.pop("next_cursor"), expected.pop("next_cursor"))
    assert jsonenc.dumps(got) == jsonenc.dumps(expected)
    assert (cursors[0] is None) == (cursors[1] is None)
    if cursors[0] is not None:
        payloads = [signing.loads(c, salt="murmur_conversations.api.cursor") for c in cursors]
        assert payloads[0] == payloads[1]
    expected["next_cursor"] = cursors[1]


def _assert_same_reads(conversation: Conversation, user: User) -> None:
    pk = conversation.pk
    rows = list(DisplayMessage.objects.filter(conversation=conversation).order_by("-seq"))
    mine = feedback_for(user, [r.pk for r in rows])
    # every row, owner's feedback and the reader's, whole and in pages below a seq
    assert _bytes(reading.display_page(pk, limit=1000)) == _bytes([display_row(r) for r in rows])
    assert _bytes(reading.display_page(pk, limit=1000, reader=user)) == _bytes(
        [display_row(r, mine.get(r.pk)) for r in rows]
    )
    for cut in {1, 2, len(rows) // 2 + 1}:
        expected = [display_row(r) for r in rows if r.seq < cut][:3]
        assert _bytes(reading.display_page(pk, limit=3, before_seq=cut)) == _bytes(expected)
    # changes after an event_seq, after a keyset
    for since in {0, conversation.last_event_seq // 2, conversation.last_event_seq}:
        changed = sorted(
            (r for r in rows if r.event_seq > since), key=lambda r: (r.event_seq, r.seq)
        )
        assert _bytes(reading.display_changes(pk, since=since, limit=1000)) == _bytes(
            [display_row(r) for r in changed]
        )
        if changed:
            first = changed[0]
            rest = [display_row(r) for r in changed[1:3]]
            after = (first.event_seq, first.seq)
            assert _bytes(reading.display_changes(pk, since=since, limit=2, after=after)) == _bytes(
                rest
            )
    # the record: REST rows and the plug-in's, from instances loaded by the ORM
    messages = list(Message.objects.filter(conversation=conversation).order_by("-position"))
    assert _bytes(reading.record_page(pk, limit=1000)) == _bytes([record_row(m) for m in messages])
    for below in {1, 2, len(messages)}:
        expected = [record_row(m) for m in messages if m.position < below][:2]
        assert _bytes(reading.record_page(pk, limit=2, before_position=below)) == _bytes(expected)
    loaded = reading.record_messages(pk, limit=1000)
    assert _bytes([hook_message(m) for m in loaded]) == _bytes([hook_message(m) for m in messages])
    assert [m.pk for m in loaded] == [m.pk for m in messages]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=st.lists(st.tuples(KINDS, TEXT), max_size=8))
def test_raw_reads_give_the_orm_bytes(
    drawn: list[tuple[str, str]], user: User, make_conversation: MakeConversation
) -> None:
    conversation = make_conversation(title="pages")
    _fill(conversation, user, _messages([k for k, _ in drawn], [t for _, t in drawn]))
    conversation.refresh_from_db()
    _assert_same_reads(conversation, user)


def test_tool_status_moves_and_odd_text_read_the_same(
    user: User, conversation: Conversation
) -> None:
    """Cards whose status moved (event_seq above created_event_seq), a held result, NUL and
    lone surrogates (repaired on write), astral characters."""
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "user", "content": "a\x00b \ud800 🦜"},
            {"role": "tool", "tool_call_id": "early", "content": "before its call"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_call", "id": "early", "name": "x", "input": {}},
                    {"type": "tool_call", "id": "mv", "name": "y", "input": {"k": [1, None]}},
                ],
            },
        ],
    )
    services.update_tool_status(
        conversation=conversation, status="executing", tool_info={"call_id": "mv"}
    )
    _fill(conversation, user, [])
    conversation.refresh_from_db()
    _assert_same_reads(conversation, user)


# ------------------------------------------------------------------------------ REST and hooks


def _old_display_body(
    conversation: Conversation, user: User, limit: int, after: int | None
) -> dict[str, Any]:
    """The body the ORM-built route answered (the view before ``reading``)."""
    rows = DisplayMessage.objects.filter(conversation=conversation)
    if after is not None:
        rows = rows.filter(seq__lt=after)
    fetched = list(rows.order_by("-seq")[: limit + 1])
    served = fetched[:limit]
    binding = CursorBinding("display", str(conversation.pk))
    mine = feedback_for(user, [r.pk for r in served])
    return {
        "results": [display_row(r, mine.get(r.pk)) for r in served],
        "next_cursor": binding.sign([served[-1].seq]) if len(fetched) > limit else None,
        "total": conversation.last_seq,
    }


def _old_since_body(
    conversation: Conversation, user: User, since: int, limit: int, after: list[int] | None
) -> dict[str, Any]:
    changed = DisplayMessage.objects.filter(conversation=conversation, event_seq__gt=since)
    total = changed.count()
    if after is not None:
        changed = changed.filter(
            Q(event_seq__gt=after[0]) | Q(event_seq=after[0], seq__gt=after[1])
        )
    fetched = list(changed.order_by("event_seq", "seq")[: limit + 1])
    served = fetched[:limit]
    binding = CursorBinding("since", str(conversation.pk), (("since", str(since)),))
    mine = feedback_for(user, [r.pk for r in served])
    last = served[-1] if served else None
    return {
        "results": [display_row(r, mine.get(r.pk)) for r in served],
        "next_cursor": binding.sign([last.event_seq, last.seq])
        if last and len(fetched) > limit
        else None,
        "total": total,
    }


def _old_record_body(
    conversation: Conversation, limit: int, after: int | None, scope: str
) -> dict[str, Any]:
    rows = Message.objects.filter(conversation=conversation)
    if after is not None:
        rows = rows.filter(position__lt=after)
    fetched = list(rows.order_by("-position")[: limit + 1])
    served = fetched[:limit]
    binding = CursorBinding("record", scope)
    return {
        "results": [record_row(m) for m in served],
        "next_cursor": binding.sign([served[-1].position]) if len(fetched) > limit else None,
        "total": conversation.record_length,
    }


def _kinds_of_every_sort(conversation: Conversation, user: User) -> None:
    kinds = ["user", "blocks", "result", "null_calls", "result", "system", "robot", "null"]
    texts = ["héllo", "", "ok", "{}", "done", "sys", "beep", ""]
    _fill(conversation, user, _messages(kinds, texts))
    services.update_tool_status(
        conversation=conversation, status="completed", tool_info={"call_id": "c1"}
    )
    conversation.refresh_from_db()


def test_rest_pages_answer_as_the_orm_pages_did(user: User, conversation: Conversation) -> None:
    _kinds_of_every_sort(conversation, user)
    client = token_client(user)
    # newest first, walked with cursors
    cursor: str | None = None
    after: int | None = None
    walked = 0
    while True:
        params: dict[str, Any] = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        response = client.get(url(conversation.pk, "display-messages/"), params)
        assert response.status_code == 200
        expected = _old_display_body(conversation, user, 3, after)
        _same_body(response, expected)
        walked += len(expected["results"])
        cursor = response.json()["next_cursor"]
        if cursor is None:
            break
        after = expected["results"][-1]["seq"]
    assert walked == conversation.last_seq
    # changes after an event_seq, walked with cursors
    for since in (0, 3):
        cursor, key = None, None
        while True:
            params = {"since": since, "limit": 2, **({"cursor": cursor} if cursor else {})}
            response = client.get(url(conversation.pk, "display-messages/"), params)
            assert response.status_code == 200
            expected = _old_since_body(conversation, user, since, 2, key)
            _same_body(response, expected)
            cursor = response.json()["next_cursor"]
            if cursor is None:
                break
            key = [expected["results"][-1]["event_seq"], expected["results"][-1]["seq"]]
    # the record
    cursor, position = None, None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        response = client.get(url(conversation.pk, "record/"), params)
        assert response.status_code == 200
        expected = _old_record_body(conversation, 2, position, str(conversation.pk))
        _same_body(response, expected)
        cursor = response.json()["next_cursor"]
        if cursor is None:
            break
        position = expected["results"][-1]["position"]


def test_the_plugin_read_answers_as_before(
    user: User, conversation: Conversation, settings: Settings
) -> None:
    settings.MURMUR_CONVERSATIONS = GRANTED
    _kinds_of_every_sort(conversation, user)
    cursor: str | None = None
    while True:
        page = read_messages(hook="recall", conversation=conversation, cursor=cursor, limit=3)
        upper = conversation.record_length if cursor is None else int(cursor[3:])
        lower = max(0, upper - 3)
        expected = Message.objects.filter(
            conversation=conversation, position__gt=lower, position__lte=upper
        ).order_by("-position")
        assert _bytes(page.messages) == _bytes([hook_message(m) for m in expected])
        assert page.next_cursor == (f"mc_{lower}" if lower > 0 else None)
        cursor = page.next_cursor
        if cursor is None:
            break


def test_a_missing_conversation_reads_empty(conversation: Conversation) -> None:
    missing = uuid.UUID("00000000-0000-4000-8000-000000000000")
    assert reading.display_page(missing, limit=5) == []
    assert reading.display_changes(missing, since=0, limit=5) == []
    assert reading.record_page(missing, limit=5) == []


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    times=st.lists(
        st.datetimes(
            min_value=datetime(1000, 1, 1),
            max_value=datetime(9999, 12, 31),
            timezones=st.just(UTC),
        ),
        min_size=2,
        max_size=2,
    ),
    whole=st.booleans(),
)
def test_any_stored_time_reads_the_same(
    times: list[datetime], whole: bool, user: User, make_conversation: MakeConversation
) -> None:
    """Times of every spelling the databases hold: whole seconds, microseconds with trailing
    zeros, far years, the database's own ``now()``; created and updated apart or equal."""
    conversation = make_conversation(title="times")
    _fill(conversation, user, _messages(["user", "blocks"], ["a", "b"]))
    created, updated = (t.replace(microsecond=0) if whole else t for t in times)
    rows = DisplayMessage.objects.filter(conversation=conversation).order_by("seq")
    first = rows.first()
    assert first is not None
    rows.filter(pk=first.pk).update(created_at=created, updated_at=updated)
    rows.exclude(pk=first.pk).update(created_at=Now(), updated_at=created)
    conversation.refresh_from_db()
    _assert_same_reads(conversation, user)


def test_each_read_is_one_query_seen_by_django(user: User, conversation: Conversation) -> None:
    """With queries logged (``CaptureQueriesContext``) each read is one ordinary query that
    Django records, and reads the same rows as unlogged."""
    _kinds_of_every_sort(conversation, user)
    plain = reading.display_page(conversation.pk, limit=4)
    with CaptureQueriesContext(connection) as captured:
        logged = reading.display_page(conversation.pk, limit=4)
        reading.display_changes(conversation.pk, since=1, limit=4)
        reading.record_page(conversation.pk, limit=4)
    assert len(captured.captured_queries) == 3
    assert _bytes(logged) == _bytes(plain)
