"""OTLP trace exports read and written with the official OpenTelemetry classes
(``opentelemetry-proto``'s ``ExportTraceServiceRequest``, ``google.protobuf.json_format``;
docs/formats.md "OpenTelemetry GenAI traces"). Pure: no Django.

Two encodings of the same request:

- **OTLP JSON** (``otlp-json``): one ``ExportTraceServiceRequest`` object per line, as the
  collector's file exporter writes it. OTLP JSON differs from protobuf's canonical JSON in its ids:
  ``traceId`` and ``spanId`` (and ``parentSpanId``, a link's ids) are hex, not base64; field names
  are lowerCamelCase, 64-bit integers are strings and enums are integers. Receivers ignore
  unknown fields, and so does :func:`read_json`.
- **OTLP protobuf** (``otlp-proto``): the collector file exporter's ``format: proto`` framing:
  each request is its binary protobuf encoding preceded by its length as a 4-byte big-endian
  unsigned integer (:func:`frames`, :func:`frame`).

Both are read into :class:`Span` values (attributes and event attributes as plain Python values)
and written from them, so the rest of the code never touches protobuf objects.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Status
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

#: Bytes of a trace id and of a span id.
TRACE_ID_BYTES: Final = 16
SPAN_ID_BYTES: Final = 8
#: The length prefix of a protobuf frame (``otlp-proto``): a big-endian unsigned 32-bit integer.
FRAME_HEADER: Final = struct.Struct(">I")
#: The largest frame read (bytes): a longer length is taken for a corrupt file, not allocated.
MAX_FRAME: Final = 256 * 1024 * 1024
#: ``Status.code`` values.
STATUS_OK: Final = 1
STATUS_ERROR: Final = 2
#: ``Span.kind`` values used by the GenAI conventions.
KIND_INTERNAL: Final = 1
KIND_CLIENT: Final = 3
#: How deep an attribute value (arrays and key-value lists) is read.
MAX_DEPTH: Final = 64


class UnreadableTrace(ValueError):
    """A request (one line, or one frame) that is not a readable OTLP trace export; ``str()``
    says why, naming the field."""


@dataclass(frozen=True)
class Event:
    """A span event: its ``name``, time (nanoseconds since the epoch, 0 unknown), attributes."""

    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass(frozen=True)
class Span:
    """One span, read: ids in lowercase hex (``parent_id`` "" for a root), times in nanoseconds
    since the epoch (0: unknown), ``kind`` and ``status_code`` as OTLP numbers them, attributes as
    Python values (strings, booleans, ints, floats, lists, dicts; bytes as base64 text)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: tuple[Event, ...] = ()
    status_code: int = 0
    status_message: str = ""
    #: The span's 0-based place among the spans of its request (lines keep the order of a file).
    order: int = 0


@dataclass
class Request:
    """What one request holds: its spans, in order."""

    spans: list[Span] = field(default_factory=list)


# ---------------------------------------------------------------------- reading


def _hex_to_base64(value: Any, size: int, where: str, *, empty: bool) -> Any:
    """An OTLP JSON hex id as the base64 protobuf's JSON reader takes; other types are left for
    that reader to refuse."""
    if not isinstance(value, str):
        return value
    if value == "" and empty:
        return value
    if len(value) != 2 * size:
        raise UnreadableTrace(f"{where} is {len(value)} characters, not {2 * size} hex digits")
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise UnreadableTrace(f"{where} is not hex") from None
    return base64.b64encode(raw).decode("ascii")


def _ids_for_protobuf(value: dict[str, Any]) -> dict[str, Any]:
    """A copy of an OTLP JSON request with its hex ids turned into protobuf JSON's base64, each
    checked for its length; anything not of the shape is left for the reader to refuse."""
    out = dict(value)
    resources = value.get("resourceSpans", value.get("resource_spans"))
    if not isinstance(resources, list):
        return out
    new_resources = []
    for r, resource in enumerate(resources):
        scopes = (
            resource.get("scopeSpans", resource.get("scope_spans"))
            if isinstance(resource, dict)
            else None
        )
        if not isinstance(scopes, list):
            new_resources.append(resource)
            continue
        new_scopes = []
        for s, scope in enumerate(scopes):
            spans = scope.get("spans") if isinstance(scope, dict) else None
            if not isinstance(spans, list):
                new_scopes.append(scope)
                continue
            new_spans = []
            for n, span in enumerate(spans):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                new_spans.append(_span_ids(span, where) if isinstance(span, dict) else span)
            new_scopes.append({**scope, "spans": new_spans})
        new_resources.append({**resource, "scopeSpans": new_scopes})
        new_resources[-1].pop("scope_spans", None)
    out["resourceSpans"] = new_resources
    out.pop("resource_spans", None)
    return out


_ID_FIELDS: Final = (
    ("traceId", "trace_id", TRACE_ID_BYTES, False),
    ("spanId", "span_id", SPAN_ID_BYTES, False),
    ("parentSpanId", "parent_span_id", SPAN_ID_BYTES, True),
)


def _span_ids(span: dict[str, Any], where: str) -> dict[str, Any]:
    out = dict(span)
    for camel, snake, size, empty in _ID_FIELDS:
        for name in (camel, snake):
            if name in out:
                out[name] = _hex_to_base64(out[name], size, f"{where}.{camel}", empty=empty)
    links = out.get("links")
    if isinstance(links, list):
        fixed = []
        for index, link in enumerate(links):
            if isinstance(link, dict):
                link = dict(link)
                for camel, snake, size, _ in _ID_FIELDS[:2]:
                    for name in (camel, snake):
                        if name in link:
                            link[name] = _hex_to_base64(
                                link[name], size, f"{where}.links[{index}].{camel}", empty=False
                            )
            fixed.append(link)
        out["links"] = fixed
    return out


def read_json(value: Any) -> Request:
    """The spans of one OTLP JSON request (a parsed line). Raises :class:`UnreadableTrace` for a
    line that is not an object with ``resourceSpans`` (null counts as none), an id that is not hex of the right length,
    a field of the wrong type or out of range (the protobuf reader's message), or an id of the
    wrong size."""
    if not isinstance(value, dict):
        raise UnreadableTrace("not a JSON object")
    if value.get("resourceSpans", value.get("resource_spans")) is None:
        raise UnreadableTrace("not an OTLP trace export (no 'resourceSpans')")
    message = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(_ids_for_protobuf(value), message, ignore_unknown_fields=True)
    except json_format.ParseError as error:
        raise UnreadableTrace(f"not an OTLP trace export: {_short(error)}") from None
    except (ValueError, TypeError, RecursionError, OverflowError) as error:
        raise UnreadableTrace(f"not an OTLP trace export: {_short(error)}") from None
    return read_request(message)


def read_binary(data: bytes) -> Request:
    """The spans of one binary ``ExportTraceServiceRequest`` (a frame). Raises
    :class:`UnreadableTrace` when it does not decode or an id has the wrong size."""
    message = ExportTraceServiceRequest()
    try:
        message.ParseFromString(data)
    except (DecodeError, ValueError, RecursionError) as error:
        raise UnreadableTrace(f"not an OTLP trace export: {_short(error)}") from None
    return read_request(message)


def _short(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def read_request(message: ExportTraceServiceRequest) -> Request:
    """The :class:`Span` values of a decoded request, in order; :class:`UnreadableTrace` for an
    id of the wrong size or all zeros (a parent id of zeros is no parent)."""
    request = Request()
    for r, resource in enumerate(message.resource_spans):
        for s, scope in enumerate(resource.scope_spans):
            for n, span in enumerate(scope.spans):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                request.spans.append(_read_span(span, where, len(request.spans)))
    return request


def _id(raw: bytes, size: int, where: str, *, empty: bool = False) -> str:
    """An id of ``size`` bytes as hex; ``empty`` (a parent id): "" for none, and for all zeros.
    The OTLP specification makes an all-zero trace or span id invalid: :class:`UnreadableTrace`."""
    if empty and raw.strip(b"\0") == b"":
        return ""
    if len(raw) != size:
        raise UnreadableTrace(f"{where} is {len(raw)} bytes, not {size}")
    if raw == bytes(size):
        raise UnreadableTrace(f"{where} is all zeros, which OTLP makes an invalid id")
    return raw.hex()


def _read_span(span: ProtoSpan, where: str, order: int) -> Span:
    return Span(
        trace_id=_id(span.trace_id, TRACE_ID_BYTES, f"{where}.traceId"),
        span_id=_id(span.span_id, SPAN_ID_BYTES, f"{where}.spanId"),
        parent_id=_id(span.parent_span_id, SPAN_ID_BYTES, f"{where}.parentSpanId", empty=True),
        name=span.name,
        kind=int(span.kind),
        start_ns=int(span.start_time_unix_nano),
        end_ns=int(span.end_time_unix_nano),
        attributes=attributes_of(span.attributes),
        events=tuple(
            Event(e.name, int(e.time_unix_nano), attributes_of(e.attributes)) for e in span.events
        ),
        status_code=int(span.status.code),
        status_message=span.status.message,
        order=order,
    )


def attributes_of(pairs: Any) -> dict[str, Any]:
    """OTLP ``KeyValue`` pairs as a dict of Python values (the last of a repeated key wins)."""
    return {pair.key: value_of(pair.value) for pair in pairs}


def value_of(value: AnyValue, depth: int = 0) -> Any:
    """An OTLP ``AnyValue`` as a Python value (None when unset; bytes as base64 text); nesting
    deeper than :data:`MAX_DEPTH` raises :class:`UnreadableTrace`."""
    if depth > MAX_DEPTH:
        raise UnreadableTrace(f"an attribute value nests deeper than {MAX_DEPTH}")
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return int(value.int_value)
    if kind == "double_value":
        return float(value.double_value)
    if kind == "array_value":
        return [value_of(v, depth + 1) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {p.key: value_of(p.value, depth + 1) for p in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return None


def frames(stream: Any) -> Iterator[tuple[int, bytes | None, str]]:
    """The frames of an ``otlp-proto`` stream: ``(byte offset after the frame, its bytes, "")``;
    at a torn or impossible frame, ``(offset, None, reason)`` once, and the stream ends there
    (nothing after a broken length can be framed)."""
    offset = 0
    while True:
        header = stream.read(FRAME_HEADER.size)
        if not header:
            return
        if len(header) < FRAME_HEADER.size:
            yield offset, None, "torn frame (the file ends inside a length prefix)"
            return
        (size,) = FRAME_HEADER.unpack(header)
        if size > MAX_FRAME:
            yield offset, None, f"frame length {size} is larger than {MAX_FRAME} bytes"
            return
        data = stream.read(size)
        if len(data) < size:
            yield offset, None, f"torn frame (the file ends {size - len(data)} byte(s) early)"
            return
        offset += FRAME_HEADER.size + size
        yield offset, data, ""


# ---------------------------------------------------------------------- writing


def any_value(value: Any) -> AnyValue:
    """A Python value as an OTLP ``AnyValue`` (lists as arrays, dicts as key-value lists)."""
    out = AnyValue()
    if isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, int):
        out.int_value = value
    elif isinstance(value, float):
        out.double_value = value
    elif isinstance(value, str):
        out.string_value = value
    elif isinstance(value, list | tuple):
        out.array_value.values.extend(any_value(v) for v in value)
    elif isinstance(value, dict):
        out.kvlist_value.values.extend(
            KeyValue(key=str(k), value=any_value(v)) for k, v in value.items()
        )
    return out


def request_of(
    spans: list[Span], *, resource: dict[str, Any], scope: str
) -> ExportTraceServiceRequest:
    """One request holding ``spans`` under one resource and one instrumentation scope."""
    scope_spans = ScopeSpans()
    scope_spans.scope.name = scope
    for span in spans:
        scope_spans.spans.append(_proto_span(span))
    resource_spans = ResourceSpans(scope_spans=[scope_spans])
    resource_spans.resource.attributes.extend(
        KeyValue(key=k, value=any_value(v)) for k, v in resource.items()
    )
    return ExportTraceServiceRequest(resource_spans=[resource_spans])


def _proto_span(span: Span) -> ProtoSpan:
    out = ProtoSpan(
        trace_id=bytes.fromhex(span.trace_id),
        span_id=bytes.fromhex(span.span_id),
        parent_span_id=bytes.fromhex(span.parent_id),
        name=span.name,
        kind=span.kind,  # type: ignore[arg-type]
        start_time_unix_nano=span.start_ns,
        end_time_unix_nano=span.end_ns,
    )
    out.attributes.extend(KeyValue(key=k, value=any_value(v)) for k, v in span.attributes.items())
    for event in span.events:
        proto_event = out.events.add()
        proto_event.name = event.name
        proto_event.time_unix_nano = event.time_ns
        proto_event.attributes.extend(
            KeyValue(key=k, value=any_value(v)) for k, v in event.attributes.items()
        )
    if span.status_code:
        out.status.CopyFrom(Status(code=span.status_code, message=span.status_message))  # type: ignore[arg-type]
    return out


def _ids_to_hex(value: Any) -> None:
    """Turn protobuf JSON's base64 ids of a request dict into OTLP JSON's hex, in place."""
    for resource in value.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for name in ("traceId", "spanId", "parentSpanId"):
                    if name in span:
                        span[name] = base64.b64decode(span[name]).hex()
                for link in span.get("links", []):
                    for name in ("traceId", "spanId"):
                        if name in link:
                            link[name] = base64.b64decode(link[name]).hex()


def json_of(message: ExportTraceServiceRequest) -> dict[str, Any]:
    """A request as an OTLP JSON object: lowerCamelCase names, hex ids, enums as integers,
    64-bit integers as strings (``json_format.MessageToDict``, ids turned to hex)."""
    value: dict[str, Any] = json_format.MessageToDict(
        message, use_integers_for_enums=True, preserving_proto_field_name=False
    )
    _ids_to_hex(value)
    return value


def frame(message: ExportTraceServiceRequest) -> bytes:
    """A request as one ``otlp-proto`` frame: its length (4 bytes, big-endian), its encoding."""
    data: bytes = message.SerializeToString(deterministic=True)
    return FRAME_HEADER.pack(len(data)) + data
