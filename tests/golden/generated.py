"""Random golden scenarios: a hypothesis strategy of step sequences over one to three
conversations (``"a"``, ``"b"``, and ``"c"``, a child of ``"a"`` launched by its call
``call_0``): user and assistant text (NULs and any other character included), null content, given
ids from a pool of three (so ids repeat), tool calls in our parts and in OpenAI's ``tool_calls``
(ids from a pool of four, so they are reused after their call ended), results that complete, fail
(with and without an exit code) or interrupt, before their call or after it ended, batches of
those (with and without times), token usage, tool status moves (allowed, refused, repeated, to an
unknown status or call), answers to interrupted results, status changes with and without a
pending ask, answers to asks, cancelled runs and synthetic rows.

``draw(count)`` draws the sequences once, deterministically; ``python -m tests.golden record
--regenerate`` stores them in ``sequences.json``, and the replay reads them from there, so it never
depends on hypothesis or its database."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

Step = dict[str, Any]

texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=10)
call_ids = st.sampled_from(["call_0", "call_1", "call_2", "call_3"])
message_ids = st.none() | st.sampled_from(["m0", "m1", "m2"])
TOOL_STATUSES = ["pending", "executing", "completed", "failed", "cancelled", "interrupted", "bogus"]
STATUSES = ["idle", "running", "paused", "interrupted", "error", "cancelled"]


@st.composite
def plain(draw: st.DrawFn) -> Step:
    message: Step = {
        "role": draw(st.sampled_from(["user", "assistant"])),
        "content": draw(st.none() | texts),
    }
    given_id = draw(message_ids)
    if given_id is not None:
        message["id"] = given_id
    if message["role"] == "assistant" and draw(st.booleans()):
        message["model"] = draw(st.sampled_from(["m", "gpt-4o-mini"]))
        message["usage"] = {"input_tokens": draw(st.integers(0, 9)), "output_tokens": 1}
    return message


@st.composite
def call(draw: st.DrawFn) -> Step:
    ids = draw(st.lists(call_ids, min_size=1, max_size=2))
    if draw(st.booleans()):  # OpenAI's shape, arguments as JSON text
        return {
            "role": "assistant",
            "content": draw(st.none() | texts),
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
                for i in ids
            ],
        }
    text = draw(texts)
    parts: list[Step] = [{"type": "text", "text": text}]
    parts += [{"type": "tool_call", "id": i, "name": "bash", "input": {"x": text}} for i in ids]
    return {"role": "assistant", "content": parts}


@st.composite
def result(draw: st.DrawFn) -> Step:
    message: Step = {"role": "tool", "tool_call_id": draw(call_ids), "content": draw(texts)}
    how = draw(st.sampled_from(["ok", "error", "interrupt"]))
    if how == "error":
        message["is_error"] = True
        code = draw(st.none() | st.integers(0, 3))
        if code is not None:
            message["exit_code"] = code
    elif how == "interrupt":
        message["is_interrupt"] = True
    return message


messages = plain() | call() | result()


@st.composite
def step(draw: st.DrawFn, names: list[str]) -> Step:
    conv = draw(st.sampled_from(names))
    kind = draw(
        st.sampled_from(
            ["message"] * 4
            + ["batch"] * 2
            + ["tool", "status", "synthetic", "resolve", "answer", "cancel"]
        )
    )
    if kind == "message":
        return {"op": "save_message", "conv": conv, "message": draw(messages)}
    if kind == "batch":
        batch = draw(st.lists(messages, min_size=2, max_size=4))
        found: Step = {"op": "save_messages", "conv": conv, "messages": batch}
        if draw(st.booleans()):
            found["times"] = [draw(st.none() | st.just("T+100")) for _ in batch]
        return found
    if kind == "tool":
        info: Step = {"call_id": draw(call_ids)}
        if draw(st.booleans()):
            info["display_text"] = draw(texts)
        if draw(st.booleans()):
            info["result"] = info["error"] = draw(st.none() | texts)
        return {
            "op": "update_tool_status",
            "conv": conv,
            "status": draw(st.sampled_from(TOOL_STATUSES)),
            "tool_info": info,
        }
    if kind == "status":
        found = {"op": "set_status", "conv": conv, "status": draw(st.sampled_from(STATUSES))}
        if draw(st.booleans()):
            found["pending_ask"] = {"question": draw(texts)}
        return found
    if kind == "synthetic":
        return {
            "op": "save_synthetic_message",
            "conv": conv,
            "message_type": "system",
            "content_type": draw(st.sampled_from(["notification", "error"])),
            "content": {"text": draw(texts)},
        }
    if kind == "resolve":
        return {
            "op": "resolve_tool_result",
            "conv": conv,
            "tool_call_id": draw(call_ids),
            "result_content": draw(st.none() | texts),
        }
    if kind == "answer":
        return {"op": "answer_pending_ask", "conv": conv, "answer": draw(texts)}
    return {"op": "cancel_run", "conv": conv}


@st.composite
def sequence(draw: st.DrawFn) -> list[Step]:
    """A scenario: start one to three conversations, then eight to sixteen steps."""
    count = draw(st.integers(1, 3))
    names = ["a", "b", "c"][:count]
    steps: list[Step] = [{"op": "start", "as": "a", "owner": "alice", "title": "generated"}]
    if count > 1:
        steps.append({"op": "start", "as": "b", "owner": "bob"})
    if count > 2:
        steps.append(
            {"op": "start", "as": "c", "owner": None, "parent": "a", "parent_call_id": "call_0"}
        )
    steps += draw(st.lists(step(names), min_size=8, max_size=16))
    return steps


def draw(count: int) -> list[list[Step]]:
    """``count`` sequences, the same on every call (hypothesis derandomized, no database)."""
    found: list[list[Step]] = []

    @settings(
        max_examples=count * 3,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(sequence())
    def collect(steps: list[Step]) -> None:
        if len(found) < count and len(steps) >= 10 and steps not in found:
            found.append(steps)

    collect()
    return found
