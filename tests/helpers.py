"""Assertions shared by the test modules."""

from __future__ import annotations

from murmur_conversations.models import Conversation, DisplayMessage, Message, ToolCall
from murmur_conversations.projection import transcript_entry


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
