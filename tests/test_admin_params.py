"""The admin's query strings and URLs (docs/admin.md): what a list does not offer is refused the
way Django's admin refuses it (the ``?e=1`` redirect) before any query of the model's table; no
admin URL answers 500 (tables for every model, and hypothesis over changelist query strings and
object URLs); deleting a conversation returns to the conversation list."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.http import StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_conversations import services
from murmur_conversations.models import (
    Conversation,
    ConversationTag,
    DisplayMessage,
    Feedback,
    Message,
    Share,
    SourceRecord,
    ToolCall,
)
from tests.helpers import MakeConversation, MakeUser

pytestmark = pytest.mark.django_db

MODELS = {
    "conversation": Conversation,
    "message": Message,
    "displaymessage": DisplayMessage,
    "toolcall": ToolCall,
    "sourcerecord": SourceRecord,
    "share": Share,
    "feedback": Feedback,
    "conversationtag": ConversationTag,
}
QUICK = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def changelist(model: str) -> str:
    return reverse(f"admin:murmur_conversations_{model}_changelist")


def object_url(model: str, pk: str, view: str = "change") -> str:
    # reverse() would quote the id: build the raw path so odd ids reach the view as typed.
    return f"{changelist(model)}{pk}/{view}/"


@pytest.fixture
def world(make_user: MakeUser, make_conversation: MakeConversation) -> dict[str, str]:
    """One conversation with a row of every admin model, a finished and an interrupted call and a
    pending ask; returns the primary keys the admin's own links use."""
    owner = make_user()
    conversation = make_conversation(owner=owner, title="world", metadata={"k": "v"})
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "text", "text": "two calls"},
                {"type": "tool_call", "id": "ok", "name": "bash", "input": {"cmd": "ls"}},
                {"type": "tool_call", "id": "wait", "name": "ask", "input": {}},
            ],
        },
    )
    services.save_message(
        conversation=conversation, message={"role": "tool", "tool_call_id": "ok", "content": "x"}
    )
    services.update_tool_status(
        conversation=conversation, status="interrupted", tool_info={"call_id": "wait"}
    )
    services.set_status(conversation=conversation, status="paused", pending_ask={"question": "?"})
    services.save_source_records(
        conversation=conversation,
        source="murmur",
        records=[{"source_key": "k", "line_number": 1, "raw": "{}", "record_type": "x"}],
    )
    message = Message.objects.filter(conversation=conversation).first()
    assert message is not None
    services.update_conversation(conversation=conversation, pinned=True, tags=["work"])
    services.create_share(conversation=conversation, created_by=owner)
    services.set_feedback(
        conversation=conversation,
        display_message=DisplayMessage.objects.filter(conversation=conversation).order_by("seq")[0],
        user=owner,
        rating=-1,
        comment="wrong",
    )
    return {
        "conversation": str(conversation.pk),
        "owner": str(owner.pk),
        "message": str(message.pk),
    }


def refused(client: Client, model: str, query: str) -> None:
    """``query`` on ``model``'s changelist is the ``?e=1`` redirect, and the model's table was
    not read."""
    table = MODELS[model]._meta.db_table
    with CaptureQueriesContext(connection) as queries:
        response = client.get(f"{changelist(model)}?{query}")
    assert response.status_code == 302, (model, query, response.status_code)
    assert response["Location"] == f"{changelist(model)}?e=1"
    touched = [q["sql"] for q in queries.captured_queries if table in q["sql"]]
    assert touched == [], (model, query)


# ----------------------------------------------------------------------------- tables

REFUSED = {
    "conversation": [
        "tool_status=bogus",
        "tool_status=",
        "tool_status=FAILED",
        "status__exact=bogus",
        "status__exact=",
        "status__exact=running&status__exact=nope",
        "metadata__contains=X",
        "metadata__k=v",
        "pending_ask__has_key=question",
        "title__regex=(",
        "title__icontains=w",
        "id__in=1,2",
        "bogus=1",
        "created_at__isnull=False",
        "saved_at__gte=not-a-date",
        "saved_at__gte=0000-01-01",
        "created_at__lt=2024-13-45",
        "status__exact=%00",
        "q=%00",
        "%00=1",
    ],
    "message": [
        "content__contains=X",
        "extra__has_key=a",
        "is_error__exact=maybe",
        "role=user",
        "conversation__id__exact=nope",
        "position__gt=1",
    ],
    "displaymessage": [
        "message_type__exact=bogus",
        "content_type__exact=text%00",
        "status__exact=done",
        "metadata__contains=X",
        "content__text=x",
        "message__id__exact=abc",
        "seq=1",
    ],
    "toolcall": [
        "status__exact=bogus",
        "interrupt_reason__exact=because",
        "arguments__contains=x",
        "result__isnull=x",
        "name=%00",
        "call_id=ok",
    ],
    "sourcerecord": [
        "raw__contains=x",
        "source=murmur",
        "line_number__gte=x",
        "conversation__id__exact=%00",
    ],
    "share": [
        "state=bogus",
        "mode__exact=forever",
        "token_hash__startswith=a",
        "snapshot__title=x",
    ],
    "feedback": ["rating=2", "rating=", "comment__contains=x", "user__id__exact=1"],
    "conversationtag": ["name=x", "name__startswith=w"],
}


@pytest.mark.parametrize(
    ("model", "query"), [(m, q) for m, queries in REFUSED.items() for q in queries]
)
def test_what_a_list_does_not_offer_is_refused_before_the_database(
    admin_client: Client, world: dict[str, str], model: str, query: str
) -> None:
    refused(admin_client, model, query)


def offered(world: dict[str, str]) -> dict[str, list[str]]:
    """What the admin's filters and links put in changelist URLs: each must still work."""
    return {
        "conversation": [
            "feedback=down",
            "pinned__exact=1",
            "archived__exact=0",
            "tag=work",
            "status__exact=paused",
            "tool_status=interrupted",
            "tool_status=completed",
            "saved_at__gte=2000-01-01+00%3A00%3A00%2B00%3A00",
            f"owner__id__exact={world['owner']}",
            "q=world",
            f"q={world['conversation']}",
            "o=2.-9",
        ],
        "message": [
            "is_error__exact=0",
            f"conversation__id__exact={world['conversation']}",
            f"q={world['conversation']}",
        ],
        "displaymessage": [
            "message_type__exact=assistant",
            "content_type__exact=tool_call&status__exact=interrupted",
            f"message__id__exact={world['message']}",
            f"conversation__id__exact={world['conversation']}",
        ],
        "toolcall": [
            "status__exact=completed",
            "interrupt_reason__exact=awaiting_input",
            "name=bash",
            f"conversation__id__exact={world['conversation']}",
        ],
        "sourcerecord": [f"conversation__id__exact={world['conversation']}", "q=nope"],
        "share": ["state=active", "mode__exact=snapshot", f"q={world['conversation']}"],
        "feedback": ["rating=-1", f"conversation__id__exact={world['conversation']}"],
        "conversationtag": ["q=WORK", f"conversation__id__exact={world['conversation']}"],
    }


def test_what_the_admin_offers_still_filters(admin_client: Client, world: dict[str, str]) -> None:
    for model, queries in offered(world).items():
        for query in queries:
            response = admin_client.get(f"{changelist(model)}?{query}")
            assert response.status_code == 200, (model, query)
            assert "cl" in response.context
    done = admin_client.get(f"{changelist('toolcall')}?status__exact=completed").context["cl"]
    assert [call.call_id for call in done.result_list] == ["ok"]


@pytest.mark.parametrize(
    ("model", "query"),
    [
        ("conversation", "owner__password__startswith=a"),
        ("conversation", "owner__id__exact=1&owner__username=x"),
        ("message", "conversation__title=x"),
        ("toolcall", "conversation__owner__email=x"),
    ],
)
def test_a_lookup_across_relations_is_djangos_400(
    admin_client: Client, world: dict[str, str], model: str, query: str
) -> None:
    table = MODELS[model]._meta.db_table
    with CaptureQueriesContext(connection) as queries:
        response = admin_client.get(f"{changelist(model)}?{query}")
    assert response.status_code == 400
    assert not [q for q in queries.captured_queries if table in q["sql"]]


ODD_IDS = [
    "nope",
    "0",
    "-1",
    "1.5",
    " 1",
    "\u0661",
    "9" * 30,
    "%00",
    "%E2%98%83",
    "..",
    str(uuid.uuid4()),
    str(uuid.uuid4()).upper(),
    "{12345678-1234-5678-1234-567812345678}",
]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("view", ["change", "delete", "history"])
def test_odd_ids_in_object_urls_are_never_a_server_error(
    admin_client: Client, world: dict[str, str], model: str, view: str
) -> None:
    for pk in ODD_IDS:
        response = admin_client.get(object_url(model, pk, view))
        # " 1" and "\u0661" are 1 to Django's integer fields: a real row (200) for row models.
        assert response.status_code in (200, 302, 403, 404), (model, view, pk)
        if response.status_code == 302:
            assert response["Location"] == reverse("admin:index")


@pytest.mark.parametrize("page", ["0", "-1", "x", "9" * 40, "%00", "\u0661", "1.5", ""])
def test_odd_transcript_pages_are_never_a_server_error(
    admin_client: Client, world: dict[str, str], page: str
) -> None:
    response = admin_client.get(object_url("conversation", world["conversation"]) + f"?page={page}")
    assert response.status_code == 200


# ----------------------------------------------------------------------------- hypothesis

FILTER_KEYS = [
    "tool_status", "status__exact", "status__isnull", "saved_at__gte", "saved_at__lt",
    "saved_at__isnull", "created_at__gte", "created_at__lt", "owner__id__exact", "is_error__exact",
    "message_type__exact", "content_type__exact", "interrupt_reason__exact", "name",
    "conversation__id__exact", "message__id__exact",
]  # fmt: skip
ODD_KEYS = [
    "o", "p", "q", "e", "all", "_facets", "_popup", "_to_field", "metadata__contains",
    "content__contains", "raw__icontains", "pending_ask__question", "id__gt", "owner",
    "conversation", "owner__is_superuser", "seq__lt", "position__in", "created_at__year",
]  # fmt: skip
VALUES = st.one_of(
    st.sampled_from(
        ["", "0", "1", "-1", "-2.1.x", "1.-3.99", "9" * 25, "True", "false", "paused", "failed",
         "interrupted", "worker_lost", "tool_call", "assistant", "bash", "2024-01-01",
         "2024-01-01T00:00:00+23:59", "9999-12-31", "0001-01-01", "\x00", "a\x00b", "\u0661",
         "\U0001f600", "' OR 1=1 --", "%", "_", "id"]
    ),
    st.uuids().map(str),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.text(max_size=12),
)  # fmt: skip
FIELD_LOOKUPS = ["", "__exact", "__contains", "__icontains", "__regex", "__has_key", "__gt", "__in"]


def queries_for(model: str) -> st.SearchStrategy[list[tuple[str, str]]]:
    """Query strings for ``model``'s changelist: its filters' and the admin's keys, lookups on
    every one of its columns, and arbitrary keys, with odd values."""
    columns = [field.name for field in MODELS[model]._meta.concrete_fields]
    lookups = [f"{column}{lookup}" for column in columns for lookup in FIELD_LOOKUPS]
    keys = st.sampled_from(FILTER_KEYS + ODD_KEYS + lookups) | st.text(max_size=10)
    return st.lists(st.tuples(keys, VALUES), max_size=3)


@pytest.mark.parametrize("model", MODELS)
def test_no_changelist_query_string_is_a_server_error(
    admin_client: Client, world: dict[str, str], model: str
) -> None:
    @QUICK
    @given(pairs=queries_for(model))
    def check(pairs: list[tuple[str, str]]) -> None:
        query = urlencode(pairs)
        response = admin_client.get(f"{changelist(model)}?{query}")
        # 200: a list; 302: Django's ?e=1 (or, with ?e=1 given, its "invalid setup" page);
        # 400: a lookup or _to_field Django's admin itself disallows.
        assert response.status_code in (200, 302, 400), (query, response.status_code)
        if response.status_code == 302:
            assert response["Location"] == f"{changelist(model)}?e=1"

    check()


@pytest.mark.parametrize("model", MODELS)
def test_no_object_url_is_a_server_error(
    admin_client: Client, world: dict[str, str], model: str
) -> None:
    @QUICK
    @given(
        pk=st.one_of(st.text(max_size=40), st.integers().map(str), st.uuids().map(str)),
        view=st.sampled_from(["change", "delete", "history"]),
    )
    def check(pk: str, view: str) -> None:
        pk = pk.replace("/", "")
        path = object_url(
            model, pk.replace("%", "%25").replace("?", "%3F").replace("#", "%23"), view
        )
        response = admin_client.get(path)
        assert response.status_code in (200, 302, 403, 404), (path, response.status_code)

    check()


# ----------------------------------------------------------------------------- deleting


def test_deleting_returns_to_the_conversation_list(
    admin_client: Client, world: dict[str, str]
) -> None:
    pk = world["conversation"]
    url = reverse("admin:murmur_conversations_conversation_delete", args=[pk])
    response = admin_client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert response["Location"] == changelist("conversation")
    assert not Conversation.objects.filter(pk=pk).exists()
    page = admin_client.get(response["Location"])
    assert "was deleted successfully" in page.text


def test_deleting_keeps_the_lists_filters(
    client: Client, make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    from django.contrib.auth.models import Permission

    staff = make_user(is_staff=True)
    staff.user_permissions.set(
        Permission.objects.filter(codename__in=["view_conversation", "delete_conversation"])
    )
    client.force_login(staff)
    doomed = make_conversation(title="doomed")
    filters = urlencode({"_changelist_filters": "status__exact=idle&q=doomed"})
    url = reverse("admin:murmur_conversations_conversation_delete", args=[doomed.pk])
    response = client.post(f"{url}?{filters}", {"post": "yes"})
    assert response.status_code == 302
    assert response["Location"] == f"{changelist('conversation')}?status__exact=idle&q=doomed"
    assert not Conversation.objects.filter(pk=doomed.pk).exists()


# ----------------------------------------------------------------------------- actions


def drain(response: HttpResponseBase) -> None:
    """Read a streamed answer (an export) to its end, which closes its file (the test client
    closes a streamed response when its content is exhausted)."""
    if isinstance(response, StreamingHttpResponse):
        response.getvalue()


BAD_SELECTIONS = [["nope"], ["%00"], ["\x00"], ["9" * 30], ["", " "], [str(uuid.uuid4()).upper()]]


@pytest.mark.parametrize("action", ["export_murmur_jsonl", "delete_selected", "bogus", ""])
@pytest.mark.parametrize("selected", BAD_SELECTIONS)
def test_actions_on_ids_that_name_no_row_change_nothing(
    admin_client: Client, world: dict[str, str], action: str, selected: list[str]
) -> None:
    before = Conversation.objects.count()
    for extra in ({}, {"post": "yes"}, {"index": "x"}, {"select_across": "0"}):
        body = {"action": action, "index": "0", "_selected_action": selected, **extra}
        response = admin_client.post(changelist("conversation"), body)
        drain(response)
        assert response.status_code in (200, 302), (action, selected, extra)
    assert Conversation.objects.count() == before


def test_an_action_keeps_the_valid_ids_among_bad_ones(
    admin_client: Client, world: dict[str, str]
) -> None:
    response = admin_client.post(
        changelist("conversation"),
        {
            "action": "delete_selected",
            "index": "0",
            "post": "yes",
            "_selected_action": ["nope", world["conversation"], "\x00"],
        },
    )
    drain(response)
    assert response.status_code == 302
    assert not Conversation.objects.filter(pk=world["conversation"]).exists()


@pytest.mark.parametrize("model", MODELS)
def test_no_action_post_is_a_server_error(
    admin_client: Client, world: dict[str, str], model: str
) -> None:
    @QUICK
    @given(
        action=st.sampled_from(["export_murmur_jsonl", "delete_selected", "bogus", ""]),
        selected=st.lists(st.one_of(st.text(max_size=40), st.uuids().map(str)), max_size=3),
        index=st.sampled_from(["0", "1", "x", "-1", "9" * 30]),
    )
    def check(action: str, selected: list[str], index: str) -> None:
        body = {"action": action, "index": index, "_selected_action": selected}
        response = admin_client.post(changelist(model), body)
        drain(response)
        assert response.status_code in (200, 302), (body, response.status_code)

    check()
