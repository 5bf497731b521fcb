"""Answering the pending ask (docs/api.md "Answering the pending ask", docs/write-path.md):
``services.answer_pending_ask`` and ``POST conversations/{id}/pending/answer/``: the saved user
message, the cleared ask, one event_seq, the signal after commit, 409 for an ask that is no longer
pending or changed, the usual 404s, CSRF for cookie clients, and the websocket frames."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest_django import DjangoCaptureOnCommitCallbacks
from rest_framework.test import APIClient

from murmur_conversations import services, signals
from murmur_conversations.exceptions import (
    ConversationNotFound,
    InvalidContent,
    NoPendingAsk,
)
from murmur_conversations.models import Conversation, DisplayMessage, Message
from murmur_conversations.representations import display_row
from tests.api_helpers import (
    NOT_FOUND,
    malformed_variants,
    missing_id,
    post_body,
    shape,
    token_client,
    url,
)
from tests.helpers import MakeConversation, MakeUser, Response, assert_counters_match_rows
from tests.import_helpers import JSON
from tests.realtime_helpers import TIMEOUT, connect, db_async

ASK = {"question": "Deploy to production?", "component": {"id": "confirm"}, "pauseData": {"n": 1}}
ANSWER = "answer/"


@pytest.fixture
def answered() -> Iterator[list[dict[str, Any]]]:
    """Every ``pending_answered`` sent, with the signals seen before it (their names)."""
    events: list[dict[str, Any]] = []
    seen: list[str] = []

    def on_answer(sender: object, signal: object = None, **kwargs: Any) -> None:
        events.append({**kwargs, "before": list(seen)})

    def on_other(name: str) -> Callable[..., None]:
        def receiver(sender: object, signal: object = None, **kwargs: Any) -> None:
            seen.append(name)

        return receiver

    others = {
        name: on_other(name)
        for name in ("display_messages_saved", "status_changed", "conversation_saved")
    }
    signals.pending_answered.connect(on_answer, weak=False)
    for name, receiver in others.items():
        getattr(signals, name).connect(receiver, weak=False)
    yield events
    signals.pending_answered.disconnect(on_answer)
    for name, receiver in others.items():
        getattr(signals, name).disconnect(receiver)


def paused(conversation: Conversation, ask: JSON = ASK) -> int:
    """Pause ``conversation`` on ``ask``; returns the event_seq the ask was set at."""
    services.set_status(conversation=conversation, status="paused", pending_ask=ask)
    conversation.refresh_from_db()
    return conversation.last_event_seq


def state(conversation: Conversation) -> tuple[object, ...]:
    """Everything an answer would change."""
    fresh = Conversation.objects.get(pk=conversation.pk)
    return (
        fresh.status,
        fresh.pending_ask,
        fresh.pending_ask_event_seq,
        fresh.record_length,
        fresh.transcript_count,
        fresh.last_seq,
        fresh.last_event_seq,
        fresh.saved_at,
        Message.objects.filter(conversation=fresh).count(),
        DisplayMessage.objects.filter(conversation=fresh).count(),
    )


def post_answer(
    client: APIClient,
    conversation_id: object,
    body: JSON,
    content_type: str = "application/json",
    **extra: Any,
) -> Response:
    return post_body(client, url(conversation_id, "pending/" + ANSWER), body, content_type, **extra)


# ----------------------------------------------------------------------------- the service


@pytest.mark.django_db
def test_service_saves_the_answer_clears_the_ask_in_one_event(
    conversation: Conversation,
    answered: list[dict[str, Any]],
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    services.save_message(conversation=conversation, message={"role": "user", "content": "go"})
    asked_at = paused(conversation)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        rows = services.answer_pending_ask(
            conversation=conversation, answer="Yes, deploy.", expected_event_seq=asked_at
        )
        assert answered == []  # not before commit
    assert len(callbacks) >= 4
    conversation.refresh_from_db()
    assert conversation.last_event_seq == asked_at + 1
    assert (conversation.status, conversation.pending_ask) == ("idle", None)
    assert conversation.pending_ask_event_seq == asked_at + 1
    assert [(r.message_type, r.content_type, r.content) for r in rows] == [
        ("user", "text", {"text": "Yes, deploy."})
    ]
    assert {r.event_seq for r in rows} == {r.created_event_seq for r in rows} == {asked_at + 1}
    last = Message.objects.filter(conversation=conversation).order_by("-position").first()
    assert last is not None
    assert (last.role, last.content) == ("user", "Yes, deploy.")
    assert conversation.transcript_count == 2
    assert_counters_match_rows(conversation)
    [event] = answered
    assert event["conversation"].pk == conversation.pk
    assert event["ask"] == ASK
    assert event["answer"] == "Yes, deploy."
    assert [r.pk for r in event["rows"]] == [r.pk for r in rows]
    assert event["event_seq"] == asked_at + 1
    # after the call's own signals, so live clients have the row and the status first
    assert event["before"] == ["display_messages_saved", "status_changed", "conversation_saved"]


@pytest.mark.django_db
def test_service_sends_nothing_for_a_rolled_back_answer(
    conversation: Conversation,
    answered: list[dict[str, Any]],
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    paused(conversation)
    before = state(conversation)
    with (
        django_capture_on_commit_callbacks(execute=True),
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        services.answer_pending_ask(conversation=conversation.pk, answer="yes")
        raise RuntimeError("the host's outer transaction fails")
    assert answered == []
    assert state(conversation) == before


@pytest.mark.django_db
def test_service_refuses_when_no_ask_is_pending_and_writes_nothing(
    conversation: Conversation, answered: list[dict[str, Any]]
) -> None:
    before = state(conversation)
    with pytest.raises(NoPendingAsk):
        services.answer_pending_ask(conversation=conversation, answer="yes")
    paused(conversation)
    services.answer_pending_ask(conversation=conversation, answer="yes")
    once = state(conversation)
    with pytest.raises(NoPendingAsk):
        services.answer_pending_ask(conversation=conversation, answer="yes again")
    assert state(conversation) == once
    assert before != once


@pytest.mark.django_db
def test_a_stale_event_seq_is_refused_and_an_unchanged_ask_is_not(
    conversation: Conversation,
) -> None:
    first = paused(conversation, {"question": "first?"})
    second = paused(conversation, {"question": "second?"})
    before = state(conversation)
    for stale in (0, first, second - 1):
        with pytest.raises(NoPendingAsk):
            services.answer_pending_ask(
                conversation=conversation, answer="yes", expected_event_seq=stale
            )
        assert state(conversation) == before
    # other writes after the ask leave it answerable at the event_seq the client saw it at
    services.save_message(conversation=conversation, message={"role": "assistant", "content": "?"})
    services.set_status(conversation=conversation, status="interrupted", pending_ask=None)
    third = paused(conversation, {"question": "second?"})
    assert third > second
    with pytest.raises(NoPendingAsk):
        services.answer_pending_ask(
            conversation=conversation, answer="y", expected_event_seq=second
        )
    services.save_message(conversation=conversation, message={"role": "assistant", "content": "!"})
    rows = services.answer_pending_ask(
        conversation=conversation, answer="yes", expected_event_seq=third
    )
    assert rows[0].content == {"text": "yes"}


@pytest.mark.django_db
def test_status_only_changes_keep_the_ask_answerable(conversation: Conversation) -> None:
    asked_at = paused(conversation)
    services.set_status(conversation=conversation, status="interrupted", pending_ask=ASK)
    conversation.refresh_from_db()
    assert conversation.pending_ask_event_seq == asked_at
    services.answer_pending_ask(conversation=conversation, answer="ok", expected_event_seq=asked_at)


@pytest.mark.django_db
def test_cancelling_clears_the_ask_for_good(conversation: Conversation) -> None:
    asked_at = paused(conversation)
    services.cancel_run(conversation=conversation)
    conversation.refresh_from_db()
    assert conversation.pending_ask_event_seq == conversation.last_event_seq > asked_at
    with pytest.raises(NoPendingAsk):
        services.answer_pending_ask(conversation=conversation, answer="too late")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (None, None),
        (5, None),
        (["yes"], None),
        ("", None),
        ("  \n\t", None),
        ("x" * (services.MAX_ANSWER_CHARS + 1), None),
        ("yes", -1),
        ("yes", True),
        ("yes", 1.0),
        ("yes", "3"),
    ],
)
def test_service_refuses_bad_answers_before_writing(
    conversation: Conversation, answer: Any, expected: Any
) -> None:
    paused(conversation)
    before = state(conversation)
    with pytest.raises(InvalidContent):
        services.answer_pending_ask(
            conversation=conversation, answer=answer, expected_event_seq=expected
        )
    assert state(conversation) == before


@pytest.mark.django_db
def test_service_repairs_bad_text_and_takes_the_longest_answer(conversation: Conversation) -> None:
    paused(conversation)
    rows = services.answer_pending_ask(conversation=conversation, answer="a\x00b\ud800")
    assert rows[0].content == {"text": "a\ufffdb\ufffd"}
    paused(conversation)
    longest = "y" * services.MAX_ANSWER_CHARS
    assert services.answer_pending_ask(conversation=conversation, answer=longest)[0].content == {
        "text": longest
    }


@pytest.mark.django_db
def test_service_missing_conversation(conversation: Conversation) -> None:
    for ref in (missing_id(), "nope"):
        with pytest.raises(ConversationNotFound):
            services.answer_pending_ask(conversation=ref, answer="yes")


@pytest.mark.django_db(transaction=True)
async def test_async_twin(conversation: Conversation) -> None:
    await db_async(paused)(conversation)
    rows = await services.aanswer_pending_ask(conversation=conversation.pk, answer="async yes")
    assert rows[0].content == {"text": "async yes"}
    fresh = await Conversation.objects.aget(pk=conversation.pk)
    assert (fresh.status, fresh.pending_ask) == ("idle", None)


# ----------------------------------------------------------------------------- the route


@pytest.fixture
def client(user: User) -> APIClient:
    return token_client(user)


@pytest.fixture
def foreign(make_user: MakeUser, make_conversation: MakeConversation) -> Conversation:
    conversation = make_conversation(owner=make_user(), title="secret")
    paused(conversation)
    return conversation


@pytest.mark.django_db
def test_route_answers_with_the_detail_and_the_saved_rows(
    client: APIClient, conversation: Conversation
) -> None:
    asked_at = paused(conversation)
    response = post_answer(client, conversation.pk, {"answer": "Ship it", "event_seq": asked_at})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"conversation", "messages"}
    assert body["conversation"] == client.get(url(conversation.pk)).json()
    assert body["conversation"]["status"] == "idle"
    assert body["conversation"]["format"] == "conversation-v1"
    rows = DisplayMessage.objects.filter(conversation=conversation).order_by("seq")
    assert body["messages"] == [display_row(r) for r in rows]
    assert body["messages"][0]["content"] == {"text": "Ship it"}
    assert body["messages"][0]["event_seq"] == asked_at + 1
    assert client.get(url(conversation.pk, "pending/")).json() == {"pending": None}
    transcript = client.get(url(conversation.pk, "transcript/")).json()["messages"]
    assert transcript[-1] == {"role": "user", "content": "Ship it"}


@pytest.mark.django_db
def test_route_without_event_seq_and_with_null(
    client: APIClient, conversation: Conversation
) -> None:
    paused(conversation)
    assert post_answer(client, conversation.pk, {"answer": "one"}).status_code == 200
    paused(conversation)
    response = post_answer(client, conversation.pk, {"answer": "two", "event_seq": None})
    assert response.status_code == 200


@pytest.mark.django_db
def test_answering_twice_or_stale_is_409_and_writes_nothing(
    client: APIClient, conversation: Conversation
) -> None:
    first = paused(conversation, {"question": "a?"})
    paused(conversation, {"question": "b?"})
    before = state(conversation)
    stale = post_answer(client, conversation.pk, {"answer": "yes", "event_seq": first})
    assert stale.status_code == 409
    assert stale.json()["code"] == "no_pending_ask"
    assert set(stale.json()) == {"detail", "code"}
    assert state(conversation) == before
    assert post_answer(client, conversation.pk, {"answer": "yes"}).status_code == 200
    after = state(conversation)
    again = post_answer(client, conversation.pk, {"answer": "yes"})
    assert (again.status_code, again.content) == (409, stale.content)
    assert state(conversation) == after


@pytest.mark.django_db
def test_foreign_missing_and_malformed_ids_are_the_one_404(
    client: APIClient, conversation: Conversation, foreign: Conversation
) -> None:
    paused(conversation)
    before = state(foreign)
    ids = [str(foreign.pk), missing_id(), *malformed_variants(conversation)]
    responses = [post_answer(client, i, {"answer": "mine now"}) for i in ids]
    first = shape(responses[0])
    assert first[0] == 404
    assert first[1] == NOT_FOUND
    assert all(shape(r) == first for r in responses)
    # the same 404 body as every other route gives for the foreign id (Allow names the route)
    other = client.get(url(foreign.pk, "pending/"))
    assert (other.status_code, other.content) == first[:2]
    assert state(foreign) == before
    assert Conversation.objects.get(pk=conversation.pk).pending_ask == ASK


@pytest.mark.django_db
def test_only_post_and_the_same_405_for_every_id(
    client: APIClient, conversation: Conversation, foreign: Conversation
) -> None:
    for method in ("get", "put", "patch", "delete"):
        ids = [str(conversation.pk), str(foreign.pk), missing_id(), "nope"]
        responses = [getattr(client, method)(url(i, "pending/" + ANSWER)) for i in ids]
        assert responses[0].status_code == 405
        assert responses[0]["Allow"] == "POST, OPTIONS"
        assert {shape(r) for r in responses} == {shape(responses[0])}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ("", "application/json"),
        ("  ", "application/json"),
        ("[]", "application/json"),
        ('"yes"', "application/json"),
        ("null", "application/json"),
        ("{not json", "application/json"),
        ('{"answer": NaN}', "application/json"),
        ("{}", "application/json"),
        ('{"answer": null}', "application/json"),
        ('{"answer": 5}', "application/json"),
        ('{"answer": ["yes"]}', "application/json"),
        ('{"answer": ""}', "application/json"),
        ('{"answer": " \\n "}', "application/json"),
        ('{"answer": "' + "x" * (services.MAX_ANSWER_CHARS + 1) + '"}', "application/json"),
        ('{"answer": "yes", "event_seq": -1}', "application/json"),
        ('{"answer": "yes", "event_seq": "3"}', "application/json"),
        ('{"answer": "yes", "event_seq": 2.0}', "application/json"),
        ('{"answer": "yes", "event_seq": true}', "application/json"),
        ('{"answer": "yes", "status": "running"}', "application/json"),
        ('{"answer": "yes"}', "text/plain"),
        ("answer=yes", "application/x-www-form-urlencoded"),
        (b"\xff\xfe{", "application/json"),
    ],
)
def test_bad_bodies_are_invalid_field_and_write_nothing(
    client: APIClient, conversation: Conversation, body: str | bytes, content_type: str
) -> None:
    paused(conversation)
    before = state(conversation)
    response = post_answer(client, conversation.pk, body, content_type)
    assert response.status_code == 400, response.content
    assert set(response.json()) == {"detail", "code"}
    assert response.json()["code"] == "invalid_field"
    assert state(conversation) == before


@pytest.mark.django_db
def test_a_bad_body_is_400_even_without_a_pending_ask(
    client: APIClient, conversation: Conversation
) -> None:
    response = post_answer(client, conversation.pk, {"answer": ""})
    assert response.json()["code"] == "invalid_field"


@pytest.mark.django_db
def test_cookie_clients_need_the_csrf_token_first(user: User, conversation: Conversation) -> None:
    paused(conversation)
    before = state(conversation)
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(user)
    for body, content_type in (
        ({"answer": "yes"}, "application/json"),
        ({"answer": "yes"}, "text/plain"),
        ("garbage", "application/json"),
        ("", "application/json"),
    ):
        response = post_answer(browser, conversation.pk, body, content_type)
        assert response.status_code == 403
        assert response.json()["code"] == "permission_denied"
    assert state(conversation) == before
    browser.cookies["csrftoken"] = "a" * 32
    response = post_answer(browser, conversation.pk, {"answer": "yes"}, HTTP_X_CSRFTOKEN="a" * 32)
    assert response.status_code == 200
    assert response.json()["messages"][0]["content"] == {"text": "yes"}


@pytest.mark.django_db
def test_no_credentials(conversation: Conversation) -> None:
    paused(conversation)
    response = post_answer(APIClient(), conversation.pk, {"answer": "yes"})
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


# ----------------------------------------------------------------------------- live


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("private_layer")
async def test_websocket_clients_see_the_row_and_the_status(
    user: User, conversation: Conversation
) -> None:
    asked_at = await db_async(paused)(conversation)
    communicator = await connect(f"ws/conversations/{conversation.pk}/", user)
    snapshot = await communicator.receive_json_from(timeout=TIMEOUT)
    assert (snapshot["type"], snapshot["pending"], snapshot["event_seq"]) == (
        "snapshot",
        ASK,
        asked_at,
    )
    client = await db_async(token_client)(user)
    response = await db_async(post_answer)(
        client, conversation.pk, {"answer": "from the page", "event_seq": asked_at}
    )
    assert response.status_code == 200
    frames = [await communicator.receive_json_from(timeout=TIMEOUT) for _ in range(2)]
    assert [f["type"] for f in frames] == ["display_message_saved", "status_changed"]
    assert {f["event_seq"] for f in frames} == {asked_at + 1}
    assert frames[0]["message"] == response.json()["messages"][0]
    assert (frames[1]["status"], frames[1]["pending"]) == ("idle", None)
    await communicator.disconnect()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
BODIES = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"answer": st.one_of(st.text(max_size=30), json_values)},
        optional={"event_seq": st.one_of(st.integers(min_value=-5, max_value=2**70), json_values)},
    ),
)


@pytest.mark.django_db
def test_no_body_is_a_server_error_and_a_refusal_writes_nothing(
    client: APIClient, conversation: Conversation
) -> None:
    @settings(max_examples=120, deadline=None, derandomize=True)
    @given(body=BODIES)
    def check(body: JSON) -> None:
        if Conversation.objects.get(pk=conversation.pk).pending_ask is None:
            paused(conversation)
        before = state(conversation)
        response = post_answer(client, conversation.pk, body)
        assert response.status_code in (200, 400, 409), (body, response.content)
        if response.status_code == 200:
            assert isinstance(body, dict)
            assert body["answer"].strip()
            assert response.json()["messages"][0]["content"]["text"]
            assert state(conversation)[0:2] == ("idle", None)
        else:
            assert response.json()["code"] in ("invalid_field", "no_pending_ask")
            assert state(conversation) == before

    check()
