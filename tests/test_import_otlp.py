"""OpenTelemetry GenAI traces (docs/formats.md "OpenTelemetry GenAI traces"): ``otlp-json`` and
``otlp-proto`` imports of an agent run of 40 model calls (each repeating the history) as one
transcript with each message once, in every spelling; usage rows per call; failed tool calls;
grouping; export -> import -> export fixed points; bad input refused line by line."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from murmur_conversations import services
from murmur_conversations.models import Conversation, Message, MessageUsage, ToolCall
from murmur_conversations.traces import otlp
from tests.frontend_helpers import conversations
from tests.helpers import MakeConversation, MakeUser
from tests.import_helpers import export, run
from tests.otlp_helpers import (
    FAILING_STEP,
    PROMPT,
    agent_run,
    frame_of,
    hex_id,
    http_span_line,
    json_lines,
    proto_frames,
    transcript,
    usage_of,
)

pytestmark = pytest.mark.django_db

CALLS = 40
ROUND_TRIP = settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def import_text(user: User, text: str, fmt: str = "otlp-json", *extra: str) -> tuple[int, str, str]:
    return run(
        "-", "--owner", user.username, "--format", fmt, *extra, stdin=io.BytesIO(text.encode())
    )


def import_bytes(user: User, data: bytes, *extra: str) -> tuple[int, str, str]:
    return run(
        "-", "--owner", user.username, "--format", "otlp-proto", *extra, stdin=io.BytesIO(data)
    )


def export_bytes(conversation: Conversation) -> bytes:
    from django.core.management import call_command

    out = io.BytesIO()
    call_command(
        "export_conversation", str(conversation.pk), "--format", "otlp-proto", binary_stdout=out
    )
    return out.getvalue()


def the_conversation(user: User) -> Conversation:
    [conversation] = Conversation.objects.filter(owner=user)
    return conversation


def record_of(conversation: Conversation) -> list[tuple[str, Any, str, bool]]:
    return [
        (m.role, m.content, m.tool_call_id, m.is_error)
        for m in Message.objects.filter(conversation=conversation).order_by("position")
    ]


def expected_record(calls: int) -> list[tuple[str, Any, str, bool]]:
    out = []
    for message in transcript(calls):
        parts = message["parts"]
        if message["role"] == "tool":
            response = parts[0]
            failed = response["id"] == f"call_{FAILING_STEP}"
            out.append(("tool", response["response"], response["id"], failed))
            continue
        if len(parts) == 1:
            out.append((message["role"], parts[0]["content"], "", False))
            continue
        blocks = [{"type": "text", "text": parts[0]["content"]}]
        call = parts[1]
        blocks.append(
            {"type": "tool_call", "id": call["id"], "name": "bash", "input": call["arguments"]}
        )
        out.append((message["role"], blocks, "", False))
    return out


def test_forty_model_calls_import_as_one_transcript_with_each_message_once(user: User) -> None:
    text = json_lines(agent_run(CALLS)) + http_span_line()
    code, out, err = import_text(user, text)
    assert (code, err) == (0, "")
    conversation = the_conversation(user)
    record = record_of(conversation)
    assert len(record) == 2 + 2 * (CALLS - 1) + 1 == conversation.record_length
    assert record == expected_record(CALLS)
    assert conversation.title == PROMPT
    lines = len(text.splitlines())
    assert (
        f"; {lines} line(s) read: {lines - 1} imported, 0 kept as source records, 1 not kept" in out
    )
    # every model call's usage and model, once
    rows = MessageUsage.objects.filter(conversation=conversation).order_by("message__position")
    assert rows.count() == CALLS
    assert {r.model for r in rows} == {"gpt-test-0613"}
    expected = [usage_of(step) for step in range(CALLS)]
    assert [r.input_tokens for r in rows] == [u["input"] - u["cache_read"] for u in expected]
    assert [r.cache_read_tokens for r in rows] == [u["cache_read"] for u in expected]
    assert [r.output_tokens for r in rows] == [u["output"] for u in expected]
    conversation.refresh_from_db()
    assert conversation.output_tokens == sum(u["output"] for u in expected)
    # the failed tool call, and the others completed
    calls = {c.call_id: c for c in ToolCall.objects.filter(conversation=conversation)}
    assert len(calls) == CALLS - 1
    assert calls[f"call_{FAILING_STEP}"].status == "failed"
    assert "exit code 1" in str(calls[f"call_{FAILING_STEP}"].error)
    assert {c.status for k, c in calls.items() if k != f"call_{FAILING_STEP}"} == {"completed"}
    # importing again adds nothing
    again = import_text(user, text)
    assert again[0] == 0 and "0 message(s) added" in again[1]
    assert Message.objects.filter(conversation=conversation).count() == len(record)


@pytest.mark.parametrize("spelling", ["older", "events", "structured", "details", "content-events"])
def test_older_spellings_import_the_same_transcript(
    user: User, make_user: MakeUser, spelling: str
) -> None:
    assert import_text(user, json_lines(agent_run(CALLS)))[0] == 0
    other = make_user()
    code, _out, err = import_text(other, json_lines(agent_run(CALLS, spelling=spelling)))
    assert (code, err) == (0, "")
    current, older = the_conversation(user), the_conversation(other)
    assert record_of(older) == record_of(current)

    def usage(c: Conversation) -> list[tuple[str, int, int, int]]:
        return list(
            MessageUsage.objects.filter(conversation=c)
            .order_by("message__position")
            .values_list("model", "input_tokens", "output_tokens", "cache_read_tokens")
        )

    assert usage(older) == usage(current)


def test_conversations_are_grouped_by_conversation_id_else_by_trace(
    user: User, make_user: MakeUser
) -> None:
    two_traces = agent_run(3, trace="a") + agent_run(2, trace="b")
    assert import_text(user, json_lines(two_traces))[0] == 0
    keys = set(Conversation.objects.filter(owner=user).values_list("external_id", flat=True))
    assert keys == {hex_id(16, "a"), hex_id(16, "b")}
    # the same conversation id on two traces (two runs of one chat): one conversation, the
    # id read from the agent span the calls are children of
    other = make_user()
    first = agent_run(3, trace="c", conversation_id="thread-1")
    second = agent_run(4, trace="d", conversation_id="thread-1")
    assert import_text(other, json_lines(first + second))[0] == 0
    conversation = the_conversation(other)
    assert conversation.external_id == "thread-1"
    # the longer run holds the shorter one, whose last answer differs from the longer's step 2
    record = record_of(conversation)
    assert record.count(("assistant", "Done in 2.", "", False)) == 1
    assert [r for r in record if r[1] != "Done in 2."] == expected_record(4)


def test_otlp_proto_frames_import_the_same_transcript(user: User, make_user: MakeUser) -> None:
    assert import_text(user, json_lines(agent_run(CALLS)))[0] == 0
    other = make_user()
    code, _out, err = import_bytes(other, proto_frames(agent_run(CALLS)))
    assert (code, err) == (0, "")
    assert record_of(the_conversation(other)) == record_of(the_conversation(user))
    # a torn last frame and a frame that is not a request are refused by number
    third = make_user()
    data = proto_frames(agent_run(3), size=2) + frame_of(b"\xff\xff\xff") + b"\x00\x00\x01"
    code, _out, err = import_bytes(third, data)
    assert code == 1
    assert ":4: not an OTLP trace export" in err and ":5: torn frame" in err
    assert record_of(the_conversation(third)) == expected_record(3)


def test_import_export_import_is_a_fixed_point(user: User, make_user: MakeUser) -> None:
    assert import_text(user, json_lines(agent_run(CALLS)))[0] == 0
    first = the_conversation(user)
    text = export(first, "--format", "otlp-json")
    other = make_user()
    assert import_text(other, text)[:1] == (0,)
    second = the_conversation(other)
    assert second.external_id == first.external_id
    assert _full_record(second) == _full_record(first)
    assert export(second, "--format", "otlp-json") == text
    # and through protobuf frames
    third = make_user()
    assert import_bytes(third, export_bytes(first))[0] == 0
    assert export(the_conversation(third), "--format", "otlp-json") == text


def _full_record(conversation: Conversation) -> list[tuple[Any, ...]]:
    return [
        (m.message_id, m.role, m.content, m.tool_call_id, m.is_error, m.extra, m.created_at)
        for m in Message.objects.filter(conversation=conversation).order_by("position")
    ]


def test_export_is_one_request_per_line_in_otlp_json(user: User) -> None:
    assert import_text(user, json_lines(agent_run(3)))[0] == 0
    lines = export(the_conversation(user), "--format", "otlp-json").splitlines()
    spans = [json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"] for line in lines]
    assert all(len(s) == 1 for s in spans)
    first = spans[0][0]
    assert len(first["traceId"]) == 32 and len(first["spanId"]) == 16
    assert isinstance(first["startTimeUnixNano"], str) and first["kind"] == 3
    names = [s[0]["name"] for s in spans]
    assert names == [
        "chat gpt-test-0613",
        "execute_tool bash",
        "chat gpt-test-0613",
        "execute_tool bash",
        "chat gpt-test-0613",
    ]
    attributes = {a["key"]: a["value"] for a in first["attributes"]}
    assert attributes["gen_ai.usage.input_tokens"] == {"intValue": "100"}
    assert json.loads(attributes["gen_ai.output.messages"]["stringValue"])[0]["role"] == "assistant"


@ROUND_TRIP
@given(record=conversations())
def test_generated_conversations_round_trip_through_otlp_json(
    make_conversation: MakeConversation, make_user: MakeUser, record: list[dict[str, Any]]
) -> None:
    owner = make_user()
    original = make_conversation(owner=owner)
    services.save_messages(conversation=original, messages=record)
    text = export(original, "--format", "otlp-json")
    copier = make_user()
    code, _out, err = import_text(copier, text)
    assert (code, err) == (0, "")
    copy = the_conversation(copier)
    again = export(copy, "--format", "otlp-json")
    assert again == text
    stored = [(m.message_id, m.role, m.tool_call_id, m.is_error) for m in _messages(original)]
    assert [(m.message_id, m.role, m.tool_call_id, m.is_error) for m in _messages(copy)] == stored

    def statuses(c: Conversation) -> list[tuple[str, str]]:
        return sorted(ToolCall.objects.filter(conversation=c).values_list("call_id", "status"))

    assert statuses(copy) == statuses(original)
    another = make_user()
    assert import_text(another, again)[0] == 0
    assert _full_record(the_conversation(another))[1:] == _full_record(copy)[1:]


def _messages(conversation: Conversation) -> list[Message]:
    return list(Message.objects.filter(conversation=conversation).order_by("position"))


def _line(spans: list[otlp.Span]) -> str:
    from tests.otlp_helpers import request

    return json.dumps(otlp.json_of(request(spans)))


def test_bad_lines_are_refused_alone_and_the_rest_lands(user: User) -> None:
    good = json_lines(agent_run(3), size=100).splitlines()
    chat = json.loads(good[0])
    span = chat["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    huge = json.loads(json.dumps(chat))
    huge["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "ab" * 40
    wrong_time = json.loads(json.dumps(chat))
    wrong_time["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["startTimeUnixNano"] = "9" * 30
    wrong_type = {"resourceSpans": [{"scopeSpans": [{"spans": [dict(span, name=["x"])]}]}]}
    bad_messages = json.loads(json.dumps(chat))
    for attribute in bad_messages["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["attributes"]:
        if attribute["key"] == "gen_ai.input.messages":
            attribute["value"] = {"stringValue": '[{"role": 5, "parts": []}]'}
    lines = [
        "not json at all",
        "[1, 2, 3]",
        '{"hello": "world"}',
        json.dumps(huge),
        json.dumps(wrong_time),
        json.dumps(wrong_type),
        json.dumps(bad_messages),
        '{"resourceSpans": "nope"}',
        good[0],
        '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "00"}]}]}]}',
    ]
    code, out, err = import_text(user, "\n".join(lines) + "\n")
    assert code == 1
    reported = [line.split(":", 2)[1] for line in err.splitlines() if line.startswith("<stdin>:")]
    assert reported == ["1", "2", "3", "4", "5", "6", "7", "8", "10"]
    assert "traceId is 80 characters, not 32 hex digits" in err
    assert "role is not a non-empty string" in err
    assert "10 line(s) read: 1 imported, 0 kept as source records, 9 refused" in out
    assert record_of(the_conversation(user)) == expected_record(3)


ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "resourceSpans",
                    "scopeSpans",
                    "spans",
                    "traceId",
                    "spanId",
                    "name",
                    "attributes",
                    "key",
                    "value",
                    "stringValue",
                    "intValue",
                    "events",
                    "status",
                    "code",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
MESSAGE_VALUES = st.recursive(
    st.none()
    | st.integers()
    | st.text(max_size=5)
    | st.sampled_from(["text", "tool_call", "user"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["role", "parts", "type", "content", "id", "name", "arguments", "response"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=10,
)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(document=ANY_JSON, messages=MESSAGE_VALUES)
def test_any_line_parses_without_raising(document: Any, messages: Any) -> None:
    from murmur_conversations.importers import otlp as parser_module
    from murmur_conversations.importers.records import ParseContext, SourceLine

    parser = parser_module.json_parser(ParseContext())
    span = agent_run(1)[1]
    attributes = dict(span.attributes, **{"gen_ai.input.messages": json.dumps(messages)})
    lines = [
        json.dumps(document),
        _line([otlp.Span(**{**span.__dict__, "attributes": attributes})]),
    ]
    for number, text in enumerate(lines, start=1):
        parser.feed(SourceLine(number, text))
    parser.finish()
    binary = parser_module.proto_parser(ParseContext())
    binary.feed(SourceLine(1, "", data=json.dumps(document).encode()))
    binary.finish()


def test_auto_detection_tells_otlp_json(user: User) -> None:
    path_text = json_lines(agent_run(2))
    code, out, err = run("-", "--owner", user.username, stdin=io.BytesIO(path_text.encode()))
    assert (code, err) == (0, "") and "(otlp-json)" in out
    code, _out, err = import_text(user, path_text, "openai")
    assert code == 2 and "looks like otlp-json" in err


def test_follow_refuses_binary_frames(user: User) -> None:
    code, _out, err = run(
        "-",
        "--owner",
        user.username,
        "--format",
        "otlp-proto",
        "--follow",
        stdin=io.BytesIO(b""),
    )
    assert code == 2 and "--follow reads lines of text" in err


def test_a_deleted_conversation_stays_deleted(user: User) -> None:
    text = json_lines(agent_run(3))
    assert import_text(user, text)[0] == 0
    services.delete_conversation(conversation=the_conversation(user))
    code, out, err = import_text(user, text)
    assert code == 0 and "deleted" in err
    assert not Conversation.objects.filter(owner=user).exists()
    lines = len(text.splitlines())
    assert f"{lines} line(s) read: 0 imported, 0 kept as source records, {lines} not kept" in out


def test_unique_ids_even_when_the_history_is_rewritten(user: User) -> None:
    """A history that changes (a compacted context) keeps both versions, each once."""
    spans = agent_run(3)
    chat = spans[3]  # the second call
    rewritten = json.loads(chat.attributes["gen_ai.input.messages"])
    rewritten[1] = {"role": "user", "parts": [{"type": "text", "content": "(summary)"}]}
    spans[3] = otlp.Span(
        **{
            **chat.__dict__,
            "attributes": {**chat.attributes, "gen_ai.input.messages": json.dumps(rewritten)},
        }
    )
    assert import_text(user, json_lines(spans))[0] == 0
    record = record_of(the_conversation(user))
    assert [r for r in record if r[1] == "(summary)"] and [r for r in record if r[1] == PROMPT]
    ids = list(Message.objects.values_list("message_id", flat=True))
    assert len(ids) == len(set(ids))


def test_usage_of_the_wrong_type_costs_the_message_nothing(user: User) -> None:
    spans = agent_run(2)
    chat = spans[1]
    spans[1] = otlp.Span(
        **{**chat.__dict__, "attributes": {**chat.attributes, "gen_ai.usage.input_tokens": "lots"}}
    )
    code, out, err = import_text(user, json_lines(spans))
    assert code == 0 and "imported without its usage" in err
    assert "1 message(s) without their unreadable usage" in out
    conversation = the_conversation(user)
    assert record_of(conversation) == expected_record(2)
    assert MessageUsage.objects.filter(conversation=conversation).count() == 1


# ---------------------------------------------------------------------- a line is refused whole


def _one_call(
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    *,
    usage: dict[str, Any] | None = None,
    span_id: str = "",
    trace_id: str = "",
    conversation: str = "",
    start_ns: int = 1_700_000_000_000_000_000,
) -> str:
    """One OTLP JSON line of one ``chat`` span with these input and output messages
    (``gen_ai.input.messages`` / ``gen_ai.output.messages`` as JSON text)."""
    attributes: list[dict[str, Any]] = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
        {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(inputs)}},
        {"key": "gen_ai.output.messages", "value": {"stringValue": json.dumps(outputs)}},
    ]
    if conversation:
        attributes.append({"key": "gen_ai.conversation.id", "value": {"stringValue": conversation}})
    attributes += [{"key": k, "value": v} for k, v in (usage or {}).items()]
    span = {
        "traceId": trace_id or hex_id(16, "t", conversation),
        "spanId": span_id or hex_id(8, "s", json.dumps([inputs, outputs])[:2000]),
        "name": "chat",
        "kind": 3,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + 1000),
        "attributes": attributes,
    }
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


def _text(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


REFUSED_WHOLE = {
    "tool call id of the wrong type": (
        [_text("user", "x")],
        [
            {
                "role": "assistant",
                "parts": [
                    {"type": "text", "content": "y"},
                    {"type": "tool_call", "id": 5, "name": "f", "arguments": {}},
                ],
            }
        ],
    ),
    "a file part nested 900 deep": (
        [
            {
                "role": "user",
                "parts": [
                    {"type": "text", "content": "x"},
                    {"type": "file", "file_id": "f", "data": _nested(900)},
                ],
            }
        ],
        [_text("assistant", "y")],
    ),
    "an input text larger than the content limit": (
        [_text("user", "x"), _text("user", "z" * (9 * 1024 * 1024))],
        [_text("assistant", "y")],
    ),
    "a text part with a number as content": (
        [{"role": "user", "parts": [{"type": "text", "content": 5}]}],
        [_text("assistant", "y")],
    ),
    "a text part without content": (
        [_text("user", "x")],
        [{"role": "assistant", "parts": [{"type": "text"}]}],
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED_WHOLE))
def test_a_refused_line_stores_none_of_its_messages(user: User, case: str) -> None:
    inputs, outputs = REFUSED_WHOLE[case]
    other = _one_call([_text("user", "q")], [_text("assistant", "a")], conversation="other")
    code, out, err = import_text(user, _one_call(inputs, outputs) + "\n" + other + "\n")
    assert code == 1, (out, err)
    assert "2 line(s) read: 1 imported, 0 kept as source records, 1 refused" in out
    assert "<stdin>:1:" in err
    assert [(r, c) for r, c, _, _ in record_of(the_conversation(user))] == [
        ("user", "q"),
        ("assistant", "a"),
    ]


def test_a_refused_line_leaves_the_other_lines_of_its_conversation_whole(user: User) -> None:
    first = _one_call([_text("user", "q1")], [_text("assistant", "a1")], conversation="c")
    bad = _one_call(
        [_text("user", "q1"), _text("assistant", "a1"), _text("user", "q2")],
        [{"role": "assistant", "parts": [{"type": "tool_call", "id": 5, "name": "f"}]}],
        conversation="c",
        start_ns=1_700_000_001_000_000_000,
    )
    code, out, _err = import_text(user, first + "\n" + bad + "\n")
    assert code == 1
    assert "2 line(s) read: 1 imported, 0 kept as source records, 1 refused" in out
    assert [(r, c) for r, c, _, _ in record_of(the_conversation(user))] == [
        ("user", "q1"),
        ("assistant", "a1"),
    ]


@pytest.mark.parametrize("spelling", ["NaN", "Infinity", "-Infinity"])
def test_a_usage_double_that_is_no_count_costs_the_message_its_usage_only(
    user: User, spelling: str
) -> None:
    usage = {"gen_ai.usage.input_tokens": {"doubleValue": spelling}}
    line = _one_call([_text("user", "x")], [_text("assistant", "y")], usage=usage)
    code, out, err = import_text(user, line + "\n")
    assert code == 0, (out, err)
    assert "imported without its usage" in err and "NaN or infinity" not in err
    conversation = the_conversation(user)
    assert [(r, c) for r, c, _, _ in record_of(conversation)] == [("user", "x"), ("assistant", "y")]
    assert not MessageUsage.objects.filter(conversation=conversation).exists()
    assistant = Message.objects.get(conversation=conversation, role="assistant")
    assert assistant.extra["usage_unread"]["input_tokens"] == spelling


# ---------------------------------------------------------------------- trace first, round trip


@ROUND_TRIP
@given(
    turns=st.lists(
        st.tuples(
            st.text(min_size=1, max_size=8),
            st.text(min_size=1, max_size=8),
            st.none() | st.sampled_from(["stop", "length", "tool_call"]),
            st.none() | st.sampled_from(["m", "gpt-x"]),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_a_trace_round_trips_with_only_what_it_held(
    make_user: MakeUser, turns: list[tuple[str, str, str | None, str | None]]
) -> None:
    lines, history = [], []
    for step, (question, answer, reason, model) in enumerate(turns):
        history.append(_text("user", question))
        output = _text("assistant", answer)
        if reason is not None:
            output["finish_reason"] = reason
        usage = {"gen_ai.request.model": {"stringValue": model}} if model else None
        lines.append(
            _one_call(
                list(history),
                [output],
                usage=usage,
                conversation="c",
                span_id=hex_id(8, "call", step),
                start_ns=1_700_000_000_000_000_000 + step * 10**9,
            )
        )
        history.append(output)
    first_owner = make_user()
    assert import_text(first_owner, "\n".join(lines) + "\n")[0] == 0
    first = the_conversation(first_owner)
    extras = [m.extra for m in _messages(first) if m.role == "assistant"]
    for (_q, _a, reason, model), extra in zip(turns, extras, strict=True):
        assert extra.get("finish_reason") == reason
        assert extra.get("model") == model
    text = export(first, "--format", "otlp-json")
    second_owner = make_user()
    assert import_text(second_owner, text)[0] == 0
    second = the_conversation(second_owner)
    assert _full_record(second) == _full_record(first)
    assert export(second, "--format", "otlp-json") == text


def test_ids_of_zeros_and_null_resource_spans_are_refused(user: User) -> None:
    good = _one_call([_text("user", "q")], [_text("assistant", "a")], conversation="c")
    zero_trace = json.loads(good)
    zero_trace["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "0" * 32
    zero_span = json.loads(good)
    zero_span["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = "0" * 16
    root_of_zeros = json.loads(good)
    root_of_zeros["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["parentSpanId"] = "0" * 16
    lines = [
        json.dumps(zero_trace),
        json.dumps(zero_span),
        '{"resourceSpans": null}',
        json.dumps(root_of_zeros),
    ]
    code, out, err = import_text(user, "\n".join(lines) + "\n")
    assert code == 1
    assert "4 line(s) read: 1 imported, 0 kept as source records, 3 refused" in out
    assert "spans[0].traceId is all zeros" in err and "spans[0].spanId is all zeros" in err
    assert "<stdin>:3: not an OTLP trace export (no 'resourceSpans')" in err
    assert [(r, c) for r, c, _, _ in record_of(the_conversation(user))] == [
        ("user", "q"),
        ("assistant", "a"),
    ]


def test_a_reasoning_signature_is_not_imported_nor_exported(user: User) -> None:
    secret = "sk-ant-api03-" + "A" * 40
    output = {
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "content": "hmm", "signature": secret},
            {"type": "text", "content": "a"},
        ],
    }
    code, _out, err = import_text(user, _one_call([_text("user", "q")], [output]) + "\n")
    assert (code, err) == (0, "")
    conversation = the_conversation(user)
    assistant = Message.objects.get(conversation=conversation, role="assistant")
    assert assistant.content == [{"type": "thinking", "text": "hmm"}, {"type": "text", "text": "a"}]
    assert secret not in json.dumps(list(conversation.messages.values_list("extra", flat=True)))
    assert "signature" not in export(conversation, "--format", "otlp-json")


# ---------------------------------------------------------------------- each message once


def _import_calls(user: User, calls: list[tuple[list[dict[str, Any]], dict[str, Any]]]) -> Any:
    lines = [
        _one_call(
            inputs,
            [output],
            conversation="c",
            span_id=hex_id(8, "call", step),
            start_ns=1_700_000_000_000_000_000 + step * 10**9,
        )
        for step, (inputs, output) in enumerate(calls)
    ]
    code, out, err = import_text(user, "\n".join(lines) + "\n")
    assert code == 0, (out, err)
    return [(r, c) for r, c, _, _ in record_of(the_conversation(user))]


_WORDS = st.sampled_from(["yes", "no", "go on", "done"])


@ROUND_TRIP
@given(
    turns=st.lists(st.tuples(_WORDS, _WORDS), min_size=1, max_size=5),
    system_from=st.none() | st.integers(min_value=0, max_value=4),
)
@example(turns=[("yes", "no"), ("go on", "done")], system_from=1)  # the attacker's case
@example(turns=[("yes", "no"), ("yes", "no"), ("yes", "done")], system_from=2)
def test_a_growing_history_keeps_each_message_once(
    make_user: MakeUser, turns: list[tuple[str, str]], system_from: int | None
) -> None:
    """Histories that grow by appending (with repeated texts), and that gain a leading system
    message from some call on: the record is the last history, each message once."""
    calls, history = [], []
    for step, (question, answer) in enumerate(turns):
        history.append(_text("user", question))
        system = (
            [_text("system", "summary")] if system_from is not None and step >= system_from else []
        )
        calls.append(([*system, *history], _text("assistant", answer)))
        history.append(_text("assistant", answer))
    record = _import_calls(make_user(), calls)
    expected = [(m["role"], m["parts"][0]["content"]) for m in history]
    assert [m for m in record if m[0] != "system"] == expected
    has_system = system_from is not None and system_from < len(turns)
    assert record.count(("system", "summary")) == (1 if has_system else 0)


@ROUND_TRIP
@given(
    turns=st.lists(st.tuples(_WORDS, _WORDS), min_size=2, max_size=5),
    edit=st.tuples(st.integers(min_value=0, max_value=9), st.sampled_from(["edited", "yes"])),
)
def test_an_edited_history_adds_the_changed_message_once(
    make_user: MakeUser, turns: list[tuple[str, str]], edit: tuple[int, str]
) -> None:
    """A later call whose history changed one earlier message: that message is added once and
    nothing of the history is stored more often than one call holds it."""
    calls, history = [], []
    for step, (question, answer) in enumerate(turns):
        history.append(_text("user", question))
        if step == len(turns) - 1:
            at = edit[0] % len(history)
            history[at] = _text(history[at]["role"], edit[1])
        calls.append((list(history), _text("assistant", answer)))
        history.append(_text("assistant", answer))
    record = _import_calls(make_user(), calls)
    most: dict[tuple[str, str], int] = {}
    for inputs, output in calls:
        seen = [(m["role"], m["parts"][0]["content"]) for m in [*inputs, output]]
        for message in set(seen):
            most[message] = max(most.get(message, 0), seen.count(message))
    for message in set(record):
        assert record.count(message) <= most[message]
    final = [(m["role"], m["parts"][0]["content"]) for m in history]
    for message in set(final):
        assert record.count(message) >= final.count(message)


def test_a_line_of_several_messages_is_refused_whole(user: User) -> None:
    """The writer's own rule, whatever the format: a Claude Code line of two tool results, one
    over the content limit, stores neither."""
    base = {"sessionId": "s", "timestamp": "2025-01-01T00:00:00Z", "cwd": "/tmp"}
    lines = [
        {**base, "type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}},
        {
            **base,
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "message": {
                "id": "msg1",
                "role": "assistant",
                "model": "m",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}},
                    {"type": "tool_use", "id": "t2", "name": "Bash", "input": {}},
                ],
            },
        },
        {
            **base,
            "type": "user",
            "uuid": "u2",
            "parentUuid": "a1",
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "z" * (9 << 20)},
                ],
            },
        },
    ]
    text = "\n".join(json.dumps(line) for line in lines) + "\n"
    code, out, _err = import_text(user, text, "claude-code")
    assert code == 1, out
    assert "1 refused" in out
    assert not Message.objects.filter(conversation__owner=user, role="tool").exists()
