"""Child conversations (docs/architecture.md "Child conversations"): a subagent is a conversation
whose ``parent`` launched it by the call ``parent_call_id``. Owner inheritance, the write-once
link, the writes a child makes to its parent (``child_count``, one event_seq, ``child_updated``),
cascade on delete and purge, the launching-call resolution, the REST surface (top-level list,
``?parent=`` scoped like every read, tool-call children), all on SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any, TypedDict

import pytest
from django.contrib.auth.models import User
from django.dispatch import Signal
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks

from murmur_conversations import services, signals
from murmur_conversations.exceptions import (
    ConversationNotFound,
    InvalidContent,
    OwnershipConflict,
    ParentConflict,
    WriteConflict,
)
from murmur_conversations.models import Conversation, DisplayMessage, Message, ToolCall
from murmur_conversations.selectors import launching_calls, launching_round
from tests.api_helpers import API, malformed_variants, missing_id, token_client, url
from tests.concurrency_helpers import run_threads
from tests.helpers import MakeConversation, MakeUser, assert_counters_match_rows

pytestmark = pytest.mark.django_db

NOT_TEXT: Any = 17  # where a service is given the wrong type on purpose


class Key(TypedDict):
    """The ``(source, external_id)`` key ``start_conversation`` finds a conversation by."""

    source: str
    external_id: str


class Heard:
    """Every signal of ``signals.py`` sent while it listens, as ``(name, kwargs)``."""

    NAMES = (
        "display_messages_saved",
        "status_changed",
        "conversation_saved",
        "conversation_deleted",
        "child_updated",
        "child_deleted",
    )

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.receivers: list[tuple[Signal, Callable[..., None]]] = []

    def __enter__(self) -> Heard:
        for name in self.NAMES:

            def receiver(sender: object, name: str = name, **kwargs: Any) -> None:
                self.sent.append((name, kwargs))

            self.receivers.append((getattr(signals, name), receiver))
            getattr(signals, name).connect(receiver, weak=False)
        return self

    def __exit__(self, *exc: object) -> None:
        for signal, receiver in self.receivers:
            signal.disconnect(receiver)

    def of(self, name: str) -> list[dict[str, Any]]:
        return [kwargs for sent, kwargs in self.sent if sent == name]


def task_call(
    conversation: Conversation,
    call_id: str = "toolu_task",
    prompt: str = "Count the seed packets",
) -> None:
    """The parent asks for a ``Task`` call that launches a subagent."""
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "tool_call", "id": call_id, "name": "Task", "input": {"prompt": prompt}}
            ],
        },
    )


def bash(conversation: Conversation | uuid.UUID, call_id: str) -> None:
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": call_id, "name": "bash", "input": {}}],
        },
    )


#: The ``listen`` fixture: ``with listen() as heard``.
Listen = Callable[[], AbstractContextManager[Heard]]


@pytest.fixture
def listen(django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks) -> Listen:
    """``with listen() as heard``: the signals sent after commit while it listens."""

    @contextlib.contextmanager
    def listening() -> Iterator[Heard]:
        with Heard() as heard, django_capture_on_commit_callbacks(execute=True):
            yield heard

    return listening


@pytest.fixture
def parent(make_conversation: MakeConversation) -> Conversation:
    conversation = make_conversation(title="Plan the beds")
    task_call(conversation)
    conversation.refresh_from_db()
    return conversation


# ------------------------------------------------------------------------------ owner and link


def test_a_child_takes_its_parents_owner_and_is_announced_to_the_parent(
    parent: Conversation, user: User, listen: Listen
) -> None:
    before = parent.last_event_seq
    with listen() as heard:
        child = services.start_conversation(
            owner=None, parent=parent, parent_call_id="toolu_task", title="Count"
        )
    parent.refresh_from_db()
    assert (child.owner_id, child.parent_id, child.parent_call_id) == (
        user.pk,
        parent.pk,
        "toolu_task",
    )
    assert parent.child_count == 1
    assert parent.last_event_seq == before + 1
    assert child.parent_created_event_seq == child.parent_event_seq == parent.last_event_seq
    [told] = heard.of("child_updated")
    assert (told["conversation"].pk, told["child"].pk, told["event_seq"]) == (
        parent.pk,
        child.pk,
        parent.last_event_seq,
    )
    saved = [(kw["conversation"].pk, kw["event_seq"]) for kw in heard.of("conversation_saved")]
    assert saved == [(child.pk, 0), (parent.pk, parent.last_event_seq)]
    assert_counters_match_rows(parent)


def test_a_child_of_another_owner_is_refused_and_nothing_is_written(
    parent: Conversation, make_user: MakeUser
) -> None:
    before = (parent.last_event_seq, Conversation.objects.count())
    with pytest.raises(OwnershipConflict):
        services.start_conversation(owner=make_user(), parent=parent)
    parent.refresh_from_db()
    assert (parent.last_event_seq, Conversation.objects.count()) == before
    assert parent.child_count == 0


def test_the_same_owner_given_is_accepted(parent: Conversation, user: User) -> None:
    child = services.start_conversation(owner=user, parent=parent.pk)
    assert child.owner_id == user.pk


@pytest.mark.parametrize("parent_id", ["missing", "malformed"])
def test_a_missing_parent_raises_not_found(user: User, parent_id: str) -> None:
    given = str(uuid.uuid4()) if parent_id == "missing" else "nope"
    with pytest.raises(ConversationNotFound):
        services.start_conversation(owner=user, parent=given)
    assert not Conversation.objects.exists()


@pytest.mark.parametrize("call_id", [NOT_TEXT, "x" * 256])
def test_a_bad_call_id_is_refused(parent: Conversation, user: User, call_id: str) -> None:
    with pytest.raises(InvalidContent):
        services.start_conversation(owner=user, parent=parent, parent_call_id=call_id)
    assert not Conversation.objects.filter(parent=parent).exists()


def test_a_call_id_needs_a_parent(user: User) -> None:
    with pytest.raises(InvalidContent):
        services.start_conversation(owner=user, parent_call_id="toolu_task")
    assert not Conversation.objects.exists()


def test_starting_the_same_child_again_writes_nothing(parent: Conversation, user: User) -> None:
    key: Key = {"source": "claude-code", "external_id": "s/agent-1"}
    first = services.start_conversation(
        owner=user, parent=parent, parent_call_id="toolu_task", **key
    )
    parent.refresh_from_db()
    before = parent.last_event_seq
    again = services.start_conversation(
        owner=user, parent=parent, parent_call_id="toolu_task", **key
    )
    by_id = services.start_conversation(owner=user, parent=parent, conversation_id=first.pk)
    parent.refresh_from_db()
    assert again.pk == by_id.pk == first.pk
    assert (parent.last_event_seq, parent.child_count) == (before, 1)


def test_the_parent_is_set_at_creation_only(
    parent: Conversation, user: User, make_conversation: MakeConversation
) -> None:
    top = make_conversation(source="x", external_id="k")
    with pytest.raises(ParentConflict):
        services.start_conversation(owner=user, parent=parent, source="x", external_id="k")
    other = make_conversation()
    child = services.start_conversation(owner=user, parent=parent, source="x", external_id="c")
    with pytest.raises(ParentConflict):
        services.start_conversation(owner=user, parent=other, conversation_id=child.pk)
    top.refresh_from_db()
    assert top.parent_id is None


def test_the_call_id_is_write_once(parent: Conversation, user: User, listen: Listen) -> None:
    key: Key = {"source": "claude-code", "external_id": "s/agent-1"}
    child = services.start_conversation(owner=user, parent=parent, **key)
    assert child.parent_call_id == ""
    parent.refresh_from_db()
    before, child_events = parent.last_event_seq, child.last_event_seq
    with listen() as heard:
        linked = services.start_conversation(
            owner=user, parent=parent, parent_call_id="toolu_task", **key
        )
    parent.refresh_from_db()
    assert linked.parent_call_id == "toolu_task"
    assert parent.last_event_seq == before + 1
    assert linked.parent_event_seq == parent.last_event_seq
    assert linked.last_event_seq == child_events + 1
    assert [kw["child"].parent_call_id for kw in heard.of("child_updated")] == ["toolu_task"]
    with pytest.raises(ParentConflict):
        services.start_conversation(owner=user, parent=parent, parent_call_id="other", **key)
    child.refresh_from_db()
    assert child.parent_call_id == "toolu_task"


def test_claiming_an_ownerless_parent_claims_its_children(make_user: MakeUser) -> None:
    parent = services.start_conversation(owner=None, title="runtime without users")
    child = services.start_conversation(owner=None, parent=parent)
    grandchild = services.start_conversation(owner=None, parent=child)
    someone = make_user()
    with pytest.raises(OwnershipConflict):
        services.start_conversation(owner=someone, conversation_id=child.pk)
    services.start_conversation(owner=someone, conversation_id=parent.pk)
    owners = set(
        Conversation.objects.filter(pk__in=[parent.pk, child.pk, grandchild.pk]).values_list(
            "owner_id", flat=True
        )
    )
    assert owners == {someone.pk}


# ------------------------------------------------------------------------------ writes on a child


def test_a_childs_status_and_steps_are_writes_to_its_parent(
    parent: Conversation, user: User, listen: Listen
) -> None:
    child = services.start_conversation(owner=user, parent=parent, parent_call_id="toolu_task")
    parent.refresh_from_db()
    start = parent.last_event_seq
    with listen() as heard:
        services.set_status(conversation=child, status="running")
        bash(child, "c1")
        services.save_message(
            conversation=child, message={"role": "tool", "tool_call_id": "c1", "content": "ok"}
        )
        services.save_message(conversation=child, message={"role": "assistant", "content": "12"})
        services.set_status(conversation=child.pk, status="idle")
    parent.refresh_from_db()
    child.refresh_from_db()
    # status running, one step, status idle; the result and the plain answer tell the parent nothing
    assert parent.last_event_seq == start + 3
    told = [(kw["child"].status, kw["child"].tool_call_count) for kw in heard.of("child_updated")]
    assert told == [("running", 0), ("running", 1), ("idle", 1)]
    assert child.parent_event_seq == parent.last_event_seq
    assert child.tool_call_count == 1
    assert_counters_match_rows(child)
    assert_counters_match_rows(parent)


def test_cancel_and_answer_on_a_child_tell_the_parent(parent: Conversation, user: User) -> None:
    child = services.start_conversation(owner=user, parent=parent)
    services.set_status(conversation=child, status="paused", pending_ask={"question": "Go?"})
    services.answer_pending_ask(conversation=child, answer="Yes")
    services.cancel_run(conversation=child)
    parent.refresh_from_db()
    child.refresh_from_db()
    assert child.status == "cancelled"
    assert child.parent_event_seq == parent.last_event_seq


# ------------------------------------------------------------------------------ deleting


def test_deleting_a_parent_deletes_its_children_and_announces_each(
    parent: Conversation, user: User, listen: Listen
) -> None:
    child = services.start_conversation(owner=user, parent=parent, parent_call_id="toolu_task")
    grandchild = services.start_conversation(owner=user, parent=child)
    bash(child, "c1")
    services.save_message(conversation=grandchild, message={"role": "user", "content": "hi"})
    with listen() as heard:
        deleted = services.delete_conversation(conversation=parent)
    assert deleted == 3
    assert not Conversation.objects.exists()
    assert not Message.objects.exists() and not ToolCall.objects.exists()
    assert not DisplayMessage.objects.exists()
    gone = [kw["conversation_id"] for kw in heard.of("conversation_deleted")]
    assert gone == [grandchild.pk, child.pk, parent.pk]
    assert all(kw["owner_id"] == user.pk for kw in heard.of("conversation_deleted"))


def test_deleting_a_child_alone_is_a_write_to_its_parent(
    parent: Conversation, user: User, listen: Listen
) -> None:
    first = services.start_conversation(owner=user, parent=parent)
    second = services.start_conversation(owner=user, parent=parent)
    parent.refresh_from_db()
    before = parent.last_event_seq
    with listen() as heard:
        services.delete_conversation(conversation=first.pk)
    parent.refresh_from_db()
    assert (parent.child_count, parent.last_event_seq) == (1, before + 1)
    [told] = heard.of("child_deleted")
    assert (told["child_id"], told["event_seq"]) == (first.pk, before + 1)
    assert list(Conversation.objects.filter(parent=parent)) == [second]
    assert_counters_match_rows(parent)


def test_purge_takes_parents_with_their_children(
    parent: Conversation, user: User, make_user: MakeUser
) -> None:
    child = services.start_conversation(owner=user, parent=parent)
    services.save_message(conversation=child, message={"role": "user", "content": "hi"})
    bystander = services.start_conversation(owner=make_user())
    assert services.purge_conversations(owner=user) == (2, False)
    assert list(Conversation.objects.all()) == [bystander]


def test_purge_by_age_never_takes_a_child_without_its_parent(
    parent: Conversation, user: User
) -> None:
    child = services.start_conversation(owner=user, parent=parent)
    old = timezone.now() - timedelta(days=30)
    Conversation.objects.filter(pk=child.pk).update(saved_at=old, retained_at=old)
    assert services.purge_conversations(older_than=timedelta(days=7)) == (0, False)
    Conversation.objects.filter(pk=parent.pk).update(saved_at=old, retained_at=old)
    assert services.purge_conversations(older_than=timedelta(days=7)) == (2, False)
    assert not Conversation.objects.exists()


def test_a_childs_write_keeps_its_parent_fresh(parent: Conversation, user: User) -> None:
    old = timezone.now() - timedelta(days=30)
    child = services.start_conversation(owner=user, parent=parent)
    Conversation.objects.filter(pk=parent.pk).update(saved_at=old, retained_at=old)
    services.set_status(conversation=child, status="running")
    parent.refresh_from_db()
    assert parent.saved_at > old
    assert parent.retained_at > old


# ------------------------------------------------------------------------------ the launching call


@pytest.mark.parametrize(
    ("rounds", "created", "expected"),
    [
        ([], 5, None),
        ([(3, 30)], 5, 30),
        ([(3, 30)], 1, 30),  # recorded before its call: the first call of that id
        ([(3, 30), (9, 90)], 5, 30),
        ([(3, 30), (9, 90)], 9, 90),
        ([(9, 90), (3, 30)], 12, 90),
        ([(3, 30), (9, 90), (15, 150)], 10, 90),
    ],
)
def test_a_repeated_call_id_names_the_call_of_that_round(
    rounds: list[tuple[int, int]], created: int, expected: int | None
) -> None:
    assert launching_round(rounds, created) == expected


def test_launching_calls_reads_the_parents_calls(parent: Conversation, user: User) -> None:
    bash(parent, "later")
    parent.refresh_from_db()
    child = services.start_conversation(owner=user, parent=parent, parent_call_id="toolu_task")
    nameless = services.start_conversation(owner=user, parent=parent)
    stray = services.start_conversation(owner=user, parent=parent, parent_call_id="unknown")
    task = ToolCall.objects.get(conversation=parent, call_id="toolu_task")
    found = launching_calls(
        parent,
        [
            (c.pk, c.parent_call_id, c.parent_created_event_seq)
            for c in Conversation.objects.filter(pk__in=[child.pk, nameless.pk, stray.pk])
        ],
    )
    assert found == {child.pk: task.pk}


# ------------------------------------------------------------------------------ REST


#: The ``family`` fixture: a top-level conversation and its three children.
Family = tuple[Conversation, Conversation, Conversation, Conversation]


@pytest.fixture
def family(user: User, make_conversation: MakeConversation) -> Family:
    top = make_conversation(owner=user, title="Plan the beds")
    task_call(top, "toolu_a")
    task_call(top, "toolu_b", prompt="Measure the beds")
    first = services.start_conversation(owner=user, parent=top, parent_call_id="toolu_a")
    second = services.start_conversation(owner=user, parent=top, parent_call_id="toolu_b")
    also = services.start_conversation(owner=user, parent=top, parent_call_id="toolu_b")
    bash(first, "c1")
    top.refresh_from_db()
    return top, first, second, also


def test_the_list_shows_top_level_conversations_with_their_child_counts(
    user: User, family: Family
) -> None:
    top = family[0]
    body = token_client(user).get(f"{API}conversations/").json()
    assert [row["id"] for row in body["results"]] == [str(top.pk)]
    assert body["total"] == 1
    row = body["results"][0]
    assert (row["parent_id"], row["parent_call_id"], row["child_count"]) == (None, None, 3)


def test_parent_lists_the_children_newest_first(user: User, family: Family) -> None:
    top, first, second, also = family
    client = token_client(user)
    body = client.get(f"{API}conversations/?parent={top.pk}&limit=2").json()
    expected = [
        str(c.pk)
        for c in sorted([first, second, also], key=lambda c: (c.saved_at, c.pk), reverse=True)
    ]
    assert [row["id"] for row in body["results"]] == expected[:2]
    assert body["total"] == 3
    rest = client.get(f"{API}conversations/?parent={top.pk}&cursor={body['next_cursor']}").json()
    assert [row["id"] for row in rest["results"]] == expected[2:]
    row = next(r for r in body["results"] + rest["results"] if r["id"] == str(first.pk))
    assert (row["parent_id"], row["parent_call_id"], row["steps"]) == (str(top.pk), "toolu_a", 1)
    # a cursor of the children's list is not one of the top-level list
    assert client.get(f"{API}conversations/?cursor={body['next_cursor']}").status_code == 400


def test_parent_of_another_user_lists_nothing_like_a_missing_one(
    user: User, family: Family, make_user: MakeUser
) -> None:
    top = family[0]
    stranger = token_client(make_user())
    foreign = stranger.get(f"{API}conversations/?parent={top.pk}")
    missing = stranger.get(f"{API}conversations/?parent={missing_id()}")
    assert foreign.status_code == missing.status_code == 200
    assert foreign.json() == missing.json() == {"results": [], "next_cursor": None, "total": 0}
    owner = token_client(user)
    for spelling in malformed_variants(top):
        body = owner.get(f"{API}conversations/?parent={spelling}").json()
        assert body == {"results": [], "next_cursor": None, "total": 0}, spelling


def test_a_child_reads_like_any_conversation(
    user: User, family: Family, make_user: MakeUser
) -> None:
    first = family[1]
    client = token_client(user)
    detail = client.get(url(first.pk)).json()
    assert detail["parent_call_id"] == "toolu_a"
    assert client.get(url(first.pk, "tool-calls/")).json()["total"] == 1
    assert token_client(make_user()).get(url(first.pk)).status_code == 404


def test_tool_call_rows_carry_the_children_they_launched(user: User, family: Family) -> None:
    top, first, second, also = family
    body = token_client(user).get(url(top.pk, "tool-calls/")).json()
    children = {row["call_id"]: row["children"] for row in body["results"]}
    assert children == {"toolu_a": [str(first.pk)], "toolu_b": [str(second.pk), str(also.pk)]}


def test_deleting_a_parent_over_rest_deletes_its_children(user: User, family: Family) -> None:
    top = family[0]
    assert token_client(user).delete(url(top.pk)).status_code == 204
    assert not Conversation.objects.exists()


def test_the_session_wire_lists_top_level_sessions(user: User, family: Family) -> None:
    response = token_client(user).post(f"{API}session/", {"op": "session-list"}, format="json")
    assert [s["sessionId"] for s in response.json()["sessions"]] == [str(family[0].pk)]


# ------------------------------------------------------------------------------ concurrency


@pytest.mark.django_db(transaction=True)
def test_children_created_and_run_at_once_keep_the_parents_counters(
    parent: Conversation, user: User
) -> None:
    def launch(index: int) -> uuid.UUID:
        child = services.start_conversation(
            owner=user, parent=parent.pk, source="t", external_id=f"agent-{index % 6}"
        )
        bash(child, f"c{index}")
        services.set_status(conversation=child.pk, status="idle" if index % 2 else "running")
        return child.pk

    results, errors = run_threads(12, launch)
    unexpected = [e for e in errors if e is not None and not isinstance(e, WriteConflict)]
    assert unexpected == []
    assert len({pk for pk in results if pk is not None}) <= 6
    parent.refresh_from_db()
    assert parent.child_count == Conversation.objects.filter(parent=parent).count() <= 6
    assert_counters_match_rows(parent)
    for child in Conversation.objects.filter(parent=parent):
        assert_counters_match_rows(child)
        assert child.parent_event_seq <= parent.last_event_seq


@pytest.mark.django_db(transaction=True)
def test_deleting_a_parent_while_its_children_write(parent: Conversation, user: User) -> None:
    children = [services.start_conversation(owner=user, parent=parent) for _ in range(4)]

    def work(index: int) -> int | uuid.UUID | None:
        if index == 0:
            return services.delete_conversation(conversation=parent.pk)
        child = children[index % 4]
        try:
            bash(child.pk, f"c{index}")
            services.set_status(conversation=child.pk, status="running")
        except ConversationNotFound:
            return None  # deleted first
        return child.pk

    _, errors = run_threads(9, work)
    unexpected = [e for e in errors if e is not None and not isinstance(e, WriteConflict)]
    assert unexpected == []
    if errors[0] is None:
        assert not Conversation.objects.exists()
        assert not ToolCall.objects.exists()


# ------------------------------------------------------------------------------ admin


def test_the_admin_links_a_child_to_its_parent_and_lists_a_parents_children(
    admin_client: Client, family: Family
) -> None:
    top, first, second, also = family
    Conversation.objects.filter(pk=first.pk).update(title="<b>Count</b>")
    page = admin_client.get(
        reverse("admin:murmur_conversations_conversation_change", args=[top.pk])
    )
    assert page.status_code == 200
    text = page.content.decode()
    for child in (first, second, also):
        assert reverse("admin:murmur_conversations_conversation_change", args=[child.pk]) in text
    assert "&lt;b&gt;Count&lt;/b&gt;" in text and "<b>Count</b>" not in text
    assert "call toolu_b" in text and "1 step(s)" in text
    listed = admin_client.get(
        reverse("admin:murmur_conversations_conversation_changelist")
        + f"?parent__id__exact={top.pk}"
    )
    assert listed.status_code == 200
    assert {c.pk for c in listed.context["cl"].result_list} == {first.pk, second.pk, also.pk}
    child_page = admin_client.get(
        reverse("admin:murmur_conversations_conversation_change", args=[first.pk])
    ).content.decode()
    assert reverse("admin:murmur_conversations_conversation_change", args=[top.pk]) in child_page


def test_deleting_a_parent_in_the_admin_deletes_its_children(
    admin_client: Client, family: Family
) -> None:
    top = family[0]
    response = admin_client.post(
        reverse("admin:murmur_conversations_conversation_delete", args=[top.pk]), {"post": "yes"}
    )
    assert response.status_code == 302
    assert not Conversation.objects.exists()


def test_tool_call_pages_with_children_take_a_fixed_number_of_queries(
    user: User, family: Family
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    top = family[0]
    client = token_client(user)

    def count() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url(top.pk, "tool-calls/")).status_code == 200
        return len(captured)

    few = count()
    for _ in range(20):
        services.start_conversation(owner=user, parent=top, parent_call_id="toolu_a")
    assert count() == few
    # token, conversation, count, page, and the children and their calls' rounds
    assert few <= 6
