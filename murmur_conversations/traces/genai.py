"""OpenTelemetry GenAI spans read into the record and written from it (docs/formats.md
"OpenTelemetry GenAI traces"). Pure: no Django.

Pinned to the GenAI semantic conventions of open-telemetry/semantic-conventions
:data:`SEMCONV_VERSION` (``docs/gen-ai/gen-ai-spans.md``, ``gen-ai-events.md`` and the input and
output messages JSON schemas), marked "development" there. Read, per model-call span, in this
order of preference:

1. the ``gen_ai.input.messages`` / ``gen_ai.output.messages`` attributes (JSON text or structured
   values; ``gen_ai.system_instructions`` becomes a first ``system`` message), on the span or on
   its ``gen_ai.client.inference.operation.details`` event;
2. the flattened attributes OpenLLMetry (traceloop) writes: ``gen_ai.prompt.N.role`` /
   ``.content`` / ``.tool_call_id`` / ``.tool_calls.M.{id,name,arguments}`` and
   ``gen_ai.completion.N.*`` (with ``.finish_reason``);
3. the span events of v1.36.0 and before: ``gen_ai.system.message``, ``gen_ai.user.message``,
   ``gen_ai.assistant.message``, ``gen_ai.tool.message`` (inputs) and ``gen_ai.choice``
   (outputs), their body fields as event attributes; and the older ``gen_ai.content.prompt`` /
   ``gen_ai.content.completion`` events (``gen_ai.prompt`` / ``gen_ai.completion`` JSON).

Usage: ``gen_ai.usage.input_tokens`` (else ``gen_ai.usage.prompt_tokens``), ``output_tokens``
(else ``completion_tokens``), ``gen_ai.usage.cache_read.input_tokens`` (else
``cache_read_input_tokens``), ``gen_ai.usage.cache_creation.input_tokens`` (else
``cache_creation_input_tokens``), ``gen_ai.usage.reasoning.output_tokens``; model:
``gen_ai.response.model``, else ``gen_ai.request.model``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from murmur_conversations import jsonenc
from murmur_conversations.frontends.parts import (
    arguments_text,
    call_block,
    media_block,
    output_text,
    read_media,
    record_content,
    result_message,
)
from murmur_conversations.traces.otlp import (
    KIND_CLIENT,
    KIND_INTERNAL,
    STATUS_ERROR,
    Event,
    Span,
)
from murmur_conversations.usage import read_usage

#: The semantic-conventions release read (the last that holds the GenAI conventions; later ones
#: moved them to open-telemetry/semantic-conventions-genai).
SEMCONV_VERSION: Final = "1.41.0"
#: ``gen_ai.operation.name`` values of a model call.
MODEL_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content"})
TOOL_OPERATION: Final = "execute_tool"
INPUT: Final = "gen_ai.input.messages"
OUTPUT: Final = "gen_ai.output.messages"
SYSTEM: Final = "gen_ai.system_instructions"
DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"
CONVERSATION: Final = "gen_ai.conversation.id"
#: Events of v1.36.0 and before: event name -> the role of its message.
MESSAGE_EVENTS: Final = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT: Final = "gen_ai.choice"
_FLAT: Final = re.compile(r"^gen_ai\.(prompt|completion)\.(\d{1,6})\.(.+)$")
_FLAT_CALL: Final = re.compile(r"^tool_calls\.(\d{1,6})\.(id|name|arguments)$")
#: ``(our usage key, the attributes read for it, first found wins)``.
USAGE_ATTRIBUTES: Final = (
    ("input", ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")),
    ("output", ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")),
    (
        "cache_read",
        ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens"),
    ),
    (
        "cache_write",
        (
            "gen_ai.usage.cache_creation.input_tokens",
            "gen_ai.usage.cache_creation_input_tokens",
        ),
    ),
    ("reasoning", ("gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_tokens")),
)
#: Keys of a record message that the span carries elsewhere (or that the parts carry).
_NOT_EXTRA: Final = frozenset(
    {"role", "content", "id", "tool_call_id", "is_error", "usage", "model", "tool_calls", "output"}
)


class UnreadableMessages(ValueError):
    """A GenAI span whose messages are not of the conventions' shape (``str()`` says which)."""


@dataclass
class ModelCall:
    """A model-call span, read: its input and output messages (ChatMessage dicts ``{role,
    parts, ...}``), the model and usage (our ``usage`` spelling, or None), and ``tag`` (what the
    caller gave to find the span again: its line)."""

    span: Span
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    model: str | None
    usage: dict[str, Any] | None
    tag: int


@dataclass
class ToolRun:
    """An ``execute_tool`` span, read."""

    span: Span
    call_id: str
    name: str
    arguments: Any
    result: Any
    failed: bool
    error: str
    tag: int


@dataclass(frozen=True)
class Placed:
    """A record message of the transcript, the ``tag`` of the span it came from first and its
    time (nanoseconds since the epoch, 0 unknown)."""

    message: dict[str, Any]
    tag: int
    time_ns: int


# ---------------------------------------------------------------------- reading spans


def conversation_of(span: Span) -> str | None:
    """The span's ``gen_ai.conversation.id``, when it is a non-empty string."""
    value = span.attributes.get(CONVERSATION)
    return value if isinstance(value, str) and value else None


def operation_of(span: Span) -> str | None:
    """The span's ``gen_ai.operation.name`` (a string), else None."""
    value = span.attributes.get("gen_ai.operation.name")
    return value if isinstance(value, str) else None


def read_span(span: Span, tag: int) -> ModelCall | ToolRun | None:
    """The span as a model call or a tool execution, or None when it is neither (another
    operation, such as ``invoke_agent``, or a span of no GenAI operation that carries no
    messages). Raises :class:`UnreadableMessages` for messages of the wrong shape."""
    operation = operation_of(span)
    if operation == TOOL_OPERATION:
        return _tool_run(span, tag)
    if operation is not None and operation not in MODEL_OPERATIONS:
        return None
    inputs, outputs = _messages(span)
    if not inputs and not outputs:
        return None
    return ModelCall(span, inputs, outputs, _model(span), _usage(span), tag)


def _tool_run(span: Span, tag: int) -> ToolRun:
    attributes = span.attributes
    call_id = attributes.get("gen_ai.tool.call.id")
    name = attributes.get("gen_ai.tool.name")
    error_type = attributes.get("error.type")
    failed = span.status_code == STATUS_ERROR or error_type is not None
    return ToolRun(
        span=span,
        call_id=call_id if isinstance(call_id, str) else "",
        name=name if isinstance(name, str) else "",
        arguments=jsonenc.loads_or_given(attributes.get("gen_ai.tool.call.arguments")),
        result=jsonenc.loads_or_given(attributes.get("gen_ai.tool.call.result")),
        failed=failed,
        error=span.status_message or (str(error_type) if error_type is not None else ""),
        tag=tag,
    )


def _model(span: Span) -> str | None:
    for name in ("gen_ai.response.model", "gen_ai.request.model"):
        value = span.attributes.get(name)
        if isinstance(value, str) and value and len(value) <= 255:
            return value
    return None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _json_ready(value: Any) -> Any:
    """A usage attribute as JSON can hold it: a NaN or infinite double becomes its OTLP JSON
    spelling (``"NaN"``, ``"Infinity"``, ``"-Infinity"``), so the writer imports the message
    without that usage (kept as ``usage_unread``) rather than refuse it."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _usage(span: Span) -> dict[str, Any] | None:
    """Our ``usage`` object of a call (docs/usage.md "Spellings": ours), or None without usage
    attributes. The conventions count cache reads and writes inside ``input_tokens``; they are
    taken out when the input holds them (an instrumentation that counts them apart leaves a
    smaller input, which is kept as it is). A value that is not a count is kept as given, so the
    writer imports the message without it and says so (docs/formats.md "Usage")."""
    found: dict[str, Any] = {}
    for key, names in USAGE_ATTRIBUTES:
        for name in names:
            if name in span.attributes:
                found[key] = _json_ready(span.attributes[name])
                break
    if not found:
        return None
    cache_read, cache_write = found.get("cache_read", 0), found.get("cache_write", 0)
    raw_input = found.get("input", 0)
    uncached = raw_input
    counts = _count(raw_input) and _count(cache_read) and _count(cache_write)
    if counts and raw_input >= cache_read + cache_write:
        uncached = raw_input - cache_read - cache_write
    usage: dict[str, Any] = {"input_tokens": uncached, "output_tokens": found.get("output", 0)}
    for key, ours in (
        ("cache_read", "cache_read_tokens"),
        ("cache_write", "cache_write_tokens"),
        ("reasoning", "reasoning_tokens"),
    ):
        if key in found and found[key] != 0:
            usage[ours] = found[key]
    return usage


def _structured(value: Any, name: str) -> Any:
    """An attribute of type ``any``: structured, or JSON text (refused when it is not JSON)."""
    if isinstance(value, str):
        try:
            return jsonenc.loads(value)
        except (ValueError, RecursionError):
            raise UnreadableMessages(f"{name} is not JSON") from None
    return value


def _chat_messages(value: Any, name: str) -> list[dict[str, Any]]:
    """A list of ChatMessage objects, checked: ``role`` a string, ``parts`` a list of objects
    each with a string ``type``."""
    value = _structured(value, name)
    if not isinstance(value, list):
        raise UnreadableMessages(f"{name} is not a list of messages")
    for index, message in enumerate(value):
        where = f"{name}[{index}]"
        if not isinstance(message, dict):
            raise UnreadableMessages(f"{where} is not an object")
        if not isinstance(message.get("role"), str) or not message["role"]:
            raise UnreadableMessages(f"{where}.role is not a non-empty string")
        _check_parts(message.get("parts"), f"{where}.parts")
    return value


#: The fields the schema gives the message parts it names (``gen-ai-input-messages.json``):
#: ``type -> ((field, the JSON types it may hold, whether it must be there), ...)``. A part of
#: another type is a ``GenericPart``: any fields.
_PART_FIELDS: Final[dict[str, tuple[tuple[str, tuple[type | None, ...], bool], ...]]] = {
    "text": (("content", (str,), True),),
    "reasoning": (("content", (str,), True),),
    "tool_call": (("id", (str, None), False), ("name", (str,), True)),
    "tool_call_response": (("id", (str, None), False),),
    "blob": (
        ("modality", (str,), False),
        ("mime_type", (str, None), False),
        ("content", (str,), True),
    ),
    "uri": (("modality", (str,), False), ("mime_type", (str, None), False), ("uri", (str,), True)),
    "file": (
        ("modality", (str,), False),
        ("mime_type", (str, None), False),
        ("file_id", (str,), True),
    ),
}
_JSON_NAMES: Final[dict[type | None, str]] = {str: "a string", None: "null"}


def _check_parts(parts: Any, where: str) -> None:
    """Refuse (:class:`UnreadableMessages`, naming the field) ``parts`` that is not a list of
    objects with a string ``type``, or a part the schema names whose fields are missing or of the
    wrong type (:data:`_PART_FIELDS`: a ``text`` part's ``content`` a string, a ``tool_call``'s
    ``id`` a string or null...)."""
    if not isinstance(parts, list):
        raise UnreadableMessages(f"{where} is not a list")
    for index, part in enumerate(parts):
        at = f"{where}[{index}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise UnreadableMessages(f"{at} is not an object with a string 'type'")
        for name, types, required in _PART_FIELDS.get(part["type"], ()):
            if name not in part:
                if required:
                    raise UnreadableMessages(f"{at} ({part['type']}) has no {name!r}")
                continue
            value = part[name]
            if not any(value is None if t is None else isinstance(value, t) for t in types):
                wanted = " or ".join(_JSON_NAMES[t] for t in types)
                found = "null" if value is None else type(value).__name__
                raise UnreadableMessages(f"{at}.{name} is {found}, not {wanted}")


def _messages(span: Span) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The input and output messages of a span, in the first spelling it has."""
    for holder in (span.attributes, *_details(span.events)):
        if INPUT in holder or OUTPUT in holder:
            inputs = _chat_messages(holder[INPUT], INPUT) if INPUT in holder else []
            outputs = _chat_messages(holder[OUTPUT], OUTPUT) if OUTPUT in holder else []
            if SYSTEM in holder:
                system = _structured(holder[SYSTEM], SYSTEM)
                _check_parts(system, SYSTEM)
                inputs = [{"role": "system", "parts": system}, *inputs]
            return inputs, outputs
    flat = _flattened(span.attributes)
    if flat[0] or flat[1]:
        return flat
    return _from_events(span.events)


def _details(events: Iterable[Event]) -> list[dict[str, Any]]:
    return [e.attributes for e in events if e.name == DETAILS_EVENT]


# ---------------------------------------------------------------------- older spellings


def _text_parts(content: Any) -> list[dict[str, Any]]:
    """The parts of an older spelling's ``content``: a string is one text part (JSON text of a
    list of typed blocks, as OpenLLMetry writes a multimodal content, is those blocks); a list
    is its blocks (``{type: text, text}`` as a text part, others as they are)."""
    if isinstance(content, str):
        blocks = jsonenc.loads_or_given(content) if content.lstrip().startswith("[") else content
        if not _typed_list(blocks):
            return [{"type": "text", "content": content}] if content else []
        content = blocks
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append({"type": "text", "content": str(block.get("text", ""))})
            elif isinstance(block, dict) and isinstance(block.get("type"), str):
                parts.append(dict(block))
            else:
                raise UnreadableMessages("a content block is not an object with a string 'type'")
        return parts
    if content is None:
        return []
    raise UnreadableMessages(f"content is a {type(content).__name__}, not text or blocks")


def _typed_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(b, dict) and isinstance(b.get("type"), str) for b in value
    )


def _call_parts(calls: Any) -> list[dict[str, Any]]:
    """``tool_call`` parts of OpenAI-style ``tool_calls`` (``{id, function: {name, arguments}}``
    or ``{id, name, arguments}``), arguments parsed when they are JSON text."""
    calls = jsonenc.loads_or_given(calls)
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise UnreadableMessages("tool_calls is not a list")
    parts = []
    for call in calls:
        if not isinstance(call, dict):
            raise UnreadableMessages("a tool call is not an object")
        inner = call.get("function")
        function: dict[str, Any] = inner if isinstance(inner, dict) else call
        arguments = jsonenc.loads_or_given(function.get("arguments"))
        parts.append(
            {
                "type": "tool_call",
                "id": str(call.get("id") or ""),
                "name": str(function.get("name") or ""),
                "arguments": {} if arguments is None else arguments,
            }
        )
    return parts


def _older_message(
    role: str, content: Any, calls: Any = None, answers: Any = None
) -> dict[str, Any]:
    """A ChatMessage from an older spelling's fields; a ``tool`` message (or one answering a
    call id) is one ``tool_call_response`` part."""
    if role == "tool" or answers:
        response = {"type": "tool_call_response", "id": str(answers or ""), "response": content}
        return {"role": role, "parts": [response]}
    return {"role": role, "parts": [*_text_parts(content), *_call_parts(calls)]}


def _flattened(attributes: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """OpenLLMetry's ``gen_ai.prompt.N.*`` and ``gen_ai.completion.N.*`` attributes."""
    found: dict[str, dict[int, dict[str, Any]]] = {"prompt": {}, "completion": {}}
    for name, value in attributes.items():
        match = _FLAT.match(name)
        if match is None:
            continue
        side, index, rest = match.group(1), int(match.group(2)), match.group(3)
        entry = found[side].setdefault(index, {"calls": {}})
        call = _FLAT_CALL.match(rest)
        if call is not None:
            entry["calls"].setdefault(int(call.group(1)), {})[call.group(2)] = value
        else:
            entry[rest] = value
    sides = []
    for side in ("prompt", "completion"):
        messages = []
        for index in sorted(found[side]):
            entry = found[side][index]
            role = entry.get("role", "assistant" if side == "completion" else "user")
            if not isinstance(role, str) or not role:
                raise UnreadableMessages(f"gen_ai.{side}.{index}.role is not a non-empty string")
            calls = [entry["calls"][m] for m in sorted(entry["calls"])]
            message = _older_message(
                role, entry.get("content"), calls or None, entry.get("tool_call_id")
            )
            if isinstance(entry.get("finish_reason"), str):
                message["finish_reason"] = entry["finish_reason"]
            messages.append(message)
        sides.append(messages)
    return sides[0], sides[1]


def _from_events(events: Iterable[Event]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The span events of v1.36.0 and before (body fields as event attributes)."""
    inputs: list[dict[str, Any]] = []
    choices: list[tuple[int, int, dict[str, Any]]] = []
    for order, event in enumerate(events):
        fields = event.attributes
        if event.name in MESSAGE_EVENTS:
            role = fields.get("role") or MESSAGE_EVENTS[event.name]
            if not isinstance(role, str):
                raise UnreadableMessages(f"{event.name} role is not a string")
            inputs.append(
                _older_message(
                    role,
                    _maybe_json_blocks(fields.get("content")),
                    fields.get("tool_calls"),
                    fields.get("id") if role == "tool" else None,
                )
            )
        elif event.name == CHOICE_EVENT:
            body = jsonenc.loads_or_given(fields.get("message", {}))
            if not isinstance(body, dict):
                raise UnreadableMessages("gen_ai.choice message is not an object")
            role = body.get("role") or "assistant"
            if not isinstance(role, str):
                raise UnreadableMessages("gen_ai.choice message role is not a string")
            message = _older_message(
                role, _maybe_json_blocks(body.get("content")), body.get("tool_calls")
            )
            if isinstance(fields.get("finish_reason"), str):
                message["finish_reason"] = fields["finish_reason"]
            index = fields.get("index", 0)
            choices.append((index if isinstance(index, int) else 0, order, message))
        elif event.name in ("gen_ai.content.prompt", "gen_ai.content.completion"):
            side = "prompt" if event.name.endswith("prompt") else "completion"
            listed = _structured(fields.get(f"gen_ai.{side}", "[]"), f"gen_ai.{side}")
            messages = _openai_list(listed, f"gen_ai.{side}")
            if side == "prompt":
                inputs.extend(messages)
            else:
                choices.extend((0, order, m) for m in messages)
    return inputs, [m for _, _, m in sorted(choices, key=lambda c: (c[0], c[1]))]


def _maybe_json_blocks(content: Any) -> Any:
    """An event's ``content``: JSON text of a list of typed blocks is those blocks."""
    if isinstance(content, str) and content.lstrip().startswith("["):
        parsed = jsonenc.loads_or_given(content)
        if _typed_list(parsed):
            return parsed
    return content


def _openai_list(value: Any, name: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise UnreadableMessages(f"{name} is not a list of messages")
    out = []
    for message in value:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise UnreadableMessages(f"{name} holds a message without a string role")
        out.append(
            _older_message(
                message["role"],
                message.get("content"),
                message.get("tool_calls"),
                message.get("tool_call_id"),
            )
        )
    return out


# ---------------------------------------------------------------------- into the record


def _block_of(part: dict[str, Any]) -> dict[str, Any]:
    """The record block of a message part (docs/formats.md): text, reasoning as thinking, a
    tool call, an image blob or URI as an image block; any other part kept as it is."""
    kind = part.get("type")
    rest = {k: v for k, v in part.items() if k not in ("type", "content")}
    content = part.get("content")
    if kind == "text" and isinstance(content, str):
        return {"type": "text", "text": content, **rest}
    if kind == "reasoning" and isinstance(content, str):
        # No provider signature travels in a trace, and ``signature`` is a key redaction leaves
        # alone (``redaction.OPAQUE_KEYS``): a trace's is not imported.
        kept = {k: v for k, v in rest.items() if k != "signature"}
        return {"type": "thinking", "text": content, **kept}
    if kind == "tool_call" and isinstance(part.get("name"), str):
        arguments = part.get("arguments")
        extra = {k: v for k, v in rest.items() if k not in ("id", "name", "arguments")}
        block = call_block(
            str(part.get("id") or ""), part["name"], {} if arguments is None else arguments
        )
        return {**block, **extra}
    mime = part.get("mime_type") if isinstance(part.get("mime_type"), str) else ""
    image = part.get("modality") == "image" or str(mime).startswith("image/")
    if (
        kind == "blob"
        and image
        and isinstance(content, str)
        and set(part)
        <= {
            "type",
            "modality",
            "mime_type",
            "content",
        }
    ):
        return media_block(f"data:{mime or 'image/png'};base64,{content}", mime or "image/png")
    if (
        kind == "uri"
        and image
        and isinstance(part.get("uri"), str)
        and set(part)
        <= {
            "type",
            "modality",
            "mime_type",
            "uri",
        }
    ):
        return media_block(part["uri"], mime or "")
    return dict(part)


def identity(message: dict[str, Any]) -> dict[str, Any]:
    """What makes two messages of a span's history the same message: role and parts."""
    return {"role": message["role"], "parts": message.get("parts") or []}


def to_record(message: dict[str, Any], message_id: str) -> list[dict[str, Any]]:
    """The record messages of one ChatMessage: one message of its parts (the other keys but
    ``finish_reason`` kept as they are, ``finish_reason`` too on an output), and one ``tool``
    result per ``tool_call_response`` part (ids ``<id>``, then ``<id>:<n>``)."""
    parts = message.get("parts") or []
    responses = [p for p in parts if p.get("type") == "tool_call_response"]
    others = [p for p in parts if p.get("type") != "tool_call_response"]
    extras = {k: v for k, v in message.items() if k not in ("role", "parts", "id")}
    records: list[dict[str, Any]] = []
    if others or not responses:
        content = record_content([_block_of(p) for p in others])
        records.append({"role": message["role"], "content": content, "id": message_id, **extras})
    for part in responses:
        rid = message_id if not records else f"{message_id}:{len(records)}"
        result = result_message(rid, str(part.get("id") or ""), part.get("response"))
        del result["is_error"]
        if len(responses) == 1 and not others:
            result.update({k: v for k, v in extras.items() if k != "finish_reason"})
        records.append(result)
    return records


#: Makes the id of a message that has none: ``(occurrence, identity) -> id`` (the importers'
#: ``imp_`` rule, given by the caller); ``occurrence`` is how many messages of the same identity
#: come before it in its call (-1: a tool run's own result).
MakeId = Callable[[int, dict[str, Any]], str]


@dataclass
class _Timeline:
    make_id: MakeId
    seen: set[str] = field(default_factory=set)
    placed: list[Placed] = field(default_factory=list)

    def add(self, message: dict[str, Any], occurrence: int, tag: int, time_ns: int) -> bool:
        given = message.get("id")
        base = given if isinstance(given, str) and given else None
        message_id = base or self.make_id(occurrence, identity(message))
        records = to_record(message, message_id)
        new = False
        for record in records:
            if record["id"] in self.seen:
                continue
            self.seen.add(record["id"])
            self.placed.append(Placed(record, tag, time_ns))
            new = True
        return new


def transcript(calls: list[ModelCall], runs: list[ToolRun], make_id: MakeId) -> list[Placed]:
    """The record of one conversation's spans: each model call's input then output messages,
    calls in time order, each message once (the same id, given or ``make_id(occurrence,
    identity)`` of its role and parts and how many messages of that role and parts come before it
    in the call's input then output, is skipped: a message put before it in a later call, such
    as system instructions given from the second call on, changes nothing; a tool run's result
    takes occurrence -1); a call's first output message carries its usage
    and model. A tool run whose call no history answers adds its result; a tool result is dated
    by its run's end and fails when its run failed."""
    timeline = _Timeline(make_id)
    answered = {
        str(p.get("id") or "")
        for call in calls
        for m in [*call.inputs, *call.outputs]
        for p in m.get("parts") or []
        if p.get("type") == "tool_call_response"
    }
    events: list[tuple[int, int, int, int, ModelCall | ToolRun]] = [
        (c.span.start_ns, c.span.end_ns, c.tag, c.span.order, c) for c in calls
    ]
    events += [
        (r.span.end_ns, r.span.end_ns, r.tag, r.span.order, r)
        for r in runs
        if r.call_id and r.call_id not in answered
    ]
    for _start, _end, _tag, _order, event in sorted(events, key=lambda e: e[:4]):
        if isinstance(event, ToolRun):
            result = event.error if event.failed and event.result is None else event.result
            message = {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": event.call_id, "response": result}],
            }
            timeline.add(message, -1, event.tag, event.span.end_ns)
            continue
        occurrences = _occurrences([*event.inputs, *event.outputs])
        for message, occurrence in zip(event.inputs, occurrences, strict=False):
            timeline.add(message, occurrence, event.tag, event.span.start_ns)
        for offset, message in enumerate(event.outputs):
            before = len(timeline.placed)
            occurrence = occurrences[len(event.inputs) + offset]
            added = timeline.add(message, occurrence, event.tag, event.span.end_ns)
            if added and offset == 0:
                _carry_usage(timeline.placed, before, event)
    _settle_results(timeline.placed, runs)
    return timeline.placed


def _occurrences(messages: list[dict[str, Any]]) -> list[int]:
    """For each message, how many messages of the same :func:`identity` come before it."""
    seen: Counter[str] = Counter()
    out = []
    for message in messages:
        same = json.dumps(identity(message), sort_keys=True, default=repr)
        out.append(seen[same])
        seen[same] += 1
    return out


def _carry_usage(placed: list[Placed], start: int, call: ModelCall) -> None:
    """Put a call's model and usage on the first assistant message its output added."""
    for index in range(start, len(placed)):
        entry = placed[index]
        if entry.message.get("role") == "assistant" and not entry.message.get("tool_call_id"):
            message = dict(entry.message)
            if call.model is not None:
                message["model"] = call.model
            if call.usage is not None:
                message["usage"] = call.usage
            placed[index] = Placed(message, entry.tag, entry.time_ns)
            return


def _settle_results(placed: list[Placed], runs: list[ToolRun]) -> None:
    """Date each tool result by the end of its call's run and fail it when the run failed (the
    runs of a call id are paired with its results in time order)."""
    by_call: dict[str, list[ToolRun]] = {}
    for run in sorted(runs, key=lambda r: (r.span.end_ns, r.tag, r.span.order)):
        if run.call_id:
            by_call.setdefault(run.call_id, []).append(run)
    for index, entry in enumerate(placed):
        call_id = entry.message.get("tool_call_id")
        pending = by_call.get(call_id) if isinstance(call_id, str) else None
        if not pending:
            continue
        run = pending.pop(0)
        message = {**entry.message, "is_error": run.failed}
        placed[index] = Placed(message, entry.tag, run.span.end_ns or entry.time_ns)


# ---------------------------------------------------------------------- out of the record


def _part_of(block: Any) -> dict[str, Any]:
    """The message part of a record block: the inverse of :func:`_block_of`."""
    if not isinstance(block, dict):
        return {
            "type": "text",
            "content": block if isinstance(block, str) else jsonenc.dumps(block),
        }
    kind = block.get("type")
    rest = {k: v for k, v in block.items() if k not in ("type", "text")}
    if kind == "text" and isinstance(block.get("text"), str):
        return {"type": "text", "content": block["text"], **rest}
    if kind == "thinking" and isinstance(block.get("text"), str):
        kept = {k: v for k, v in rest.items() if k != "signature"}  # not imported either
        return {"type": "reasoning", "content": block["text"], **kept}
    if kind == "tool_call":
        extra = {k: v for k, v in rest.items() if k not in ("id", "name", "input")}
        arguments = block.get("input")
        return {
            "type": "tool_call",
            "id": str(block.get("id") or ""),
            "name": str(block.get("name") or ""),
            "arguments": {} if arguments is None else arguments,
            **extra,
        }
    media = read_media(block) if kind == "image" else None
    if media is not None and set(block) <= {"type", "url", "data", "mime_type"}:
        if media.data:
            return {
                "type": "blob",
                "modality": "image",
                "mime_type": media.mime_type,
                "content": media.data,
            }
        part: dict[str, Any] = {"type": "uri", "modality": "image"}
        if media.mime_type:
            part["mime_type"] = media.mime_type
        part["uri"] = media.url
        return part
    return dict(block)


def chat_message(record: dict[str, Any], *, output: bool) -> dict[str, Any]:
    """The ChatMessage of a record message (:func:`to_record`'s inverse): ``{role, parts}``,
    ``finish_reason`` on an output when the record has one (none is made up, so importing the
    export again gives the same ``extra``), the record's other keys, then its ``id`` (an extra key the schema allows, so importing it again keeps the
    message's id)."""
    content = record.get("content")
    if record.get("tool_call_id"):
        response = record.get("output", content)
        parts = [{"type": "tool_call_response", "id": record["tool_call_id"], "response": response}]
    else:
        blocks = content if isinstance(content, list) else ([content] if content else [])
        parts = [_part_of(b) for b in blocks]
        listed = record.get("tool_calls")
        calls = listed if isinstance(listed, list) else []
        parts.extend(
            _call_parts(
                [c for c in calls if isinstance(c, dict) and isinstance(c.get("function"), dict)]
            )
        )
    message: dict[str, Any] = {"role": record["role"], "parts": parts}
    if output and record.get("finish_reason") is not None:
        message["finish_reason"] = record["finish_reason"]
    for key, value in record.items():
        if key not in _NOT_EXTRA and key != "finish_reason":
            message[key] = value
    message["id"] = record["id"]
    return message


def _hex(size: int, *parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[: 2 * size]


def _usage_attributes(usage: Any) -> dict[str, int]:
    """The conventions' usage attributes of a record ``usage`` (any spelling ``read_usage``
    reads): ``input_tokens`` counting cache reads and writes, as the conventions do."""
    try:
        counters = read_usage(usage)
    except ValueError:
        return {}
    if counters is None:
        return {}
    out = {
        "gen_ai.usage.input_tokens": counters.input_tokens
        + counters.cache_read_tokens
        + counters.cache_write_tokens,
        "gen_ai.usage.output_tokens": counters.output_tokens,
    }
    for name, value in (
        ("gen_ai.usage.cache_read.input_tokens", counters.cache_read_tokens),
        ("gen_ai.usage.cache_creation.input_tokens", counters.cache_write_tokens),
        ("gen_ai.usage.reasoning.output_tokens", counters.reasoning_tokens),
    ):
        if value:
            out[name] = value
    return out


def spans_of(key: str, records: list[tuple[dict[str, Any], int]]) -> list[Span]:
    """The spans of a record (messages as the model saw them, each with its time in
    nanoseconds), in record order: one ``chat`` span per assistant message, its input the
    messages before it and its output that message, from the time of the message before it to
    its own; one ``execute_tool`` span per tool result, from its call's message to the result
    (failed when the result is an error); a last ``chat`` span without output when messages
    follow the last assistant message. All in one trace; ids derived from ``key`` and the message
    ids, so exporting again gives the same bytes."""
    trace_id = _hex(16, "trace", key)
    spans: list[Span] = []
    calls: dict[str, tuple[str, Any, int]] = {}  # call id -> (name, arguments, time)
    for index, (record, time_ns) in enumerate(records):
        history = [chat_message(r, output=False) for r, _ in records[:index]]
        if record.get("role") == "assistant" and not record.get("tool_call_id"):
            spans.append(
                _call_span(
                    key,
                    trace_id,
                    record,
                    history,
                    records[index - 1][1] if index else time_ns,
                    time_ns,
                )
            )
            for part in chat_message(record, output=False)["parts"]:
                if part.get("type") == "tool_call":
                    calls[part["id"]] = (part["name"], part.get("arguments"), time_ns)
        elif record.get("tool_call_id"):
            spans.append(_tool_span(key, trace_id, record, calls, time_ns))
    if records and records[-1][0].get("role") != "assistant":
        last, time_ns = records[-1]
        history = [chat_message(r, output=False) for r, _ in records]
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            CONVERSATION: key,
            INPUT: jsonenc.dumps(history),
        }
        spans.append(
            Span(
                trace_id,
                _hex(8, "pending", key, str(last["id"])),
                "",
                "chat",
                KIND_CLIENT,
                time_ns,
                time_ns,
                attributes,
            )
        )
    return spans


def _call_span(
    key: str,
    trace_id: str,
    record: dict[str, Any],
    history: list[dict[str, Any]],
    start_ns: int,
    end_ns: int,
) -> Span:
    model = record.get("model") if isinstance(record.get("model"), str) else None
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", CONVERSATION: key}
    if model:
        attributes["gen_ai.request.model"] = model
        attributes["gen_ai.response.model"] = model
    if record.get("usage") is not None:
        attributes.update(_usage_attributes(record["usage"]))
    attributes[INPUT] = jsonenc.dumps(history)
    attributes[OUTPUT] = jsonenc.dumps([chat_message(record, output=True)])
    name = f"chat {model}" if model else "chat"
    span_id = _hex(8, "call", key, str(record["id"]))
    return Span(trace_id, span_id, "", name, KIND_CLIENT, start_ns, end_ns, attributes)


def _tool_span(
    key: str,
    trace_id: str,
    record: dict[str, Any],
    calls: dict[str, tuple[str, Any, int]],
    time_ns: int,
) -> Span:
    call_id = str(record["tool_call_id"])
    name, arguments, started = calls.get(call_id, ("", None, time_ns))
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": TOOL_OPERATION,
        CONVERSATION: key,
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
    }
    if arguments is not None:
        attributes["gen_ai.tool.call.arguments"] = arguments_text(arguments)
    failed = bool(record.get("is_error"))
    output = record.get("output", record.get("content"))
    if not failed and output is not None:
        attributes["gen_ai.tool.call.result"] = jsonenc.dumps(output)
    if failed:
        attributes["error.type"] = "tool_error"
    span = Span(
        trace_id,
        _hex(8, "tool", key, str(record["id"])),
        "",
        f"{TOOL_OPERATION} {name}".strip(),
        KIND_INTERNAL,
        min(started, time_ns),
        time_ns,
        attributes,
        status_code=STATUS_ERROR if failed else 0,
        status_message=output_text(output)[:1000] if failed else "",
    )
    return span
