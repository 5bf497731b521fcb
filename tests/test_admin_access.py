"""Every admin page that shows or tests an owner's content writes the access log (docs/admin.md
"The access log"): the walk takes every URL of every model admin of the app from the admin
site's registry and URL patterns (lists, searched lists, change, history and delete pages) and
every action's page, and any page whose body holds a word planted in the owner's conversation
must have written an entry for the staff member who read it. The lists are searched for another
word planted beside it, so the search box's echo of the query does not count as content."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin import helpers
from django.contrib.auth.models import User
from django.db.models import Model
from django.http.response import HttpResponseBase
from django.test import Client, RequestFactory
from django.urls import URLPattern, reverse

from murmur_conversations import services
from murmur_conversations.models import AccessLogEntry, Conversation
from tests.helpers import MakeUser

pytestmark = pytest.mark.django_db

APP = "murmur_conversations"


def unique_word() -> str:
    return "".join(random.choice("bcdfghjklmnpqrtvwxz") for _ in range(16))


def planted(owner: User, word: str) -> Conversation:
    """A conversation of ``owner`` with ``word`` in every kind of row the admin shows."""
    conversation = services.start_conversation(
        owner=owner, title=f"about {word}", metadata={"note": word}
    )
    services.save_messages(
        conversation=conversation,
        messages=[
            {"id": "m1", "role": "user", "content": f"tell me {word}"},
            {
                "id": "m2",
                "role": "assistant",
                "content": [{"type": "tool_call", "id": "c1", "name": "sh", "input": {"q": word}}],
            },
            {"id": "m3", "role": "tool", "tool_call_id": "c1", "content": f"found {word}"},
        ],
        source="murmur",
        source_records=[{"source_key": "m1", "line_number": 1, "raw": f'{{"w": "{word}"}}'}],
    )
    services.update_conversation(conversation=conversation, tags=word.split())
    row = conversation.display_messages.order_by("seq").first()
    assert row is not None
    services.set_feedback(
        conversation=conversation, display_message=row, user=owner, rating=1, comment=word
    )
    services.create_share(conversation=conversation, created_by=owner)
    return conversation


def row_of(model: type[Model], conversation: Conversation) -> Model | None:
    """One row of ``model`` that belongs to ``conversation`` (itself for Conversation)."""
    if model is Conversation:
        return conversation
    if not any(f.name == "conversation" for f in model._meta.get_fields()):
        return None
    return model._default_manager.filter(conversation=conversation).first()


def admin_pages(
    conversation: Conversation, search: str
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``(method, url, data)`` of every page of the app's model admins: each named URL pattern,
    with the conversation's row where it takes an object; each list searched for ``search`` and
    for the conversation's id; each action's page for that row."""
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label != APP:
            continue
        row = row_of(model, conversation)
        patterns: list[URLPattern] = model_admin.get_urls()
        for pattern in patterns:
            name = pattern.name
            takes_object = "object_id" in str(pattern.pattern)
            if name is None or (takes_object and row is None):
                continue  # the unnamed one redirects to the change page
            args = [row.pk] if takes_object and row is not None else []
            url = reverse(f"admin:{name}", args=args)
            yield "get", url, {}
            if name.endswith("_changelist"):
                yield "get", url, {"q": search}
                yield "get", url, {"q": str(conversation.pk)}
        if row is None:
            continue
        request = RequestFactory().get("/")
        request.user = User.objects.get(username="walker")
        for action in model_admin.get_actions(request):
            changelist = reverse(f"admin:{APP}_{model._meta.model_name}_changelist")
            yield "post", changelist, {"action": action, helpers.ACTION_CHECKBOX_NAME: [row.pk]}


def body(response: HttpResponseBase) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)  # type: ignore[attr-defined]
    return bytes(getattr(response, "content", b""))


def test_every_admin_page_that_shows_content_writes_the_access_log(make_user: MakeUser) -> None:
    owner = make_user()
    staff = User.objects.create_superuser("walker", password="pw")
    word, search = unique_word(), unique_word()
    conversation = planted(owner, f"{search} {word}")
    client = Client()
    client.force_login(staff)
    shown, unlogged = [], []
    for method, url, data in admin_pages(conversation, search):
        before = AccessLogEntry.objects.filter(actor=staff, conversation=conversation).count()
        response = getattr(client, method)(url, data)
        assert response.status_code < 500, (method, url, data)
        if word.encode() not in body(response):
            continue
        shown.append((method, url, data))
        after = AccessLogEntry.objects.filter(actor=staff, conversation=conversation).count()
        if after == before:
            unlogged.append((method, url, data))
    assert unlogged == []
    # The walk reached the pages it is about: lists, searches, change, history, delete, actions.
    urls = {url for _, url, _ in shown}
    assert len(shown) >= 20, shown
    for view in ("changelist", "change", "history", "delete"):
        name = f"admin:{APP}_conversation_{view}"
        args = [] if view == "changelist" else [conversation.pk]
        assert reverse(name, args=args) in urls, view
    surfaces = set(AccessLogEntry.objects.filter(actor=staff).values_list("surface", flat=True))
    assert surfaces >= {
        "admin",
        "admin-list",
        "admin-search",
        "admin-history",
        "admin-delete",
        "admin-rows",
        "admin-export",
    }


def test_the_owner_reading_their_own_conversation_in_the_admin_logs_nothing(
    make_user: MakeUser,
) -> None:
    owner = User.objects.create_superuser("walker", password="pw")
    word = unique_word()
    conversation = planted(owner, word)
    client = Client()
    client.force_login(owner)
    for method, url, data in admin_pages(conversation, word):
        assert getattr(client, method)(url, data).status_code < 500
    assert not AccessLogEntry.objects.exists()
