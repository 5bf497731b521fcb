"""Export then import is a fixed point (docs/formats.md "Export"): a murmur export carries the
conversation's title, dates and status, every message's time and its children (subagents) with
their launching calls, so importing it gives the same conversations and exporting those again
gives the same bytes. OpenAI and Anthropic lists carry messages only (their APIs' shapes)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_conversations import services
from murmur_conversations.exporters import child_key
from murmur_conversations.models import Conversation, Message
from tests.helpers import MakeUser, assert_counters_match_rows
from tests.import_helpers import export, run

pytestmark = pytest.mark.django_db

CLAUDE_SESSION = "claude_code_session/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def imported(user: User, text: str) -> Conversation:
    """Import a murmur export from stdin for ``user``: the top-level conversation it made."""
    before = set(Conversation.objects.values_list("pk", flat=True))
    code, _out, err = run(
        "-", "--owner", user.username, "--format", "murmur", stdin=io.BytesIO(text.encode())
    )
    assert (code, err) == (0, "")
    [top] = Conversation.objects.exclude(pk__in=before).filter(parent__isnull=True)
    return top


def tree(conversation: Conversation, parent: Conversation | None = None) -> dict[str, Any]:
    """What a fixed point keeps of a conversation and its descendants, without ids."""
    return {
        "key": None if parent is None else child_key(conversation, parent),
        "call_id": conversation.parent_call_id,
        "title": conversation.title,
        "created_at": conversation.created_at,
        "saved_at": conversation.saved_at,
        "status": conversation.status,
        "messages": list(
            Message.objects.filter(conversation=conversation)
            .order_by("position")
            .values_list("message_id", "role", "content", "created_at")
        ),
        "children": [
            tree(child, conversation)
            for child in Conversation.objects.filter(parent=conversation).order_by(
                "created_at", "pk"
            )
        ],
    }


def assert_fixed_point(original: Conversation, reader: User) -> None:
    first = export(original)
    again = imported(reader, first)
    assert tree(again) == tree(original)
    assert export(again) == first
    for conversation in Conversation.objects.filter(owner=reader):
        assert_counters_match_rows(conversation)


def test_a_claude_code_session_of_the_corpus_survives_export_and_import(
    corpus: Path, user: User, make_user: MakeUser
) -> None:
    code, _out, err = run(corpus / CLAUDE_SESSION, "--owner", user.username)
    assert code == 0, err
    original = Conversation.objects.get(owner=user, parent__isnull=True)
    assert original.child_count == 2
    assert_fixed_point(original, make_user())


def test_the_record_alone_is_the_stored_lines(corpus: Path, user: User) -> None:
    code, _out, err = run(corpus / CLAUDE_SESSION, "--owner", user.username)
    assert code == 0, err
    original = Conversation.objects.get(owner=user, parent__isnull=True)
    lines = export(original, "--record-only").splitlines()
    assert len(lines) == original.record_length
    assert all('"murmur.' not in line for line in lines)


def build(owner: User, gaps: list[int], titles: list[str], statuses: list[str]) -> Conversation:
    """A conversation with a child and a grandchild, each message ``gaps[i]`` seconds after the
    previous one, titles and final statuses as given."""
    clock = iter(START + timedelta(seconds=sum(gaps[: i + 1])) for i in range(len(gaps)))
    root = services.start_conversation(owner=owner, title=titles[0], created_at=START)

    def talk(conversation: Conversation, call: str | None = None) -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "plan the beds"}]
        if call is not None:
            messages.append(
                {
                    "role": "assistant",
                    "content": [{"type": "tool_call", "id": call, "name": "Task", "input": {}}],
                }
            )
        else:
            messages.append({"role": "assistant", "content": "Three beds."})
        times = [next(clock), next(clock)]
        services.save_messages(conversation=conversation, messages=messages, times=times)

    talk(root, call="toolu_a")
    family, key = [root], "session"
    for name, launched_by, launches in (
        (titles[1], "toolu_a", "toolu_b"),
        (titles[2], "toolu_b", None),
    ):
        key = f"{key}/agent-{launched_by}"
        child = services.start_conversation(
            owner=owner,
            parent=family[-1],
            parent_call_id=launched_by,
            title=name,
            source="claude-code",
            external_id=key,
            created_at=next(clock),
        )
        talk(child, call=launches)
        family.append(child)
    for conversation, status in zip(reversed(family), statuses, strict=True):
        services.set_status(conversation=conversation, status=status, at=next(clock))
    root.refresh_from_db()
    return root


titles = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=12).map(
    str.strip
)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    gaps=st.lists(st.integers(min_value=0, max_value=90 * 86400), min_size=12, max_size=12),
    names=st.lists(titles, min_size=3, max_size=3),
    statuses=st.lists(st.sampled_from(["idle", "error", "cancelled"]), min_size=3, max_size=3),
)
def test_generated_conversations_with_children_are_a_fixed_point(
    make_user: MakeUser, gaps: list[int], names: list[str], statuses: list[str]
) -> None:
    owner, reader = make_user(), make_user()
    original = build(owner, gaps, names, statuses)
    assert_fixed_point(original, reader)
    Conversation.objects.filter(owner__in=[owner, reader]).delete()
