"""Assertions and fixture types shared by the test modules (the fixtures are in ``conftest.py``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from django.contrib.auth.models import User
from django.http.response import ResponseHeaders

from murmur_conversations.models import (
    OPEN_TOOL_STATUSES,
    Conversation,
    DisplayMessage,
    Message,
    ToolCall,
)
from murmur_conversations.projection import transcript_entry


def corpus_path() -> Path | None:
    """The folder of the real-log corpus, or None when there is none.

    The folder ``MURMUR_CORPUS`` names (a relative path is taken from the repository root); the
    corpus is read in place and never copied into the repository. Without the variable there is
    none, so the corpus tests skip naming it (``.ci/run`` sets it and refuses such skips).
    """
    given = os.environ.get("MURMUR_CORPUS")
    if not given:
        return None
    path = Path(__file__).resolve().parent.parent / given
    return path if path.is_dir() else None


def corpus_skip_reason() -> str:
    """Why a ``corpus`` test skips: the variable to set, or the folder it names that is missing."""
    given = os.environ.get("MURMUR_CORPUS")
    if given:
        return f"needs corpus: MURMUR_CORPUS={given} is not a folder"
    return "needs corpus: set MURMUR_CORPUS to the real-log corpus folder to run it"


def corpus_logs() -> list[str]:
    """The corpus's ``*/*.jsonl`` logs as paths relative to its folder, for parametrizing; without
    a corpus one placeholder, which the ``corpus`` fixture skips with its reason (an empty
    parameter set would skip without one)."""
    corpus = corpus_path()
    if corpus is None:
        return ["no-corpus"]
    return [p.relative_to(corpus).as_posix() for p in sorted(corpus.glob("*/*.jsonl"))]


def assert_counters_match_rows(conversation: Conversation) -> None:
    """Every counter of ``conversation`` equals what its rows say (docs/architecture.md)."""
    conversation.refresh_from_db()
    messages = list(Message.objects.filter(conversation=conversation).order_by("position"))
    positions = [m.position for m in messages]
    assert positions == list(range(1, len(messages) + 1)), "positions are gapless from 1"
    assert conversation.record_length == len(messages)
    transcript = [
        m
        for m in messages
        if transcript_entry(
            role=m.role, content=m.content, tool_call_id=m.tool_call_id, extra=m.extra
        )
        is not None
    ]
    assert conversation.transcript_count == len(transcript)
    seqs = list(
        DisplayMessage.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("seq", flat=True)
    )
    assert seqs == list(range(1, len(seqs) + 1)), "seqs are gapless from 1"
    assert conversation.last_seq == len(seqs)
    events = set(
        DisplayMessage.objects.filter(conversation=conversation).values_list("event_seq", flat=True)
    )
    assert all(e <= conversation.last_event_seq for e in events)
    assert (
        conversation.tool_call_count == ToolCall.objects.filter(conversation=conversation).count()
    )
    assert conversation.child_count == Conversation.objects.filter(parent=conversation).count()
    held = DisplayMessage.objects.filter(
        conversation=conversation,
        content_type="tool_result",
        tool_call__isnull=True,
        metadata__orphan=True,
    ).count()
    assert conversation.held_results == held, "held_results counts the results held for a call"
    calls = list(
        ToolCall.objects.filter(conversation=conversation).values_list("call_id", "status")
    )
    open_ids = [call_id for call_id, status in calls if status in OPEN_TOOL_STATUSES]
    assert len(open_ids) == len(set(open_ids)), "a call id names one open call"


class MakeUser(Protocol):
    """The ``make_user`` fixture: a user with password 'pw' (a fresh username unless given)."""

    def __call__(self, username: str | None = None, **fields: Any) -> User: ...


class MakeConversation(Protocol):
    """The ``make_conversation`` fixture: ``start_conversation`` for ``owner`` (the ``user``
    fixture unless given)."""

    def __call__(self, owner: User | None = ..., **kwargs: Any) -> Conversation: ...


class Response(Protocol):
    """What the tests read of a test client's response (Django's or DRF's)."""

    @property
    def status_code(self) -> int: ...
    @property
    def content(self) -> bytes: ...
    @property
    def headers(self) -> ResponseHeaders: ...
    def json(self) -> Any: ...
