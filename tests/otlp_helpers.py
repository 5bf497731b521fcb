"""Helpers of the OTLP trace tests: a generator of our own making for an agent run's trace (one
model call per step, each repeating the whole history, and a tool execution per call), written in
the current GenAI spelling (``gen_ai.input.messages``), OpenLLMetry's flattened attributes, or
the span events of v1.36.0, or with the messages as structured values or on the inference
details event; and the OTLP JSON / protobuf framing of its spans."""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

from murmur_conversations.traces import otlp

#: When the run starts (nanoseconds since the epoch): 2025-09-07 09:52:03 UTC.
START_NS = 1_757_238_723_000_000_000
STEP_NS = 1_000_000_000
FAILING_STEP = 7
SYSTEM_PROMPT = "You are a careful coding agent."
PROMPT = "Count the files, step by step."


def hex_id(size: int, *parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[: 2 * size]


def transcript(calls: int) -> list[dict[str, Any]]:
    """The run as ChatMessages: system, user, then per step an assistant turn (a tool call, the
    last one a final answer) and the call's result; step ``FAILING_STEP``'s call fails."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "parts": [{"type": "text", "content": SYSTEM_PROMPT}]},
        {"role": "user", "parts": [{"type": "text", "content": PROMPT}]},
    ]
    for step in range(calls):
        if step == calls - 1:
            messages.append(
                {"role": "assistant", "parts": [{"type": "text", "content": f"Done in {step}."}]}
            )
            break
        messages.append(
            {
                "role": "assistant",
                "parts": [
                    {"type": "text", "content": f"Step {step}."},
                    {
                        "type": "tool_call",
                        "id": f"call_{step}",
                        "name": "bash",
                        "arguments": {"cmd": f"ls part{step}"},
                    },
                ],
            }
        )
        result = "exit code 1: no such file" if step == FAILING_STEP else f"{step} files"
        messages.append(
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": f"call_{step}", "response": result}],
            }
        )
    return messages


def usage_of(step: int) -> dict[str, int]:
    """The usage each step's call reports (the conventions' spelling: input counts cache reads)."""
    return {"input": 100 + 10 * step, "output": 20 + step, "cache_read": 50 if step else 0}


def _content(message: dict[str, Any]) -> str:
    texts = [p["content"] for p in message["parts"] if p["type"] == "text"]
    return "\n".join(texts)


def _flat(side: str, index: int, message: dict[str, Any]) -> dict[str, Any]:
    """OpenLLMetry's flattened attributes of one message."""
    prefix = f"gen_ai.{side}.{index}"
    out: dict[str, Any] = {f"{prefix}.role": message["role"]}
    if message["role"] == "tool":
        response = message["parts"][0]
        out[f"{prefix}.content"] = response["response"]
        out[f"{prefix}.tool_call_id"] = response["id"]
        return out
    out[f"{prefix}.content"] = _content(message)
    calls = [p for p in message["parts"] if p["type"] == "tool_call"]
    for n, call in enumerate(calls):
        out[f"{prefix}.tool_calls.{n}.id"] = call["id"]
        out[f"{prefix}.tool_calls.{n}.name"] = call["name"]
        out[f"{prefix}.tool_calls.{n}.arguments"] = json.dumps(call["arguments"])
    if side == "completion":
        out[f"{prefix}.finish_reason"] = "tool_calls" if calls else "stop"
    return out


def _event_of(message: dict[str, Any], time_ns: int) -> otlp.Event:
    """A v1.36.0 message event, its body fields as attributes."""
    role = message["role"]
    name = f"gen_ai.{role}.message"
    if role == "tool":
        response = message["parts"][0]
        return otlp.Event(name, time_ns, {"content": response["response"], "id": response["id"]})
    fields: dict[str, Any] = {"content": _content(message)}
    calls = [p for p in message["parts"] if p["type"] == "tool_call"]
    if calls:
        fields["tool_calls"] = json.dumps(
            [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                }
                for c in calls
            ]
        )
    return otlp.Event(name, time_ns, fields)


def _openai_of(message: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI Chat Completions message (the ``gen_ai.prompt`` JSON of the oldest events)."""
    if message["role"] == "tool":
        response = message["parts"][0]
        return {"role": "tool", "content": response["response"], "tool_call_id": response["id"]}
    out: dict[str, Any] = {"role": message["role"], "content": _content(message)}
    calls = [p for p in message["parts"] if p["type"] == "tool_call"]
    if calls:
        out["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
            }
            for c in calls
        ]
    return out


def _choice_of(message: dict[str, Any], time_ns: int) -> otlp.Event:
    event = _event_of(message, time_ns)
    body = {"role": "assistant", **event.attributes}
    calls = [p for p in message["parts"] if p["type"] == "tool_call"]
    return otlp.Event(
        "gen_ai.choice",
        time_ns,
        {
            "index": 0,
            "finish_reason": "tool_calls" if calls else "stop",
            "message": json.dumps(body),
        },
    )


def agent_run(
    calls: int = 40,
    *,
    spelling: str = "current",
    trace: str = "run",
    conversation_id: str | None = None,
) -> list[otlp.Span]:
    """The spans of an agent run of ``calls`` model calls (see :func:`transcript`), each call
    followed by the execution of the tool it asked for, all children of one ``invoke_agent``
    span (which carries ``conversation_id`` when given)."""
    messages = transcript(calls)
    trace_id = hex_id(16, trace)
    root = hex_id(8, trace, "root")
    spans = [
        otlp.Span(
            trace_id,
            root,
            "",
            "invoke_agent counter",
            otlp.KIND_INTERNAL,
            START_NS,
            START_NS + (2 * calls + 1) * STEP_NS,
            {"gen_ai.operation.name": "invoke_agent"}
            | ({"gen_ai.conversation.id": conversation_id} if conversation_id else {}),
        )
    ]
    history = 2
    for step in range(calls):
        start, end = START_NS + 2 * step * STEP_NS, START_NS + (2 * step + 1) * STEP_NS
        inputs, output = messages[:history], messages[history]
        usage = usage_of(step)
        attributes: dict[str, Any] = {"gen_ai.request.model": "gpt-test"}
        events: tuple[otlp.Event, ...] = ()
        current = {
            "gen_ai.operation.name": "chat",
            "gen_ai.response.model": "gpt-test-0613",
            "gen_ai.usage.input_tokens": usage["input"],
            "gen_ai.usage.output_tokens": usage["output"],
            "gen_ai.usage.cache_read.input_tokens": usage["cache_read"],
        }
        if spelling == "current":
            attributes |= current | {
                "gen_ai.input.messages": json.dumps(inputs),
                "gen_ai.output.messages": json.dumps([{**output, "finish_reason": "stop"}]),
            }
        elif spelling == "older":
            attributes |= {
                "llm.request.type": "chat",
                "gen_ai.response.model": "gpt-test-0613",
                "gen_ai.usage.prompt_tokens": usage["input"],
                "gen_ai.usage.completion_tokens": usage["output"],
                "gen_ai.usage.cache_read_input_tokens": usage["cache_read"],
            }
            for index, message in enumerate(inputs):
                attributes |= _flat("prompt", index, message)
            attributes |= _flat("completion", 0, output)
        elif spelling == "structured":  # messages as OTLP arrays and key-value lists
            system, *rest = inputs
            attributes |= current | {
                "gen_ai.system_instructions": system["parts"],
                "gen_ai.input.messages": rest,
                "gen_ai.output.messages": [{**output, "finish_reason": "stop"}],
            }
        elif spelling == "details":  # the messages on the inference details event
            attributes |= current
            details = {
                "gen_ai.input.messages": json.dumps(inputs),
                "gen_ai.output.messages": json.dumps([{**output, "finish_reason": "stop"}]),
            }
            events = (otlp.Event("gen_ai.client.inference.operation.details", end, details),)
        elif spelling == "content-events":  # the oldest events, OpenAI messages as JSON
            attributes |= current
            prompt = json.dumps([_openai_of(m) for m in inputs])
            completion = json.dumps([_openai_of(output)])
            events = (
                otlp.Event("gen_ai.content.prompt", start, {"gen_ai.prompt": prompt}),
                otlp.Event("gen_ai.content.completion", end, {"gen_ai.completion": completion}),
            )
        else:  # events
            attributes |= current
            events = (
                *(_event_of(m, start) for m in inputs),
                _choice_of(output, end),
            )
        spans.append(
            otlp.Span(
                trace_id,
                hex_id(8, trace, "chat", step),
                root,
                "chat gpt-test",
                otlp.KIND_CLIENT,
                start,
                end,
                attributes,
                events,
            )
        )
        history += 1
        if step == calls - 1:
            break
        result = messages[history]["parts"][0]
        failed = step == FAILING_STEP
        tool_attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "bash",
            "gen_ai.tool.call.id": f"call_{step}",
            "gen_ai.tool.call.arguments": json.dumps({"cmd": f"ls part{step}"}),
        }
        if failed:
            tool_attributes["error.type"] = "ExitCode1"
        else:
            tool_attributes["gen_ai.tool.call.result"] = result["response"]
        spans.append(
            otlp.Span(
                trace_id,
                hex_id(8, trace, "tool", step),
                root,
                "execute_tool bash",
                otlp.KIND_INTERNAL,
                end,
                end + STEP_NS // 2,
                tool_attributes,
                status_code=otlp.STATUS_ERROR if failed else 0,
                status_message=result["response"] if failed else "",
            )
        )
        history += 1
    return spans


def batches(spans: list[otlp.Span], size: int = 7) -> list[list[otlp.Span]]:
    """Spans in batches of ``size``, the batches in reverse order (a collector's file need not be
    in time order)."""
    return [spans[i : i + size] for i in range(0, len(spans), size)][::-1]


def request(spans: list[otlp.Span]) -> Any:
    return otlp.request_of(spans, resource={"service.name": "agent"}, scope="tests")


def json_lines(spans: list[otlp.Span], size: int = 7) -> str:
    """The spans as OTLP JSON Lines, one request per batch."""
    return "".join(json.dumps(otlp.json_of(request(b))) + "\n" for b in batches(spans, size))


def proto_frames(spans: list[otlp.Span], size: int = 7) -> bytes:
    """The spans as ``otlp-proto`` frames, one request per batch."""
    return b"".join(otlp.frame(request(b)) for b in batches(spans, size))


def frame_of(data: bytes) -> bytes:
    """``data`` framed as a request of ``otlp-proto`` (whatever it holds)."""
    return struct.pack(">I", len(data)) + data


def http_span_line() -> str:
    """A line of one span of no GenAI operation."""
    span = otlp.Span(
        hex_id(16, "web"), hex_id(8, "web"), "", "GET /", otlp.KIND_CLIENT, START_NS, START_NS, {}
    )
    return json.dumps(otlp.json_of(request([span]))) + "\n"
