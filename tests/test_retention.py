"""Retention with legal holds (docs/deployment.md "Retention and holds"): holds stop every delete,
purges remove everything else from every table the app owns, concurrent purges do not collide."""

from __future__ import annotations

import io
import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connections, models
from django.db.models import ProtectedError
from django.test import Client
from django.utils import timezone
from pytest_django import Settings
from rest_framework.test import APIClient

from murmur_conversations import selectors, services
from murmur_conversations.exceptions import ConversationHeld
from murmur_conversations.models import Conversation, Hold
from tests.helpers import MakeConversation, MakeUser

pytestmark = pytest.mark.django_db

NO_REASON: Any = None  # where place_hold is given the wrong type on purpose


def fill(conversation: Conversation, staff: User | None = None) -> None:
    """Rows in every table: record, display rows, tool calls, source records, redaction counts,
    an access log entry."""
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "user", "content": "token ghp_" + "a1B2c3D4e5" * 4},
            {"role": "assistant", "content": [{"type": "tool_call", "id": "c1", "name": "sh"}]},
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ],
        source="murmur",
        source_records=[{"source_key": "k1", "line_number": 1, "raw": "{}"}],
    )
    if staff is not None:
        services.log_access(conversation=conversation, actor=staff, surface="admin")


def age(conversation: Conversation, days: int) -> None:
    then = timezone.now() - timedelta(days=days)
    Conversation.objects.filter(pk=conversation.pk).update(saved_at=then, retained_at=then)


def rows_referring_to(pks: set[uuid.UUID]) -> dict[str, int]:
    """Rows of every model of the app (found through the app registry, so new tables are
    covered) that refer to one of ``pks`` through a relation to Conversation."""
    found: dict[str, int] = {}
    for model in apps.get_app_config("murmur_conversations").get_models():
        if model is Conversation:
            count = model._default_manager.filter(pk__in=pks).count()
        else:
            fields = [
                f
                for f in model._meta.get_fields()
                if isinstance(f, models.ForeignKey | models.OneToOneField)
                and f.related_model is Conversation
            ]
            count = sum(
                model._default_manager.filter(**{f"{f.name}__in": pks}).count() for f in fields
            )
        if count:
            found[model.__name__] = count
    return found


def test_a_held_conversation_cannot_be_deleted_by_anyone(
    make_user: MakeUser, conversation: Conversation
) -> None:
    staff = make_user(is_staff=True)
    hold = services.place_hold(conversation=conversation, reason="Case 42", placed_by=staff)
    assert hold.placed_by == staff and selectors.is_held(conversation)
    with pytest.raises(ConversationHeld):
        services.delete_conversation(conversation=conversation)
    owner = conversation.owner
    assert owner is not None
    client = APIClient()
    client.force_authenticate(owner)
    response = client.delete(f"/api/conversations/{conversation.pk}/")
    assert response.status_code == 409
    assert response.json()["code"] == "conversation_held"
    with pytest.raises(ProtectedError):  # the owner's account cannot take it along either
        owner.delete()
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    services.place_hold(conversation=conversation, reason="Case 43")  # a second: new reason
    assert Hold.objects.get().reason == "Case 43"
    assert services.release_hold(conversation=conversation) is True
    assert services.release_hold(conversation=conversation) is False
    services.delete_conversation(conversation=conversation)
    assert not Conversation.objects.filter(pk=conversation.pk).exists()


def test_a_hold_needs_a_reason(conversation: Conversation) -> None:
    from murmur_conversations.exceptions import InvalidContent

    for reason in ("", "   ", NO_REASON):
        with pytest.raises(InvalidContent):
            services.place_hold(conversation=conversation, reason=reason)
    assert not Hold.objects.exists()


def test_purge_removes_every_row_of_every_table_and_keeps_held_ones(
    make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    staff = make_user(is_staff=True)
    old, held, recent = (make_conversation(title=t) for t in ("old", "held", "recent"))
    for conversation in (old, held, recent):
        fill(conversation, staff)
    age(old, 40)
    age(held, 40)
    services.place_hold(conversation=held, reason="litigation")
    deleted, more = services.purge_conversations(older_than=timedelta(days=30), batch_size=1)
    assert (deleted, more) == (1, False)
    assert rows_referring_to({old.pk}) == {}
    assert rows_referring_to({held.pk})["Message"] == 3
    assert rows_referring_to({recent.pk})["AccessLogEntry"] == 1


def test_purge_by_owner_in_batches_reports_progress(
    make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    owner = make_user()
    for n in range(5):
        fill(make_conversation(owner=owner, title=f"c{n}"))
    seen: list[int] = []
    assert services.purge_conversations(
        owner=owner, limit=3, batch_size=2, progress=seen.append
    ) == (
        3,
        True,
    )
    assert seen == [2, 1]
    assert services.purge_conversations(owner=owner) == (2, False)


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("purge_conversations", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_the_command_dry_run_owner_and_retention_days(
    settings: Settings, make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    owner = make_user()
    old, held = make_conversation(owner=owner), make_conversation(owner=owner)
    age(old, 10)
    age(held, 10)
    services.place_hold(conversation=held, reason="audit")
    assert run("--older-than", "7d", "--dry-run").endswith(
        "\nwould delete 1 conversation(s); 1 held conversation(s) kept\n"
    )
    assert Conversation.objects.count() == 2
    with pytest.raises(CommandError) as refused:
        run()
    assert refused.value.returncode == 2
    settings.MURMUR_CONVERSATIONS = {"RETENTION_DAYS": 30}
    assert run().startswith("deleted 0 conversation(s)")
    settings.MURMUR_CONVERSATIONS = {"RETENTION_DAYS": 7}
    assert run() == "deleted 1 conversation(s); 1 held conversation(s) kept\n"
    assert (
        run("--owner", owner.username) == "deleted 0 conversation(s); 1 held conversation(s) kept\n"
    )
    for bad in (
        ["--older-than", "soon"],
        ["--owner", "nobody"],
        ["--older-than", "1d", "--batch-size", "0"],
    ):
        with pytest.raises(CommandError) as refused:
            run(*bad)
        assert refused.value.returncode == 2


def test_age_spellings() -> None:
    from murmur_conversations.management.commands.purge_conversations import parse_age

    assert parse_age("30d") == parse_age("30") == timedelta(days=30)
    assert parse_age("2w") == timedelta(weeks=2)
    assert parse_age("12h") == timedelta(hours=12)
    assert parse_age("90m") == timedelta(minutes=90)


@pytest.mark.django_db(transaction=True)
def test_concurrent_purges_do_not_collide(
    make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    owner = make_user()
    made = [make_conversation(owner=owner, title=f"c{n}") for n in range(24)]
    for conversation in made:
        age(conversation, 40)
    services.place_hold(conversation=made[0], reason="kept")
    barrier = threading.Barrier(3)
    results: list[int] = []
    errors: list[Exception] = []

    def purge() -> None:
        try:
            barrier.wait()
            total = 0
            while True:
                deleted, more = services.purge_conversations(
                    older_than=timedelta(days=30), batch_size=3
                )
                total += deleted
                if not more:
                    break
            results.append(total)
        except Exception as error:  # asserted below
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=purge) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sum(results) == 23
    assert list(Conversation.objects.values_list("pk", flat=True)) == [made[0].pk]


def test_the_admin_refuses_to_delete_a_held_conversation(
    admin_client: Client, conversation: Conversation
) -> None:
    services.place_hold(conversation=conversation, reason="legal")
    url = f"/admin/murmur_conversations/conversation/{conversation.pk}/delete/"
    page = admin_client.get(url)
    assert b"legal hold" in page.content
    admin_client.post(url, {"post": "yes"})
    admin_client.post(
        "/admin/murmur_conversations/conversation/",
        {"action": "delete_selected", "_selected_action": [conversation.pk], "post": "yes"},
    )
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    listing = admin_client.get("/admin/murmur_conversations/conversation/?held=yes")
    assert str(conversation.pk).encode() in listing.content


def test_holds_are_set_in_the_admin_by_staff_allowed_to(
    admin_client: Client, client: Client, make_user: MakeUser, conversation: Conversation
) -> None:
    url = f"/admin/murmur_conversations/conversation/{conversation.pk}/hold/"
    page = admin_client.get(f"/admin/murmur_conversations/conversation/{conversation.pk}/change/")
    assert b"Place a hold" in page.content
    admin_client.post(url, {"action": "place", "reason": "Case 7"})
    assert Hold.objects.get(conversation=conversation).reason == "Case 7"
    page = admin_client.get(f"/admin/murmur_conversations/conversation/{conversation.pk}/change/")
    assert b"Case 7" in page.content and b"Release the hold" in page.content
    viewer = make_user(is_staff=True)
    from django.contrib.auth.models import Permission

    viewer.user_permissions.add(Permission.objects.get(codename="view_conversation"))
    client.force_login(viewer)
    assert client.post(url, {"action": "release"}).status_code == 403
    assert (
        b"Place a hold"
        not in client.get(
            f"/admin/murmur_conversations/conversation/{conversation.pk}/change/"
        ).content
    )
    assert admin_client.get(url).status_code == 405
    admin_client.post(url, {"action": "release"})
    assert not Hold.objects.exists()
