"""Concurrency across OS processes on PostgreSQL (RELIABILITY.md; docs/architecture.md, docs/write-path.md and docs/api.md): nothing written
is lost or doubled.

Four worker processes (each its own interpreter and connection pool, released together by the
test) append to one shared conversation and to one conversation of their own, send the same
message ids as each other, and race to finish the same tool calls with different terminal statuses,
while the test walks the record and display pages over the API. Afterwards: every message id landed
exactly once, positions and seqs are gapless, the counters equal the rows, ``last_event_seq`` equals
the number of service calls that changed something, every raced call ended in exactly one terminal
state (the one the single winning worker set), and every page walk returned each row exactly once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from murmur_conversations import services
from murmur_conversations.models import Message, ToolCall
from tests.api_helpers import token_client, url
from tests.helpers import MakeUser, assert_counters_match_rows
from tests.servers import database_environment

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 4
ROUNDS = 25  # messages per worker and conversation
RACED_CALLS = 12
DUPLICATE_EVERY = 5  # every 5th round all workers send the same message id
TIMEOUT = 90  # seconds for the whole run; it takes a few

WORKER = r"""
import json, sys
import django
django.setup()
from murmur_conversations import services, signals
from murmur_conversations.exceptions import InvalidToolTransition, WriteConflict

worker, shared, own, rounds, raced, every = json.loads(sys.argv[1])

def retry(call):
    for attempt in range(20):
        try:
            return call()
        except WriteConflict:
            continue
    return call()

changes = {shared: 0, own: 0}
wins = {}

def count(sender, conversation, event_seq, **kwargs):
    if event_seq:  # one conversation_saved per service call that changed something
        changes[str(conversation.pk)] += 1

signals.conversation_saved.connect(count, weak=False)
print("ready", flush=True)
sys.stdin.readline()  # released by the test, all workers together
statuses = ["completed", "failed", "cancelled"]
for i in range(rounds):
    for conversation in (shared, own):
        message_id = f"dup-{i}" if i % every == 0 else f"w{worker}-{i}"
        if conversation == own:
            message_id = f"own-{i}"
        retry(lambda: services.save_message(
            conversation=conversation,
            message={"role": "user" if i % 2 else "assistant", "content": f"{worker}:{i}",
                     "id": message_id},
        ))
    if i < raced:
        status = statuses[(worker + i) % 3]
        before = changes[shared]
        try:
            retry(lambda: services.update_tool_status(
                conversation=shared, status=status, tool_info={"call_id": f"race-{i}"}
            ))
        except InvalidToolTransition:
            pass
        if changes[shared] > before:  # this call moved it (the same status again is a no-op)
            wins[f"race-{i}"] = status
print(json.dumps({"changes": changes, "wins": wins}), flush=True)
"""


def walk(client: APIClient, conversation_id: uuid.UUID, route: str) -> list[int]:
    """One full page walk (newest first), returning the keys it saw."""
    seen: list[int] = []
    cursor = None
    while True:
        query = {"limit": 7, **({"cursor": cursor} if cursor else {})}
        page = client.get(url(conversation_id, route), query)
        assert page.status_code == 200, page.content
        body = page.json()
        key = "position" if route == "record/" else "seq"
        seen.extend(row[key] for row in body["results"])
        cursor = body["next_cursor"]
        if cursor is None:
            return seen


def test_workers_in_several_processes_lose_and_double_nothing(make_user: MakeUser) -> None:
    owner = make_user()
    shared = services.start_conversation(owner=owner, title="shared")
    own = [services.start_conversation(owner=owner, title=f"own {w}") for w in range(WORKERS)]
    services.save_message(
        conversation=shared,
        message={
            "id": "setup",
            "role": "assistant",
            "content": [
                {"type": "tool_call", "id": f"race-{i}", "name": "t", "input": {}}
                for i in range(RACED_CALLS)
            ],
        },
    )
    setup_events = 1
    env = database_environment(pool_max=4)
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                json.dumps(
                    [w, str(shared.pk), str(own[w].pk), ROUNDS, RACED_CALLS, DUPLICATE_EVERY]
                ),
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WORKERS)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "ready"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        # Read pages while the workers write: each walk sees every row below its start once.
        client = token_client(owner)
        for _walk in range(200):  # at least one walk during the writes, and one after them
            done = all(w.poll() is not None for w in workers)
            for route in ("record/", "display-messages/"):
                seen = walk(client, shared.pk, route)
                assert seen == list(range(len(seen), 0, -1)), route  # each row once, no gap
            if done:
                break
        outputs = [worker.communicate(timeout=TIMEOUT) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    for worker, (_out, err) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, err[-2000:]
    results = [json.loads(out.strip().splitlines()[-1]) for out, _err in outputs]

    shared_ids = list(
        Message.objects.filter(conversation=shared).values_list("message_id", flat=True)
    )
    expected = {"setup"} | {f"dup-{i}" for i in range(0, ROUNDS, DUPLICATE_EVERY)}
    expected |= {f"w{w}-{i}" for w in range(WORKERS) for i in range(ROUNDS) if i % DUPLICATE_EVERY}
    assert sorted(shared_ids) == sorted(expected)
    for w in range(WORKERS):
        ids = set(Message.objects.filter(conversation=own[w]).values_list("message_id", flat=True))
        assert ids == {f"own-{i}" for i in range(ROUNDS)}
        assert_counters_match_rows(own[w])
        own[w].refresh_from_db()
        assert own[w].last_event_seq == ROUNDS == results[w]["changes"][str(own[w].pk)]
    assert_counters_match_rows(shared)

    wins: dict[str, list[str]] = {}
    for result in results:
        for call_id, status in result["wins"].items():
            wins.setdefault(call_id, []).append(status)
    calls = {c.call_id: c for c in ToolCall.objects.filter(conversation=shared)}
    assert len(calls) == RACED_CALLS
    for call_id, call in calls.items():
        assert len(wins.get(call_id, [])) == 1, (call_id, wins.get(call_id))
        assert call.status == wins[call_id][0]
        assert call.finished_at is not None
    shared.refresh_from_db()
    landed = len(expected) - 1
    changed = sum(r["changes"][str(shared.pk)] for r in results)
    assert changed == landed + RACED_CALLS
    assert shared.last_event_seq == setup_events + changed
