"""The staff access log (docs/admin.md "The access log", docs/api.md "Access log"): views of a
conversation by someone who is not its owner are logged once per view, the owner reads them,
nobody edits them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet
from django.test import Client
from pytest_django import Settings
from rest_framework.test import APIClient

from murmur_conversations import services
from murmur_conversations.models import AccessLogEntry, Conversation
from tests.helpers import MakeUser

pytestmark = pytest.mark.django_db


def staff_scope(user: User | AnonymousUser) -> QuerySet[Conversation]:
    """A host's SCOPE: staff read every conversation, others their own."""
    if getattr(user, "is_staff", False) and user.is_active:
        return Conversation.objects.all()
    return Conversation.objects.owned_by(user)


@pytest.fixture
def scoped(settings: Settings) -> None:
    settings.MURMUR_CONVERSATIONS = {"SCOPE": "tests.test_access_log.staff_scope"}


@pytest.fixture
def owner(make_user: MakeUser) -> User:
    return make_user("owner", email="owner@example.org")


@pytest.fixture
def staff(make_user: MakeUser) -> User:
    return make_user(
        "grace", email="grace@example.org", is_staff=True, first_name="Grace", last_name="Hopper"
    )


@pytest.fixture
def owned(owner: User) -> Conversation:
    conversation = services.start_conversation(owner=owner, title="mine")
    services.save_message(conversation=conversation, message={"role": "user", "content": "hi"})
    return conversation


def api(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


ROUTES = {
    "": "api-detail",
    "display-messages/": "api-display-messages",
    "record/": "api-record",
    "transcript/": "api-transcript",
    "tool-calls/": "api-tool-calls",
}


def test_a_scope_reader_is_logged_once_per_view_and_the_owner_never(
    scoped: None, owner: User, staff: User, owned: Conversation
) -> None:
    for route in ROUTES:
        assert api(owner).get(f"/api/conversations/{owned.pk}/{route}").status_code == 200
    assert not AccessLogEntry.objects.exists()
    for route in ROUTES:
        assert api(staff).get(f"/api/conversations/{owned.pk}/{route}?limit=1").status_code == 200
    session = api(staff).post(
        "/api/session/", {"op": "session-transcript", "sessionId": str(owned.pk)}, format="json"
    )
    assert session.status_code == 200
    surfaces = list(AccessLogEntry.objects.order_by("id").values_list("surface", flat=True))
    assert surfaces == [*ROUTES.values(), "api-transcript"]
    assert set(AccessLogEntry.objects.values_list("actor_name", flat=True)) == {"Grace Hopper"}


def test_the_owner_reads_the_log_in_keyset_pages(
    scoped: None, owner: User, staff: User, owned: Conversation
) -> None:
    for _ in range(3):
        api(staff).get(f"/api/conversations/{owned.pk}/")
    url = f"/api/conversations/{owned.pk}/access-log/"
    seen: list[dict[str, str]] = []
    page = api(owner).get(url, {"limit": 2}).json()
    assert page["total"] == 3
    seen += page["results"]
    page = api(owner).get(url, {"limit": 2, "cursor": page["next_cursor"]}).json()
    seen += page["results"]
    assert page["next_cursor"] is None
    assert [set(row) for row in seen] == [{"actor", "at", "surface"}] * 3
    assert {row["actor"] for row in seen} == {"Grace Hopper"}
    assert "grace@example.org" not in str(seen)
    # the access-log route is the owner's only: the staff reader gets the usual 404
    denied = api(staff).get(url)
    assert denied.status_code == 404 and denied.json() == {
        "detail": "Not found.",
        "code": "not_found",
    }
    assert api(owner).get(url, {"cursor": "forged"}).status_code == 400


def test_actor_is_the_username_without_a_full_name_and_never_an_email(
    owned: Conversation, make_user: MakeUser
) -> None:
    plain = make_user("ops-bot", email="ops@example.org")
    by_mail = make_user("someone@example.org", email="someone@example.org")
    entry = services.log_access(conversation=owned, actor=plain, surface="custom")
    assert entry is not None and entry.actor_name == "ops-bot"
    entry = services.log_access(conversation=owned.pk, actor=by_mail, surface="custom")
    assert entry is not None and entry.actor_name == f"user {by_mail.pk}"
    assert services.log_access(conversation=owned, actor=owned.owner, surface="custom") is None


def test_admin_views_are_logged_for_staff_who_do_not_own_it(
    admin_client: Client, admin_user: User, owned: Conversation, owner: User
) -> None:
    change = f"/admin/murmur_conversations/conversation/{owned.pk}/change/"
    assert admin_client.get(change).status_code == 200
    assert admin_client.get(change + "?page=1").status_code == 200
    rows = f"/admin/murmur_conversations/message/?conversation__id__exact={owned.pk}"
    assert admin_client.get(rows).status_code == 200
    message_id = owned.messages.get().pk
    assert (
        admin_client.get(f"/admin/murmur_conversations/message/{message_id}/change/").status_code
        == 200
    )
    entries = list(AccessLogEntry.objects.order_by("id").values_list("surface", "actor"))
    assert entries == [("admin", admin_user.pk)] * 2 + [("admin-rows", admin_user.pk)] * 2
    # the admin's own conversations are not logged
    mine = services.start_conversation(owner=admin_user, title="admin's own")
    admin_client.get(f"/admin/murmur_conversations/conversation/{mine.pk}/change/")
    assert AccessLogEntry.objects.filter(conversation=mine).count() == 0
    # the log itself: per conversation and per staff member, never editable or deletable
    listing = admin_client.get(
        f"/admin/murmur_conversations/accesslogentry/?actor__id__exact={admin_user.pk}"
    )
    assert listing.status_code == 200
    entry = AccessLogEntry.objects.first()
    assert entry is not None
    base = f"/admin/murmur_conversations/accesslogentry/{entry.pk}/"
    assert admin_client.post(base + "delete/", {"post": "yes"}).status_code == 403
    assert admin_client.post(base + "change/", {"surface": "x"}).status_code == 403
    admin_client.post(
        "/admin/murmur_conversations/accesslogentry/",
        {"action": "delete_selected", "_selected_action": [entry.pk], "post": "yes"},
    )
    assert AccessLogEntry.objects.filter(pk=entry.pk).exists()
    assert admin_client.get("/admin/murmur_conversations/accesslogentry/add/").status_code == 403


def test_access_log_entries_go_with_the_conversation(owned: Conversation, staff: User) -> None:
    services.log_access(conversation=owned, actor=staff, surface="admin")
    services.delete_conversation(conversation=owned)
    assert not AccessLogEntry.objects.exists()
