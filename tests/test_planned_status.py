"""``set_status`` through the plan (``plan.plan_status``, both backends): one UPDATE of the
conversation and the frame log's row in one transaction; a no-op and a child conversation are
declined by the plan's guard and take the general path. What it writes is the golden record's
(``tests/test_golden.py``, scenario ``status_and_asks``). SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from murmur_conversations import services
from murmur_conversations.models import Conversation, FrameLogEntry
from tests.helpers import MakeConversation

pytestmark = [pytest.mark.django_db(transaction=True)]


def _writes(sql: list[str]) -> list[str]:
    return [s for s in sql if s.lstrip().startswith(("UPDATE", "INSERT", "WITH"))]


def test_a_status_change_is_one_update_and_the_frame_log(conversation: Conversation) -> None:
    ask = {"question": "go on?", "tool": "confirm"}
    with CaptureQueriesContext(connection) as queries:
        saved = services.set_status(conversation=conversation, status="paused", pending_ask=ask)
    sql = [q["sql"] for q in queries.captured_queries]
    sql = sql[: sql.index("COMMIT") + 1]
    writes = _writes(sql)
    assert len(writes) == 2, sql
    assert FrameLogEntry._meta.db_table in writes[1], sql
    assert not [s for s in sql if s.lstrip().startswith("SELECT")], sql
    assert saved is conversation or saved.pk == conversation.pk
    stored = Conversation.objects.get(pk=conversation.pk)
    assert (stored.status, stored.pending_ask) == ("paused", ask)
    assert stored.status_event_seq == stored.pending_ask_event_seq == stored.last_event_seq
    assert conversation.last_event_seq == stored.last_event_seq  # the instance refreshed


def test_a_status_alone_keeps_the_asks_event_and_a_no_op_writes_nothing(
    conversation: Conversation,
) -> None:
    ask = {"question": "go on?"}
    services.set_status(conversation=conversation, status="paused", pending_ask=ask)
    asked = Conversation.objects.get(pk=conversation.pk).pending_ask_event_seq
    services.set_status(conversation=conversation, status="interrupted", pending_ask=ask)
    stored = Conversation.objects.get(pk=conversation.pk)
    assert stored.pending_ask_event_seq == asked < stored.status_event_seq
    services.set_status(conversation=conversation, status="interrupted", pending_ask=ask)
    assert Conversation.objects.get(pk=conversation.pk).last_event_seq == stored.last_event_seq
    services.set_status(conversation=conversation, status="running")  # the ask cleared
    cleared = Conversation.objects.get(pk=conversation.pk)
    assert cleared.pending_ask is None
    assert cleared.pending_ask_event_seq == cleared.last_event_seq


def test_a_childs_status_reaches_its_parent(make_conversation: MakeConversation) -> None:
    parent = make_conversation()
    child = services.start_conversation(owner=parent.owner, parent=parent, parent_call_id="call_1")
    before = Conversation.objects.get(pk=parent.pk).last_event_seq
    services.set_status(conversation=child, status="running")
    assert Conversation.objects.get(pk=child.pk).status == "running"
    assert Conversation.objects.get(pk=parent.pk).last_event_seq > before
