"""Real input (docs/demo.md): every ``*.jsonl`` agent log of the real-log corpus goes through
``import_conversations`` as a user would type it, and each imported conversation reads back
through the REST API (display rows and the transcript), page by page.

The corpus is not part of the repository and is never copied into it: ``MURMUR_CORPUS`` names its
folder (tests/helpers.py, corpus_path), and without it these tests skip with a reason. Formats this version
cannot read yet must be refused cleanly: exit 2 with "cannot read yet".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from murmur_conversations.models import Conversation, DisplayMessage, Message
from tests.helpers import assert_counters_match_rows, corpus_logs
from tests.import_helpers import run

pytestmark = pytest.mark.django_db

LOGS = corpus_logs()
#: Folders whose format this version must import (the others may still be refused by name).
MUST_IMPORT = ("codex_rollout", "codex_exec_jsonl")


def walk(client: APIClient, url: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every page of ``url`` (a cursor walk): the pages' bodies and all their rows."""
    pages: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    cursor = None
    while True:
        response = client.get(url, {"cursor": cursor} if cursor else {})
        assert response.status_code == 200, response.content
        body = response.json()
        pages.append(body)
        rows.extend(body["results"] if "results" in body else body["messages"])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages, rows
        assert len(pages) < 1000  # a walk always ends


def check_read_back(client: APIClient, conversation: Conversation) -> None:
    """Display rows and transcript of ``conversation`` read back whole through the API."""
    base = f"/api/conversations/{conversation.pk}/"
    summary = client.get(base)
    assert summary.status_code == 200
    pages, rows = walk(client, f"{base}display-messages/")
    stored = DisplayMessage.objects.filter(conversation=conversation)
    assert [row["seq"] for row in rows] == sorted(
        stored.values_list("seq", flat=True), reverse=True
    )
    assert len({row["id"] for row in rows}) == len(rows)
    assert {page["total"] for page in pages} == {len(rows)}
    for row in rows:
        assert row["content_type"]
        assert isinstance(row["content"], dict)
        if row["content_type"] == "tool_call":
            assert row["tool_call_id"] == row["content"]["call_id"]
    _, messages = walk(client, f"{base}transcript/")
    assert len(messages) == summary.json()["message_count"] == conversation.transcript_count
    assert {message["role"] for message in messages} <= {"user", "assistant"}
    assert all(isinstance(message["content"], str) and message["content"] for message in messages)
    assert_counters_match_rows(conversation)


def test_the_corpus_is_there(corpus: Path) -> None:
    assert sorted(corpus.glob("*/*.jsonl")), "the corpus has no *.jsonl file"


@pytest.mark.parametrize("name", LOGS)
def test_import_and_read_back(corpus: Path, name: str, user: User) -> None:
    path = corpus / name
    code, out, err = run(path, "--owner", user.username)
    if code != 0:
        assert path.parent.name not in MUST_IMPORT, err
        assert code == 2, err
        assert "cannot read yet" in err
        assert not Conversation.objects.exists()
        return
    conversations = list(Conversation.objects.filter(owner=user))
    assert conversations, out
    assert Message.objects.filter(conversation__in=conversations).exists()
    client = APIClient()
    client.force_authenticate(user)
    _, listed = walk(client, "/api/conversations/")
    top = {str(c.pk) for c in conversations if c.parent_id is None}
    assert {row["id"] for row in listed} == top
    for conversation in conversations:
        check_read_back(client, conversation)
        # docs/api.md: a subagent's child conversation is listed under its parent
        _, children = walk(client, f"/api/conversations/?parent={conversation.pk}")
        assert {row["id"] for row in children} == {
            str(c.pk) for c in conversations if c.parent_id == conversation.pk
        }

    counts = (Message.objects.count(), DisplayMessage.objects.count())
    again, _, again_err = run(path, "--owner", user.username)
    assert again == 0, again_err
    assert (Message.objects.count(), DisplayMessage.objects.count()) == counts  # idempotent
