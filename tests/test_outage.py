"""Outages seen from inside one process (docs/deployment.md "Outages", docs/websocket.md): a view
whose database fails is retried once (a read) or answered 503 with ``Retry-After`` (a write, or a
read that fails again), pages and API alike; a socket's access check that cannot run is retried
once and otherwise closes 1013, never 4401; a websocket whose channel layer cannot be reached is
accepted, then closed 1013, instead of an HTTP 500; an anonymous share socket assumes no user.

The real restarts (a private PostgreSQL cluster and a private Redis) are in
``test_reliability_outages.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError, connection
from django.test import Client
from pytest_django import Settings

from murmur_conversations import services
from murmur_conversations.models import Conversation, ShareMode
from murmur_conversations.outage import caused_by_database_outage, retry_once, unavailable
from murmur_conversations.realtime import access
from murmur_conversations.realtime.share_stream import SharedConsumer
from tests.api_helpers import token_client, url
from tests.helpers import MakeUser
from tests.realtime_helpers import LOCAL_LAYER, TIMEOUT, connect, db_async, expect_close

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def failing_queries(times: int) -> Iterator[list[str]]:
    """The next ``times`` statements of this thread fail as on a connection a restart killed;
    yields the statements that failed."""
    failed: list[str] = []

    def fail(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        if len(failed) < times:
            failed.append(sql)
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, *args)

    with connection.execute_wrapper(fail):
        yield failed


# ------------------------------------------------------------------------------ HTTP


@pytest.mark.parametrize("route", ["", "display-messages/", "record/", "tool-calls/"])
def test_a_read_on_a_dead_connection_is_retried_once(
    conversation: Conversation, user: User, route: str
) -> None:
    client = token_client(user)
    with failing_queries(1) as failed:
        response = client.get(url(conversation.pk, route))
    assert failed
    assert response.status_code == 200, response.content


def test_a_read_that_fails_again_and_a_write_answer_503_with_retry_after(
    conversation: Conversation, user: User
) -> None:
    client = token_client(user)
    with failing_queries(10):
        read = client.get(url(conversation.pk))
        write = client.patch(url(conversation.pk), {"title": "new"}, format="json")
    for response in (read, write):
        assert response.status_code == 503, response.content
        assert response["Retry-After"] == "2"
        assert response.json()["code"] == "service_unavailable"
    conversation.refresh_from_db()
    assert conversation.title == "Test conversation"  # the write was not retried behind the back


def test_pages_get_the_same_answers(make_user: MakeUser, conversation: Conversation) -> None:
    """The admin (a page, not the API) is retried and answered 503 the same way."""
    staff = make_user(is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)
    page = "/admin/murmur_conversations/conversation/"
    with failing_queries(1):
        assert client.get(page).status_code == 200
    with failing_queries(10):
        response = client.get(page)
    assert response.status_code == 503
    assert response["Retry-After"] == "2"


def test_an_error_that_is_not_an_outage_is_left_alone() -> None:
    assert not unavailable(ValueError("bad"))
    assert unavailable(OperationalError("gone"))
    assert unavailable(ConnectionRefusedError(111, "refused"))
    wrapped = RuntimeError("wrapped")
    wrapped.__context__ = OperationalError("gone")
    assert caused_by_database_outage(wrapped)
    assert not caused_by_database_outage(RuntimeError("alone"))


def test_retry_once_runs_again_only_once() -> None:
    calls: list[int] = []

    def flaky() -> int:
        calls.append(1)
        if len(calls) < 3:
            raise OperationalError("gone")
        return len(calls)

    with pytest.raises(OperationalError):
        retry_once(flaky)
    assert len(calls) == 2
    assert retry_once(flaky) == 3


# ------------------------------------------------------------------------------ websockets


def failing_denials(times: int) -> Callable[..., dict[int, int]]:
    real = access.denials
    calls: list[int] = []

    def denials(accesses: Any) -> dict[int, int]:
        calls.append(1)
        if len(calls) <= times:
            raise OperationalError("server closed the connection unexpectedly")
        return real(accesses)

    return denials


async def test_an_access_check_that_fails_once_is_retried_and_the_frame_arrives(
    monkeypatch: pytest.MonkeyPatch, user: User, conversation: Conversation
) -> None:
    socket = await connect(f"ws/conversations/{conversation.pk}/", user)
    await socket.receive_json_from(timeout=TIMEOUT)  # the snapshot
    monkeypatch.setattr(access, "denials", failing_denials(1))
    await db_async(services.save_message)(
        conversation=conversation, message={"role": "user", "content": "after the blink"}
    )
    frame = await socket.receive_json_from(timeout=TIMEOUT)
    assert frame["type"] == "display_message_saved"
    assert frame["message"]["content"] == {"text": "after the blink"}
    await socket.disconnect()


@pytest.mark.parametrize("path", ["conversation", "sidebar"])
async def test_an_access_check_that_cannot_run_closes_1013_not_4401(
    monkeypatch: pytest.MonkeyPatch, user: User, conversation: Conversation, path: str
) -> None:
    route = (
        f"ws/conversations/{conversation.pk}/" if path == "conversation" else "ws/conversations/"
    )
    socket = await connect(route, user)
    if path == "conversation":
        await socket.receive_json_from(timeout=TIMEOUT)
    monkeypatch.setattr(access, "denials", failing_denials(2))
    await db_async(services.save_message)(
        conversation=conversation, message={"role": "user", "content": "during the outage"}
    )
    await expect_close(socket, 1013)


async def test_a_handshake_whose_channel_layer_is_down_is_accepted_then_closed_1013(
    settings: Settings, user: User, conversation: Conversation
) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "tests.realtime_helpers.UnreachableLayer"}}
    for route in (f"ws/conversations/{conversation.pk}/", "ws/conversations/"):
        socket = await connect(route, user)
        await expect_close(socket, 1013)
    settings.CHANNEL_LAYERS = {"default": LOCAL_LAYER}  # the layer is back: sockets open again
    socket = await connect(f"ws/conversations/{conversation.pk}/", user)
    assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    await socket.disconnect()


# ------------------------------------------------------------------------------ share sockets


async def test_an_anonymous_share_socket_assumes_no_user(
    settings: Settings, user: User, conversation: Conversation
) -> None:
    """The user re-check, the revocation groups and the access of a share socket without a user
    run without one (they read ``user.pk`` of nobody before)."""
    consumer = SharedConsumer()
    await consumer.check_user()
    await consumer.join_revocation()
    assert consumer.joined == []
    assert consumer.user_access(share_hash="h") == access.Access(user_pk=None, share_hash="h")
    consumer.start_tail()
    assert consumer.tail_task is None
    # And through the real wiring, on the process-local layer (which tails the database):
    settings.CHANNEL_LAYERS = {"default": LOCAL_LAYER}
    _share, token = await db_async(services.create_share)(
        conversation=conversation, created_by=user, mode=ShareMode.LIVE
    )
    socket = await connect(f"ws/shared/{token}/")
    assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    await db_async(services.save_message)(
        conversation=conversation, message={"role": "user", "content": "shared"}
    )
    frame = await socket.receive_json_from(timeout=TIMEOUT)
    assert frame["type"] == "display_message_saved"
    await socket.disconnect()
