"""Hostile parameters end in the documented error (docs/api.md "Errors", docs/websocket.md
"Connecting", docs/hooks.md, docs/write-path.md "Errors"): every place that turns client text into
a number, encodes client text or trusts a type, fed lone surrogates, 5000-digit integers,
infinities, NaN and wrong JSON types, on every route, every socket parameter and the Python
entry points. Nothing may answer 500, raise something undocumented or crash a consumer."""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

import pytest
from django.contrib.auth.models import User
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from rest_framework.test import APIClient
from schemathesis import Case, checks
from schemathesis.core.result import Ok
from schemathesis.generation.modes import GenerationMode

from murmur_conversations import hooks, services
from murmur_conversations.exceptions import InvalidContent
from murmur_conversations.models import Conversation, DisplayMessage
from murmur_conversations.realtime.scope import InvalidSince, since_of
from tests.api_helpers import API, keep_test_connection, load_schema, post_body, token_client
from tests.helpers import MakeConversation, MakeUser
from tests.realtime_helpers import TIMEOUT, connect, db_async, expect_close

HUGE = "9" * 5000
#: Raw JSON fragments (text, so that escapes and huge literals reach the parser as sent).
HOSTILE_JSON = [
    '"\\ud800"',
    '"a\\udfffb"',
    '"\\ud800\\udc00"',
    HUGE,
    "-" + HUGE,
    f'"{HUGE}"',
    "1e400",
    "-1e400",
    "1e-400",
    "Infinity",
    "-Infinity",
    "NaN",
    '"inf"',
    '"NaN"',
    str(2**63),
    str(2**64),
    str(-(2**63) - 1),
    "1.5",
    "true",
    "false",
    "null",
    "[]",
    "{}",
    '[1,"a"]',
    '{"a":{"b":[]}}',
    '""',
    '" "',
    '"\\u0000"',
]
#: Query values (percent-encoded when sent): a lone surrogate cannot survive the URL decoding,
#: but its UTF-8 spelling can be sent as bytes.
HOSTILE_QUERY = [
    HUGE,
    "-" + HUGE,
    "inf",
    "-inf",
    "NaN",
    "1e400",
    "%ED%A0%80",
    "%FF",
    "%00",
    "",
    "0x10",
    "\u0661\u0662",
    " 1",
    "1.5",
    "null",
    "[]",
    str(2**64),
]
QUERY_NAMES = [
    "limit", "since", "cursor", "status", "q", "archived", "tag", "parent", "from", "to",
    "group_by", "page", "format",
]  # fmt: skip
FIELDS = [
    "title", "metadata", "pinned", "archived", "tags", "answer", "event_seq", "rating", "comment",
    "at_seq", "mode", "expires_in", "require_login", "op", "sessionId",
]  # fmt: skip
QUICK = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

pytestmark = pytest.mark.django_db


def routes(conversation: Conversation, row: DisplayMessage) -> list[str]:
    detail = f"{API}conversations/{conversation.pk}/"
    return [
        f"{API}conversations/",
        detail,
        f"{detail}display-messages/",
        f"{detail}record/",
        f"{detail}transcript/",
        f"{detail}pending/",
        f"{detail}pending/answer/",
        f"{detail}tool-calls/",
        f"{detail}access-log/",
        f"{detail}display-messages/{row.pk}/feedback/",
        f"{detail}display-messages/{HUGE}/feedback/",
        f"{detail}fork/",
        f"{detail}shares/",
        f"{detail}shares/{uuid.uuid4()}/",
        f"{detail}shares/{HUGE}/",
        f"{API}shared/msh_{'A' * 43}/",
        f"{API}shared/{HUGE}/",
        f"{API}search/",
        f"{API}usage/",
        f"{API}ws-ticket/",
        f"{API}session/",
    ]


@pytest.fixture
def world(make_user: MakeUser, make_conversation: MakeConversation) -> tuple[APIClient, list[str]]:
    owner = make_user()
    conversation = make_conversation(owner=owner, title="hostile")
    rows = services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "tool_call", "id": "c1", "name": "bash", "input": {}},
            ],
        },
    )
    services.set_status(conversation=conversation, status="paused", pending_ask={"question": "q"})
    return token_client(owner), routes(conversation, rows[0])


def body_text(fields: dict[str, str]) -> str:
    return "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in fields.items()) + "}"


def test_every_route_answers_hostile_parameters_without_a_server_error(
    world: tuple[APIClient, list[str]],
) -> None:
    client, paths = world

    @QUICK
    @given(
        path=st.sampled_from(paths),
        method=st.sampled_from(["get", "post", "patch", "put", "delete"]),
        query=st.dictionaries(
            st.sampled_from(QUERY_NAMES), st.sampled_from(HOSTILE_QUERY), max_size=3
        ),
        body=st.one_of(
            st.sampled_from(HOSTILE_JSON),
            st.dictionaries(st.sampled_from(FIELDS), st.sampled_from(HOSTILE_JSON), max_size=4).map(
                body_text
            ),
            st.sampled_from(
                ['{"op":"session-transcript","sessionId":"\\ud800"}', '{"op":"session-pending"}']
            ),
        ),
    )
    def check(path: str, method: str, query: dict[str, str], body: str) -> None:
        address = path
        if query:
            address += "?" + "&".join(
                f"{name}={value if '%' in value else quote(value)}" for name, value in query.items()
            )
        if method == "get":
            response = client.get(address)
        else:
            response = client.generic(
                method.upper(), address, body, content_type="application/json"
            )
        assert response.status_code < 500, (method, address, body, response.content[:300])
        response.content.decode("utf-8")  # valid UTF-8, never a lone surrogate
        if response.status_code >= 400:
            assert response["Content-Type"].startswith("application/json")

    check()


@pytest.mark.parametrize("op", ["session-transcript", "session-pending"])
@pytest.mark.parametrize("session_id", ["\\ud800", "a\\udfffb", HUGE, "\\u0000"])
def test_session_wire_lone_surrogate_is_session_not_found(
    world: tuple[APIClient, list[str]], op: str, session_id: str
) -> None:
    client, _ = world
    raw = f'{{"op":"{op}","sessionId":"{session_id}"}}'
    response = post_body(client, f"{API}session/", raw)
    assert response.status_code == 404
    assert response.json()["code"] == "ERR_SESSION_NOT_FOUND"
    response.content.decode("utf-8")


# ------------------------------------------------------------------------------ Python entry points


@pytest.mark.parametrize(
    "cursor", ["mc_" + HUGE, "mc_" + "9" * 30, "mc_-1", "mc_\u0661", "mc_1\n", 5, 1.5, b"mc_1", []]
)
def test_hook_cursor_hostile_is_invalid_cursor(conversation: Conversation, cursor: Any) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hooks, "is_granted", lambda hook: True)
        with pytest.raises(hooks.HookReadError) as raised:
            hooks.read_messages(hook="h", conversation=conversation.pk, cursor=cursor)
    assert raised.value.code == "invalid-cursor"


@pytest.mark.parametrize(
    ("limit", "size"),
    [
        (float("inf"), hooks.MAX_LIMIT),
        (float("-inf"), 1),
        (float("nan"), 1),
        pytest.param(10**5000, hooks.MAX_LIMIT, id="5000-digits"),
        pytest.param(-(10**5000), 1, id="minus-5000-digits"),
        (HUGE, 1),
        (True, 1),
        (None, 1),
        ("50", 1),
        (2.9, 2),
        ([], 1),
    ],
)
def test_hook_limit_is_clamped_whatever_it_is(
    conversation: Conversation, limit: Any, size: int
) -> None:
    services.save_messages(
        conversation=conversation,
        messages=[{"role": "user", "content": f"m{i}"} for i in range(120)],
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hooks, "is_granted", lambda hook: True)
        page = hooks.read_messages(hook="h", conversation=conversation.pk, limit=limit)
    assert len(page.messages) == size


@pytest.mark.parametrize(
    "arguments",
    [
        {"messages": 5},
        {"messages": None},
        {"messages": "hello"},
        {"messages": b"hello"},
        {"messages": {"role": "user", "content": "x"}},
        {"messages": [5]},
        {"messages": [{"role": "user", "content": "x"}], "source_records": 5},
        {"messages": [{"role": "user", "content": "x"}], "source_records": [5], "source": "x"},
        {"messages": [{"role": "user", "content": "x"}], "times": 5},
        {"messages": [{"role": "user", "content": "x"}], "times": ["yesterday"]},
        {"messages": [{"role": "user", "content": "x"}], "source": 5, "source_records": [{}]},
    ],
)
def test_save_messages_wrong_types_are_invalid_content(
    conversation: Conversation, arguments: dict[str, Any]
) -> None:
    with pytest.raises(InvalidContent):
        services.save_messages(conversation=conversation, **arguments)
    conversation.refresh_from_db()
    assert conversation.record_length == 0  # nothing half-written


# ------------------------------------------------------------------------------ socket parameters


@pytest.mark.parametrize(
    "query",
    [
        f"since={HUGE}",
        f"since={2**63}",
        "since=-1",
        "since=inf",
        "since=NaN",
        "since=1e400",
        "since=%ED%A0%80",
        "since=%FF",
        "since=1&since=2",
        "since=\u0661",
    ],
)
def test_since_of_hostile_values_is_invalid_since(query: str) -> None:
    with pytest.raises(InvalidSince):
        since_of({"query_string": query.encode("utf-8")})


def test_since_of_accepts_the_largest_event_seq() -> None:
    assert since_of({"query_string": f"since=000{2**63 - 1}".encode()}) == 2**63 - 1
    assert since_of({"query_string": f"since={'0' * 5000}1".encode()}) == 1


SOCKET_CASES = [
    (f"?since={HUGE}", 4400),
    (f"?since={2**63}", 4400),
    ("?since=inf", 4400),
    ("?since=NaN", 4400),
    ("?since=%ED%A0%80", 4400),
    ("?since=-1", 4400),
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("private_layer")
@pytest.mark.parametrize(("query", "code"), SOCKET_CASES)
async def test_socket_hostile_since_closes_4400_before_joining(
    user: User, conversation: Conversation, query: str, code: int
) -> None:
    communicator = await connect(f"ws/conversations/{conversation.pk}/{query}", user)
    await expect_close(communicator, code)
    # the socket joined no group: a write afterwards reaches nobody, and nothing crashed
    await db_async(services.save_message)(
        conversation=conversation, message={"role": "user", "content": "after"}
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("private_layer")
@pytest.mark.parametrize(
    ("path", "signed_in", "code"),
    [
        (f"ws/conversations/{HUGE}/", True, 4404),
        ("ws/conversations/\ud800/", True, 4404),
        ("ws/conversations/%ED%A0%80/", True, 4404),
        (f"ws/conversations/{HUGE}/?since={HUGE}", True, 4404),
        (f"ws/conversations/?ticket={HUGE}", False, 4401),
        ("ws/conversations/?ticket=%ED%A0%80", False, 4401),
        ("ws/conversations/?ticket=inf&ticket=NaN", False, 4401),
        (f"ws/conversations/{HUGE}/?ticket={HUGE}", False, 4401),
        (f"ws/shared/{HUGE}/", False, 4404),
        ("ws/shared/\ud800/", False, 4404),
        ("ws/shared/%ED%A0%80/?since=inf", False, 4404),
        (f"ws/shared/msh_{'A' * 43}/extra/{HUGE}", False, 4404),
    ],
)
async def test_socket_hostile_path_and_ticket_close_with_their_code(
    user: User, path: str, signed_in: bool, code: int
) -> None:
    communicator = await connect(path, user if signed_in else None)
    await expect_close(communicator, code)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("private_layer")
async def test_socket_client_frames_with_surrogates_are_ignored(
    user: User, conversation: Conversation
) -> None:
    communicator = await connect(f"ws/conversations/{conversation.pk}/", user)
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    await communicator.send_to(text_data="\ud800" * 10)
    await communicator.send_to(text_data=HUGE[:4000])
    await communicator.send_to(text_data="\ud800" * 2000)  # 6000 bytes in UTF-8: too big
    await expect_close(communicator, 1009)


# ------------------------------------------------------------------------------ schemathesis


def test_negative_schema_cases_are_never_a_server_error(
    world: tuple[APIClient, list[str]],
) -> None:
    """Schemathesis' negative mode on every operation of the served schema: wrong types, values
    out of range, missing and extra fields; never a 500."""
    client, _ = world
    schema = load_schema(client)
    token = str(getattr(client, "_credentials")["HTTP_AUTHORIZATION"])  # noqa: B009
    app = get_wsgi_application()
    skipped = 0
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operation = result.ok()

        @settings(
            QUICK,
            max_examples=10,
            suppress_health_check=[*QUICK.suppress_health_check, HealthCheck.filter_too_much],
        )
        @given(case=operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))
        def check(case: Case[Any]) -> None:
            with keep_test_connection():
                case.call_and_validate(
                    app=app,
                    headers={"Authorization": token},
                    checks=[checks.not_a_server_error],
                )

        try:
            check()
        except Unsatisfiable:  # nothing of this operation can be made invalid
            skipped += 1
    assert skipped < 10
