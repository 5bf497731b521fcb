"""Imports write in chunks (docs/formats.md "Transactions"): a file of many notices and subagent
switches is one transaction with its remembered offset, a large one a few of ``CHUNK_ROWS`` rows,
and an import that dies mid-chunk leaves the chunks before it; run again, it writes every row
exactly once. Counted in transactions and statements, never in time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from murmur_conversations import services
from murmur_conversations.importers import base
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    ImportedSource,
    Message,
    SourceRecord,
    ToolCall,
)
from tests.agentlog_lines import Claude, tool_use, write_jsonl
from tests.helpers import assert_counters_match_rows
from tests.import_helpers import run

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = 12


def busy_session(path: Path, turns: int = TURNS) -> Path:
    """A session whose every turn launches a subagent (inline sidechain lines: two switches of
    conversation a turn) and ends on a compaction notice."""
    c = Claude()
    lines: list[dict[str, Any]] = []
    for turn in range(turns):
        agent = f"a{turn}"
        side = {"isSidechain": True, "agentId": agent}
        lines += [
            c.prompt(f"Plan bed {turn}"),
            c.answer(f"msg_{turn}", tool_use(f"toolu_task{turn}", "Task", prompt=f"Bed {turn}")),
            c.prompt(f"Bed {turn}", parentUuid=None, **side),
            c.answer(f"msg_s{turn}", tool_use(f"toolu_ls{turn}", command="ls"), **side),
            c.result(f"toolu_ls{turn}", "3 rows", **side),
            c.answer(f"msg_s{turn}b", "Three rows.", **side),
            c.result(
                f"toolu_task{turn}", "Three", toolUseResult={"agentId": agent, "content": "Three"}
            ),
            c.answer(f"msg_{turn}b", f"Bed {turn} has three rows."),
            c.system("compact_boundary", content="Conversation compacted"),
        ]
    return write_jsonl(path / f"{c.session}.jsonl", lines)


@contextmanager
def counted() -> Iterator[dict[str, int]]:
    """Counts of the default database while the block runs: ``statements`` sent, ``commits`` of
    transactions, and ``autocommitted`` writes (a write statement outside any transaction is a
    transaction of its own)."""
    counts = {"statements": 0, "commits": 0, "autocommitted": 0}
    commit = connection.commit

    def counting_commit() -> None:
        counts["commits"] += 1
        commit()

    def wrapper(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        counts["statements"] += 1
        verb = sql.lstrip().split(None, 1)[0].upper()
        if not connection.in_atomic_block and verb in {"INSERT", "UPDATE", "DELETE", "WITH"}:
            counts["autocommitted"] += 1
        return execute(sql, *args)

    connection.commit = counting_commit  # type: ignore[method-assign]
    try:
        with connection.execute_wrapper(wrapper):
            yield counts
    finally:
        del connection.commit


def stored(owner: User) -> dict[str, Any]:
    """What an import left for ``owner``: each conversation by key with its record, display rows,
    calls and source records (their keys), and its counters."""
    out: dict[str, Any] = {}
    for conversation in Conversation.objects.filter(owner=owner):
        assert_counters_match_rows(conversation)
        out[conversation.external_id] = {
            "counters": (
                conversation.record_length,
                conversation.last_seq,
                conversation.tool_call_count,
                conversation.parent_call_id,
            ),
            "record": list(
                Message.objects.filter(conversation=conversation)
                .order_by("position")
                .values_list("position", "message_id", "role")
            ),
            "display": list(
                DisplayMessage.objects.filter(conversation=conversation)
                .order_by("seq")
                .values_list("seq", "message_type", "content_type", "status")
            ),
            "calls": sorted(
                ToolCall.objects.filter(conversation=conversation).values_list("call_id", "status")
            ),
            "sources": sorted(
                SourceRecord.objects.filter(conversation=conversation).values_list(
                    "source_key", flat=True
                )
            ),
        }
    return out


def test_notices_and_subagent_switches_commit_once_with_the_offset(
    tmp_path: Path, make_user: Callable[..., User]
) -> None:
    session = busy_session(tmp_path)
    owner = make_user()
    with counted() as counts:
        code, _, err = run(session, "--owner", owner.username)
    assert (code, err) == (0, "")
    rows = stored(owner)
    assert len(rows) == 1 + TURNS  # the session and a child per turn
    top = rows[Claude().session]
    notices = [row for row in top["display"] if row[2] == "notification"]
    assert len(notices) == TURNS
    # One transaction for the whole file, its remembered offset included; no write on its own.
    assert counts["commits"] == 1
    assert counts["autocommitted"] == 0
    assert ImportedSource.objects.get(owner=owner).offset == session.stat().st_size
    # Each switch and notice is a service call inside it (the source's order, so the same rows),
    # never a commit: the statements grow with them (about 80 a turn of 9 lines and 3 service
    # calls today), the transactions do not.
    assert counts["statements"] < 100 * TURNS


def test_a_large_file_commits_a_chunk_every_chunk_rows(
    tmp_path: Path, make_user: Callable[..., User], monkeypatch: pytest.MonkeyPatch
) -> None:
    session = busy_session(tmp_path)
    whole = make_user()
    assert run(session, "--owner", whole.username)[0] == 0
    monkeypatch.setattr(base, "CHUNK_ROWS", 20)
    chunked = make_user()
    with counted() as counts:
        assert run(session, "--owner", chunked.username)[0] == 0
    rows = SourceRecord.objects.filter(conversation__owner=chunked).count()
    assert rows > 100
    assert rows // 40 <= counts["commits"] <= rows // 10
    assert counts["autocommitted"] == 0
    assert stored(chunked) == stored(whole)  # the same rows, whatever the chunks


class Crash(Exception):
    """What the test's hook raises, as a crash would stop the import."""


def test_an_import_killed_mid_chunk_resumes_exactly_once(
    tmp_path: Path, make_user: Callable[..., User], monkeypatch: pytest.MonkeyPatch
) -> None:
    session = busy_session(tmp_path)
    clean = make_user()
    assert run(session, "--owner", clean.username)[0] == 0
    expected = stored(clean)

    owner = make_user()
    monkeypatch.setattr(base, "CHUNK_ROWS", 30)
    notice = services.save_synthetic_message
    calls = {"n": 0}

    def dying(**kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == TURNS // 2:  # mid-file, mid-chunk: rows of this chunk written already
            raise Crash
        return notice(**kwargs)

    monkeypatch.setattr(services, "save_synthetic_message", dying)
    with pytest.raises(Crash):
        run(session, "--owner", owner.username)
    partial = stored(owner)
    kept = sum(len(c["record"]) for c in partial.values())
    assert 0 < kept < sum(len(c["record"]) for c in expected.values())  # the chunks before
    assert not ImportedSource.objects.filter(owner=owner).exists()  # no offset moved

    monkeypatch.setattr(services, "save_synthetic_message", notice)
    code, _, err = run(session, "--owner", owner.username)
    assert (code, err) == (0, "")
    assert stored(owner) == expected
    assert run(session, "--owner", owner.username)[0] == 0  # and again: unchanged
    assert stored(owner) == expected
