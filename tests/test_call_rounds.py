"""Tool calls by id (docs/write-path.md "Call ids" and "Results before their call"): an id names
one call among the open calls, a reused id after the call ended starts a new call, and a result
stored before its call completes that call when it arrives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_conversations import services
from murmur_conversations.models import Conversation, DisplayMessage, ToolCall
from tests.api_helpers import token_client, url
from tests.helpers import MakeConversation, assert_counters_match_rows
from tests.import_helpers import run, write_json

pytestmark = pytest.mark.django_db

CALL_ID = "search_web:0"


def round_of(query: str) -> list[dict[str, Any]]:
    """One round: an assistant turn calling ``search_web:0``, then its result."""
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": CALL_ID,
                    "type": "function",
                    "function": {"name": "search_web", "arguments": json.dumps({"q": query})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": CALL_ID, "content": f"results for {query}"},
    ]


def cards(conversation: Conversation) -> list[DisplayMessage]:
    return list(
        DisplayMessage.objects.filter(conversation=conversation, content_type="tool_call")
        .select_related("tool_call")
        .order_by("seq")
    )


def results(conversation: Conversation) -> list[DisplayMessage]:
    return list(
        DisplayMessage.objects.filter(conversation=conversation, content_type="tool_result")
        .select_related("tool_call")
        .order_by("seq")
    )


@pytest.mark.parametrize("batched", [False, True], ids=["one-by-one", "one-batch"])
def test_a_call_id_reused_per_round_makes_a_call_per_round(
    conversation: Conversation, user: User, batched: bool
) -> None:
    messages = round_of("alpha") + round_of("beta")
    if batched:
        services.save_messages(conversation=conversation, messages=messages)
    else:
        for message in messages:
            services.save_message(conversation=conversation, message=message)
    calls = list(ToolCall.objects.filter(conversation=conversation).order_by("pk"))
    assert [(c.call_id, c.arguments, c.status) for c in calls] == [
        (CALL_ID, {"q": "alpha"}, "completed"),
        (CALL_ID, {"q": "beta"}, "completed"),
    ]
    assert [c.result for c in calls] == ["results for alpha", "results for beta"]
    shown = cards(conversation)
    assert [(c.content["arguments"], c.status, c.tool_call_id) for c in shown] == [
        ({"q": "alpha"}, "completed", calls[0].pk),
        ({"q": "beta"}, "completed", calls[1].pk),
    ]
    assert [(r.tool_call_id, r.metadata) for r in results(conversation)] == [
        (calls[0].pk, {}),
        (calls[1].pk, {}),
    ]
    # REST lists both, newest first, told apart by their own id
    body = token_client(user).get(url(conversation.pk, "tool-calls/")).json()
    assert [(r["call_id"], r["arguments"], r["id"]) for r in body["results"]] == [
        (CALL_ID, {"q": "beta"}, str(calls[1].pk)),
        (CALL_ID, {"q": "alpha"}, str(calls[0].pk)),
    ]
    assert body["total"] == 2
    assert_counters_match_rows(conversation)


def test_status_moves_and_resolving_address_the_latest_call(conversation: Conversation) -> None:
    services.save_messages(conversation=conversation, messages=round_of("alpha"))
    services.save_message(conversation=conversation, message=round_of("beta")[0])
    card = services.update_tool_status(
        conversation=conversation, status="executing", tool_info={"call_id": CALL_ID}
    )
    assert card.content["arguments"] == {"q": "beta"}
    services.save_message(
        conversation=conversation,
        message={"role": "tool", "tool_call_id": CALL_ID, "content": "?", "is_interrupt": True},
    )
    row = services.resolve_tool_result(
        conversation=conversation, tool_call_id=CALL_ID, result_content="beta answered"
    )
    first, second = ToolCall.objects.filter(conversation=conversation).order_by("pk")
    assert row.tool_call_id == second.pk
    assert (first.status, first.result) == ("completed", "results for alpha")
    assert (second.status, second.result) == ("completed", "beta answered")
    assert_counters_match_rows(conversation)


def test_an_open_call_id_adds_nothing(conversation: Conversation) -> None:
    services.save_message(conversation=conversation, message=round_of("alpha")[0])
    services.save_message(conversation=conversation, message=round_of("again")[0])
    assert ToolCall.objects.filter(conversation=conversation).count() == 1
    services.update_tool_status(
        conversation=conversation,
        status="interrupted",
        tool_info={"call_id": CALL_ID, "interrupt_reason": "worker_lost"},
    )
    services.save_message(conversation=conversation, message=round_of("still")[0])
    assert ToolCall.objects.filter(conversation=conversation).count() == 1  # interrupted is open


def test_the_admin_shows_each_round_as_its_own_call(
    admin_client: Client, conversation: Conversation
) -> None:
    services.save_messages(conversation=conversation, messages=round_of("alpha") + round_of("beta"))
    first, second = ToolCall.objects.filter(conversation=conversation).order_by("pk")
    page = admin_client.get(
        reverse("admin:murmur_conversations_conversation_change", args=[conversation.pk])
    )
    assert page.status_code == 200
    assert page.text.count("murmur-card-tool-call") == 2  # one card per round
    assert "alpha" in page.text and "beta" in page.text
    listing = admin_client.get(reverse("admin:murmur_conversations_toolcall_changelist")).text
    for call in (first, second):
        assert reverse("admin:murmur_conversations_toolcall_change", args=[call.pk]) in listing
    for call, query in ((first, "alpha"), (second, "beta")):
        shown = admin_client.get(
            reverse("admin:murmur_conversations_toolcall_change", args=[call.pk])
        ).text
        assert query in shown


# --- results before their call -----------------------------------------------------------------


def test_a_result_saved_before_its_call_completes_the_call(conversation: Conversation) -> None:
    [held] = services.save_message(
        conversation=conversation,
        message={"role": "tool", "tool_call_id": "call_1", "content": "42"},
    )
    assert held.metadata == {"orphan": True}
    conversation.refresh_from_db()
    assert conversation.held_results == 1
    [card] = services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "call_1", "name": "answer", "input": {}}],
        },
    )
    call = ToolCall.objects.get(conversation=conversation)
    assert (call.status, call.result) == ("completed", "42")
    assert (card.status, card.metadata) == ("completed", {"result": "42"})
    held.refresh_from_db()
    assert held.metadata == {}
    assert held.tool_call_id == call.pk
    assert held.content["name"] == "answer"
    assert held.event_seq == card.event_seq  # changed by the call that brought the call
    conversation.refresh_from_db()
    assert conversation.held_results == 0
    assert services.recover_interrupted(conversation=conversation) == 0
    assert_counters_match_rows(conversation)


def test_an_openai_log_with_a_result_before_its_call_imports_it_completed(
    tmp_path: Path, user: User
) -> None:
    log = [
        {"role": "user", "content": "sum it"},
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
            ],
        },
        {"role": "assistant", "content": "It is 42."},
    ]
    assert run(write_json(tmp_path / "log.json", log), "--owner", user.username)[0] == 0
    conversation = Conversation.objects.get()
    call = ToolCall.objects.get(conversation=conversation)
    assert (call.status, call.interrupt_reason, call.result) == ("completed", "", "42")
    assert [r.metadata for r in results(conversation)] == [{}]
    assert_counters_match_rows(conversation)


# --- the kind: any order of calls and results, in any batches ----------------------------------

IDS = ("a", "b")
STEP = st.one_of(
    st.tuples(st.just("call"), st.sampled_from(IDS), st.booleans()),
    st.tuples(st.just("result"), st.sampled_from(IDS), st.booleans()),
)
PROPERTY = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def message_of(step: tuple[str, str, bool], index: int) -> dict[str, Any]:
    kind, call_id, flag = step
    if kind == "call":
        return {
            "role": "assistant",
            "content": [{"type": "tool_call", "id": call_id, "name": f"t{index}", "input": {}}],
        }
    return {"role": "tool", "tool_call_id": call_id, "content": f"r{index}", "is_error": flag}


@PROPERTY
@given(steps=st.lists(STEP, min_size=1, max_size=8), cuts=st.sets(st.integers(1, 7)))
def test_calls_and_results_in_any_order_and_batches_follow_the_rules(
    make_conversation: MakeConversation, steps: list[tuple[str, str, bool]], cuts: set[int]
) -> None:
    """A reference model of the rules: a call on an id with no open call starts a call (and takes
    the results held for it: the first answers it, later ones are late); a result answers the
    open call of its id, is late for an ended one, and is held when there is none. Whatever the
    batches, the stored calls, cards and results follow it, and no call is pending or executing
    while a result of its own is stored."""
    conversation = make_conversation()
    messages = [message_of(step, index) for index, step in enumerate(steps)]
    batches: list[list[dict[str, Any]]] = [[]]
    for index, message in enumerate(messages):
        if index in cuts:
            batches.append([])
        batches[-1].append(message)
    for batch in batches:
        if batch:
            services.save_messages(conversation=conversation, messages=batch)

    # the model
    calls: list[dict[str, Any]] = []  # {"id", "status", "result"}
    held: dict[str, list[int]] = {}
    marks: dict[int, str] = {}  # result index -> "", "orphan", "late"
    for index, (kind, call_id, flag) in enumerate(steps):
        latest = next((c for c in reversed(calls) if c["id"] == call_id), None)
        open_ = latest is not None and latest["status"] == "pending"
        if kind == "call":
            if open_:
                continue
            call = {"id": call_id, "status": "pending", "result": None}
            calls.append(call)
            for position, result in enumerate(held.pop(call_id, [])):
                if position == 0:
                    call["status"] = "failed" if steps[result][2] else "completed"
                    call["result"] = f"r{result}"
                    marks[result] = ""
                else:
                    marks[result] = "late"
        elif latest is None:
            held.setdefault(call_id, []).append(index)
            marks[index] = "orphan"
        elif open_:
            latest["status"] = "failed" if flag else "completed"
            latest["result"] = f"r{index}"
            marks[index] = ""
        else:
            marks[index] = "late"

    stored = list(ToolCall.objects.filter(conversation=conversation).order_by("pk"))
    assert [(c.call_id, c.status, c.result) for c in stored] == [
        (c["id"], c["status"], c["result"]) for c in calls
    ]
    shown = [
        "orphan" if r.metadata.get("orphan") else "late" if r.metadata.get("late") else ""
        for r in results(conversation)
    ]
    assert shown == [marks[i] for i in sorted(marks)]
    for row in results(conversation):
        if row.tool_call is not None and not row.metadata.get("late"):
            assert row.tool_call.status not in ("pending", "executing")
    for stored_call in stored:
        if stored_call.status == "failed":
            assert stored_call.error and stored_call.result is not None
    assert_counters_match_rows(conversation)
