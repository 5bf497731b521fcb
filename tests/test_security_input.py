"""Hostile input (RELIABILITY.md; docs/write-path.md, docs/api.md, docs/websocket.md and docs/formats.md): whatever arrives, the answer is the
result or a documented error, never a crash, and a refused write leaves nothing behind.

- every registered importer parser, fed lines built from each format's own vocabulary (so the
  fuzzing reaches deep into the parsers, not just their "not JSON" branch), yields items only, and
  every message it yields is accepted or refused with ``InvalidContent`` by the write path;
- ``services.save_message`` with arbitrary JSON-ish dicts (NUL, lone and split surrogates, huge
  and non-finite numbers, non-string keys, non-JSON values, deep nesting): it returns rows whose
  stored text obeys the bad-text rule and renders as strict JSON, or raises ``InvalidContent`` and
  nothing changed;
- 10,000 levels of nesting through every service that takes JSON and through PATCH and the session
  wire: a clear 4xx / ``InvalidContent``, never ``RecursionError`` or a 500;
- oversized metadata, content and bodies: refused with the documented error, at the documented
  boundary; websocket frames over 4 KiB close 1009, binary frames 1003.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pytest_django import Settings

from murmur_conversations import services
from murmur_conversations.api.renderers import CompactJSONRenderer
from murmur_conversations.exceptions import (
    ConversationsError,
    InvalidContent,
    InvalidPendingAsk,
)
from murmur_conversations.importers import registry
from murmur_conversations.importers.records import (
    ParseContext,
    Parsed,
    Problem,
    SourceLine,
)
from murmur_conversations.messages import normalize_message
from murmur_conversations.models import Conversation, DisplayMessage, Message, ToolCall
from murmur_conversations.representations import display_row, record_row, tool_call_row
from tests.api_helpers import API, token_client, url
from tests.helpers import assert_counters_match_rows
from tests.import_helpers import JSON, assert_well_formed, feed
from tests.realtime_helpers import TIMEOUT, connect, db_async, frames_until

DEEP = 10_000
FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def nested(depth: int, leaf: JSON = 1) -> JSON:
    value = leaf
    for index in range(depth):
        value = {"k": value} if index % 2 else [value]
    return value


# ------------------------------------------------------------------------------ strategies

NASTY = ["\x00", "\ud800", "\udfff", "\ud83d\ude00", "\ud83d", "\ufeff", "\u2028", "é", "\r\n"]
nasty_text = st.lists(st.sampled_from(NASTY) | st.text(max_size=6), max_size=5).map("".join)
numbers = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([10**400, -(10**4000), 2**63, -(2**63) - 1])
    | st.floats(allow_nan=True, allow_infinity=True)
)
scalars = st.none() | st.booleans() | numbers | nasty_text
junk = st.sampled_from([b"bytes", {1, 2}, (1, "t"), object(), {1: "int key"}, {None: 1}])

# Keys and values each importer looks at, so generated lines get past the "not my format" checks.
VOCABULARY_KEYS = [
    "type", "role", "content", "id", "text", "name", "input", "output", "arguments", "call_id",
    "payload", "session_meta", "message", "sessionId", "session_id", "uuid", "parentUuid",
    "isSidechain", "isMeta", "stream", "sequence", "payload_type", "prompt", "task_id",
    "task_kind", "idempotency_key", "tool_use_id", "thinking", "signature", "format", "savedAt",
    "data", "history", "toolCalls", "toolCallId", "injectedBy", "pending", "conversation",
    "thread_id", "item", "status", "exit_code", "aggregated_output", "messages", "system",
    "tool_calls", "function", "tool_call_id", "is_error", "timestamp", "reason", "schema_version",
    "correlation_facts", "outcome", "summary", "args", "state", "subtype", "result",
]  # fmt: skip
VOCABULARY_VALUES = [
    "user", "assistant", "tool", "system", "developer", "message", "function_call",
    "function_call_output", "custom_tool_call", "custom_tool_call_output", "reasoning",
    "session_meta", "response_item", "event_msg", "tool_use", "tool_result", "text", "thinking",
    "input_text", "output_text", "turn.input.user", "run.lifecycle.started",
    "run.terminal.completed", "run.terminal.failed", "run.output.delta",
    "task.lifecycle.started", "task.lifecycle.completed", "task.lifecycle.failed", "tool.result",
    "tool.read", "tool:c1", "thread.started", "item.started", "item.completed",
    "command_execution", "agent_message", "in_progress", "completed", "failed", "failure",
    "conversation-v1", "flowchart-v1", "summary", "result", "c1", "c2", "u1", "s1", "",
]  # fmt: skip
vocab_scalar = st.sampled_from(VOCABULARY_VALUES) | scalars
json_like = st.recursive(
    vocab_scalar,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(VOCABULARY_KEYS) | nasty_text, inner, max_size=6)
    ),
    max_leaves=25,
)
record = st.dictionaries(st.sampled_from(VOCABULARY_KEYS), json_like, min_size=1, max_size=8)


def dump(value: JSON) -> str:
    return json.dumps(value, ensure_ascii=False)


line_text = st.one_of(
    record.map(dump),
    record.map(lambda v: json.dumps(v)),  # ASCII escapes: surrogates as \ud800
    json_like.map(dump),
    nasty_text,
    st.just("[" * 5000 + "]" * 5000),
    st.just('{"role": "user", "content": ' + "[" * 3000),
)


# ------------------------------------------------------------------------------ importer parsers


@pytest.mark.parametrize("fmt", sorted(registry.PARSERS))
@FUZZ
@given(
    texts=st.lists(line_text, max_size=8),
    context=st.builds(
        ParseContext,
        path_parts=st.sampled_from([(), ("rec", "ctx", "conversation.jsonl"), ("x.jsonl",)]),
        conversation_id=st.none() | st.just("fixed") | nasty_text,
    ),
)
def test_every_parser_yields_items_and_only_writable_or_refusable_messages(
    fmt: str, texts: list[str], context: ParseContext
) -> None:
    """Whatever the lines, a parser returns items of the documented types; each message it yields
    has a string id and is accepted by ``normalize_message`` or refused with ``InvalidContent``."""
    items = feed(fmt, texts, context, torn_end=True)
    assert_well_formed(items)
    for item in items:
        if isinstance(item, Parsed):
            with contextlib.suppress(InvalidContent):
                normalize_message(item.message, max_content_bytes=8 * 1024 * 1024)


@FUZZ
@given(texts=st.lists(line_text, min_size=1, max_size=8))
def test_format_detection_never_raises(texts: list[str]) -> None:
    """``--format auto`` detection of hostile lines names a format or None and gives back every
    line it read."""
    lines = [SourceLine(n, t) for n, t in enumerate(texts, 1)]
    name, head = registry.detect(iter(lines))
    assert name is None or name in registry.FORMAT_NAMES
    assert head == lines[: len(head)]


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", sorted(registry.PARSERS))
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(texts=st.lists(line_text, min_size=1, max_size=6))
def test_every_importer_writes_hostile_lines_without_raising(
    fmt: str, texts: list[str], user: User
) -> None:
    """``run_import`` through the services: hostile lines are reported, never raised, and every
    conversation it touched keeps its counters equal to its rows."""
    from murmur_conversations.importers.base import run_import

    problems: list[Problem] = []
    lines = [SourceLine(n, t, complete=True) for n, t in enumerate(texts, 1)]
    outcome = run_import(
        lines=lines,
        parser=registry.make_parser(fmt, ParseContext(conversation_id="fuzz")),
        source=fmt,
        owner=user,
        report=problems.append,
    )
    # Every refused line is reported (with its number, or None for the whole source) and
    # counted; nothing raised.
    assert outcome.problems == len(problems)
    assert all(p.reason and (p.line is None or 1 <= p.line <= len(lines)) for p in problems)
    assert outcome.messages_added <= outcome.messages_seen
    for conversation_id in outcome.conversations:
        assert_counters_match_rows(Conversation.objects.get(pk=conversation_id))


# ------------------------------------------------------------------------------ save_message

finite_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | nasty_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(nasty_text, inner, max_size=3),
    max_leaves=12,
)
block = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "thinking", "image", "tool_call", "tool_result", "x"])},
    optional={
        "text": nasty_text,
        "id": st.sampled_from(["c1", "c2", "c3"]) | nasty_text,
        "name": nasty_text,
        "input": finite_json,
        "url": nasty_text,
        "data": finite_json,
        "mime_type": nasty_text,
        "extra": finite_json,
    },
)
openai_call = st.fixed_dictionaries(
    {"id": st.sampled_from(["c1", "c2", "c4"]) | nasty_text},
    optional={
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {"name": nasty_text},
            optional={
                "arguments": finite_json.map(dump)
                | st.sampled_from(['{"a": NaN}', "1e999", '"\\u0000\\ud800"', "[" * 3000])
                | finite_json
            },
        ),
    },
)
#: Messages of the right shape carrying hostile values: these mostly land.
plausible_message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "tool", "system", "robot"])
        | nasty_text.filter(bool)
    },
    optional={
        "content": nasty_text | st.lists(block, max_size=4) | st.none(),
        "id": st.sampled_from(["m1", "m2"]) | nasty_text,
        "tool_call_id": st.sampled_from(["c1", "c2", "nope", ""]) | nasty_text,
        "is_error": st.booleans(),
        "is_interrupt": st.booleans(),
        "injected": st.booleans(),
        "source_id": nasty_text,
        "tool_calls": st.lists(openai_call, max_size=3),
        "meta": finite_json,
    },
)
#: Anything at all in any key: these are mostly refused.
wild_message = st.dictionaries(
    st.sampled_from(["role", "content", "id", "tool_call_id", "is_error", "is_interrupt",
                     "injected", "source_id", "tool_calls", "meta"]) | nasty_text,
    json_like | junk,
    max_size=6,
)  # fmt: skip
hostile_message = st.one_of(
    plausible_message, plausible_message, plausible_message, wild_message, json_like | junk
)


def state(conversation: Conversation) -> tuple[int, ...]:
    fresh = Conversation.objects.get(pk=conversation.pk)
    return (
        fresh.record_length,
        fresh.transcript_count,
        fresh.last_seq,
        fresh.last_event_seq,
        Message.objects.filter(conversation=conversation).count(),
        DisplayMessage.objects.filter(conversation=conversation).count(),
        ToolCall.objects.filter(conversation=conversation).count(),
    )


def strict_json(value: JSON) -> bytes:
    """What the API would send: strict, UTF-8 (fails on NaN and lone surrogates)."""
    return CompactJSONRenderer().render(value)


def assert_clean(data: bytes) -> None:
    """No string of the JSON holds a NUL (escaped or not); text that merely spells an escape, such
    as OpenAI argument text kept as given, is not a NUL."""

    def strings(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for key, item in value.items():
                yield key
                yield from strings(item)
        elif isinstance(value, list):
            for item in value:
                yield from strings(item)

    text = data.decode("utf-8")
    assert "\x00" not in text
    assert not any("\x00" in string for string in strings(json.loads(text)))


@pytest.mark.django_db
@FUZZ
@given(messages=st.lists(hostile_message, min_size=1, max_size=4))
def test_save_message_returns_rows_or_invalid_content_and_then_wrote_nothing(
    messages: list[JSON], user: User
) -> None:
    """Each hostile message (after two tool calls c1, c2 exist) is saved, with every stored value
    rendering as strict JSON free of NULs, or refused with ``InvalidContent`` and nothing changed."""
    conversation = services.start_conversation(owner=user)
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "tool_call", "id": "c1", "name": "a", "input": {}},
                {"type": "tool_call", "id": "c2", "name": "b", "input": {}},
            ],
        },
    )
    for message in messages:
        before = state(conversation)
        refused: ConversationsError | None = None
        try:
            rows = services.save_message(conversation=conversation, message=message)
        except ConversationsError as error:
            refused = error
        event("refused" if refused is not None else "saved")
        if refused is not None:
            assert isinstance(refused, InvalidContent), refused
            assert state(conversation) == before
            continue
        for row in rows:
            assert_clean(strict_json(display_row(row)))
    for stored in Message.objects.filter(conversation=conversation):
        assert_clean(strict_json(record_row(stored)))
    for call in ToolCall.objects.filter(conversation=conversation):
        assert_clean(strict_json(tool_call_row(call)))
    for row in DisplayMessage.objects.filter(conversation=conversation):
        assert_clean(strict_json(display_row(row)))
    assert_counters_match_rows(conversation)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("arguments", "stored"),
    [
        ('{"a": NaN}', '{"a": NaN}'),
        ("1e999", "1e999"),
        ('{"a": "x\\u0000y\\ud800"}', {"a": "x\ufffdy\ufffd"}),
        ("[" * 3000 + "]" * 3000, "[" * 3000 + "]" * 3000),
        ('{"ok": [1, 2]}', {"ok": [1, 2]}),
    ],
)
def test_openai_arguments_that_are_not_storable_json_stay_a_string(
    conversation: Conversation, user: User, arguments: str, stored: JSON
) -> None:
    """Regression: ``function.arguments`` with NaN, an overflowing number or nesting too deep was
    parsed into a value the database refused (a ``WriteConflict`` that no retry fixes) or that the
    API could not render; NUL and surrogates escaped inside it bypassed the bad-text rule. Now such
    text is kept as the string, and parsed values are cleaned."""
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c9", "function": {"name": "f", "arguments": arguments}}],
    }
    services.save_message(conversation=conversation, message=message)
    assert ToolCall.objects.get(conversation=conversation, call_id="c9").arguments == stored
    answer = token_client(user).get(url(conversation.pk, "tool-calls/"))
    assert answer.status_code == 200


# ------------------------------------------------------------------------------ deep nesting

DEEP_CALLS: dict[str, Callable[[Conversation], object]] = {
    "content block": lambda c: services.save_message(
        conversation=c, message={"role": "user", "content": [{"type": "x", "d": nested(DEEP)}]}
    ),
    "extra key": lambda c: services.save_message(
        conversation=c, message={"role": "user", "content": "hi", "meta": nested(DEEP)}
    ),
    "tool input": lambda c: services.save_message(
        conversation=c,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "d", "name": "n", "input": nested(DEEP)}],
        },
    ),
    "batch": lambda c: services.save_messages(
        conversation=c,
        messages=[{"role": "user", "content": "fine"}, {"role": "user", "content": nested(DEEP)}],
    ),
    "metadata": lambda c: services.update_conversation(
        conversation=c, metadata={"d": nested(DEEP)}
    ),
    "synthetic": lambda c: services.save_synthetic_message(
        conversation=c,
        message_type="system",
        content_type="notification",
        content={"text": "t", "d": nested(DEEP)},
    ),
    "tool result": lambda c: services.update_tool_status(
        conversation=c, status="completed", tool_info={"call_id": "c1", "result": nested(DEEP)}
    ),
    "start": lambda c: services.start_conversation(owner=None, metadata={"d": nested(DEEP)}),
}


@pytest.mark.django_db
@pytest.mark.parametrize("where", sorted(DEEP_CALLS))
def test_ten_thousand_levels_of_nesting_are_invalid_content(
    conversation: Conversation, where: str
) -> None:
    """Regression: 10,000 nested arrays/objects raised ``RecursionError`` from the write path. Now
    each service refuses them with ``InvalidContent`` and writes nothing."""
    services.save_message(
        conversation=conversation,
        message={"role": "assistant", "content": [{"type": "tool_call", "id": "c1", "name": "n"}]},
    )
    before, conversations = state(conversation), Conversation.objects.count()
    with pytest.raises(InvalidContent, match="nested deeper"):
        DEEP_CALLS[where](conversation)
    assert state(conversation) == before
    assert Conversation.objects.count() == conversations


@pytest.mark.django_db
def test_a_deep_pending_ask_is_an_invalid_pending_ask(conversation: Conversation) -> None:
    """``set_status`` with a 10,000-level pending ask: ``InvalidPendingAsk``, status unchanged."""
    with pytest.raises(InvalidPendingAsk):
        services.set_status(
            conversation=conversation, status="paused", pending_ask={"pauseData": nested(DEEP)}
        )
    conversation.refresh_from_db()
    assert (conversation.status, conversation.pending_ask) == ("idle", None)


@pytest.mark.django_db
def test_nesting_at_the_limit_is_stored_and_served(conversation: Conversation, user: User) -> None:
    """The boundary: content nested just under ``MAX_JSON_DEPTH`` is stored and every API view
    renders it."""
    from murmur_conversations.validation import MAX_JSON_DEPTH

    # message (1) > content list (2) > block (3) > value: 97 more levels reach the limit.
    services.save_message(
        conversation=conversation,
        message={"role": "user", "content": [{"type": "x", "d": nested(MAX_JSON_DEPTH - 3)}]},
    )
    client = token_client(user)
    for route in ("display-messages/", "record/"):
        assert client.get(url(conversation.pk, route)).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [
        '{"metadata":' + '{"a":' * DEEP + "1" + "}" * (DEEP + 1),
        "[" * DEEP + "]" * DEEP,
        '{"metadata":' + dump(nested(150, "x")) + "}",
    ],
    ids=["deep-metadata", "deep-array", "metadata-over-depth-limit"],
)
def test_patch_with_deep_json_is_a_clear_400(
    conversation: Conversation, user: User, body: str
) -> None:
    """Regression: a PATCH body nested 10,000 levels deep was a 500 (``RecursionError`` in the
    JSON parser). Now it is 400 ``invalid_field``, as JSON, and nothing changes."""
    answer = token_client(user).generic(
        "PATCH", url(conversation.pk), body, content_type="application/json"
    )
    assert answer.status_code == 400
    assert answer["Content-Type"] == "application/json"
    assert answer.json()["code"] == "invalid_field"
    conversation.refresh_from_db()
    assert conversation.metadata == {}


@pytest.mark.django_db
def test_session_wire_with_deep_json_is_invalid_wire_op(user: User) -> None:
    """The session wire answers a 10,000-level body with 400 ``ERR_INVALID_WIRE_OP``."""
    answer = token_client(user).generic(
        "POST", API + "session/", "[" * DEEP + "]" * DEEP, content_type="application/json"
    )
    assert answer.status_code == 400
    assert answer.json()["code"] == "ERR_INVALID_WIRE_OP"


# ------------------------------------------------------------------------------ sizes


@pytest.mark.django_db
def test_patch_metadata_at_and_over_the_limit(
    conversation: Conversation, user: User, settings: Settings
) -> None:
    """Metadata of exactly ``MAX_METADATA_BYTES`` is accepted; one byte more is 400
    ``invalid_field`` naming the limit, and the stored metadata is unchanged."""
    settings.MURMUR_CONVERSATIONS = {"MAX_METADATA_BYTES": 1024}
    client = token_client(user)
    overhead = len(dump({"k": ""}).replace(" ", ""))
    fits = {"k": "x" * (1024 - overhead)}
    answer = client.patch(url(conversation.pk), {"metadata": fits}, format="json")
    assert answer.status_code == 200
    too_big = {"k": "x" * (1025 - overhead)}
    answer = client.patch(url(conversation.pk), {"metadata": too_big}, format="json")
    assert answer.status_code == 400
    assert answer.json()["code"] == "invalid_field"
    assert "1024" in answer.json()["detail"]
    conversation.refresh_from_db()
    assert conversation.metadata == fits


@pytest.mark.django_db
def test_a_multi_megabyte_patch_body_is_a_json_400(conversation: Conversation, user: User) -> None:
    """Regression: a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MB by default) was answered
    with Django's HTML "Bad Request" page. Now it is the API's JSON 400 ``invalid_field``."""
    body = dump({"metadata": {"k": "x" * (3 * 1024 * 1024)}})
    answer = token_client(user).generic(
        "PATCH", url(conversation.pk), body, content_type="application/json"
    )
    assert answer.status_code == 400
    assert answer["Content-Type"] == "application/json"
    assert answer.json()["code"] == "invalid_field"
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in answer.json()["detail"]


@pytest.mark.django_db
def test_a_multi_megabyte_session_wire_body_is_refused(user: User) -> None:
    """The session wire refuses an oversized body with 400 ``ERR_INVALID_WIRE_OP``."""
    body = dump({"op": "session-list", "pad": "x" * (3 * 1024 * 1024)})
    answer = token_client(user).generic("POST", API + "session/", body, "application/json")
    assert answer.status_code == 400
    assert answer.json()["code"] == "ERR_INVALID_WIRE_OP"


@pytest.mark.django_db
@override_settings(MURMUR_CONVERSATIONS={"MAX_CONTENT_BYTES": 1000})
@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "x" * 1001},
        {"role": "user", "content": "é" * 501},  # 1002 UTF-8 bytes, 501 characters
        {"role": "user", "content": "ok", "extra": "x" * 1001},
        {"role": "user", "content": [{"type": "text", "text": "x" * 1000}]},
        {"role": "user", "content": "ok", "big": 10**5000},
    ],
    ids=["text", "multibyte", "extra", "blocks", "huge-integer"],
)
def test_oversized_content_is_invalid_content_and_writes_nothing(
    conversation: Conversation, message: dict[str, JSON]
) -> None:
    """Content and extra keys over ``MAX_CONTENT_BYTES`` (measured in UTF-8 bytes of compact JSON)
    and integers too long to write as JSON raise ``InvalidContent``; nothing is written."""
    before = state(conversation)
    with pytest.raises(InvalidContent):
        services.save_message(conversation=conversation, message=message)
    assert state(conversation) == before


# ------------------------------------------------------------------------------ websocket frames


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("private_layer")
@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ({"text": "x" * 4097}, 1009),
        ({"text": "€" * 1366}, 1009),  # 1,366 characters, 4,098 UTF-8 bytes
        ({"bytes": b"\x00"}, 1003),
        ({"bytes": b"x" * 10_000}, 1003),
    ],
    ids=["text-4097", "multibyte-4098", "binary", "binary-large"],
)
@pytest.mark.parametrize("stream", ["conversation", "user"])
async def test_oversized_and_binary_client_frames_close_the_socket(
    user: User, conversation: Conversation, frame: dict[str, Any], code: int, stream: str
) -> None:
    """Text over 4 KiB closes 1009 and binary frames close 1003, on both streams."""
    path = (
        f"ws/conversations/{conversation.pk}/" if stream == "conversation" else "ws/conversations/"
    )
    communicator = await connect(path, user)
    if stream == "conversation":
        assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    await communicator.send_to(text_data=frame.get("text"), bytes_data=frame.get("bytes"))
    assert await communicator.receive_output(timeout=TIMEOUT) == {
        "type": "websocket.close",
        "code": code,
    }
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("private_layer")
async def test_client_text_up_to_four_kib_is_ignored(
    user: User, conversation: Conversation
) -> None:
    """4,096 bytes of text (and garbage JSON) change nothing: the socket stays open and the next
    write still arrives."""
    communicator = await connect(f"ws/conversations/{conversation.pk}/", user)
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "snapshot"
    for text in ("x" * 4096, "{" * 4096, '{"type":"cancel"}', "€" * 1365):
        await communicator.send_to(text_data=text)
    await db_async(services.save_message)(
        conversation=conversation, message={"role": "user", "content": "still here"}
    )
    frames = await frames_until(
        communicator, lambda f: f.get("message", {}).get("content") == {"text": "still here"}
    )
    assert all(f["type"] != "websocket.close" for f in frames)
    await communicator.disconnect()
