"""Every read of the record returns the message as the model saw it (docs/write-path.md "The
message as the model saw it"): the record API's ``message``, the plug-in read, the OpenAI and
Anthropic exports; and reading a record back into ``save_messages`` gives the same record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pytest_django import Settings
from rest_framework.test import APIClient

from murmur_conversations import services
from murmur_conversations.hooks import read_messages
from murmur_conversations.models import Conversation, Message, ToolCall
from tests.api_helpers import token_client, url
from tests.helpers import MakeConversation, assert_counters_match_rows
from tests.import_helpers import cassette_conversation, export, reimport, run, write_json

pytestmark = pytest.mark.django_db

#: The OpenAI history of the record's first input: a turn of two calls with null content (one
#: call with empty argument text, one spaced unusually), their results, a refusal, a named user.
HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Look both up.", "name": "ops-bot"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "now", "arguments": ""}},
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "search", "arguments": '{ "q" :  "x",\n  "n":1 }'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "12:00"},
    {"role": "tool", "tool_call_id": "call_b", "content": "found"},
    {"role": "assistant", "content": None, "refusal": "I can't help with that."},
]

GRANTED = {"HOOKS": {"recall": {"capabilities": {"conversation": {"read": True}}}}}


@pytest.fixture(autouse=True)
def grants(settings: Settings) -> None:
    settings.MURMUR_CONVERSATIONS = GRANTED


def without_bookkeeping(message: dict[str, Any]) -> dict[str, Any]:
    """The message without the keys murmur adds (its id; ``is_error`` of a result)."""
    return {k: v for k, v in message.items() if k not in ("id", "is_error")}


def api_walk(client: APIClient, conversation: Conversation, limit: int = 2) -> list[Any]:
    """Every record row of the API, oldest first, walking pages of ``limit``."""
    rows: list[Any] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit}
        if cursor:
            params["cursor"] = cursor
        response = client.get(url(conversation.pk, "record/"), params)
        assert response.status_code == 200, response.content
        body = response.json()
        rows.extend(body["results"])
        cursor = body["next_cursor"]
        if cursor is None:
            return list(reversed(rows))


def hook_walk(conversation: Conversation, limit: int = 2) -> list[dict[str, Any]]:
    """Every message of the plug-in read, oldest first."""
    messages: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = read_messages(hook="recall", conversation=conversation, cursor=cursor, limit=limit)
        messages.extend(page.messages)
        cursor = page.next_cursor
        if cursor is None:
            return list(reversed(messages))


def stored(conversation: Conversation) -> list[tuple[Any, ...]]:
    """The record as stored, content null told apart from an empty string."""
    return [
        (
            m.message_id,
            m.role,
            m.content is None,
            m.content,
            m.tool_call_id,
            m.is_error,
            m.source_id,
            m.extra,
        )
        for m in Message.objects.filter(conversation=conversation).order_by("position")
    ]


def test_the_api_and_the_plugin_read_return_the_message_as_given(
    conversation: Conversation, user: User
) -> None:
    services.save_messages(conversation=conversation, messages=HISTORY)
    rows = api_walk(token_client(user), conversation)
    assert [without_bookkeeping(row["message"]) for row in rows] == HISTORY
    assert rows[2]["content"] is None and rows[5]["content"] is None
    assert rows[2]["message"]["tool_calls"][1]["function"]["arguments"] == (
        '{ "q" :  "x",\n  "n":1 }'
    )
    hooked = hook_walk(conversation)
    assert [without_bookkeeping(m["message"]) for m in hooked] == HISTORY
    assert json.loads(hooked[5]["content"]) is None
    # the calls are the model's: two cards, results completing them
    statuses = dict(ToolCall.objects.values_list("call_id", "status"))
    assert statuses == {"call_a": "completed", "call_b": "completed"}


def test_openai_export_keeps_null_content(conversation: Conversation) -> None:
    services.save_messages(conversation=conversation, messages=HISTORY)
    exported = json.loads(export(conversation, "--format", "openai"))
    assert exported[5] == {"role": "assistant", "content": None, "refusal": HISTORY[5]["refusal"]}
    assert exported == HISTORY


def test_openai_import_then_export_gives_the_input_list(tmp_path: Path, user: User) -> None:
    path = write_json(tmp_path / "chat.json", HISTORY)
    assert run(path, "--owner", user.username, "--format", "openai")[0] == 0
    conversation = Conversation.objects.get()
    assert json.loads(export(conversation, "--format", "openai")) == HISTORY
    # and with keys OpenAI's API does not name, which the list carried
    extended = [{**message, "x_trace": index} for index, message in enumerate(HISTORY)]
    again = reimport(user, json.dumps(extended), "openai")
    assert json.loads(export(again, "--format", "openai")) == extended


ANTHROPIC_BODY: dict[str, Any] = {
    "system": "Be brief.",
    "messages": [
        {"role": "user", "content": "What is in the folder?"},
        {
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "list it", "signature": "c2ln"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "."}},
            ],
            "model": "claude-x",
            "stop_reason": "tool_use",
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "One file."}]},
    ],
}


def test_anthropic_import_then_export_gives_the_input_back(tmp_path: Path, user: User) -> None:
    path = write_json(tmp_path / "chat.json", ANTHROPIC_BODY)
    assert run(path, "--owner", user.username, "--format", "anthropic")[0] == 0
    conversation = Conversation.objects.get()
    assert json.loads(export(conversation, "--format", "anthropic")) == ANTHROPIC_BODY


def test_a_runtime_conversation_exports_as_anthropic(conversation: Conversation) -> None:
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_call", "id": "c", "name": "f"}]},
            {"role": "tool", "tool_call_id": "c", "content": "no", "is_error": True},
            {"role": "tool", "tool_call_id": "d", "content": "?"},
        ],
    )
    exported = json.loads(export(conversation, "--format", "anthropic"))
    assert exported == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c", "content": "no", "is_error": True},
                {"type": "tool_result", "tool_use_id": "d", "content": "?"},
            ],
        },
    ]


# --- the round-trip property: any accepted message list reads back into the same record ------

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
KEYS = st.sampled_from(["name", "refusal", "annotations", "x_meta", "audio", "model", "lang"])
JSON_LEAF = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | TEXT
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
BLOCK = st.one_of(
    st.builds(lambda text: {"type": "text", "text": text}, TEXT),
    st.builds(lambda text: {"type": "thinking", "text": text, "signature": "s"}, TEXT),
    st.builds(
        lambda call_id, name, arguments: {
            "type": "tool_call",
            "id": call_id,
            "name": name,
            "input": arguments,
        },
        st.sampled_from(["c1", "c2", "c3"]),
        TEXT,
        JSON_VALUE,
    ),
    st.builds(lambda value: {"type": "mystery", "v": value}, JSON_VALUE),
)
OPENAI_CALL = st.builds(
    lambda call_id, arguments: {
        "id": call_id,
        "type": "function",
        "function": {"name": "f", "arguments": arguments},
    },
    st.sampled_from(["c1", "c2", "c3"]),
    st.one_of(TEXT, st.just(""), st.just('{ "a" :1 }'), st.none()),
)


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    """One message ``save_messages`` accepts."""
    role = draw(st.sampled_from(["user", "assistant", "system", "tool", "developer"]))
    message: dict[str, Any] = {"role": role}
    if draw(st.booleans()):
        message["content"] = draw(st.none() | TEXT | st.lists(BLOCK, max_size=3))
    if draw(st.integers(0, 3)) == 0:
        message["id"] = draw(st.sampled_from(["m1", "m2", "m3"]))
    if role == "tool" or draw(st.integers(0, 5)) == 0:
        message["tool_call_id"] = draw(st.sampled_from(["c1", "c2", "c4"]))
        if draw(st.booleans()):
            message["is_error"] = draw(st.booleans())
    elif role == "assistant" and draw(st.booleans()):
        message["tool_calls"] = draw(st.lists(OPENAI_CALL, max_size=2))
    if draw(st.integers(0, 4)) == 0:
        message["source_id"] = draw(st.sampled_from(["hook-1", ""]))
    for key in draw(st.lists(KEYS, max_size=2, unique=True)):
        message[key] = draw(JSON_VALUE)
    return message


ROUND_TRIP = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@ROUND_TRIP
@given(batch=st.lists(messages(), min_size=1, max_size=6))
def test_record_api_pages_save_back_into_the_same_record(
    make_conversation: MakeConversation, user: User, batch: list[dict[str, Any]]
) -> None:
    original = make_conversation(owner=user)
    services.save_messages(conversation=original, messages=batch)
    rows = api_walk(token_client(user), original, limit=2)
    copy = make_conversation(owner=user)
    services.save_messages(conversation=copy, messages=[row["message"] for row in rows])
    assert stored(copy) == stored(original)
    assert_counters_match_rows(copy)


@ROUND_TRIP
@given(batch=st.lists(messages(), min_size=1, max_size=6))
def test_plugin_read_saves_back_into_the_same_record(
    make_conversation: MakeConversation, user: User, batch: list[dict[str, Any]]
) -> None:
    original = make_conversation(owner=user)
    services.save_messages(conversation=original, messages=batch)
    copy = make_conversation(owner=user)
    services.save_messages(
        conversation=copy, messages=[m["message"] for m in hook_walk(original, limit=3)]
    )
    assert stored(copy) == stored(original)


def test_null_content_is_sql_null_on_every_path(conversation: Conversation) -> None:
    """Null content is stored as null (not ""), whichever write path stored it."""
    services.save_messages(
        conversation=conversation,
        messages=[{"role": "assistant", "content": None}, {"role": "user", "content": ""}],
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT content IS NULL FROM {Message._meta.db_table} "
            "WHERE conversation_id = %s ORDER BY position",
            [conversation.pk.hex if connection.vendor == "sqlite" else conversation.pk],
        )
        assert [bool(row[0]) for row in cursor.fetchall()] == [True, False]


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("openai_multiple_agent_tool_calls", "openai"), ("anthropic_tool_with_thinking", "anthropic")],
)
def test_a_recorded_chat_imports_and_exports_as_it_was(
    corpus: Path, tmp_path: Path, user: User, name: str, fmt: str
) -> None:
    """The corpus's recorded chats: import as their format, export as it, the same list but for
    the normalisations docs/write-path.md lists (a missing ``content`` is null; an Anthropic
    ``tool_result``'s ``is_error: false`` is left out)."""
    messages = cassette_conversation(corpus, name)
    path = write_json(tmp_path / "chat.json", messages)
    assert run(path, "--owner", user.username, "--format", fmt)[0] == 0
    assert json.loads(export(Conversation.objects.get(), "--format", fmt)) == [
        normalised(message) for message in messages
    ]


def normalised(message: Any) -> Any:
    """``message`` as the record gives it back (the table of docs/write-path.md)."""
    message = {"content": None, **message}
    if isinstance(message["content"], list):
        message["content"] = [
            {k: v for k, v in block.items() if not (k == "is_error" and v is False)}
            if isinstance(block, dict) and block.get("type") == "tool_result"
            else block
            for block in message["content"]
        ]
    return message
