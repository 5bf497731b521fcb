"""Management commands of the core: recover_interrupted."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from murmur_conversations import services
from murmur_conversations.models import Conversation, ToolCall

pytestmark = pytest.mark.django_db


def test_recover_interrupted_command(conversation: Conversation) -> None:
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "c", "name": "n", "input": {}}],
        },
    )
    services.set_status(conversation=conversation, status="running")
    Conversation.objects.filter(pk=conversation.pk).update(
        saved_at=timezone.now() - timedelta(seconds=120)
    )
    out = io.StringIO()
    call_command("recover_interrupted", "--stale-after", "300", stdout=out)
    assert "0 conversation(s)" in out.getvalue()
    call_command(
        "recover_interrupted",
        "--stale-after",
        "60",
        "--conversation",
        str(conversation.pk),
        stdout=out,
    )
    assert "1 conversation(s)" in out.getvalue()
    assert Conversation.objects.get(pk=conversation.pk).status == "interrupted"
    assert ToolCall.objects.get(call_id="c").interrupt_reason == "worker_lost"


@pytest.mark.parametrize(
    "args",
    [
        ["--stale-after", "soon"],
        ["--stale-after", "-1"],
        ["--stale-after", "inf"],
        ["--stale-after", "1e300"],
        ["--conversation", "nope"],
        ["--conversation", "4F6A3C2E-0000-0000-0000-000000000000"],
    ],
)
def test_recover_interrupted_bad_arguments(args: list[str]) -> None:
    with pytest.raises(CommandError) as info:
        call_command("recover_interrupted", *args)
    assert info.value.returncode == 2


@pytest.mark.parametrize("age", ["99999999999d", "9999999999999w", "999999999999999999999h"])
def test_purge_older_than_beyond_the_calendar_is_a_usage_error(age: str) -> None:
    """An age longer than a timedelta holds is exit 2 with a message, never a traceback."""
    with pytest.raises(CommandError) as info:
        call_command("purge_conversations", "--older-than", age)
    assert info.value.returncode == 2


@pytest.mark.django_db
def test_purging_older_than_the_calendar_matches_nothing(conversation: Conversation) -> None:
    """``older_than`` reaching before year 1 purges nothing (nothing was saved that long ago)."""
    assert services.purge_conversations(older_than=timedelta.max) == (0, False)
    assert Conversation.objects.filter(pk=conversation.pk).exists()
