"""The read-only admin (docs/admin.md): permissions, fixed query counts, cheap counts,
search and filters, transcript cards, escaping, truncation, paging and deletion through the
services."""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from collections.abc import Iterator
from typing import Any, Protocol

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from murmur_conversations import services, signals
from murmur_conversations.admin.cards import PREVIEW_CHARS, TRANSCRIPT_PAGE_SIZE
from murmur_conversations.admin.conversation import ConversationAdmin
from murmur_conversations.admin.pagination import EstimatedCountPaginator
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    SourceRecord,
    ToolCall,
)
from tests.helpers import MakeConversation, MakeUser

pytestmark = pytest.mark.django_db


class StaffClient(Protocol):
    """The ``staff_client`` fixture: the test client logged in as a new staff user holding these
    permissions (codenames) of this app."""

    def __call__(self, *codenames: str) -> Client: ...


XSS = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
CHILD_MODELS: dict[str, type[Message | DisplayMessage | ToolCall | SourceRecord]] = {
    "message": Message,
    "displaymessage": DisplayMessage,
    "toolcall": ToolCall,
    "sourcerecord": SourceRecord,
}
MODELS = ["conversation", *CHILD_MODELS]


def changelist(model: str) -> str:
    return reverse(f"admin:murmur_conversations_{model}_changelist")


def change(model: str, pk: object) -> str:
    return reverse(f"admin:murmur_conversations_{model}_change", args=[pk])


def delete(pk: object) -> str:
    return reverse("admin:murmur_conversations_conversation_delete", args=[pk])


def fill(conversation: Conversation, tag: str = "") -> None:
    """One of every card type, with script tags in the model's and the tools' text."""
    services.save_message(conversation=conversation, message={"role": "user", "content": XSS})
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "thinking", "text": f"pondering {XSS}"},
                {"type": "text", "text": f"answer {XSS}"},
                {"type": "tool_call", "id": f"ok{tag}", "name": "bash", "input": {"cmd": XSS}},
                {"type": "tool_call", "id": f"bad{tag}", "name": "flaky", "input": {}},
            ],
        },
    )
    services.update_tool_status(
        conversation=conversation,
        status="executing",
        tool_info={"call_id": f"ok{tag}", "display_text": f"running {XSS}"},
    )
    services.save_message(
        conversation=conversation,
        message={"role": "tool", "tool_call_id": f"ok{tag}", "content": f"out {XSS}"},
    )
    services.save_message(
        conversation=conversation,
        message={
            "role": "tool",
            "tool_call_id": f"bad{tag}",
            "content": f"boom {XSS}",
            "is_error": True,
        },
    )
    for content_type, content in (
        ("error", {"text": f"error {XSS}", "error_type": "overloaded"}),
        ("notification", {"text": f"notice {XSS}"}),
        ("image", {"url": f"https://example.com/{XSS}.png"}),
        ("file_reference", {"path": f"notes/{XSS}", "name": "f.txt"}),
        ("structured_data", {"format": "chart", "data": {"k": XSS}}),
        ("todo_snapshot", {"todos": [{"content": XSS, "status": "pending"}]}),
    ):
        services.save_synthetic_message(
            conversation=conversation,
            message_type="system",
            content_type=content_type,
            content=content,
        )
    services.save_source_records(
        conversation=conversation,
        source="murmur",
        records=[{"source_key": f"k{tag}", "line_number": 1, "raw": XSS, "record_type": "x"}],
    )


@pytest.fixture
def staff_client(client: Client, make_user: MakeUser) -> StaffClient:
    """Factory: a client logged in as a staff user with the given codenames of this app."""

    def make(*codenames: str) -> Client:
        staff = make_user(is_staff=True)
        staff.user_permissions.set(
            Permission.objects.filter(
                content_type__app_label="murmur_conversations", codename__in=codenames
            )
        )
        client.force_login(staff)
        return client

    return make


def count_queries(client: Client, url: str) -> tuple[int, CaptureQueriesContext]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(queries.captured_queries), queries


# ----------------------------------------------------------------- permissions


@pytest.mark.parametrize("model", MODELS)
def test_anonymous_and_non_staff_see_nothing(
    client: Client, make_user: MakeUser, conversation: Conversation, model: str
) -> None:
    response = client.get(changelist(model))
    assert response.status_code == 302
    assert "/login/" in response["Location"]
    client.force_login(make_user())  # active, not staff
    response = client.get(changelist(model))
    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_staff_without_permission_is_forbidden(
    staff_client: StaffClient, conversation: Conversation
) -> None:
    client = staff_client()
    assert client.get(changelist("conversation")).status_code == 403
    assert client.get(change("conversation", conversation.pk)).status_code == 403
    assert client.get(delete(conversation.pk)).status_code == 403


def test_view_permission_reads_but_cannot_delete(
    staff_client: StaffClient, conversation: Conversation
) -> None:
    client = staff_client("view_conversation")
    response = client.get(changelist("conversation"))
    assert response.status_code == 200
    assert conversation.title in response.text
    assert "delete_selected" not in response.text
    assert client.get(change("conversation", conversation.pk)).status_code == 200
    assert client.get(delete(conversation.pk)).status_code == 403
    assert client.post(delete(conversation.pk), {"post": "yes"}).status_code == 403
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    assert client.get(changelist("message")).status_code == 403


@pytest.mark.parametrize("model", MODELS)
def test_add_is_forbidden_for_every_model(admin_client: Client, model: str) -> None:
    response = admin_client.get(changelist(model))
    assert response.status_code == 200
    assert reverse(f"admin:murmur_conversations_{model}_add") not in response.text
    assert admin_client.get(reverse(f"admin:murmur_conversations_{model}_add")).status_code == 403
    response = admin_client.post(reverse(f"admin:murmur_conversations_{model}_add"), {})
    assert response.status_code == 403


def test_change_is_forbidden_and_post_changes_nothing(
    admin_client: Client, conversation: Conversation
) -> None:
    fill(conversation)
    response = admin_client.get(change("conversation", conversation.pk))
    assert response.status_code == 200
    assert 'name="_save"' not in response.text
    response = admin_client.post(
        change("conversation", conversation.pk), {"title": "changed", "status": "error"}
    )
    assert response.status_code == 403
    conversation.refresh_from_db()
    assert conversation.title == "Test conversation"
    assert conversation.status == "idle"
    row = DisplayMessage.objects.filter(conversation=conversation).first()
    assert row is not None
    response = admin_client.post(change("displaymessage", row.pk), {"status": "failed"})
    assert response.status_code == 403


@pytest.mark.parametrize("model", list(CHILD_MODELS))
def test_only_conversations_can_be_deleted(
    admin_client: Client, conversation: Conversation, model: str
) -> None:
    fill(conversation)
    obj = CHILD_MODELS[model].objects.first()
    assert obj is not None
    url = reverse(f"admin:murmur_conversations_{model}_delete", args=[obj.pk])
    assert admin_client.get(url).status_code == 403
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    assert "delete_selected" not in admin_client.get(changelist(model)).text


# ----------------------------------------------------------------- deleting


@pytest.fixture
def deleted() -> Iterator[list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []

    def receiver(sender: object, signal: object = None, **kwargs: Any) -> None:
        events.append(kwargs)

    signals.conversation_deleted.connect(receiver, weak=False)
    yield events
    signals.conversation_deleted.disconnect(receiver)


def children_of(pk: uuid.UUID) -> list[int]:
    return [
        model.objects.filter(conversation_id=pk).count()
        for model in (Message, DisplayMessage, ToolCall, SourceRecord)
    ]


def test_delete_confirmation_summarises_without_reading_children(
    admin_client: Client, conversation: Conversation
) -> None:
    fill(conversation)
    conversation.refresh_from_db()
    with CaptureQueriesContext(connection) as queries:
        response = admin_client.get(delete(conversation.pk))
    assert response.status_code == 200
    text = response.text
    assert f"{conversation.record_length} record messages" in text
    assert f"{conversation.last_seq} display messages" in text
    assert "Tool call:" not in text
    assert "Display message:" not in text
    sql = " ".join(q["sql"] for q in queries.captured_queries)
    for table in ("message", "displaymessage", "toolcall", "sourcerecord"):
        assert f"murmur_conversations_{table}" not in sql


def test_delete_view_goes_through_delete_conversation(
    admin_client: Client,
    conversation: Conversation,
    deleted: list[dict[str, Any]],
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    fill(conversation)
    pk, owner_id = conversation.pk, conversation.owner_id
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(delete(pk), {"post": "yes"})
    assert response.status_code == 302
    assert not Conversation.objects.filter(pk=pk).exists()
    assert children_of(pk) == [0, 0, 0, 0]
    assert deleted == [{"conversation_id": pk, "owner_id": owner_id}]


def test_delete_action_goes_through_delete_conversation(
    staff_client: StaffClient,
    make_conversation: MakeConversation,
    deleted: list[dict[str, Any]],
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    keep, *doomed = [make_conversation(title=f"c{i}") for i in range(3)]
    for i, c in enumerate(doomed):
        fill(c, tag=str(i))
    client = staff_client("view_conversation", "delete_conversation")
    data = {"action": "delete_selected", "_selected_action": [str(c.pk) for c in doomed]}
    with CaptureQueriesContext(connection) as queries:
        response = client.post(changelist("conversation"), data)
    assert response.status_code == 200
    assert "display messages" in response.text
    assert "Tool call:" not in response.text
    assert "murmur_conversations_displaymessage" not in " ".join(
        q["sql"] for q in queries.captured_queries
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(changelist("conversation"), {**data, "post": "yes"})
    assert response.status_code == 302
    assert list(Conversation.objects.values_list("pk", flat=True)) == [keep.pk]
    for c in doomed:
        assert children_of(c.pk) == [0, 0, 0, 0]
    assert sorted(str(e["conversation_id"]) for e in deleted) == sorted(str(c.pk) for c in doomed)


# ----------------------------------------------------------------- query counts


def add_rows(conversation: Conversation, start: int, stop: int) -> None:
    services.save_messages(
        conversation=conversation,
        messages=[
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"m{i}"},
                    {"type": "tool_call", "id": f"c{i}", "name": "bash", "input": {"i": i}},
                ],
            }
            for i in range(start, stop)
        ],
        source="murmur",
        source_records=[
            {"source_key": f"s{i}", "line_number": i, "raw": "{}", "record_type": "m"}
            for i in range(start, stop)
        ],
    )


@pytest.mark.parametrize("model", MODELS)
def test_changelist_queries_do_not_grow_with_rows(
    admin_client: Client, make_user: MakeUser, make_conversation: MakeConversation, model: str
) -> None:
    def grow(total: int, have: int) -> None:
        for i in range(have, total):
            c = make_conversation(owner=make_user(), title=f"t{i}")
            add_rows(c, i, i + 1)

    grow(3, 0)
    admin_client.get(changelist(model))  # warm caches (content types, session)
    few, _ = count_queries(admin_client, changelist(model))
    grow(30, 3)
    many, queries = count_queries(admin_client, changelist(model))
    assert few == many, "\n".join(q["sql"] for q in queries.captured_queries)
    response = admin_client.get(changelist(model))
    assert len(response.context["cl"].result_list) >= 30


def test_conversation_page_queries_do_not_grow_with_rows(
    admin_client: Client, conversation: Conversation
) -> None:
    add_rows(conversation, 0, 2)  # 4 display rows
    url = change("conversation", conversation.pk)
    admin_client.get(url)
    few, _ = count_queries(admin_client, url)
    add_rows(conversation, 2, 20)  # 40 display rows
    many, queries = count_queries(admin_client, url)
    assert few == many, "\n".join(q["sql"] for q in queries.captured_queries)


@pytest.mark.parametrize("model", list(CHILD_MODELS))
def test_row_pages_render(admin_client: Client, conversation: Conversation, model: str) -> None:
    fill(conversation)
    manager = CHILD_MODELS[model].objects
    for obj in manager.all():
        response = admin_client.get(change(model, obj.pk))
        assert response.status_code == 200
        assert "<script>alert" not in response.text
    query = f"?conversation__id__exact={conversation.pk}"
    response = admin_client.get(changelist(model) + query)
    assert response.status_code == 200
    assert len(response.context["cl"].result_list) == manager.count()
    assert "<script>alert" not in response.text


# ----------------------------------------------------------------- counts


def test_filtered_count_is_capped(
    admin_client: Client, make_conversation: MakeConversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(EstimatedCountPaginator, "count_cap", 2)
    for i in range(3):
        make_conversation(title=f"c{i}")
    response = admin_client.get(changelist("conversation") + "?status__exact=idle")
    cl = response.context["cl"]
    assert cl.result_count == 2
    assert cl.paginator.count_kind == "capped"
    assert "more than 2" in response.text
    assert ConversationAdmin.show_full_result_count is False
    response = admin_client.get(changelist("conversation") + "?status__exact=running")
    assert response.context["cl"].result_count == 0
    assert response.context["cl"].paginator.count_kind == "exact"


def test_small_unfiltered_count_is_exact(
    admin_client: Client, make_conversation: MakeConversation
) -> None:
    for i in range(3):
        make_conversation(title=f"c{i}")
    cl = admin_client.get(changelist("conversation")).context["cl"]
    assert (cl.result_count, cl.paginator.count_kind) == (3, "exact")


@pytest.mark.postgres
def test_unfiltered_count_is_estimated_on_postgres(
    admin_client: Client, make_conversation: MakeConversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(EstimatedCountPaginator, "estimate_threshold", 1)
    for i in range(3):
        make_conversation(title=f"c{i}")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE murmur_conversations_conversation")
    for i in range(2):  # not in the statistics yet: the estimate stays at 3
        make_conversation(title=f"late{i}")
    with CaptureQueriesContext(connection) as queries:
        response = admin_client.get(changelist("conversation"))
    cl = response.context["cl"]
    assert (cl.result_count, cl.paginator.count_kind) == (3, "estimate")
    assert "about 3" in response.text
    assert not any("COUNT(" in q["sql"].upper() for q in queries.captured_queries)
    assert len(cl.result_list) == 5
    filtered = admin_client.get(changelist("conversation") + "?status__exact=idle")
    assert filtered.context["cl"].paginator.count_kind == "exact"
    assert filtered.context["cl"].result_count == 5


# ----------------------------------------------------------------- search and filters


def found(client: Client, query: str) -> set[str]:
    response = client.get(changelist("conversation") + query)
    assert response.status_code == 200
    return {c.title for c in response.context["cl"].result_list}


def test_search_by_id_owner_and_title_prefix(
    admin_client: Client, make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    alice = make_user("alice", email="alice@example.com")
    bob = make_user("bob", email="bob@example.com")
    first = make_conversation(owner=alice, title="Refactor the parser")
    make_conversation(owner=bob, title="Fix parser bug")
    make_conversation(owner=None, title="alice in the title")
    assert found(admin_client, f"?q={first.pk}") == {"Refactor the parser"}
    assert found(admin_client, f"?q={str(first.pk).upper()}") == {"Refactor the parser"}
    assert found(admin_client, f"?q={uuid.uuid4()}") == set()
    assert found(admin_client, "?q=bob") == {"Fix parser bug"}
    assert found(admin_client, "?q=alice@example.com") == {"Refactor the parser"}
    assert found(admin_client, "?q=alice") == {"Refactor the parser", "alice in the title"}
    assert found(admin_client, "?q=bo") == set()  # owners match exactly
    assert found(admin_client, "?q=Fix par") == {"Fix parser bug"}
    assert found(admin_client, "?q=parsers") == {"Refactor the parser", "Fix parser bug"}
    assert found(admin_client, "?q=parser -fix") == {"Refactor the parser"}
    assert found(admin_client, "?q=the") == set()  # a stop word alone finds nothing
    assert found(admin_client, f"?owner__id__exact={bob.pk}") == {"Fix parser bug"}


def test_search_finds_words_in_messages_through_the_index(
    admin_client: Client, make_conversation: MakeConversation
) -> None:
    talk = make_conversation(title="quiet title")
    make_conversation(title="other")
    services.save_message(
        conversation=talk, message={"role": "assistant", "content": "the tokenizers broke"}
    )
    assert found(admin_client, "?q=tokenizer") == {"quiet title"}
    assert found(admin_client, '?q="tokenizers broke"') == {"quiet title"}
    assert found(admin_client, "?q=" + "x" * 600) == set()  # too long to search: exact only


def test_usage_columns_and_fields(
    admin_client: Client, make_conversation: MakeConversation, settings: Settings
) -> None:
    settings.MURMUR_CONVERSATIONS = {
        "PRICES": {"house": {"input": "1", "output": "2", "cache_read": "0", "cache_write": "0"}}
    }
    talk = make_conversation(title="spent")
    services.save_message(
        conversation=talk,
        message={
            "role": "assistant",
            "model": "house",
            "content": "x",
            "usage": {"input_tokens": 1000, "output_tokens": 500},
        },
    )
    text = admin_client.get(changelist("conversation")).text
    assert "$0.002" in text and "1000" in text
    page = admin_client.get(change("conversation", talk.pk)).text
    assert "$0.002" in page and "&quot;house&quot;" in page


def test_filters_by_status_tool_status_and_date(
    admin_client: Client, make_conversation: MakeConversation
) -> None:
    failing = make_conversation(title="failing")
    fill(failing)
    running = make_conversation(title="running")
    services.set_status(conversation=running, status="running")
    make_conversation(title="quiet")
    assert found(admin_client, "?status__exact=running") == {"running"}
    assert found(admin_client, "?tool_status=failed") == {"failing"}
    assert found(admin_client, "?tool_status=completed") == {"failing"}
    assert found(admin_client, "?tool_status=executing") == set()
    refused = admin_client.get(changelist("conversation") + "?tool_status=nonsense")
    assert (refused.status_code, refused["Location"]) == (302, changelist("conversation") + "?e=1")
    since_2000 = "2000-01-01T00:00:00%2B00:00"
    assert found(admin_client, f"?saved_at__gte={since_2000}") == {"failing", "running", "quiet"}
    assert found(admin_client, f"?saved_at__lt={since_2000}") == set()
    text = admin_client.get(changelist("conversation")).text
    assert "has failed tool calls" in text


def test_owner_is_never_a_dropdown(
    admin_client: Client, make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    for i in range(3):
        make_conversation(owner=make_user(f"owner-{i}"))
    names = [
        f if isinstance(f, str) else getattr(f, "parameter_name", f)
        for f in ConversationAdmin.list_filter
    ]
    assert "owner" not in names
    assert "owner" in ConversationAdmin.raw_id_fields
    text = admin_client.get(changelist("conversation") + "?status__exact=running").text
    assert "owner-0" not in text  # no filter lists owners


def test_tool_calls_filter_by_status_and_name(
    admin_client: Client, conversation: Conversation
) -> None:
    fill(conversation)
    response = admin_client.get(changelist("toolcall") + "?status__exact=failed")
    assert [c.call_id for c in response.context["cl"].result_list] == ["bad"]
    response = admin_client.get(changelist("toolcall") + "?name=bash")
    assert [c.call_id for c in response.context["cl"].result_list] == ["ok"]
    assert change("conversation", conversation.pk) in response.text
    assert "?name=bash" in response.text


# ----------------------------------------------------------------- the transcript


def test_change_page_renders_every_card_type_escaped(
    admin_client: Client, conversation: Conversation
) -> None:
    fill(conversation)
    response = admin_client.get(change("conversation", conversation.pk))
    assert response.status_code == 200
    text = response.text
    for kind in ("text", "thinking", "tool-call", "tool-result", "error", "notice", "data"):
        assert f"murmur-card-{kind}" in text, kind
    assert '<details class="murmur-thinking">' in text
    assert 'murmur-status-completed">completed<' in text
    assert 'murmur-status-failed">failed<' in text
    assert "<script>alert" not in text
    assert text.count(ESCAPED) >= 12  # user, thinking, text, args, display, results, notices...
    assert "<img" not in text


def test_long_payloads_are_cut_with_a_link_to_the_rest(
    admin_client: Client, conversation: Conversation
) -> None:
    long = "x" * (PREVIEW_CHARS + 500) + "TAILMARK"
    services.save_message(conversation=conversation, message={"role": "user", "content": long})
    response = admin_client.get(change("conversation", conversation.pk))
    assert "TAILMARK" not in response.text
    row = DisplayMessage.objects.get(conversation=conversation)
    assert change("displaymessage", row.pk) in response.text
    assert f"of {len(long)} characters" in response.text
    assert "TAILMARK" in admin_client.get(change("displaymessage", row.pk)).text
    listing = admin_client.get(changelist("displaymessage")).text
    assert "TAILMARK" not in listing
    assert "xxx…" in listing


def test_long_conversations_are_paged(admin_client: Client, conversation: Conversation) -> None:
    total = TRANSCRIPT_PAGE_SIZE * 2 + 20
    services.save_messages(
        conversation=conversation,
        messages=[{"role": "user", "content": f"line-{i + 1}."} for i in range(total)],
    )
    url = change("conversation", conversation.pk)

    def seqs(query: str) -> list[int]:
        return [card.seq for card in admin_client.get(url + query).context["transcript"]["cards"]]

    assert seqs("") == list(range(1, TRANSCRIPT_PAGE_SIZE + 1))
    assert seqs("?page=3") == list(range(2 * TRANSCRIPT_PAGE_SIZE + 1, total + 1))
    assert seqs("?page=99") == seqs("?page=3")
    assert seqs("?page=nope") == seqs("?page=1")
    text = admin_client.get(url + "?page=2").text
    assert f"Page 2 of 3 ({total} display rows)" in text
    assert "line-51." in text
    assert "line-50." not in text


# ----------------------------------------------------------------- export


def test_export_action_writes_murmur_jsonl(
    staff_client: StaffClient, make_conversation: MakeConversation
) -> None:
    one, two = make_conversation(title="one"), make_conversation(title="two")
    fill(one, tag="1")
    services.save_message(conversation=two, message={"role": "user", "content": "hi", "id": "m1"})
    client = staff_client("view_conversation")
    data = {"action": "export_murmur_jsonl", "_selected_action": [str(two.pk)]}
    response = client.post(changelist("conversation"), data)
    assert response.status_code == 200
    assert f'filename="{two.pk}.jsonl"' in response["Content-Disposition"]
    body = [json.loads(line) for line in response.getvalue().decode().splitlines()]
    # the murmur format: the conversation's line and the record's times around the record lines
    assert [line for line in body if not str(line.get("type", "")).startswith("murmur.")] == [
        {"role": "user", "content": "hi", "id": "m1"}
    ]
    assert body[0]["type"] == "murmur.conversation" and body[0]["title"] == "two"
    data["_selected_action"] = [str(one.pk), str(two.pk)]
    response = client.post(changelist("conversation"), data)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(response.getvalue()))
    assert sorted(archive.namelist()) == sorted([f"{one.pk}.jsonl", f"{two.pk}.jsonl"])
    lines = [json.loads(line) for line in archive.read(f"{one.pk}.jsonl").decode().splitlines()]
    records = [line for line in lines if not str(line.get("type", "")).startswith("murmur.")]
    assert len(records) == Message.objects.filter(conversation=one).count()
    assert records[0]["content"] == XSS
