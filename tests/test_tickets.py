"""Websocket tickets (docs/websocket.md "Connecting", docs/security.md "Credentials"): single-use,
kept server-side in the ticket cache, dead with the session and the API token they were issued
under, accepted in the query string and in ``Sec-WebSocket-Protocol``."""

from __future__ import annotations

import threading
from importlib import import_module

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from murmur_conversations.models import Conversation
from murmur_conversations.tickets import issue_ticket, redeem_ticket, ticket_cache
from tests.api_helpers import API, token_client
from tests.realtime_helpers import TIMEOUT, connect, db_async, expect_close

pytestmark = pytest.mark.django_db


def session_ticket(user: User) -> tuple[Client, str, str]:
    """A browser client signed in as ``user``, its session key, and a ticket issued over it."""
    browser = Client()
    browser.force_login(user)
    key = browser.cookies["sessionid"].value
    csrf = APIClient(enforce_csrf_checks=False)
    csrf.cookies = browser.cookies
    response = csrf.post(f"{API}ws-ticket/")
    assert response.status_code == 200
    return browser, key, response.json()["ticket"]


def test_a_ticket_is_single_use(user: User) -> None:
    ticket = issue_ticket(user=user, session_key=None)
    assert ticket.startswith("mwt_") and len(ticket) == 47
    first = redeem_ticket(ticket)
    assert first is not None and first.user.pk == user.pk
    assert redeem_ticket(ticket) is None


@pytest.mark.django_db(transaction=True)
def test_only_one_of_concurrent_redemptions_wins(user: User) -> None:
    ticket = issue_ticket(user=user, session_key=None)
    results: list[object] = []
    barrier = threading.Barrier(8)

    def redeem() -> None:
        barrier.wait()
        try:
            results.append(redeem_ticket(ticket))
        finally:
            connection.close()

    threads = [threading.Thread(target=redeem) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(result is not None for result in results) == 1


def test_the_store_never_holds_the_ticket_itself(user: User) -> None:
    ticket = issue_ticket(user=user, session_key=None)
    cache = ticket_cache()
    assert cache.get(f"murmur:ws-ticket:{ticket}") is None
    assert redeem_ticket(ticket) is not None


@pytest.mark.parametrize(
    "ending", ["logout", "session deleted", "session flushed by a new login", "expired"]
)
def test_a_ticket_dies_with_its_session(user: User, ending: str) -> None:
    browser, key, ticket = session_ticket(user)
    if ending == "logout":
        browser.logout()
    elif ending == "session deleted":
        Session.objects.filter(session_key=key).delete()
    elif ending == "session flushed by a new login":
        store = import_module(django_settings.SESSION_ENGINE).SessionStore(key)
        store.flush()
    else:
        Session.objects.filter(session_key=key).update(expire_date="2000-01-01T00:00:00Z")
    assert redeem_ticket(ticket) is None


def test_a_session_ticket_names_its_session(user: User) -> None:
    _browser, key, ticket = session_ticket(user)
    redeemed = redeem_ticket(ticket)
    assert redeemed is not None and redeemed.session_key == key
    assert redeemed.credential is None


def test_a_ticket_dies_with_its_api_token(user: User) -> None:
    client = token_client(user)
    ticket = client.post(f"{API}ws-ticket/").json()["ticket"]
    spare = client.post(f"{API}ws-ticket/").json()["ticket"]
    redeemed = redeem_ticket(spare)
    assert redeemed is not None and redeemed.credential == ("authtoken.token", user.auth_token.key)
    Token.objects.filter(user=user).delete()
    assert redeem_ticket(ticket) is None


def test_a_ticket_dies_with_deactivation(user: User) -> None:
    ticket = issue_ticket(user=user, session_key=None)
    user.is_active = False
    user.save()
    assert redeem_ticket(ticket) is None


@pytest.mark.parametrize("value", [None, 5, "", "mwt_", "mwt_" + "a" * 42, "mwt_" + "\ud800" * 43])
def test_malformed_tickets_redeem_nothing(value: object) -> None:
    assert redeem_ticket(value) is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("private_layer")
async def test_a_used_ticket_opens_no_second_socket(user: User, conversation: Conversation) -> None:
    ticket = await db_async(issue_ticket)(user=user, session_key=None)
    path = f"ws/conversations/{conversation.pk}/?ticket={ticket}"
    first = await connect(path)
    assert (await first.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    await expect_close(await connect(path), 4401)
    await first.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("private_layer")
async def test_a_ticket_in_sec_websocket_protocol(user: User, conversation: Conversation) -> None:
    """A browser passes ``["murmur", ticket]`` as protocols and gets ``murmur`` back, never the
    ticket; the address then carries no secret."""
    from channels.routing import get_default_application
    from channels.testing import WebsocketCommunicator

    ticket = await db_async(issue_ticket)(user=user, session_key=None)
    communicator = WebsocketCommunicator(
        get_default_application(),
        f"ws/conversations/{conversation.pk}/",
        subprotocols=["murmur", ticket],
    )
    connected, subprotocol = await communicator.connect(timeout=TIMEOUT)
    assert connected and subprotocol == "murmur"
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    await communicator.disconnect()
    again = WebsocketCommunicator(
        get_default_application(),
        f"ws/conversations/{conversation.pk}/",
        subprotocols=["murmur", ticket],
    )
    await again.connect(timeout=TIMEOUT)
    await expect_close(again, 4401)
    # two tickets (one in the query, one in the header) are refused, like two in the query
    one = await db_async(issue_ticket)(user=user, session_key=None)
    two = await db_async(issue_ticket)(user=user, session_key=None)
    both = WebsocketCommunicator(
        get_default_application(),
        f"ws/conversations/{conversation.pk}/?ticket={one}",
        subprotocols=["murmur", two],
    )
    await both.connect(timeout=TIMEOUT)
    await expect_close(both, 4401)
