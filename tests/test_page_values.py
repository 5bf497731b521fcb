"""Page reads built from ``values_list`` (``representations.display_row_of_values``) give the same
bytes as ``display_row`` of model instances, for every kind of row, with and without feedback."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from murmur_conversations import jsonenc, services
from murmur_conversations.models import Conversation, DisplayMessage
from murmur_conversations.representations import (
    DISPLAY_COLUMNS,
    display_row,
    display_row_of_values,
)
from murmur_conversations.selectors import feedback_for
from tests.api_helpers import token_client, url

pytestmark = pytest.mark.django_db


def _fill(conversation: Conversation, user: User) -> None:
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "user", "content": "héllo\n"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "text", "text": "running"},
                    {"type": "tool_call", "id": "c1", "name": "bash", "input": {"cmd": "ls"}},
                    {"type": "tool_call", "id": "c2", "name": "edit", "input": None},
                    {"type": "image", "url": "https://example.invalid/a.png"},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]},
            {"role": "tool", "tool_call_id": "nope", "content": "orphan", "is_error": True},
            {"role": "user", "content": "<ctx>", "injected": True},
            {"role": "robot", "content": "unknown role"},
        ],
    )
    services.update_tool_status(
        conversation=conversation,
        status="executing",
        tool_info={"call_id": "c2", "display_text": "x"},
    )
    services.save_synthetic_message(
        conversation=conversation,
        message_type="system",
        content_type="todo_snapshot",
        content={"todos": [{"content": "a", "status": "pending"}]},
    )
    row = DisplayMessage.objects.filter(conversation=conversation).order_by("seq").first()
    assert row is not None
    services.set_feedback(
        conversation=conversation, display_message=row, user=user, rating=1, comment="good"
    )


def test_values_and_instances_give_the_same_bytes(user: User, conversation: Conversation) -> None:
    _fill(conversation, user)
    rows = DisplayMessage.objects.filter(conversation=conversation).order_by("-seq")
    instances = list(rows)
    values = list(rows.values_list(*DISPLAY_COLUMNS))
    assert len(instances) == len(values) > 8
    mine = feedback_for(user, [r.pk for r in instances])
    for instance, value in zip(instances, values, strict=True):
        assert jsonenc.dumps(display_row(instance)) == jsonenc.dumps(display_row_of_values(value))
        assert jsonenc.dumps(display_row(instance, mine.get(instance.pk))) == jsonenc.dumps(
            display_row_of_values(value, mine.get(value[0]))
        )


def test_the_page_route_serves_the_instance_bytes(user: User, conversation: Conversation) -> None:
    _fill(conversation, user)
    client = token_client(user)
    response = client.get(url(conversation.pk, "display-messages/"), {"limit": 5})
    assert response.status_code == 200
    instances = list(DisplayMessage.objects.filter(conversation=conversation).order_by("-seq")[:5])
    mine = feedback_for(user, [r.pk for r in instances])
    expected = [display_row(r, mine.get(r.pk)) for r in instances]
    assert jsonenc.dumps(response.json()["results"]) == jsonenc.dumps(expected)
    conversation.refresh_from_db()
    assert response.json()["total"] == conversation.last_seq
