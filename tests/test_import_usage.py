"""Usage on imported assistant messages (docs/formats.md "Usage"): the provider's ``usage`` and
``model`` as they are, placed so that a sum over distinct message ids counts each model response
once. Claude Code repeats a message's usage on each of its lines, ``output_tokens`` growing: the
last line's counts, once per ``message.id`` (a part stored by an earlier import counted once);
Codex ``token_count`` events are cumulative: the messages sum to the last total."""

from __future__ import annotations

import io
import json
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_conversations.models import Conversation, Message
from tests.agentlog_lines import START, Claude, Codex, tool_use, write_jsonl
from tests.import_helpers import JSON, run

pytestmark = pytest.mark.django_db

SESSION = "claude_code_session/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
ROLLOUT = "codex_rollout/rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl"
CLAUDE_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def summed(conversation: Conversation, names: tuple[str, ...]) -> dict[str, int]:
    """The usage counts of ``conversation``'s messages, each message id once."""
    total: Counter[str] = Counter()
    seen: set[str] = set()
    for message in Message.objects.filter(conversation=conversation, role="assistant"):
        usage = message.extra.get("usage")
        if message.message_id in seen or not isinstance(usage, dict):
            continue
        seen.add(message.message_id)
        for name in names:
            total[name] += usage.get(name, 0)
    return dict(total)


def last_lines(lines: list[dict[str, JSON]], ids: set[str]) -> dict[str, int]:
    """The sum, over ``ids``, of the usage on the last line of each ``message.id``."""
    last: dict[str, dict[str, int]] = {}
    for line in lines:
        if line.get("type") != "assistant":
            continue
        message = line["message"]
        if message.get("id") in ids:
            last[message["id"]] = message["usage"]
    return {name: sum(u.get(name, 0) for u in last.values()) for name in CLAUDE_COUNTS}


def test_claude_code_usage_counts_each_message_once_per_conversation(
    corpus: Path, user: User
) -> None:
    lines = [json.loads(x) for x in (corpus / SESSION).read_text("utf-8").splitlines()]
    assert run(corpus / SESSION, "--owner", user.username)[0] == 0
    family = list(Conversation.objects.filter(owner=user).order_by("parent_id", "created_at"))
    assert len(family) == 3
    totals: dict[bool, dict[str, int]] = {}
    for conversation in family:
        ids = set(
            conversation.messages.filter(role="assistant").values_list("message_id", flat=True)
        )
        expected = last_lines(lines, ids)
        assert summed(conversation, CLAUDE_COUNTS) == expected
        models = set(
            conversation.messages.filter(role="assistant").values_list("extra__model", flat=True)
        )
        assert models == {"claude-sonnet-4-20250514"}
        totals[conversation.parent_id is None] = expected
    # the main thread, counted by hand: 10 answers, the last line of each
    assert totals[True] == {
        "input_tokens": 64,
        "output_tokens": 2003,
        "cache_read_input_tokens": 190261,
        "cache_creation_input_tokens": 26074,
    }
    # summing every line instead would count the growing output of split answers again
    naive = sum(
        line["message"]["usage"]["output_tokens"]
        for line in lines
        if line["type"] == "assistant" and not line["isSidechain"]
    )
    assert naive > totals[True]["output_tokens"]


@pytest.mark.parametrize("live", [False, True])
def test_an_answer_stored_in_two_parts_counts_its_usage_once(
    tmp_path: Path, user: User, live: bool
) -> None:
    c = Claude()
    usage_1 = {"input_tokens": 100, "output_tokens": 7, "cache_read_input_tokens": 50}
    usage_2 = {"input_tokens": 100, "output_tokens": 41, "cache_read_input_tokens": 50}
    first = [c.prompt("Read two files"), answer(c, "msg_s", tool_use("toolu_a"), usage_1)]
    second = [
        answer(c, "msg_s", tool_use("toolu_b"), usage_2),
        c.result("toolu_a", "A"),
        c.result("toolu_b", "B"),
    ]
    path = write_jsonl(tmp_path / "s.jsonl", first)
    if live:  # a result between the lines of the answer: live, the answer is stored at once
        data = write_jsonl(tmp_path / "l.jsonl", [*first, second[1], second[0], second[2]])
        stdin = io.BytesIO(data.read_bytes())
        assert run("-", "--owner", user.username, "--follow", stdin=stdin)[0] == 0
    else:
        assert run(path, "--owner", user.username)[0] == 0
        write_jsonl(path, [*first, *second])
        assert run(path, "--owner", user.username)[0] == 0
    [conversation] = Conversation.objects.filter(owner=user)
    parts = list(conversation.messages.filter(message_id__startswith="msg_s").order_by("position"))
    assert [m.message_id for m in parts] == ["msg_s", "msg_s:1"]
    assert summed(conversation, ("input_tokens", "output_tokens", "cache_read_input_tokens")) == {
        "input_tokens": 100,
        "output_tokens": 41,
        "cache_read_input_tokens": 50,
    }


def answer(
    c: Claude, message_id: str, block: dict[str, Any], usage: dict[str, int]
) -> dict[str, Any]:
    line = c.answer(message_id, block)
    line["message"]["usage"] = usage
    return line


def test_codex_usage_sums_to_the_last_cumulative_total(corpus: Path, user: User) -> None:
    lines = [json.loads(x) for x in (corpus / ROLLOUT).read_text("utf-8").splitlines()]
    counts = [
        line["payload"]["info"]["total_token_usage"]
        for line in lines
        if line["type"] == "event_msg"
        and line["payload"]["type"] == "token_count"
        and line["payload"]["info"]
    ]
    assert run(corpus / ROLLOUT, "--owner", user.username)[0] == 0
    conversation = Conversation.objects.get(owner=user)
    names = tuple(counts[-1])
    assert summed(conversation, names) == counts[-1]
    carrying = conversation.messages.exclude(extra__usage=None)
    # one message per model response whose total grew (repeated events add nothing)
    grew = sum(1 for a, b in zip([{}, *counts], counts, strict=False) if a != b)
    assert carrying.count() == grew
    assert set(carrying.values_list("extra__model", flat=True)) == {"gpt-5.3-codex"}
    assert all(m.role == "assistant" for m in carrying)
    # re-reading changes nothing: the ids are those of messages without usage
    before = list(conversation.messages.values_list("message_id", flat=True))
    assert run(corpus / ROLLOUT, "--owner", user.username, "--reread")[0] == 0
    assert list(conversation.messages.values_list("message_id", flat=True)) == before


def token_count(x: Codex, total: dict[str, int]) -> dict[str, Any]:
    return x.event(type="token_count", info={"total_token_usage": total, "last_token_usage": {}})


def test_codex_usage_split_across_two_imports_still_sums(tmp_path: Path, user: User) -> None:
    x = Codex()
    first_total = {"input_tokens": 1000, "cached_input_tokens": 800, "output_tokens": 30}
    last_total = {"input_tokens": 2500, "cached_input_tokens": 2000, "output_tokens": 75}
    head = [
        x.meta(),
        x.line("turn_context", {"model": "gpt-x"}),
        x.message("user", "Plan the beds"),
        x.message("assistant", "Reading."),
        token_count(x, first_total),
        token_count(x, first_total),  # an echo: nothing new
        x.item(type="function_call", name="exec", arguments="{}", call_id="c1"),
    ]
    tail = [
        token_count(x, last_total),
        x.item(type="function_call_output", call_id="c1", output="ok"),
    ]
    path = write_jsonl(tmp_path / "rollout.jsonl", head)
    assert run(path, "--owner", user.username)[0] == 0
    write_jsonl(path, [*head, *tail])
    code, out, _ = run(path, "--owner", user.username)
    assert code == 0 and "appended since the last import" in out
    [conversation] = Conversation.objects.filter(owner=user)
    # the first import ended between the call and its count: the call was stored without it,
    # and the growth waits, in the parser's state, for the next assistant message
    assert summed(conversation, tuple(last_total)) == first_total
    assert conversation.messages.exclude(extra__usage=None).count() == 1
    follow = [x.message("assistant", "Done."), token_count(x, last_total)]
    write_jsonl(path, [*head, *tail, *follow])
    assert run(path, "--owner", user.username)[0] == 0
    assert summed(conversation, tuple(last_total)) == last_total
    assert conversation.messages.get(extra__usage__output_tokens=45).content == [
        {"type": "text", "text": "Done."}
    ]


# ----------------------------------------------------------------------------- Codex forks

PARENT_ID = "019a1b2c-3d4e-7f60-8a9b-00000000aaaa"
FORK_ID = "019a1b2c-3d4e-7f60-8a9b-00000000bbbb"
Turn = tuple[int, int, int]  # uncached input, cached input, output of one model response
COUNTS = ("input_tokens", "cached_input_tokens", "output_tokens")


def turns(x: Codex, spent: list[Turn], total: dict[str, int]) -> tuple[list[Any], dict[str, int]]:
    """Rollout lines of one model response per ``spent`` item, each ending with the cumulative
    total so far (Codex's ``input_tokens`` counts the cached part in it)."""
    lines: list[Any] = []
    for number, (uncached, cached, output) in enumerate(spent):
        total = {
            "input_tokens": total.get("input_tokens", 0) + uncached + cached,
            "cached_input_tokens": total.get("cached_input_tokens", 0) + cached,
            "output_tokens": total.get("output_tokens", 0) + output,
        }
        lines += [
            x.line("turn_context", {"model": "gpt-5.3-codex"}),
            x.message("user", f"Question {number}"),
            x.message("assistant", f"Answer {number}"),
            token_count(x, total),
        ]
    return lines, total


def fork_lines(parent: list[Any], cut: int, own: list[Turn]) -> tuple[list[Any], dict[str, int]]:
    """What ``codex fork`` writes: its own session_meta, the original's first ``cut`` lines
    replayed in one burst (stamped at the fork's start), then its own turns, whose totals go on
    from the replayed ones; and the fork's own growth."""
    x = Codex(session=FORK_ID, start=START + timedelta(hours=1))
    meta = x.meta()
    meta["payload"]["forked_from_id"] = PARENT_ID
    replay = [{**line, "timestamp": meta["timestamp"]} for line in parent[:cut]]
    replayed: dict[str, int] = {}
    for line in replay:
        if line["type"] == "event_msg" and line["payload"].get("type") == "token_count":
            replayed = line["payload"]["info"]["total_token_usage"]
    for _ in range(5):  # the person types the fork's first prompt
        next(x.clock)
    lines, total = turns(x, own, replayed)
    return [meta, *replay, *lines], {k: total.get(k, 0) - replayed.get(k, 0) for k in COUNTS}


def import_pair(tmp: Path, user: User, parent: list[Any], fork: list[Any]) -> tuple[Any, Any]:
    write_jsonl(tmp / "parent" / "rollout-parent.jsonl", parent)
    write_jsonl(tmp / "fork" / "rollout-fork.jsonl", fork)
    assert run(tmp / "parent", "--owner", user.username)[0] == 0
    assert run(tmp / "fork", "--owner", user.username)[0] == 0
    return (
        Conversation.objects.get(owner=user, external_id=PARENT_ID),
        Conversation.objects.get(owner=user, external_id=FORK_ID),
    )


def test_a_codex_fork_bills_only_what_it_spent(tmp_path: Path, user: User) -> None:
    """The issue's case: the original spent 1,000 input (600 cached) and 100 output; the fork
    replays it, then a new turn takes the totals to 1,500 / 900 / 150: 150 output in all."""
    x = Codex(session=PARENT_ID)
    parent, _total = turns(x, [(400, 600, 100)], {})
    fork, own = fork_lines([x.meta(), *parent], 5, [(200, 300, 50)])
    original, forked = import_pair(tmp_path, user, [x.meta(), *parent], fork)
    assert own == {"input_tokens": 500, "cached_input_tokens": 300, "output_tokens": 50}
    forked.refresh_from_db()
    original.refresh_from_db()
    assert (original.output_tokens, forked.output_tokens) == (100, 50)
    assert (forked.input_tokens, forked.cache_read_tokens) == (200, 300)
    assert summed(forked, COUNTS) == own
    assert original.output_tokens + forked.output_tokens == 150


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    spent=st.lists(st.tuples(*[st.integers(0, 5000)] * 3), min_size=1, max_size=4),
    own=st.lists(st.tuples(*[st.integers(0, 5000)] * 3), min_size=1, max_size=3),
    cut=st.integers(min_value=0, max_value=17),
)
def test_any_codex_fork_prefix_bills_each_token_once(
    tmp_path_factory: pytest.TempPathFactory,
    user: User,
    spent: list[Turn],
    own: list[Turn],
    cut: int,
) -> None:
    """A fork cut anywhere in its original (between any two lines, the session_meta included):
    the fork's usage is its own growth after the replay, never the replayed totals."""
    Conversation.objects.filter(owner=user).delete()
    x = Codex(session=PARENT_ID)
    lines, total = turns(x, spent, {})
    parent = [x.meta(), *lines]
    fork, growth = fork_lines(parent, min(cut, len(parent)), own)
    original, forked = import_pair(tmp_path_factory.mktemp("fork"), user, parent, fork)
    assert nonzero(summed(original, COUNTS)) == nonzero(total)
    assert nonzero(summed(forked, COUNTS)) == nonzero(growth)


def nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {name: value for name, value in counts.items() if value}


@pytest.mark.parametrize("order", ["original first", "fork first"])
def test_a_codex_fork_links_to_its_original(tmp_path: Path, user: User, order: str) -> None:
    """The fork names its original as forks made in the app do (``forked_from``; ``parent``
    stays the subagent link), whichever is imported first."""
    x = Codex(session=PARENT_ID)
    lines, _total = turns(x, [(10, 0, 5)], {})
    parent = [x.meta(), *lines]
    fork, _growth = fork_lines(parent, len(parent), [(1, 0, 1)])
    write_jsonl(tmp_path / "original" / "rollout-original.jsonl", parent)
    write_jsonl(tmp_path / "fork" / "rollout-fork.jsonl", fork)
    folders = ["original", "fork"] if order == "original first" else ["fork", "original"]
    for folder in folders:
        assert run(tmp_path / folder, "--owner", user.username)[0] == 0
    original = Conversation.objects.get(owner=user, external_id=PARENT_ID)
    forked = Conversation.objects.get(owner=user, external_id=FORK_ID)
    assert forked.forked_from_id == original.pk and forked.parent_id is None
    assert forked.metadata == {"forked_from_external_id": PARENT_ID}
    assert original.forked_from_id is None and original.child_count == 0
    assert run(tmp_path / "fork", "--owner", user.username, "--reread")[0] == 0
    forked.refresh_from_db()
    assert forked.forked_from_id == original.pk
