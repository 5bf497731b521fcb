"""A fixed script of writes to one conversation that makes every kind of live frame the realtime
package sends (docs/websocket.md): row saves and updates, tool status, status, rename, pin, tags
and archive, a child's creation, progress and deletion, feedback, a fork and its deletion, and at
last the conversation's deletion. ``tests.test_frame_log`` runs it in its own process and as a
child process (``python -m tests.frame_script <conversation id>``) and compares what sockets got.
"""

from __future__ import annotations

import os
import sys
from typing import Any

#: The conversation stream's frame kinds the script makes (``conversation_deleted`` last).
CONVERSATION_KINDS = frozenset(
    {
        "display_message_saved",
        "display_message_updated",
        "tool_execution_update",
        "status_changed",
        "conversation_updated",
        "child_updated",
        "child_deleted",
        "conversation_deleted",
    }
)
#: The user stream's frame kinds the script makes.
SIDEBAR_KINDS = frozenset({"conversation_saved", "conversation_deleted"})


#: The title the last write of the ``events`` phase gives the conversation: a marker to read to.
DONE_TITLE = "Script done"


def run(conversation_id: str, phase: str = "all") -> None:
    """Write the script to the conversation ``conversation_id`` (owned by a user): ``events``
    writes every event and ends with the rename to ``DONE_TITLE``; ``delete`` deletes the
    conversation; ``all`` does both. Sockets confirm access before each event's frames go out
    (docs/security.md), so a reader that wants the frames of the events sees them out before the
    deletion."""
    from murmur_conversations import services

    if phase in ("events", "all"):
        _events(conversation_id)
    if phase in ("delete", "all"):
        services.delete_conversation(conversation=conversation_id)


def _events(conversation_id: str) -> None:
    from murmur_conversations import services
    from murmur_conversations.models import Conversation, DisplayMessage

    conversation = Conversation.objects.get(pk=conversation_id)
    owner: Any = conversation.owner
    pk = conversation.pk
    services.save_message(conversation=pk, message={"role": "user", "content": "Look it up"})
    services.save_message(
        conversation=pk,
        message={
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_call", "id": "call_1", "name": "read", "input": {"p": "a"}},
            ],
        },
    )
    services.update_tool_status(
        conversation=pk,
        status="executing",
        tool_info={"call_id": "call_1", "display_text": "Reading a"},
    )
    services.save_message(
        conversation=pk, message={"role": "tool", "tool_call_id": "call_1", "content": "42"}
    )
    services.set_status(conversation=pk, status="running")
    services.update_conversation(conversation=pk, title="Renamed", pinned=True, tags=["x"])
    child = services.start_conversation(
        owner=owner, parent=pk, parent_call_id="call_1", title="Helper"
    )
    services.save_message(
        conversation=child,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "c_1", "name": "grep", "input": {}}],
        },
    )
    services.set_status(conversation=child, status="running")
    services.delete_conversation(conversation=child)
    first = DisplayMessage.objects.filter(conversation_id=pk).order_by("seq").first()
    assert first is not None
    services.set_feedback(conversation=pk, display_message=first, user=owner, rating=1)
    fork = services.fork_conversation(conversation=pk, at_seq=1, owner=owner, title="Fork")
    services.delete_conversation(conversation=fork)
    services.update_conversation(conversation=pk, archived=True)
    services.set_status(conversation=pk, status="idle")
    services.update_conversation(conversation=pk, title=DONE_TITLE)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    run(sys.argv[1], *sys.argv[2:3])
