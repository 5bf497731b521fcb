"""The hand-written golden scenarios: every kind of write through the public services, each a list
of steps (``tests/golden/replay.py`` says what a step may name). The comments say which of the
implementations of 237fc11 (where the fixtures were recorded) a step took, so that each was
pinned: on PostgreSQL plain messages took ``fastpath``, tool calls and one result ``fasttools``,
status and tool moves ``singles``; on SQLite plain messages took ``fastlite``; everything else,
and every kind that stepped aside, the general path (``appending``), whose batches of three rows
or more reach PostgreSQL by ``COPY`` (``bulkcopy``). Plain batches, synthetic rows and status
changes now take the one plan (``services/plan.py``) instead."""

from __future__ import annotations

from typing import Any

Step = dict[str, Any]

ALICE = {"op": "start", "as": "a", "owner": "alice", "title": "golden", "source": "test"}
SECRET_AWS = "AKIA" + "Q3ZJ7W2XKD5VHM4N"
SECRET_GITHUB = "ghp_" + "aZ3kQ9mX2pL7vB4nR8tY1wE6uI0oP5sD3fG7"


def user(text: str, **extra: Any) -> Step:
    return {"role": "user", "content": text, **extra}


def assistant(content: Any, **extra: Any) -> Step:
    return {"role": "assistant", "content": content, **extra}


def call(call_id: str, name: str = "bash", **arguments: Any) -> Step:
    return {"type": "tool_call", "id": call_id, "name": name, "input": arguments}


def result(call_id: str, content: Any, **extra: Any) -> Step:
    return {"role": "tool", "tool_call_id": call_id, "content": content, **extra}


def save(message: Step, conv: str = "a") -> Step:
    return {"op": "save_message", "conv": conv, "message": message}


def batch(*messages: Step, conv: str = "a", **extra: Any) -> Step:
    return {"op": "save_messages", "conv": conv, "messages": list(messages), **extra}


def tool(status: str, call_id: str, conv: str = "a", **info: Any) -> Step:
    return {
        "op": "update_tool_status",
        "conv": conv,
        "status": status,
        "tool_info": {"call_id": call_id, **info},
    }


def status(value: str, conv: str = "a", **extra: Any) -> Step:
    return {"op": "set_status", "conv": conv, "status": value, **extra}


SCENARIOS: dict[str, list[Step]] = {
    "start": [
        ALICE,
        {"op": "start", "as": "again", "owner": "alice", "source": "test", "external_id": "k1"},
        # the same key again: the conversation it made, nothing written
        {"op": "start", "as": "same", "owner": "alice", "source": "test", "external_id": "k1"},
        {"op": "start", "as": "other", "owner": "bob", "source": "test", "external_id": "k1"},
        {"op": "start", "as": "nobody", "owner": None, "title": "no owner", "metadata": {"x": 1}},
        {"op": "start", "as": "early", "owner": "alice", "created_at": "2024-04-01T00:00:00+00:00"},
    ],
    "plain_messages": [  # fastpath / fastlite
        ALICE,
        save(user("hello")),
        save(assistant("hi there")),
        save(assistant([{"type": "thinking", "text": "hmm"}, {"type": "text", "text": "so"}])),
        save(assistant(None)),  # null content, kept as null
        save(user("")),  # empty text: no display row
        save(user("injected", injected=True)),
        save({"role": "narrator", "content": "an unknown role"}),
        save(assistant([{"type": "image", "source": {"data": "abc"}}, "x"])),  # InvalidContent
        save(
            assistant([{"type": "image", "source": {"data": "abc"}}, {"type": "text", "text": "y"}])
        ),
        save(assistant("extra keys", refusal=None, name="bot", annotations=[])),
    ],
    "given_ids": [
        ALICE,
        save(user("first", id="m1")),
        save(user("first again", id="m1")),  # a known id: a no-op
        save(assistant("empty id", id="")),
        batch(user("b1", id="m2"), user("b1 again", id="m2"), user("b3", id="m1")),
        batch(user("known", id="m1"), user("new", id="m3")),
    ],
    "openai_tool_calls": [  # fasttools
        ALICE,
        save(
            assistant(
                None,
                tool_calls=[
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "ls", "arguments": '{"path": "."}'},
                    },
                    {"id": "call_b", "type": "function", "function": {"name": "cat"}},
                ],
            )
        ),
        save(result("call_a", "file.txt")),
        save(result("call_b", [{"type": "text", "text": "no such file"}], is_error=True)),
        save(assistant("bad args", tool_calls=[{"id": "call_c", "function": {"arguments": "{"}}])),
    ],
    "parts_tool_calls": [
        ALICE,
        save(assistant([{"type": "text", "text": "two calls"}, call("c1", x=1), call("c2", y=2)])),
        save(result("c1", "one", exit_code=0)),
        save(result("c2", "Exit code: 2\nboom", is_error=True)),  # failed with its reason
        save(assistant([call("c3", "edit")])),
        save(result("c3", "stopped", is_interrupt=True)),  # interrupted
        save(result("c1", "late")),  # its call ended: late
        save(assistant([call("c1", again=True)])),  # a new round of an ended id
        save(assistant([call("c1", open=True)])),  # an open call's id: nothing new
        save(result("c1", {"output": "x", "metadata": {"exit_code": 3}}, is_error=True)),  # refused
        save(result("c1", '{"output": "x", "metadata": {"exit_code": 3}}', is_error=True)),
        save(result("missing", "no call")),  # held
        save(assistant([call("missing")])),  # adopted
    ],
    "orphans": [
        ALICE,
        save(result("o1", "early")),  # held
        save(result("o1", "early twice", is_error=True)),  # held too
        save(user("between")),
        save(assistant([call("o1", "bash")])),  # adopts the first; the second is late
        batch(result("o2", "held in batch"), assistant([call("o2")])),  # adopted in its batch
        batch(assistant([call("o3")]), result("o3", "same batch")),  # answers its batch's call
        save(result("o4", "interrupt first", is_interrupt=True)),
        save(assistant([call("o4")])),
    ],
    "batches": [  # general path; three rows or more: COPY on PostgreSQL
        ALICE,
        batch(user("one"), assistant("two"), user("three")),  # plain: fastpath / fastlite
        batch(assistant([call("b1")]), result("b1", "done")),  # fasttools
        batch(  # mixed: the general path
            user("go"),
            assistant([{"type": "thinking", "text": "plan"}, call("b2"), call("b3", "edit")]),
            result("b2", "r2"),
            result("b3", "r3", is_error=True, exit_code=1),
            assistant("done"),
            source="test",
            source_records=[{"source_key": "line-1", "raw": "{}", "line_number": 1}],
        ),
        batch(),
        batch(user("timed"), assistant("timed"), times=["T+100", None]),
        batch(assistant([call("b4")]), times=["2023-01-01T00:00:00+00:00"]),
    ],
    "usage": [
        ALICE,
        save(
            assistant(
                "anthropic",
                model="claude-3-5-sonnet-20241022",
                usage={
                    "input_tokens": 10,
                    "output_tokens": 5,
                    "cache_read_input_tokens": 3,
                    "cache_creation_input_tokens": 2,
                    "cache_creation": {"ephemeral_1h_input_tokens": 1},
                },
            )
        ),
        save(
            assistant(
                "openai chat",
                model="gpt-4o-mini",
                usage={
                    "prompt_tokens": 500,
                    "completion_tokens": 40,
                    "prompt_tokens_details": {"cached_tokens": 128},
                    "completion_tokens_details": {"reasoning_tokens": 7},
                },
            )
        ),
        batch(
            assistant(
                "responses",
                model="gpt-4o-mini",
                usage={
                    "input_tokens": 20,
                    "output_tokens": 4,
                    "input_tokens_details": {"cached_tokens": 5},
                    "output_tokens_details": {"reasoning_tokens": 2},
                },
            ),
            assistant(
                "codex",
                model="gpt-5-codex",
                usage={
                    "input_tokens": 30,
                    "cached_input_tokens": 10,
                    "output_tokens": 6,
                    "reasoning_output_tokens": 1,
                },
            ),
            assistant(
                "ours",
                model="m",
                usage={"input_tokens": 1, "output_tokens": 1, "cache_read_tokens": 1},
            ),
        ),
        save(assistant([call("u1")], model="m", usage={"input_tokens": 2, "output_tokens": 2})),
        save(assistant("no model", usage={"input_tokens": 2})),
        save(assistant("bad usage", model="m", usage={"input_tokens": -1})),
        save(user("a user's usage", usage={"input_tokens": 9})),
    ],
    "secrets": [  # a redacted secret takes the general path
        ALICE,
        save(user(f"my key is {SECRET_AWS}")),
        save(
            assistant(
                [{"type": "text", "text": f"token {SECRET_GITHUB}"}, call("s1", k=SECRET_AWS)]
            )
        ),
        save(result("s1", f"echo {SECRET_GITHUB}")),
        batch(user(SECRET_AWS), user("clean")),
        {
            "op": "save_synthetic_message",
            "conv": "a",
            "message_type": "system",
            "content_type": "notification",
            "content": {"text": SECRET_AWS},
        },
        status("paused", pending_ask={"question": f"use {SECRET_AWS}?"}),
        tool("executing", "s1", display_text=SECRET_GITHUB),
    ],
    "source_records": [
        ALICE,
        {
            "op": "save_source_records",
            "conv": "a",
            "source": "test",
            "records": [
                {"source_key": "r1", "raw": '{"a": 1}', "line_number": 1, "record_type": "x"},
                {"source_key": "r2", "raw": "text", "line_number": 2},
            ],
        },
        {
            "op": "save_source_records",
            "conv": "a",
            "source": "test",
            "records": [
                {"source_key": "r1", "raw": "again", "line_number": 1},
            ],
        },
        batch(
            user("with a record", source_id="r3"),
            source="test",
            source_records=[{"source_key": "r3", "raw": "{}", "line_number": 3}],
        ),
        {"op": "save_source_records", "conv": "a", "source": "test", "records": [{"raw": "x"}]},
    ],
    "synthetic": [
        ALICE,
        {
            "op": "save_synthetic_message",
            "conv": "a",
            "message_type": "system",
            "content_type": "notification",
            "content": {"text": "note"},
        },
        {
            "op": "save_synthetic_message",
            "conv": "a",
            "message_type": "system",
            "content_type": "error",
            "content": {"text": "bad"},
            "metadata": {"k": "v"},
            "at": "T+50",
        },
        {
            "op": "save_synthetic_message",
            "conv": "a",
            "message_type": "nope",
            "content_type": "notification",
            "content": {"text": "x"},
        },
        {
            "op": "save_synthetic_message",
            "conv": "a",
            "message_type": "system",
            "content_type": "notification",
            "content": {},
        },
    ],
    "status_and_asks": [  # singles on PostgreSQL
        ALICE,
        status("running"),
        status("running"),  # a no-op
        status("paused", pending_ask={"question": "Deploy?", "tool": "deploy"}),
        {"op": "answer_pending_ask", "conv": "a", "answer": "Yes", "expected_event_seq": 1},
        {"op": "answer_pending_ask", "conv": "a", "answer": "Yes", "expected_event_seq": 3},
        {"op": "answer_pending_ask", "conv": "a", "answer": "again"},  # none pending
        status("paused", pending_ask={"question": "Sure?"}),
        {"op": "answer_pending_ask", "conv": "a", "answer": "   "},  # blank
        {"op": "answer_pending_ask", "conv": "a", "answer": "sure"},
        status("bogus"),
        status("error", at="T+30"),
        status("idle", pending_ask={"question": "an ask while idle"}),
    ],
    "tool_status": [  # singles on PostgreSQL
        ALICE,
        save(assistant([call("t1"), call("t2"), call("t3"), call("t4")])),
        tool("executing", "t1", display_text="ls -la"),
        tool("executing", "t1"),  # the same status: a no-op
        tool("completed", "t1", result={"out": 1}),
        tool("executing", "t1"),  # not allowed
        tool("interrupted", "t2"),
        tool("failed", "t2", error="it broke", result="partial", name="renamed"),
        tool("cancelled", "t3"),
        tool("pending", "t4"),
        tool("bogus", "t4"),
        tool("executing", "nope"),  # no such call
        tool("interrupted", "t4", at="T+40"),
        save(result("t4", "asked", is_interrupt=True)),
        {"op": "resolve_tool_result", "conv": "a", "tool_call_id": "t4", "result_content": "ok"},
        {"op": "resolve_tool_result", "conv": "a", "tool_call_id": "t4", "result_content": "2"},
        {"op": "resolve_tool_result", "conv": "a", "tool_call_id": "t9", "result_content": "x"},
    ],
    "runs": [
        ALICE,
        status("running"),
        save(assistant([call("r1"), call("r2")])),
        tool("executing", "r1"),
        status("paused", pending_ask={"question": "?"}),
        {"op": "cancel_run", "conv": "a"},
        {"op": "cancel_run", "conv": "a"},  # already cancelled, nothing open: a no-op
        {"op": "start", "as": "b", "owner": "alice"},
        status("running", conv="b"),
        save(assistant([call("r3"), call("r4")]), conv="b"),
        tool("executing", "r3", conv="b"),
        {"op": "recover_interrupted", "stale_after_seconds": 1000},  # nothing stale yet
        {"op": "recover_interrupted", "conv": "b", "stale_after_seconds": 1},
        {"op": "recover_interrupted", "stale_after_seconds": 1},
    ],
    "children": [
        ALICE,
        save(assistant([call("task_1", "Task", prompt="go")])),
        {
            "op": "start",
            "as": "child",
            "owner": None,
            "parent": "a",
            "parent_call_id": "task_1",
            "title": "sub",
            "source": "test",
            "external_id": "a/sub",
        },
        {
            "op": "start",
            "as": "child2",
            "owner": "alice",
            "parent": "a",
            "source": "test",
            "external_id": "a/sub2",
        },
        # the same key with the call id it lacked: set; another parent: ParentConflict
        {
            "op": "start",
            "as": "child2",
            "owner": "alice",
            "parent": "a",
            "parent_call_id": "x",
            "source": "test",
            "external_id": "a/sub2",
        },
        {"op": "start", "as": "b", "owner": "alice"},
        {
            "op": "start",
            "as": "bad",
            "owner": "alice",
            "parent": "b",
            "source": "test",
            "external_id": "a/sub2",
        },
        {"op": "start", "as": "bad", "owner": "bob", "parent": "a"},  # OwnershipConflict
        status("running", conv="child"),
        save(user("brief"), conv="child"),  # a plain message: the child only
        save(assistant([call("cc1"), call("cc2")]), conv="child"),  # steps: the parent hears
        tool("executing", "cc1", conv="child"),
        save(result("cc1", "out"), conv="child"),
        batch(assistant([call("cc3")]), result("cc3", "x"), conv="child"),
        status("idle", conv="child"),
        save(result("task_1", "report")),
        {"op": "delete_conversation", "conv": "child2"},  # child_deleted to the parent
    ],
    "fork": [
        ALICE,
        save(user("q")),
        save(assistant([{"type": "text", "text": "a"}, call("f1")])),
        save(result("f1", "r")),
        save(assistant("end", model="m", usage={"input_tokens": 4, "output_tokens": 1})),
        {"op": "update_conversation", "conv": "a", "tags": ["x"], "pinned": True},
        {"op": "fork", "as": "f", "conv": "a", "at_seq": 3, "owner": "bob"},
        {"op": "fork", "as": "g", "conv": "a", "at_seq": 99, "owner": "alice", "title": "all"},
        {"op": "fork", "as": "h", "conv": "a", "at_seq": 0, "owner": "alice"},
        {"op": "fork", "as": "i", "conv": "a", "at_seq": 5, "owner": "alice"},
        save(user("after the fork"), conv="f"),
    ],
    "share_and_feedback": [
        ALICE,
        save(user("q")),
        save(assistant("a")),
        {"op": "create_share", "as": "s1", "conv": "a", "created_by": "alice"},
        {
            "op": "create_share",
            "as": "s2",
            "conv": "a",
            "created_by": "alice",
            "mode": "live",
            "expires_in": 3600,
            "require_login": True,
        },
        {"op": "create_share", "as": "s3", "conv": "a", "created_by": "alice", "mode": "nope"},
        {"op": "revoke_share", "share": "s2"},
        {"op": "revoke_share", "share": "s2"},
        {
            "op": "set_feedback",
            "conv": "a",
            "seq": 2,
            "user": "alice",
            "rating": -1,
            "comment": "wrong",
        },
        {"op": "set_feedback", "conv": "a", "seq": 2, "user": "bob", "rating": 1},
        {"op": "set_feedback", "conv": "a", "seq": 2, "user": "alice", "rating": 5},
        {"op": "clear_feedback", "conv": "a", "seq": 2, "user": "bob"},
        {"op": "update_conversation", "conv": "a", "title": "renamed", "archived": True},
        {"op": "update_conversation", "conv": "a", "tags": "not a list"},
        {"op": "broadcast_delta", "conv": "a", "stream_id": "s", "text": "partial "},
        {"op": "broadcast_delta", "conv": "a", "stream_id": "s", "text": f"{SECRET_AWS} more"},
    ],
    "deletion": [
        ALICE,
        save(user("q")),
        {"op": "start", "as": "b", "owner": "alice", "source": "test", "external_id": "gone"},
        save(assistant([call("d1")]), conv="b"),
        {"op": "start", "as": "bc", "owner": None, "parent": "b"},
        save(user("child"), conv="bc"),
        {"op": "delete_conversation", "conv": "b"},
        {"op": "delete_conversation", "conv": "b"},  # gone already
        {"op": "start", "as": "c", "owner": "bob"},
        {"op": "start", "as": "d", "owner": "bob"},
        {"op": "place_hold", "conv": "d", "reason": "legal"},
        {"op": "purge_conversations", "owner": "bob", "older_than_seconds": 0},
        {"op": "purge_conversations", "older_than_seconds": 1000},
    ],
}


def import_scenarios() -> dict[str, list[Step]]:
    """One scenario per import fixture (``tests/fixtures``): the import, then importing again."""
    files = {
        "ag_ui": "ag_ui/support_thread.json",
        "agentfootprint": "agentfootprint/conversation.json",
        "agentfootprint_paused": "agentfootprint/paused.json",
        "anthropic": "anthropic/bike_trip.json",
        "claude_code": "claude_code/3c6d9e10-2b6f-4c1a-9f0e-4a8b2c6d1e01.jsonl",
        "claude_code_stream": "claude_code/stream_json.jsonl",
        "codex": "codex/rollout-2025-11-20T08-00-00-0190d1e2-0000-7a00-8b00-c0de00000001.jsonl",
        "codex_exec": "codex/exec.jsonl",
        "murmur": "murmur/garden/ctx-0001/conversation.jsonl",
        "muse": "muse/notes_run.jsonl",
        "openai": "openai/timetable.json",
        "openai_items": "openai_items/refund_items.json",
        "vercel_ui": "vercel_ui/trip_planner.json",
    }
    step = {"op": "import", "owner": "alice"}
    return {
        f"import_{name}": [{**step, "path": path}, {**step, "path": path}]
        for name, path in files.items()
    }


SCENARIOS |= import_scenarios()
