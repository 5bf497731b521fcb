"""Subagents imported as child conversations (docs/formats.md "Subagents"): Claude Code sidechain
lines, ``subagents/agent-*.jsonl`` files beside a session (picked up by a session or a folder
import), stream-json ``parent_tool_use_id``, muse task streams the journal links; each child linked
to the call that launched it by the id the log gives, the agent id in the Task result, or the Task
prompt; re-import adds nothing. The corpus acceptance: every tool call of a file lands in exactly
one conversation of its family."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_conversations.models import Conversation, Message, SourceRecord, ToolCall
from tests.agentlog_lines import Claude, tool_use, write_jsonl
from tests.helpers import assert_counters_match_rows
from tests.import_helpers import JSON, run

pytestmark = pytest.mark.django_db

SESSION = "claude_code_session/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
STREAM = "claude_code_stream_json/explore_count_files.jsonl"
TASK_TOOLS = ("Task", "Agent")


def family(user: User) -> tuple[Conversation, list[Conversation]]:
    """The one top-level conversation of ``user`` and its children, oldest child first."""
    [top] = Conversation.objects.filter(owner=user, parent__isnull=True)
    return top, list(top.children.order_by("parent_created_event_seq", "pk"))


def tool_use_ids(lines: list[dict[str, JSON]]) -> list[str]:
    """Every tool_use id a log's lines hold (each message.id's blocks counted once)."""
    ids: list[str] = []
    for line in lines:
        message = line.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            tool = isinstance(block, dict) and block.get("type") == "tool_use"
            if tool and block["id"] not in ids:
                ids.append(block["id"])
    return ids


def snapshot(user: User) -> list[tuple[str, int, int, str, int]]:
    return sorted(
        (str(c.pk), c.last_event_seq, c.record_length, c.parent_call_id, c.child_count)
        for c in Conversation.objects.filter(owner=user)
    )


# ------------------------------------------------------------------------------ the corpus


@pytest.mark.parametrize(("name", "children"), [(SESSION, 2), (STREAM, 1)])
def test_every_tool_call_of_the_file_belongs_to_one_conversation_of_the_family(
    corpus: Path, user: User, name: str, children: int
) -> None:
    lines = [json.loads(x) for x in (corpus / name).read_text("utf-8").splitlines()]
    code, out, err = run(corpus / name, "--owner", user.username)
    assert (code, err) == (0, "")
    assert f"1 conversation(s) and {children} child(ren)" in out
    top, kids = family(user)
    assert len(kids) == children
    owners = Counter(
        call_id
        for call_id in ToolCall.objects.filter(conversation__in=[top, *kids]).values_list(
            "call_id", flat=True
        )
    )
    expected = tool_use_ids(lines)
    assert len(expected) == (21 if name == SESSION else 2)
    assert sorted(owners) == sorted(expected)
    assert set(owners.values()) == {1}
    # each child names the Task/Agent call of its parent that launched it
    tasks = {c.call_id: c for c in ToolCall.objects.filter(conversation=top, name__in=TASK_TOOLS)}
    for child in kids:
        assert child.parent_call_id in tasks
        assert child.owner_id == user.pk
        assert_counters_match_rows(child)
    top.refresh_from_db()
    assert top.child_count == children
    assert_counters_match_rows(top)
    # the subagent's calls are no longer in the session: 8 of 21 in the corpus session
    if name == SESSION:
        assert sum(len(ToolCall.objects.filter(conversation=k)) for k in kids) == 8
    before = snapshot(user)
    assert run(corpus / name, "--owner", user.username, "--reread")[0] == 0
    assert snapshot(user) == before


# ------------------------------------------------------------------------------ linking


def newer_session(
    tmp_path: Path, *, result_names_agent: bool = True, progress: bool = True
) -> tuple[Path, Path, Path]:
    """A session of a newer version, whose subagent writes ``subagents/agent-<id>.jsonl``."""
    c = Claude()
    project = tmp_path / "projects" / "-home-dev-garden"
    task = tool_use("toolu_task", "Task", description="Count seeds", prompt="Count the packets")
    lines = [c.prompt("How many seed packets?"), c.answer("msg_1", task)]
    if progress:
        lines.append(
            c.line(
                "progress",
                data={"type": "agent_progress", "agentId": "a7f3"},
                parentToolUseID="toolu_task",
            )
        )
    used = {"agentId": "a7f3", "content": "Twelve"} if result_names_agent else {"content": "x"}
    lines += [c.result("toolu_task", "Twelve", toolUseResult=used), c.answer("msg_2", "Twelve.")]
    session = write_jsonl(project / f"{c.session}.jsonl", lines)
    sub = Claude(session=c.session)
    side = {"isSidechain": True, "agentId": "a7f3"}
    agent = write_jsonl(
        project / c.session / "subagents" / "agent-a7f3.jsonl",
        [
            sub.prompt("Count the packets", **side),
            sub.answer("msg_s1", tool_use("toolu_ls", command="ls seeds"), **side),
            sub.result("toolu_ls", "12 files", **side),
            sub.answer("msg_s2", "Twelve", **side),
        ],
    )
    return project, session, agent


@pytest.mark.parametrize(
    ("progress", "result_names_agent"), [(True, True), (False, True), (True, False)]
)
def test_a_session_import_picks_up_its_subagent_logs(
    tmp_path: Path, user: User, progress: bool, result_names_agent: bool
) -> None:
    _, session, agent = newer_session(
        tmp_path, progress=progress, result_names_agent=result_names_agent
    )
    code, out, err = run(session, "--owner", user.username)
    assert (code, err) == (0, "")
    assert str(agent) in out
    top, [child] = family(user)
    assert (child.external_id, child.parent_call_id) == (f"{top.external_id}/a7f3", "toolu_task")
    assert [m.message_id for m in child.messages.order_by("position")][1:] == [
        "msg_s1",
        child.messages.get(position=3).message_id,
        "msg_s2",
    ]
    assert ToolCall.objects.get(call_id="toolu_ls").conversation == child
    before = snapshot(user)
    assert run(session, "--owner", user.username)[0] == 0
    assert run(tmp_path, "--owner", user.username, "--reread")[0] == 0
    assert snapshot(user) == before


def test_a_subagent_log_read_before_its_session_is_linked_when_the_session_comes(
    tmp_path: Path, user: User
) -> None:
    _, session, agent = newer_session(tmp_path)
    assert run(agent, "--owner", user.username)[0] == 0
    top, [child] = family(user)
    assert (top.record_length, child.parent_call_id) == (0, "")  # the parent only, so far
    assert run(session, "--owner", user.username)[0] == 0
    top, [child] = family(user)
    assert top.record_length == 4
    assert child.parent_call_id == "toolu_task"
    assert_counters_match_rows(top)


def test_a_subagent_log_that_grew_goes_on_in_its_child(tmp_path: Path, user: User) -> None:
    _, session, agent = newer_session(tmp_path)
    assert run(session, "--owner", user.username)[0] == 0
    sub = Claude(session=family(user)[0].external_id)
    for _ in range(9):
        sub.line("x")
    side = {"isSidechain": True, "agentId": "a7f3"}
    with agent.open("ab") as file:
        file.write(json.dumps(sub.answer("msg_s3", "Recounted: twelve.", **side)).encode() + b"\n")
    code, out, _ = run(tmp_path, "--owner", user.username)
    assert code == 0 and "1 appended, 1 unchanged" in out  # the session was left alone
    _, [child] = family(user)
    last = child.messages.order_by("position").last()
    assert last is not None
    assert last.message_id == "msg_s3"
    assert child.parent_call_id == "toolu_task"


def test_inline_sidechains_link_by_prompt_and_by_the_agent_id_learned_later(
    tmp_path: Path, user: User
) -> None:
    c = Claude()
    side = Claude(session=c.session)
    by_prompt = tool_use("toolu_a", "Task", description="Weeds", prompt="List the weeds")
    by_agent = tool_use("toolu_b", "Agent", description="Soil", prompt="Test the soil")
    lines = [
        c.prompt("Survey the garden"),
        c.answer("msg_1", by_prompt, by_agent),
        # an older version: the sidechain names no agent; its root repeats the Task prompt
        side.prompt("List the weeds", isSidechain=True, parentUuid=None),
        side.answer("msg_w", "Dandelions.", isSidechain=True),
        # a newer one: the sidechain names its agent; only the Task result says which call
        side.prompt("Check pH", isSidechain=True, agentId="b9", parentUuid=None),
        side.answer("msg_p", "pH 6.5.", isSidechain=True, agentId="b9"),
        c.result("toolu_a", "Dandelions."),
        c.result("toolu_b", "pH 6.5.", toolUseResult={"agentId": "b9"}),
        c.answer("msg_2", "Weed, then lime."),
    ]
    path = write_jsonl(tmp_path / f"{c.session}.jsonl", lines)
    assert run(path, "--owner", user.username)[0] == 0
    top, kids = family(user)
    assert [(k.title, k.parent_call_id, k.record_length) for k in kids] == [
        ("Weeds", "toolu_a", 2),  # titled by the Task's description
        ("Check pH", "toolu_b", 2),
    ]
    assert top.record_length == 5
    before = snapshot(user)
    assert run(path, "--owner", user.username, "--reread")[0] == 0
    assert snapshot(user) == before


def test_a_sidechain_no_call_names_is_a_child_of_the_session_only(
    tmp_path: Path, user: User
) -> None:
    c = Claude()
    side = Claude(session=c.session)
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            c.prompt("Plan"),
            c.answer("msg_1", "Planned."),
            side.prompt("Something nobody asked", isSidechain=True, parentUuid=None),
        ],
    )
    assert run(path, "--owner", user.username)[0] == 0
    _, [child] = family(user)
    assert child.parent_call_id == ""


def stream_line(
    kind: str, session: str, parent: str | None = None, **fields: JSON
) -> dict[str, JSON]:
    return {"type": kind, "session_id": session, "parent_tool_use_id": parent, **fields}


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    agents=st.integers(min_value=1, max_value=3),
    order=st.randoms(use_true_random=False),
)
def test_any_stream_json_subagent_names_its_launching_call(
    tmp_path_factory: pytest.TempPathFactory, user: User, agents: int, order: random.Random
) -> None:
    """Subagents running at once, their lines interleaved in any order: each child names the
    call its ``parent_tool_use_id`` gives, holds its own lines, and the session the rest."""
    Conversation.objects.filter(owner=user).delete()
    session = f"5e55{agents}{order.random():.8f}"[:36]
    calls = [f"toolu_run{n}" for n in range(agents)]
    head = [
        stream_line("system", session, subtype="init", cwd="/garden"),
        stream_line(
            "assistant",
            session,
            uuid="u-a",
            message={
                "id": "msg_main",
                "role": "assistant",
                "content": [tool_use(call, "Agent", prompt=f"Job {call}") for call in calls],
            },
        ),
    ]
    per_agent = {
        call: [
            stream_line(
                "user",
                session,
                call,
                uuid=f"u-{call}-1",
                message={"role": "user", "content": [{"type": "text", "text": f"Job {call}"}]},
            ),
            stream_line(
                "assistant",
                session,
                call,
                uuid=f"u-{call}-2",
                message={
                    "id": f"msg_{call}",
                    "role": "assistant",
                    "content": [tool_use(f"{call}_ls", "Bash")],
                },
            ),
            stream_line(
                "user",
                session,
                call,
                uuid=f"u-{call}-3",
                message={
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"{call}_ls", "content": "ok"}
                    ],
                },
            ),
        ]
        for call in calls
    }
    body: list[dict[str, JSON]] = []
    queues = {call: list(lines) for call, lines in per_agent.items()}
    while any(queues.values()):
        call = order.choice([c for c, q in queues.items() if q])
        body.append(queues[call].pop(0))
    tail = [
        stream_line(
            "user",
            session,
            uuid=f"u-r-{call}",
            message={
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": "done"}],
            },
        )
        for call in calls
    ] + [stream_line("result", session, subtype="success", is_error=False, result="done")]
    path = write_jsonl(tmp_path_factory.mktemp("s") / "stream.jsonl", [*head, *body, *tail])
    code, _, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    top, kids = family(user)
    assert sorted(k.parent_call_id for k in kids) == sorted(calls)
    for kid in kids:
        call = kid.parent_call_id
        assert [m.message_id for m in kid.messages.order_by("position")] == [
            f"u-{call}-1",
            f"msg_{call}",
            f"u-{call}-3",
        ]
        lines = [json.loads(r.raw) for r in SourceRecord.objects.filter(conversation=kid)]
        assert {line["parent_tool_use_id"] for line in lines} == {call}
        assert ToolCall.objects.get(conversation=kid).call_id == f"{call}_ls"
    assert Message.objects.filter(conversation=top).count() == 1 + agents
    assert top.child_count == agents


# ------------------------------------------------------------------------------ muse


def envelope(
    stream: str, sequence: int, payload_type: str, payload: dict[str, JSON], kind: str = "session"
) -> dict[str, JSON]:
    return {
        "schema_version": 1,
        "stream": {"kind": kind, "id": stream},
        "sequence": sequence,
        "recorded_at": 1790000000000000 + sequence * 1000,
        "record_type": "event",
        "payload_type": payload_type,
        "payload": payload,
    }


def test_a_muse_task_stream_the_journal_links_is_a_child(tmp_path: Path, user: User) -> None:
    session, task, run_id = "5e550000-aaaa-4bbb-8ccc-000000000001", "7a5c0000-1111", "c0de-1"
    run_stream = {"id": run_id, "kind": "run"}
    lines = [
        envelope(
            session, 1, "turn.input.user", {"prompt": "Tidy the notes", "run_stream": run_stream}
        ),
        envelope(
            session,
            2,
            "task.stream.linked",
            {
                "task_id": task,
                "task_stream": {"id": task, "kind": "task"},
                "run_stream": run_stream,
            },
        ),
        envelope(
            session,
            3,
            "task.lifecycle.proposed",
            {
                "task_id": task,
                "event": {"kind": "proposed", "task_id": task, "task_kind": "tool.delegate"},
            },
        ),
        envelope(
            session,
            4,
            "task.lifecycle.started",
            {"task_id": task, "event": {"kind": "started", "task_id": task}},
        ),
        # the task's own stream: a run of its own
        envelope(
            task,
            1,
            "turn.input.user",
            {"prompt": "Sort ideas.md", "run_stream": run_stream},
            kind="task",
        ),
        envelope(
            task,
            2,
            "run.terminal.completed",
            {"terminal": "completed", "text": "Sorted."},
            kind="task",
        ),
        envelope(
            session,
            5,
            "run.terminal.completed",
            {
                "terminal": "completed",
                "text": "Tidied.",
                "usage": {"input_tokens": 40, "output_tokens": 9},
            },
        ),
    ]
    path = write_jsonl(tmp_path / "journal.jsonl", lines)
    code, _, err = run(path, "--owner", user.username)
    assert (code, err) == (0, "")
    top, [child] = family(user)
    assert (top.external_id, child.external_id, child.parent_call_id) == (session, task, task)
    assert [m.role for m in child.messages.order_by("position")] == ["user", "assistant"]
    answer = top.messages.filter(role="assistant").order_by("position").last()
    assert answer is not None
    assert answer.extra["usage"] == {"input_tokens": 40, "output_tokens": 9}
    before = snapshot(user)
    assert run(path, "--owner", user.username, "--reread")[0] == 0
    assert snapshot(user) == before
