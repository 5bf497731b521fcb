"""The frontend shapes (docs/formats.md "Frontend shapes"): ``vercel-ui``, ``ag-ui`` and
``openai-items`` exported from the record, imported back (a fixed point), merged by message id
into the conversation they came from, and validated with AG-UI's own pydantic models."""

from __future__ import annotations

import contextlib
import io
import json
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur_conversations import services
from murmur_conversations.models import Conversation, Message
from tests.frontend_helpers import conversations
from tests.helpers import MakeConversation
from tests.import_helpers import export, run

pytestmark = pytest.mark.django_db

FORMATS = ("vercel-ui", "ag-ui", "openai-items")
ROUND_TRIP = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def import_text(user: User, text: str, fmt: str, *extra: str) -> tuple[int, str]:
    code, _out, err = run(
        "-", "--owner", user.username, "--format", fmt, *extra, stdin=io.BytesIO(text.encode())
    )
    return code, err


def without_conversation_id(text: str, conversation: Conversation) -> str:
    return text.replace(str(conversation.pk), "CONVERSATION")


def stored(conversation: Conversation) -> list[tuple[str, str]]:
    return list(
        Message.objects.filter(conversation=conversation)
        .order_by("position")
        .values_list("message_id", "role")
    )


@pytest.mark.parametrize("fmt", FORMATS)
@ROUND_TRIP
@given(record=conversations())
def test_export_import_export_is_a_fixed_point(
    make_conversation: MakeConversation, user: User, fmt: str, record: list[dict[str, Any]]
) -> None:
    original = make_conversation(owner=user)
    services.save_messages(conversation=original, messages=record)
    text = export(original, "--format", fmt)
    assert text.endswith("]\n") and isinstance(json.loads(text), list)
    key = f"copy-{uuid.uuid4().hex}"
    assert import_text(user, text, fmt, "--conversation-id", key) == (0, "")
    copy = Conversation.objects.get(owner=user, external_id=key)
    again = export(copy, "--format", fmt)
    assert without_conversation_id(again, copy) == without_conversation_id(text, original)


@pytest.mark.parametrize("fmt", FORMATS)
@ROUND_TRIP
@given(record=conversations(), cut=st.integers(0, 12))
def test_posting_the_history_again_adds_only_new_messages(
    make_conversation: MakeConversation,
    user: User,
    fmt: str,
    record: list[dict[str, Any]],
    cut: int,
) -> None:
    original = make_conversation(owner=user)
    services.save_messages(conversation=original, messages=record)
    before = stored(original)
    listed = json.loads(export(original, "--format", fmt))
    target = ("--conversation-id", str(original.pk))
    # the whole history again, and a short post (a client that lost turns): nothing changes
    for sent in (listed, listed[:cut]):
        if sent:
            assert import_text(user, json.dumps(sent), fmt, *target) == (0, "")
        assert stored(original) == before
    # the history and one new user message: exactly that message is appended
    new = {
        "vercel-ui": {"id": "new-1", "role": "user", "parts": [{"type": "text", "text": "more"}]},
        "ag-ui": {"id": "new-1", "role": "user", "content": "more"},
        "openai-items": {
            "type": "message",
            "id": "new-1",
            "role": "user",
            "content": [{"type": "input_text", "text": "more"}],
        },
    }[fmt]
    assert import_text(user, json.dumps([*listed, new]), fmt, *target) == (0, "")
    assert stored(original) == [*before, ("new-1", "user")]


@pytest.mark.parametrize("fmt", ["vercel-ui", "ag-ui"])
def test_the_list_names_its_conversation(
    make_conversation: MakeConversation, user: User, fmt: str
) -> None:
    original = make_conversation(owner=user)
    services.save_messages(
        conversation=original, messages=[{"role": "user", "id": "u1", "content": "hi"}]
    )
    listed = json.loads(export(original, "--format", fmt))
    answer = {
        "vercel-ui": {
            "id": "a1",
            "role": "assistant",
            "parts": [{"type": "text", "text": "hello"}],
            "metadata": {"conversationId": str(original.pk)},
        },
        "ag-ui": {"id": "a1", "role": "assistant", "content": "hello"},
    }[fmt]
    assert import_text(user, json.dumps([*listed, answer]), fmt) == (0, "")
    assert stored(original) == [("u1", "user"), ("a1", "assistant")]
    assert Conversation.objects.count() == 1


def test_a_foreign_conversation_id_is_as_absent_as_a_missing_one(
    make_conversation: MakeConversation, make_user: Any, user: User
) -> None:
    other = make_user("other")
    theirs = make_conversation(owner=other)
    services.save_messages(
        conversation=theirs, messages=[{"role": "user", "id": "u1", "content": "x"}]
    )
    listed = json.loads(export(theirs, "--format", "vercel-ui"))
    assert import_text(user, json.dumps(listed), "vercel-ui") == (0, "")
    assert stored(theirs) == [("u1", "user")]
    mine = Conversation.objects.get(owner=user)
    assert mine.external_id == str(theirs.pk) and stored(mine) == [("u1", "user")]


def test_a_client_side_tool_result_completes_the_stored_call(
    make_conversation: MakeConversation, user: User
) -> None:
    original = make_conversation(owner=user)
    services.save_messages(
        conversation=original,
        messages=[
            {"role": "user", "id": "u1", "content": "where am I?"},
            {
                "role": "assistant",
                "id": "a1",
                "content": [{"type": "tool_call", "id": "c1", "name": "locate", "input": {}}],
            },
        ],
    )
    listed = json.loads(export(original, "--format", "vercel-ui"))
    assert listed[1]["parts"][0]["state"] == "input-available"
    listed[1]["parts"][0].update(state="output-available", output={"city": "Lyon"})
    assert import_text(user, json.dumps(listed), "vercel-ui") == (0, "")
    again = json.loads(export(original, "--format", "vercel-ui"))
    assert again[1]["parts"][0]["state"] == "output-available"
    assert again[1]["parts"][0]["output"] == {"city": "Lyon"}
    assert original.tool_calls.get().status == "completed"
    # posting it again adds nothing
    assert import_text(user, json.dumps(listed), "vercel-ui") == (0, "")
    assert len(stored(original)) == 3


@pytest.mark.parametrize(
    ("fmt", "body", "reason"),
    [
        ("vercel-ui", [{"id": "x", "role": "robot", "parts": []}], "role"),
        ("vercel-ui", [{"role": "user", "parts": []}], "'id'"),
        ("ag-ui", [{"id": "t", "role": "tool", "content": "x"}], "toolCallId"),
        ("openai-items", [{"type": "mystery", "id": "i"}], "mystery"),
        ("vercel-ui", {"nothing": 1}, "not a vercel-ui list"),
    ],
)
def test_bad_entries_are_reported_and_the_rest_lands(
    user: User, fmt: str, body: Any, reason: str
) -> None:
    good = {
        "vercel-ui": {"id": "ok", "role": "user", "parts": [{"type": "text", "text": "fine"}]},
        "ag-ui": {"id": "ok", "role": "user", "content": "fine"},
        "openai-items": {"type": "message", "id": "ok", "role": "user", "content": "fine"},
    }[fmt]
    sent = [*body, good] if isinstance(body, list) else body
    code, err = import_text(user, json.dumps(sent), fmt, "--conversation-id", "k")
    assert code in (1, 2) and reason in err
    if isinstance(body, list):
        assert code == 1
        assert stored(Conversation.objects.get(owner=user)) == [("ok", "user")]
    else:
        assert code == 2 and not Conversation.objects.exists()


def test_auto_detection_tells_the_shapes_apart(
    make_conversation: MakeConversation, user: User
) -> None:
    original = make_conversation(owner=user)
    services.save_messages(
        conversation=original,
        messages=[
            {"role": "user", "id": "u1", "content": "hi"},
            {
                "role": "assistant",
                "id": "a1",
                "content": [{"type": "tool_call", "id": "c", "name": "x", "input": {}}],
            },
            {"role": "tool", "id": "r1", "tool_call_id": "c", "content": "ok"},
        ],
    )
    for fmt in FORMATS:
        text = export(original, "--format", fmt)
        code, _out, err = run(
            "-", "--owner", user.username, "--conversation-id", fmt, stdin=io.BytesIO(text.encode())
        )
        assert (code, err) == (0, "")
        assert Conversation.objects.get(owner=user, external_id=fmt).source == fmt


@ROUND_TRIP
@given(record=conversations())
def test_ag_ui_output_parses_with_the_protocol_models(
    make_conversation: MakeConversation, user: User, record: list[dict[str, Any]]
) -> None:
    from ag_ui.core import Message as AgUiMessage
    from pydantic import TypeAdapter

    original = make_conversation(owner=user)
    services.save_messages(conversation=original, messages=record)
    listed = json.loads(export(original, "--format", "ag-ui"))
    parsed = TypeAdapter(list[AgUiMessage]).validate_python(listed)
    # the package's own camelCase serialisation is what we wrote
    dumped = TypeAdapter(list[AgUiMessage]).dump_python(parsed, by_alias=True, mode="json")
    assert dumped == listed


KEYS = st.sampled_from(
    [
        "id",
        "role",
        "parts",
        "type",
        "text",
        "state",
        "toolCallId",
        "toolName",
        "input",
        "output",
        "errorText",
        "url",
        "mediaType",
        "content",
        "toolCalls",
        "function",
        "arguments",
        "name",
        "source",
        "value",
        "error",
        "call_id",
        "summary",
        "metadata",
        "encryptedValue",
        "image_url",
        "file_data",
        "providerMetadata",
    ]
)
VALUES = st.sampled_from(
    [
        "user",
        "assistant",
        "tool",
        "reasoning",
        "system",
        "text",
        "file",
        "reasoning",
        "tool-x",
        "dynamic-tool",
        "output-available",
        "output-error",
        "message",
        "function_call",
        "function_call_output",
        "image",
        "data",
        "url",
        "{}",
        "[1",
        "",
    ]
)
shapes = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | VALUES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=6),
    max_leaves=30,
)


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=150, deadline=None, derandomize=True)
@given(document=shapes)
def test_any_document_parses_without_raising(fmt: str, document: Any) -> None:
    """Pure: whatever the JSON, the parser gives a key, messages and problems, never raises."""
    from murmur_conversations.importers.frontends import FrontendParser
    from murmur_conversations.importers.records import (
        Begin,
        ParseContext,
        Parsed,
        Problem,
        SourceLine,
    )
    from murmur_conversations.messages import normalize_message

    parser = FrontendParser(ParseContext(), name=fmt)
    assert parser.feed(SourceLine(1, json.dumps(document))) == []
    for item in parser.finish():
        assert isinstance(item, Begin | Parsed | Problem)
        if isinstance(item, Parsed):
            with contextlib.suppress(ValueError):  # refused alone by the writer, with its reason
                normalize_message(item.message, max_content_bytes=1 << 20)


@ROUND_TRIP
@given(record=conversations())
def test_openai_items_parse_with_the_sdks_item_types(
    make_conversation: MakeConversation, user: User, record: list[dict[str, Any]]
) -> None:
    """Each item is the OpenAI SDK's Conversations item of its ``type``, with no key it does not
    know."""
    from openai.types.conversations import Message as ItemMessage
    from openai.types.responses import (
        ResponseFunctionToolCallItem,
        ResponseFunctionToolCallOutputItem,
        ResponseReasoningItem,
    )

    models: dict[str, Any] = {
        "message": ItemMessage,
        "function_call": ResponseFunctionToolCallItem,
        "function_call_output": ResponseFunctionToolCallOutputItem,
        "reasoning": ResponseReasoningItem,
    }
    original = make_conversation(owner=user)
    services.save_messages(conversation=original, messages=record)
    for item in json.loads(export(original, "--format", "openai-items")):
        parsed = models[item["type"]].model_validate(item)
        assert not parsed.model_extra, item
        parts = [
            *(getattr(parsed, "content", None) or []),
            *(getattr(parsed, "summary", None) or []),
        ]
        assert all(not part.model_extra for part in parts if hasattr(part, "model_extra")), item
