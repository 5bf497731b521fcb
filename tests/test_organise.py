"""Organising conversations (docs/api.md "Organising"): pinned, archived and tags set with PATCH,
the list pinned first with archived ones hidden and a tag filter, the sidebar carrying the changes,
and keyset walks that never return a row twice while pins change."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pytest_django import DjangoCaptureOnCommitCallbacks

from murmur_conversations import services, signals
from murmur_conversations.exceptions import InvalidContent
from murmur_conversations.models import Conversation, ConversationTag
from murmur_conversations.representations import summary_row
from murmur_conversations.validation import MAX_TAG_CHARS, TAG_PATTERN, clean_tag
from tests.api_helpers import API, token_client, url
from tests.helpers import MakeConversation, MakeUser

pytestmark = pytest.mark.django_db

LIST = f"{API}conversations/"


def ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


def test_patch_sets_pinned_archived_and_tags(conversation: Conversation, user: User) -> None:
    client = token_client(user)
    before = conversation.last_event_seq
    response = client.patch(
        url(conversation.pk),
        {"pinned": True, "archived": True, "tags": [" Work ", "urgent", "work", "Q3  plan"]},
        format="json",
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["pinned"], body["archived"], body["tags"]) == (
        True,
        True,
        ["work", "urgent", "q3 plan"],
    )
    conversation.refresh_from_db()
    assert conversation.last_event_seq == before + 1
    assert sorted(ConversationTag.objects.values_list("name", flat=True)) == [
        "q3 plan",
        "urgent",
        "work",
    ]
    client.patch(url(conversation.pk), {"tags": ["urgent", "later"]}, format="json")
    assert sorted(ConversationTag.objects.values_list("name", flat=True)) == ["later", "urgent"]
    conversation.refresh_from_db()
    event = conversation.last_event_seq
    client.patch(url(conversation.pk), {"tags": ["URGENT", "later"], "pinned": True}, format="json")
    conversation.refresh_from_db()
    assert conversation.last_event_seq == event  # nothing changed: no event


@pytest.mark.parametrize(
    "body",
    [
        {"pinned": "yes"},
        {"archived": 1},
        {"tags": "work"},
        {"tags": [1]},
        {"tags": [""]},
        {"tags": ["   "]},
        {"tags": ["x" * 33]},
        {"tags": ["a\u0007b"]},
        {"tags": [f"t{i}" for i in range(21)]},
        {"starred": True},
    ],
)
def test_bad_organising_values_are_400_and_change_nothing(
    conversation: Conversation, user: User, body: Any
) -> None:
    response = token_client(user).patch(url(conversation.pk), body, format="json")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_field")
    conversation.refresh_from_db()
    assert (conversation.pinned, conversation.archived, conversation.tags) == (False, False, [])


def test_service_refuses_bad_values(conversation: Conversation) -> None:
    for kwargs in ({"pinned": None}, {"archived": "no"}, {"tags": None}, {"tags": ["a", 2]}):
        with pytest.raises(InvalidContent):
            services.update_conversation(conversation=conversation, **kwargs)


def test_the_list_is_pinned_first_hides_archived_and_filters_by_tag(
    user: User, make_conversation: MakeConversation
) -> None:
    a, b, c, d = (make_conversation(title=name) for name in "abcd")
    services.update_conversation(conversation=b, pinned=True, tags=["work"])
    services.update_conversation(conversation=c, archived=True, tags=["work"])
    services.update_conversation(conversation=d, tags=["home"])
    services.update_conversation(conversation=a, title="a2")  # organising moves no date
    client = token_client(user)
    assert ids(client.get(LIST)) == [str(b.pk), str(d.pk), str(a.pk)]
    assert client.get(LIST).json()["total"] == 3
    assert ids(client.get(LIST + "?archived=1")) == [str(c.pk)]
    assert ids(client.get(LIST + "?archived=all")) == [str(b.pk), str(d.pk), str(c.pk), str(a.pk)]
    assert ids(client.get(LIST + "?tag=work")) == [str(b.pk)]
    assert ids(client.get(LIST + "?tag=WORK&archived=all")) == [str(b.pk), str(c.pk)]
    assert ids(client.get(LIST + "?tag=none")) == []
    assert ids(client.get(LIST + "?tag=&archived=")) == ids(client.get(LIST))


@pytest.mark.parametrize("query", ["?archived=yes", "?archived=2", "?tag=" + "x" * 40, "?tag=%07"])
def test_bad_list_filters_are_400(user: User, query: str) -> None:
    response = token_client(user).get(LIST + query)
    assert (response.status_code, response.json()["code"]) == (400, "invalid_filter")


def test_a_cursor_is_bound_to_its_filters(user: User, make_conversation: MakeConversation) -> None:
    for _ in range(3):
        make_conversation()
    client = token_client(user)
    cursor = client.get(LIST + "?limit=1").json()["next_cursor"]
    response = client.get(LIST + f"?limit=1&archived=all&cursor={cursor}")
    assert response.json()["code"] == "invalid_cursor"


def test_the_sidebar_signal_carries_the_new_fields(
    conversation: Conversation, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    heard = []

    def listen(
        sender: object, conversation: Conversation, event_seq: int, **kwargs: object
    ) -> None:
        heard.append(summary_row(conversation))

    signals.conversation_saved.connect(listen)
    signals.conversation_updated.connect(listen)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            services.update_conversation(conversation=conversation, pinned=True, tags=["x"])
    finally:
        signals.conversation_saved.disconnect(listen)
        signals.conversation_updated.disconnect(listen)
    assert len(heard) == 2
    assert all((row["pinned"], row["tags"]) == (True, ["x"]) for row in heard)


def test_deleting_a_conversation_deletes_its_tags(conversation: Conversation) -> None:
    services.update_conversation(conversation=conversation, tags=["a", "b"])
    services.delete_conversation(conversation=conversation)
    assert not ConversationTag.objects.exists()


# ----------------------------------------------------------------------------- walks


operation = st.tuples(
    st.sampled_from(["pin", "unpin", "archive", "unarchive", "rename", "none"]),
    st.integers(min_value=0, max_value=11),
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    pinned=st.lists(st.booleans(), min_size=12, max_size=12),
    limit=st.integers(min_value=1, max_value=5),
    changes=st.lists(st.lists(operation, max_size=3), max_size=12),
)
def test_a_walk_never_repeats_a_row_and_returns_every_unchanged_one(
    make_user: MakeUser, pinned: list[bool], limit: int, changes: list[list[tuple[str, int]]]
) -> None:
    owner = make_user()
    conversations = [services.start_conversation(owner=owner, title=f"c{i}") for i in range(12)]
    for conversation, pin in zip(conversations, pinned, strict=True):
        if pin:
            services.update_conversation(conversation=conversation, pinned=True)
    client = token_client(owner)
    changed: set[str] = set()
    seen: list[str] = []
    query, step = f"?limit={limit}", 0
    while True:
        body = client.get(LIST + query).json()
        seen += [row["id"] for row in body["results"]]
        pins = [row["pinned"] for row in body["results"]]
        assert pins == sorted(pins, reverse=True)
        if body["next_cursor"] is None:
            break
        for kind, index in changes[step] if step < len(changes) else []:
            target = conversations[index]
            if kind == "none":
                continue
            fields: dict[str, dict[str, Any]] = {
                "pin": {"pinned": True},
                "unpin": {"pinned": False},
                "archive": {"archived": True},
                "unarchive": {"archived": False},
                "rename": {"title": f"r{step}"},
            }
            services.update_conversation(conversation=target, **fields[kind])
            changed.add(str(target.pk))
        step += 1
        query = f"?limit={limit}&cursor={body['next_cursor']}"
    assert len(seen) == len(set(seen)), "a row came twice"
    listed = {
        str(pk)
        for pk in Conversation.objects.filter(owner=owner, archived=False).values_list(
            "pk", flat=True
        )
    }
    assert listed - changed <= set(seen), "an unchanged row was missed"
    assert set(seen) <= {str(c.pk) for c in conversations}
    Conversation.objects.filter(owner=owner).delete()


def test_a_secret_in_a_tag_is_redacted(conversation: Conversation) -> None:
    secret = "AK" + "IA" + "Z7QX3MNB5KLP2RTV"  # an access key's shape, upper case as found
    services.update_conversation(conversation=conversation, tags=["ok", secret])
    conversation.refresh_from_db()
    assert conversation.tags == ["ok", "[redacted:aws-access-key]"]
    assert sorted(ConversationTag.objects.values_list("name", flat=True)) == sorted(
        conversation.tags
    )


@given(
    before=st.text(max_size=5),
    control=st.characters(categories=["Cc"]).filter(lambda ch: not ch.isspace()),
    after=st.text(max_size=5),
)
def test_every_control_character_in_a_tag_is_refused(before: str, control: str, after: str) -> None:
    """NUL included: it is refused like the others, not repaired to U+FFFD and stored."""
    with pytest.raises(InvalidContent, match="control characters"):
        clean_tag(f"{before}x{control}{after}")


@pytest.mark.parametrize("invisible", ["\u00ad", "\u200b", "\u202e", "\u2066", "\ufeff"])
def test_invisible_format_characters_in_a_tag_are_refused(invisible: str) -> None:
    with pytest.raises(InvalidContent, match="control characters"):
        clean_tag(f"a{invisible}b")


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.text(max_size=MAX_TAG_CHARS))
def test_the_schema_pattern_of_a_tag_is_the_rule(raw: str) -> None:
    """The OpenAPI schema's pattern (with its length limit) accepts exactly the tags
    ``clean_tag`` accepts, so schema and server agree (lower-casing that lengthens a tag aside)."""
    try:
        clean_tag(raw)
        accepted = True
    except InvalidContent:
        accepted = False
    if len(" ".join(raw.split()).lower()) <= MAX_TAG_CHARS:
        assert accepted == bool(re.search(TAG_PATTERN, raw)), repr(raw)
