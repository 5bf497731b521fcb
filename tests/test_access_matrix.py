"""Access that ends when it ends (docs/security.md, docs/websocket.md "Losing access"): every way
of losing access closes an open socket within 5 seconds and no frame written after the loss
reaches it, for cookie and ticket sockets, on the layer of the run (process-local, or Redis with
``REDIS_URL``). No sleeps: each test waits for the close with a deadline."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser, User
from django.contrib.sessions.models import Session
from django.db.models import QuerySet
from django.test import Client
from django.utils import timezone
from pytest_django import Settings
from rest_framework.authtoken.models import Token

from murmur_conversations import services
from murmur_conversations.exceptions import ConversationNotFound
from murmur_conversations.models import AccessLogEntry, Conversation
from murmur_conversations.realtime import access
from murmur_conversations.realtime.access import Access, denials
from murmur_conversations.tickets import credential_ref, issue_ticket
from tests.helpers import MakeUser
from tests.realtime_helpers import TIMEOUT, connect, db_async, frames_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("private_layer")]

ALLOWED = (b"origin", b"http://testserver")
HOST = (b"host", b"testserver")
#: Readers a test's custom SCOPE grants: (user pk, conversation pk).
TEAM: set[tuple[Any, uuid.UUID]] = set()


def team_scope(user: User | AnonymousUser) -> QuerySet[Conversation]:
    """A host's SCOPE: owners, and the readers :data:`TEAM` lets in."""
    owned = Conversation.objects.owned_by(user)
    shared = [pk for member, pk in TEAM if member == getattr(user, "pk", None)]
    if not shared:
        return owned
    return Conversation.objects.filter(pk__in=shared) | owned


@pytest.fixture(autouse=True)
def quick_recheck(settings: Settings) -> None:
    """Idle re-checks every 0.2 s (the default is 2 s; at most 4): tests wait less."""
    settings.MURMUR_CONVERSATIONS = {
        "ACCESS_RECHECK_INTERVAL": 0.2,
        "SCOPE": "tests.test_access_matrix.team_scope",
    }
    TEAM.clear()


class Reader:
    """A user signed in twice: a browser session and an API token."""

    def __init__(self, user: User) -> None:
        self.user = user
        self.browser = Client()
        self.browser.force_login(user)
        self.session_key = self.browser.cookies["sessionid"].value
        self.token = Token.objects.create(user=user)

    def ticket(self, *, over: str) -> str:
        if over == "session":
            return issue_ticket(user=self.user, session_key=self.session_key)
        return issue_ticket(user=self.user, session_key=None, credential=self.token)


async def open_socket(
    reader: Reader, path: str, credential: str, over: str
) -> WebsocketCommunicator:
    if credential == "cookie":
        cookie = (b"cookie", f"sessionid={reader.session_key}".encode())
        return await connect(path, headers=[ALLOWED, HOST, cookie])
    ticket = await db_async(reader.ticket)(over=over)
    return await connect(f"{path}?ticket={ticket}")


async def outputs_until_close(communicator: WebsocketCommunicator) -> list[dict[str, Any]]:
    """Every output up to the close, which must come within 5 seconds (a deadline, not a sleep)."""
    deadline = time.monotonic() + 5
    outputs: list[dict[str, Any]] = []
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"still open after 5 s: {outputs}"
        output = await communicator.receive_output(timeout=remaining)
        outputs.append(output)
        if output["type"] == "websocket.close":
            await communicator.disconnect()
            return outputs


def lose(loss: str, reader: Reader, conversation: Conversation, other: User) -> None:
    """Take the reader's access away, the way ``loss`` names."""
    if loss == "logout":
        reader.browser.logout()
    elif loss == "session deleted":
        Session.objects.filter(session_key=reader.session_key).delete()
    elif loss == "session expired":  # no signal: only a check can notice
        Session.objects.filter(session_key=reader.session_key).update(
            expire_date=timezone.now() - timedelta(seconds=1)
        )
    elif loss == "token deleted":
        Token.objects.filter(user=reader.user).delete()
    elif loss == "deactivated":
        reader.user.is_active = False
        reader.user.save()
    elif loss == "password changed":
        reader.user.set_password("a new one")
        reader.user.save()
    elif loss == "user deleted":
        reader.user.delete()
    elif loss == "owner changed":  # an update: no signal, only a check can notice
        Conversation.objects.filter(pk=conversation.pk).update(owner=other)
    elif loss == "custom scope revoked":
        TEAM.clear()
    else:
        raise AssertionError(loss)


LOSSES = {
    "logout": 4401,
    "session deleted": 4401,
    "session expired": 4401,
    "token deleted": 4401,
    "deactivated": 4401,
    "password changed": 4401,
    "user deleted": 4401,
    "owner changed": 4404,
    "custom scope revoked": 4404,
}
#: Losses that have nothing to do with a cookie socket: the socket was not opened with the token.
COOKIE_UNAFFECTED = {"token deleted"}


def over_for(loss: str) -> str:
    """What a ticket is issued with: the session for the session's own ends, else the token."""
    return "session" if loss in ("logout", "session deleted", "session expired") else "token"


@pytest.mark.parametrize("then_write", [True, False], ids=["then a write", "idle"])
@pytest.mark.parametrize("credential", ["cookie", "ticket"])
@pytest.mark.parametrize("loss", list(LOSSES))
async def test_losing_access_closes_the_socket_and_nothing_later_arrives(
    make_user: MakeUser, loss: str, credential: str, then_write: bool
) -> None:
    owner = await db_async(make_user)()
    other = await db_async(make_user)()
    reader_user = owner
    conversation = await db_async(services.start_conversation)(owner=owner, title="secret")
    if loss == "custom scope revoked":
        reader_user = await db_async(make_user)()
        TEAM.add((reader_user.pk, conversation.pk))
    reader = await db_async(Reader)(reader_user)
    socket = await open_socket(
        reader, f"ws/conversations/{conversation.pk}/", credential, over_for(loss)
    )
    assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    await db_async(lose)(loss, reader, conversation, other)
    marker = f"after-the-loss-{uuid.uuid4().hex}"
    if then_write:
        with contextlib.suppress(ConversationNotFound):  # a deleted user took it along
            await db_async(services.save_message)(
                conversation=conversation, message={"role": "user", "content": marker}
            )
    if credential == "cookie" and loss in COOKIE_UNAFFECTED:
        # the socket was opened with the session, not the token: it stays and still receives
        if not then_write:
            await db_async(services.save_message)(
                conversation=conversation, message={"role": "user", "content": marker}
            )
        frame = await socket.receive_json_from(timeout=TIMEOUT)
        assert frame["message"]["content"] == {"text": marker}
        await socket.disconnect()
        return
    outputs = await outputs_until_close(socket)
    assert outputs[-1] == {"type": "websocket.close", "code": LOSSES[loss]}
    assert all(marker not in str(output) for output in outputs)


@pytest.mark.parametrize("credential", ["cookie", "ticket"])
@pytest.mark.parametrize(
    "loss", ["logout", "session deleted", "token deleted", "deactivated", "password changed"]
)
async def test_the_user_stream_ends_with_its_credential(
    make_user: MakeUser, loss: str, credential: str
) -> None:
    user = await db_async(make_user)()
    reader = await db_async(Reader)(user)
    if credential == "cookie" and loss in COOKIE_UNAFFECTED:
        pytest.skip("a cookie socket does not rest on the API token")
    stream = await open_socket(reader, "ws/conversations/", credential, over_for(loss))
    await db_async(lose)(loss, reader, Conversation(), user)
    await db_async(services.start_conversation)(owner=user, title="after-the-loss")
    outputs = await outputs_until_close(stream)
    assert outputs[-1] == {"type": "websocket.close", "code": 4401}
    assert all("after-the-loss" not in str(output) for output in outputs)


async def test_a_host_recheck_closes_at_once(make_user: MakeUser, settings: Settings) -> None:
    """``access.recheck`` after a SCOPE change closes the socket without waiting for the idle
    re-check (here made slow: 4 s)."""
    settings.MURMUR_CONVERSATIONS = {
        "ACCESS_RECHECK_INTERVAL": 4,
        "SCOPE": "tests.test_access_matrix.team_scope",
    }
    owner, member = await db_async(make_user)(), await db_async(make_user)()
    conversation = await db_async(services.start_conversation)(owner=owner)
    TEAM.add((member.pk, conversation.pk))
    socket = await connect(f"ws/conversations/{conversation.pk}/", member)
    assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    TEAM.clear()
    await db_async(access.recheck)(user=member)
    outputs = await outputs_until_close(socket)
    assert outputs == [{"type": "websocket.close", "code": 4404}]


async def test_a_deletion_found_by_the_recheck_is_said_before_the_close(
    make_user: MakeUser, settings: Settings
) -> None:
    """A conversation deleted where this process hears nothing of it (another process, whose
    frame of the deletion has not come yet; here a queryset delete, which sends no signal): the
    idle re-check finds it gone, and the socket says ``conversation_deleted`` before it closes
    4404, as when the deletion's own frame comes first."""
    settings.MURMUR_CONVERSATIONS = {"ACCESS_RECHECK_INTERVAL": 0.2, "FRAME_LOG": False}
    owner = await db_async(make_user)()
    conversation = await db_async(services.start_conversation)(owner=owner)
    socket = await connect(f"ws/conversations/{conversation.pk}/", owner)
    assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    await db_async(lambda: Conversation.objects.filter(pk=conversation.pk).delete())()
    outputs = await outputs_until_close(socket)
    assert outputs[-1] == {"type": "websocket.close", "code": 4404}
    said = [json.loads(o["text"]) for o in outputs[:-1]]
    assert said == [{"type": "conversation_deleted", "conversation_id": str(conversation.pk)}]


# ------------------------------------------------------------------------------ batching


def test_one_query_confirms_every_socket_of_a_conversation(
    make_user: MakeUser, settings: Settings, django_assert_num_queries: Any
) -> None:
    settings.MURMUR_CONVERSATIONS = {}
    owner = make_user()
    conversation = services.start_conversation(owner=owner)
    from murmur_conversations.realtime.receivers import auth_digest

    sockets = [
        Access(user_pk=owner.pk, digest=auth_digest(owner), conversation=conversation.pk)
        for _ in range(200)
    ]
    with django_assert_num_queries(1):
        assert denials(sockets) == {}
    reader = Reader(owner)
    token = reader.token
    mixed = [
        *sockets,
        Access(
            user_pk=owner.pk,
            digest=auth_digest(owner),
            session_key=reader.session_key,
            conversation=conversation.pk,
        ),
        Access(
            user_pk=owner.pk,
            digest=auth_digest(owner),
            credential=credential_ref(token),
            conversation=conversation.pk,
        ),
    ]
    with django_assert_num_queries(3):  # + the sessions, + the tokens
        assert denials(mixed) == {}


async def test_an_event_is_confirmed_once_for_all_sockets(
    make_user: MakeUser, monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    settings.MURMUR_CONVERSATIONS = {"ACCESS_RECHECK_INTERVAL": 4}
    calls: list[int] = []
    real = access.denials

    def counting(accesses: Any) -> dict[int, int]:
        calls.append(len(accesses))
        return real(accesses)

    monkeypatch.setattr(access, "denials", counting)
    owner = await db_async(make_user)()
    conversation = await db_async(services.start_conversation)(owner=owner)
    sockets = [await connect(f"ws/conversations/{conversation.pk}/", owner) for _ in range(5)]
    for socket in sockets:
        assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    calls.clear()
    await db_async(services.save_message)(
        conversation=conversation, message={"role": "user", "content": "one event"}
    )
    for socket in sockets:
        frame = await socket.receive_json_from(timeout=TIMEOUT)
        assert frame["message"]["content"] == {"text": "one event"}
    assert calls.count(5) == 1, calls  # one check of all five, not five checks
    for socket in sockets:
        await socket.disconnect()


# ------------------------------------------------------------------------------ access log


async def test_a_scope_reader_socket_is_logged_and_the_owner_is_not(make_user: MakeUser) -> None:
    owner, member = await db_async(make_user)(), await db_async(make_user)()
    conversation = await db_async(services.start_conversation)(owner=owner)
    TEAM.add((member.pk, conversation.pk))
    for user in (owner, member, member):
        socket = await connect(f"ws/conversations/{conversation.pk}/", user)
        assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
        await socket.disconnect()

    def entries() -> list[tuple[Any, str]]:
        return list(
            AccessLogEntry.objects.filter(conversation=conversation)
            .order_by("id")
            .values_list("actor_id", "surface")
        )

    assert await db_async(entries)() == [
        (member.pk, "ws-conversation"),
        (member.pk, "ws-conversation"),
    ]


# ------------------------------------------------------------------------------ share links


def share_of(conversation: Conversation, **options: Any) -> tuple[Any, str]:
    return services.create_share(
        conversation=conversation, created_by=conversation.owner, **options
    )


async def shared_socket(token: str, *, user: User | None = None) -> WebsocketCommunicator:
    return await connect(f"ws/shared/{token}/", user)


def _keys_and_strings(value: Any) -> tuple[set[str], set[str]]:
    """Every key and every string value in a JSON value."""
    keys: set[str] = set()
    strings: set[str] = set()

    def walk(item: Any) -> None:
        if isinstance(item, dict):
            keys.update(item)
            for child in item.values():
                walk(child)
        elif isinstance(item, list):
            for child in item:
                walk(child)
        elif isinstance(item, str):
            strings.add(item)

    walk(value)
    return keys, strings


async def test_a_live_share_streams_only_what_the_shared_view_shows(make_user: MakeUser) -> None:
    owner = await db_async(make_user)(username="owner-name-secret", email="owner@secret.example")
    conversation = await db_async(services.start_conversation)(owner=owner, title="shared")
    _share, token = await db_async(share_of)(conversation, mode="live")
    socket = await shared_socket(token)
    snapshot = await socket.receive_json_from(timeout=TIMEOUT)
    assert snapshot["type"] == "snapshot" and snapshot["conversation"]["title"] == "shared"
    await db_async(services.save_message)(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "text", "text": "visible"}],
        },
    )
    frame = await socket.receive_json_from(timeout=TIMEOUT)
    assert frame["type"] == "display_message_saved"
    assert frame["message"]["content"] == {"text": "visible"}
    text = str([snapshot, frame])
    for secret in (str(conversation.pk), "owner-name-secret", "owner@secret.example"):
        assert secret not in text
    # The owner's pk may be a small number found in any time or seq: no key names a user, and no
    # string value is the pk.
    keys, strings = _keys_and_strings([snapshot, frame])
    assert not {k for k in keys if "owner" in k or "user" in k}
    assert str(owner.pk) not in strings
    assert "conversation_id" not in frame and "id" not in frame["message"]
    await db_async(services.broadcast_delta)(
        conversation=conversation, stream_id="s", text="typing"
    )
    await db_async(services.update_conversation)(conversation=conversation, title="renamed")
    later = await frames_until(
        socket, lambda f: f.get("conversation", {}).get("title") == "renamed"
    )
    assert {f["type"] for f in later} == {"conversation_updated"}  # no delta on a share link
    await socket.disconnect()


@pytest.mark.parametrize("then_write", [True, False], ids=["then a write", "idle"])
@pytest.mark.parametrize("ending", ["revoked", "expired"])
async def test_a_share_socket_ends_with_its_link(
    make_user: MakeUser, ending: str, then_write: bool
) -> None:
    owner = await db_async(make_user)()
    conversation = await db_async(services.start_conversation)(owner=owner)
    share, token = await db_async(share_of)(conversation, mode="live")
    socket = await shared_socket(token)
    assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    if ending == "revoked":
        await db_async(services.revoke_share)(share=share)
    else:
        from murmur_conversations.models import Share

        await db_async(Share.objects.filter(pk=share.pk).update)(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
    if then_write:
        await db_async(services.save_message)(
            conversation=conversation, message={"role": "user", "content": "after-the-end"}
        )
    outputs = await outputs_until_close(socket)
    assert outputs[-1] == {"type": "websocket.close", "code": 4404}
    assert all("after-the-end" not in str(output) for output in outputs)


async def test_share_sockets_that_open_nothing(make_user: MakeUser) -> None:
    owner = await db_async(make_user)()
    conversation = await db_async(services.start_conversation)(owner=owner)
    _snapshot_share, snapshot_token = await db_async(share_of)(conversation)
    _login_share, login_token = await db_async(share_of)(
        conversation, mode="live", require_login=True
    )
    for path, code in [
        (f"ws/shared/{snapshot_token}/", 4404),
        (f"ws/shared/msh_{'A' * 43}/", 4404),
        ("ws/shared/nope/", 4404),
        (f"ws/shared/{'9' * 5000}/", 4404),
        (f"ws/shared/{login_token}/", 4401),
    ]:
        socket = await connect(path)
        outputs = await outputs_until_close(socket)
        assert outputs == [{"type": "websocket.close", "code": code}], path
    socket = await shared_socket(login_token, user=owner)
    assert (await socket.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    await socket.disconnect()


# ------------------------------------------------------------------------------ the threat model


def test_the_threat_model_names_tests_that_exist() -> None:
    """Every test docs/security.md names (``file.py::name``, or ``::name`` of the file named
    before it) exists, so the threat model cannot point at proof that is gone."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "security.md").read_text("utf-8")
    current: Path | None = None
    named = 0
    for match in re.finditer(r"`((?:[\w/]+\.py)?)::(\w+)`|`([\w/]+\.py)`", text):
        path, name, alone = match.groups()
        if alone:
            current = root / alone if "/" in alone else root / "tests" / alone
            assert current.is_file(), alone
            continue
        if path:
            current = root / path if "/" in path else root / "tests" / path
        assert current is not None and current.is_file(), match.group(0)
        source = current.read_text("utf-8")
        assert re.search(rf"^(async )?def {name}\(", source, re.M), f"{current.name}::{name}"
        named += 1
    assert named >= 30
