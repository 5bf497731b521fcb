"""Which clock dates what (docs/write-path.md "Times", docs/deployment.md "Retention and holds"):
retention counts from ``retained_at``, which an import moves to when it ran; organising and
feedback move neither ``saved_at`` nor ``retained_at``."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone

from murmur_conversations import selectors, services
from murmur_conversations.models import Conversation, DisplayMessage
from murmur_conversations.representations import iso
from murmur_conversations.signals import conversation_saved
from tests.agentlog_lines import Claude, write_jsonl
from tests.helpers import MakeConversation
from tests.import_helpers import run

pytestmark = pytest.mark.django_db


def purge(*args: str) -> str:
    out = io.StringIO()
    call_command("purge_conversations", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def old_session(tmp_path: Path, days: int = 90) -> Path:
    """A Claude Code session whose log times are ``days`` ago."""
    log = Claude(start=timezone.now() - timedelta(days=days))
    return write_jsonl(
        tmp_path / "projects" / "garden" / f"{log.session}.jsonl",
        [log.prompt("plan the beds"), log.answer("msg_1", "three beds")],
    )


def test_an_import_of_an_old_log_is_kept_by_retention(tmp_path: Path, user: User) -> None:
    before = timezone.now()
    code, _out, err = run(old_session(tmp_path), "--owner", user.username)
    assert code == 0, err
    conversation = Conversation.objects.get()
    assert conversation.saved_at < before - timedelta(days=89)  # the log's own time is shown
    assert conversation.retained_at >= before  # retention counts from the import
    assert purge("--older-than", "30d", "--dry-run").endswith(
        "would delete 0 conversation(s); 0 held conversation(s) kept\n"
    )
    assert services.purge_conversations(older_than=timedelta(days=30)) == (0, False)
    assert Conversation.objects.count() == 1


def test_retained_at_is_never_before_saved_at_and_follows_every_write_path(
    user: User, make_conversation: MakeConversation
) -> None:
    """Plain messages, tool calls, results, statuses and synthetic rows each take their own
    statement on PostgreSQL and SQLite: each moves ``retained_at`` to the wall clock at least."""
    conversation = make_conversation(owner=user)
    old = timezone.now() - timedelta(days=60)
    future = timezone.now() + timedelta(days=2)

    def stale() -> None:
        Conversation.objects.filter(pk=conversation.pk).update(saved_at=old, retained_at=old)

    writes: list[Any] = [
        lambda at: services.save_messages(
            conversation=conversation, messages=[{"role": "user", "content": "hi"}], times=[at]
        ),
        lambda at: services.save_messages(
            conversation=conversation,
            messages=[
                {"role": "assistant", "content": [{"type": "tool_call", "id": f"c{at}"}]},
            ],
            times=[at],
        ),
        lambda at: services.save_messages(
            conversation=conversation,
            messages=[{"role": "tool", "tool_call_id": f"r{at}", "content": "ok"}],
            times=[at],
        ),
        lambda at: services.set_status(
            conversation=conversation,
            status="idle" if at > old + timedelta(days=1) else "running",
            at=at,
        ),
        lambda at: services.set_status(
            conversation=conversation,
            status="paused",
            pending_ask={"question": f"now? {at}"},
            at=at,
        ),
        lambda at: services.save_synthetic_message(
            conversation=conversation,
            message_type="system",
            content_type="notification",
            content={"text": "x"},
            at=at,
        ),
    ]
    for write in writes:
        for at in (old + timedelta(days=1), future):
            stale()
            started = timezone.now()
            write(at)
            conversation.refresh_from_db()
            assert conversation.saved_at == at
            assert conversation.retained_at >= max(at, started)


def test_the_dry_run_says_why_each_conversation_would_go(
    user: User, make_conversation: MakeConversation
) -> None:
    old, fresh, held = (make_conversation(owner=user, title=t) for t in ("old", "fresh", "held"))
    child = services.start_conversation(owner=user, parent=old)
    then = timezone.now() - timedelta(days=40)
    Conversation.objects.filter(pk__in=[old.pk, child.pk, held.pk]).update(
        saved_at=then, retained_at=then
    )
    services.place_hold(conversation=held, reason="audit")
    lines = purge("--older-than", "30d", "--dry-run").splitlines()
    assert lines[-1] == "would delete 2 conversation(s); 1 held conversation(s) kept"
    explained = {line.split(":", 1)[0]: line for line in lines[:-1]}
    assert set(explained) == {f"would delete {old.pk}", f"keep {held.pk}"}
    why = explained[f"would delete {old.pk}"]
    assert f"retained_at {iso(then)}" in why
    assert "--older-than 30d: retained_at before " in why
    assert "with 1 child conversation(s)" in why
    assert "held" in explained[f"keep {held.pk}"]
    assert str(fresh.pk) not in "\n".join(lines)
    assert Conversation.objects.count() == 4
    by_owner = purge("--owner", user.username, "--dry-run")
    assert f"--owner {user.username}" in by_owner
    assert by_owner.endswith("would delete 3 conversation(s); 1 held conversation(s) kept\n")


ORGANISING: list[tuple[str, Any]] = [
    ("rename", lambda c: services.update_conversation(conversation=c, title="renamed")),
    ("tag", lambda c: services.update_conversation(conversation=c, tags=["garden"])),
    ("pin", lambda c: services.update_conversation(conversation=c, pinned=True)),
    ("archive", lambda c: services.update_conversation(conversation=c, archived=True)),
    ("metadata", lambda c: services.update_conversation(conversation=c, metadata={"k": 1})),
]


@pytest.mark.parametrize("action", [pytest.param(a, id=name) for name, a in ORGANISING])
def test_organising_moves_neither_saved_at_nor_retained_at(
    action: Any,
    user: User,
    make_conversation: MakeConversation,
    django_capture_on_commit_callbacks: Any,
) -> None:
    older, newer = make_conversation(owner=user), make_conversation(owner=user)
    for n, conversation in enumerate((older, newer)):
        then = timezone.now() - timedelta(days=10 - n)
        services.save_messages(
            conversation=conversation, messages=[{"role": "user", "content": "x"}], times=[then]
        )
        Conversation.objects.filter(pk=conversation.pk).update(saved_at=then, retained_at=then)
    older.refresh_from_db()
    before = (older.saved_at, older.retained_at, older.last_event_seq)
    saved: list[dict[str, Any]] = []

    def receiver(**kwargs: Any) -> None:
        saved.append(kwargs)

    conversation_saved.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            action(older)
    finally:
        conversation_saved.disconnect(receiver)
    older.refresh_from_db()
    assert (older.saved_at, older.retained_at) == before[:2]
    assert older.last_event_seq == before[2] + 1  # still a write: clients hear of it
    assert [kwargs["conversation"].pk for kwargs in saved] == [older.pk]
    # The sidebar's order (newest message first) is unchanged by anything but pinning.
    listed = [c.pk for c in Conversation.objects.newest_first()]
    assert listed == [newer.pk, older.pk]
    if not older.archived:
        shown = [c.pk for c in selectors.organised(Conversation.objects.filter(owner=user))]
        assert shown == ([older.pk, newer.pk] if older.pinned else [newer.pk, older.pk])


def test_feedback_moves_neither_saved_at_nor_retained_at(
    user: User, make_conversation: MakeConversation
) -> None:
    conversation = make_conversation(owner=user)
    then = timezone.now() - timedelta(days=3)
    services.save_messages(
        conversation=conversation, messages=[{"role": "user", "content": "x"}], times=[then]
    )
    Conversation.objects.filter(pk=conversation.pk).update(saved_at=then, retained_at=then)
    row = DisplayMessage.objects.get(conversation=conversation)
    services.set_feedback(conversation=conversation, display_message=row, user=user, rating=1)
    services.clear_feedback(conversation=conversation, display_message=row, user=user)
    conversation.refresh_from_db()
    assert (conversation.saved_at, conversation.retained_at) == (then, then)
