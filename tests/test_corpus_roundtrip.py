"""Real input (docs/demo.md): every ``*.jsonl`` agent log of the real-log corpus goes through
``import_conversations`` as a user would type it, and each imported conversation reads back
through the REST API (display rows and the transcript), page by page.

The corpus is not part of the repository and is never copied into it: ``MURMUR_CORPUS`` names its
folder (tests/conftest.py), and without it these tests skip with a reason. Formats this version
cannot read yet must be refused cleanly: exit 2 with "cannot read yet".
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from murmur_conversations.models import Conversation, DisplayMessage, Message
from tests.conftest import corpus_path
from tests.helpers import assert_counters_match_rows

pytestmark = pytest.mark.django_db

_CORPUS = corpus_path()
#: The corpus logs as paths relative to the corpus folder; without a corpus, one placeholder that
#: the ``corpus`` fixture skips with its reason (an empty parameter set would skip without one).
LOGS = (
    [p.relative_to(_CORPUS).as_posix() for p in sorted(_CORPUS.glob("*/*.jsonl"))]
    if _CORPUS is not None
    else ["no-corpus"]
)
#: Folders whose format this version must import (the others may still be refused by name).
MUST_IMPORT = ("codex_rollout", "codex_exec_jsonl")


def walk(client: APIClient, url: str) -> tuple[list[dict], list[dict]]:
    """Every page of ``url`` (a cursor walk): the pages' bodies and all their rows."""
    pages, rows, cursor = [], [], None
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


def run_import(path: Path, owner) -> tuple[str, str, CommandError | None]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(
            "import_conversations", str(path), "--owner", owner.username, stdout=out, stderr=err
        )
    except CommandError as error:
        return out.getvalue(), err.getvalue(), error
    return out.getvalue(), err.getvalue(), None


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


def test_the_corpus_is_there(corpus):
    assert sorted(corpus.glob("*/*.jsonl")), "the corpus has no *.jsonl file"


@pytest.mark.parametrize("name", LOGS)
def test_import_and_read_back(corpus, name, user):
    path = corpus / name
    out, err, error = run_import(path, user)
    if error is not None:
        assert path.parent.name not in MUST_IMPORT, f"{error}\n{err}"
        assert error.returncode == 2, f"{error}\n{err}"
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
    _, again_err, again = run_import(path, user)
    assert again is None, again_err
    assert (Message.objects.count(), DisplayMessage.objects.count()) == counts  # idempotent
