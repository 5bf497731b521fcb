"""The demo project's commands: demo_setup is idempotent, demo_agent plays the scripted run."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from murmur_conversations.models import Conversation, DisplayMessage, ToolCall
from tests.helpers import assert_counters_match_rows

pytestmark = pytest.mark.django_db


def test_demo_setup_is_idempotent(django_user_model: type[User]) -> None:
    out = io.StringIO()
    call_command("demo_setup", stdout=out)
    assert "username 'demo', password 'demo'" in out.getvalue()
    counts = (Conversation.objects.count(), DisplayMessage.objects.count())
    call_command("demo_setup", stdout=io.StringIO())
    assert (Conversation.objects.count(), DisplayMessage.objects.count()) == counts
    assert counts[0] == 3  # two conversations, and the subagent of the demo agent's run
    assert Conversation.objects.filter(parent__isnull=True).count() == 2
    user = django_user_model.objects.get(username="demo")
    assert user.check_password("demo")
    assert user.is_staff


def test_demo_agent_shows_every_kind_of_row(django_user_model: type[User]) -> None:
    call_command("demo_setup", stdout=io.StringIO())
    out = io.StringIO()
    call_command("demo_agent", "--delay", "0", stdout=out)
    conversation = Conversation.objects.get(title="Why is the nightly slow?", source="")
    kinds = set(
        DisplayMessage.objects.filter(conversation=conversation).values_list(
            "content_type", flat=True
        )
    )
    assert kinds == {"text", "thinking", "tool_call", "tool_result", "error"}
    statuses = sorted(
        ToolCall.objects.filter(conversation=conversation).values_list("status", flat=True)
    )
    assert statuses == ["completed", "completed", "completed", "failed"]
    assert conversation.status == "paused"
    assert conversation.pending_ask is not None
    assert conversation.pending_ask["question"].startswith("Pin image-tools")
    assert_counters_match_rows(conversation)
    # the Task call's subagent: a child that took two steps and is done
    [child] = conversation.children.all()
    task = ToolCall.objects.get(conversation=conversation, name="Task")
    assert (child.parent_call_id, child.status, child.tool_call_count) == (task.call_id, "idle", 2)
    assert child.owner_id == conversation.owner_id
    assert_counters_match_rows(child)


@pytest.mark.parametrize(
    "args", [["--owner", "nobody"], ["--delay", "-1"], ["--conversation", "x"]]
)
def test_demo_agent_bad_arguments(args: list[str]) -> None:
    call_command("demo_setup", stdout=io.StringIO())
    with pytest.raises(CommandError) as info:
        call_command("demo_agent", *args)
    assert info.value.returncode == 2
