"""Exports of the durable record (docs/formats.md): murmur JSON Lines, an OpenAI list and an
Anthropic list, each made from the message as the model saw it
(``representations.record_message``).

Murmur lines are the stored raw line when the conversation was imported from murmur (kept as a
source record under the message id), else compact JSON (``ensure_ascii=False``) with the keys
``role, content, id``, then ``tool_call_id`` and ``is_error`` for tool results (``is_error`` also
whenever true), ``source_id`` when set, then the ``extra`` keys in stored order. Importing that output
as murmur and exporting again gives the same bytes. Reads go in chunks, so memory stays bounded.

A murmur export is a fixed point of export then import (docs/formats.md "Export"): before the
record comes the conversation line ``{"type": "murmur.conversation", "conversation_id", "title",
"created_at", "saved_at", "status"}`` (and ``pending_ask`` when set), and before each chunk of record lines a
times line ``{"type": "murmur.times", "times": {message_id: ISO 8601 time}}`` dating them. After
the conversation's own lines (its feedback last) come its children (subagents), oldest first, each
as the same lines whose conversation line also names it: ``key`` (its key in the export),
``parent`` (its parent's key, null for the exported conversation) and ``call_id`` (the launching
call, or null); theirs follow in turn. ``record_only`` gives the record lines alone: the stored
lines of a murmur import, byte for byte.

After the record come the conversation's feedback lines (docs/formats.md "Feedback"), one per
user and display row: ``{"type": "murmur.feedback", "message_id", "part", "rating", "comment",
"user"}``, where ``part`` is the row's 0-based place among the display rows of that record message
and ``user`` is null for the conversation's owner, else the username. The murmur importer reads
them back through ``services.set_feedback``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from django.contrib.auth import get_user_model

from murmur_conversations import jsonenc
from murmur_conversations.frontends.ag_ui import to_ag_ui
from murmur_conversations.frontends.openai_items import to_openai_items
from murmur_conversations.frontends.vercel_ui import to_vercel_ui
from murmur_conversations.models import (
    EXPORTED_FROM_KEY,
    Conversation,
    DisplayMessage,
    Feedback,
    Message,
    SourceRecord,
)
from murmur_conversations.representations import iso, record_message
from murmur_conversations.traces import genai, otlp

CHUNK: Final = 500
MURMUR: Final = "murmur"
OPENAI: Final = "openai"
ANTHROPIC: Final = "anthropic"
#: The ``type`` of a feedback line of a murmur export (``importers.murmur.FEEDBACK_TYPE``).
FEEDBACK_RECORD: Final = "murmur.feedback"
#: The ``type`` of a murmur export's conversation line (``importers.murmur.CONVERSATION_TYPE``).
CONVERSATION_RECORD: Final = "murmur.conversation"
#: The ``type`` of a murmur export's times line (``importers.murmur.TIMES_TYPE``).
TIMES_RECORD: Final = "murmur.times"
#: Message keys the OpenAI Chat Completions API knows besides role, content and tool_call_id.
OPENAI_KEYS: Final = ("name", "tool_calls", "refusal", "audio", "function_call")


def _messages(conversation: Conversation) -> Iterator[list[Message]]:
    """The record in position order, in chunks of :data:`CHUNK`."""
    chunk: list[Message] = []
    for message in (
        Message.objects.filter(conversation=conversation)
        .order_by("position")
        .iterator(chunk_size=CHUNK)
    ):
        chunk.append(message)
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def murmur_message(message: Message) -> dict[str, Any]:
    """The murmur record line of a message: the message as the model saw it
    (``representations.record_message``), in export key order."""
    return record_message(message)


def export_murmur(
    conversation: Conversation, *, feedback: bool = True, record_only: bool = False
) -> Iterator[str]:
    """The conversation as murmur JSON Lines (the module docstring): its conversation line, then
    per chunk a times line and one ``\\n``-terminated line per record message, then (unless
    ``feedback`` is false) one per feedback (:func:`feedback_lines`), then its children's lines,
    depth first. ``record_only``: the record lines alone."""
    if record_only:
        yield from _murmur_record(conversation, times=False)
        return
    yield from _murmur_tree(conversation, None, feedback=feedback)


def _murmur_tree(
    conversation: Conversation, place: tuple[str, str | None] | None, *, feedback: bool
) -> Iterator[str]:
    """The lines of ``conversation`` and its descendants; ``place`` is ``(its key, its parent's
    key)`` for a child, None for the exported conversation."""
    yield jsonenc.dumps(conversation_line(conversation, place))
    yield "\n"
    yield from _murmur_record(conversation, times=True)
    if feedback:
        for line in feedback_lines(conversation):
            yield jsonenc.dumps(line)
            yield "\n"
    here = None if place is None else place[0]
    children = Conversation.objects.filter(parent=conversation).order_by("created_at", "pk")
    for child in list(children):
        key = child_key(child, conversation)
        yield from _murmur_tree(
            child, (key if here is None else f"{here}/{key}", here), feedback=feedback
        )


def child_key(child: Conversation, parent: Conversation) -> str:
    """A child's key below its parent in a murmur export: its ``external_id`` without the
    parent's ``external_id/`` in front (how importers key children), else its id. Importing gives
    the child the external id ``<the parent's key>/<this>``, so exporting again gives the same."""
    own = child.external_id or str(child.pk)
    prefix = f"{parent.external_id}/" if parent.external_id else ""
    return own[len(prefix) :] if prefix and own.startswith(prefix) and own != prefix else own


def conversation_line(
    conversation: Conversation, place: tuple[str, str | None] | None = None
) -> dict[str, Any]:
    """The conversation line of a murmur export: ``type``, ``conversation_id`` (its id, or for a
    conversation imported from a murmur export the one that export named,
    ``metadata[EXPORTED_FROM_KEY]``: an import of the export after that conversation's deletion
    is refused), then for a child ``key``, ``parent`` and ``call_id``, then ``title``,
    ``created_at``, ``saved_at`` (ISO 8601, UTC), ``status`` and ``pending_ask`` when set."""
    origin = (conversation.metadata or {}).get(EXPORTED_FROM_KEY)
    named = origin if isinstance(origin, str) and origin else str(conversation.pk)
    line: dict[str, Any] = {"type": CONVERSATION_RECORD, "conversation_id": named}
    if place is not None:
        line["key"], line["parent"] = place
        line["call_id"] = conversation.parent_call_id or None
    line.update(
        title=conversation.title,
        created_at=iso(conversation.created_at),
        saved_at=iso(conversation.saved_at),
        status=conversation.status,
    )
    if conversation.pending_ask is not None:
        line["pending_ask"] = conversation.pending_ask
    return line


def _murmur_record(conversation: Conversation, *, times: bool) -> Iterator[str]:
    """The record lines of ``conversation``, each chunk after its times line when ``times``."""
    for chunk in _messages(conversation):
        if times:
            stamps = {m.message_id: iso(m.created_at) for m in chunk}
            yield jsonenc.dumps({"type": TIMES_RECORD, "times": stamps})
            yield "\n"
        raw: dict[str, str] = {}
        if conversation.source == MURMUR:
            raw = dict(
                SourceRecord.objects.filter(
                    conversation=conversation,
                    source=MURMUR,
                    source_key__in=[m.message_id for m in chunk],
                ).values_list("source_key", "raw")
            )
        for message in chunk:
            yield raw.get(message.message_id) or jsonenc.dumps(murmur_message(message))
            yield "\n"


def feedback_lines(conversation: Conversation) -> list[dict[str, Any]]:
    """The feedback lines of the module docstring, ordered by display row, the owner's first, then
    by username (so the order does not depend on database ids). Three queries."""
    username = get_user_model().USERNAME_FIELD
    items = list(
        Feedback.objects.filter(conversation=conversation)
        .select_related("display_message__message", "user")
        .order_by("display_message__seq")
    )
    if not items:
        return []
    places: dict[int, int] = {}
    counters: dict[int, int] = {}
    for pk, message_pk in (
        DisplayMessage.objects.filter(message_id__in={f.display_message.message_id for f in items})
        .order_by("seq")
        .values_list("pk", "message_id")
    ):
        places[pk] = counters.get(message_pk, 0)
        counters[message_pk] = places[pk] + 1
    lines = []
    for item in items:
        message = item.display_message.message
        if message is None:  # feedback is only ever given on rows of the record
            continue
        owner = item.user_id == conversation.owner_id
        lines.append(
            (
                item.display_message.seq,
                not owner,
                "" if owner else str(getattr(item.user, username)),
                {
                    "type": FEEDBACK_RECORD,
                    "message_id": message.message_id,
                    "part": places[item.display_message_id],
                    "rating": item.rating,
                    "comment": item.comment,
                    "user": None if owner else str(getattr(item.user, username)),
                },
            )
        )
    lines.sort(key=lambda entry: entry[:3])
    return [entry[3] for entry in lines]


def _openai_calls(content: Any) -> list[dict[str, Any]]:
    calls = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_call":
            arguments = block.get("input", {})
            calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {
                        "name": block.get("name"),
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else jsonenc.dumps(arguments),
                    },
                }
            )
    return calls


def openai_message(message: Message, *, every_key: bool = False) -> dict[str, Any]:
    """A record message (``representations.record_message``) as an OpenAI Chat Completions
    message: ``role``, ``content`` as given (null stays null), ``tool_call_id`` of a result, then
    the message's own keys in stored order. ``tool_call`` blocks become ``tool_calls`` (unless the
    message already carries them) and thinking blocks are left out; a block list left empty by
    that is ``null``. Only keys the API knows are kept (:data:`OPENAI_KEYS`), unless
    ``every_key`` (a conversation imported from an OpenAI list: every key it arrived with)."""
    content: Any = message.content
    calls = _openai_calls(content)
    if isinstance(content, list):
        content = [
            b
            for b in content
            if not (isinstance(b, dict) and b.get("type") in ("tool_call", "thinking"))
        ]
        if not content and len(content) != len(message.content or []):
            content = None  # only calls (and thinking) were there: OpenAI's null beside calls
    out: dict[str, Any] = {"role": message.role, "content": content}
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    for key, value in (message.extra or {}).items():
        if (every_key or key in OPENAI_KEYS) and key not in out:
            out[key] = value
    if calls and "tool_calls" not in out:
        out["tool_calls"] = calls
    return out


def export_openai(conversation: Conversation) -> Iterator[str]:
    """The conversation as one OpenAI message list: a compact JSON array and a newline. A
    conversation imported from an OpenAI list gives back that list (docs/formats.md "Export")."""
    every_key = conversation.source == OPENAI
    yield "["
    first = True
    for chunk in _messages(conversation):
        for message in chunk:
            if not first:
                yield ","
            first = False
            yield jsonenc.dumps(openai_message(message, every_key=every_key))
    yield "]\n"


#: Message ids the app or an importer made up (``ids.new_message_id``, ``importers.records.imported_id``):
#: not the source's, so an Anthropic export leaves them out.
MADE_UP_ID: Final = re.compile(r"^(msg|imp)_[0-9a-f]{32}$")


def _anthropic_block(block: Any) -> Any:
    """A record block as an Anthropic block: the inverse of ``importers.anthropic``."""
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind == "tool_call":
        rest = {k: v for k, v in block.items() if k not in ("type", "id", "name", "input")}
        arguments = block.get("input", {})
        return {
            "type": "tool_use",
            "id": block.get("id"),
            "name": block.get("name"),
            "input": {} if arguments is None else arguments,
            **rest,
        }
    if kind == "thinking" and isinstance(block.get("text"), str):
        rest = {k: v for k, v in block.items() if k not in ("type", "text")}
        return {"type": "thinking", "thinking": block["text"], **rest}
    return block


def _anthropic_result(message: Message) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": message.content,
    }
    if message.is_error:
        block["is_error"] = True
    for key, value in (message.extra or {}).items():
        block.setdefault(key, value)
    return block


def anthropic_messages(messages: Iterator[Message]) -> tuple[Any, list[dict[str, Any]]]:
    """``(system, messages)``: record messages as an Anthropic Messages list, the inverse of the
    Anthropic import (docs/formats.md "Export"). Leading ``system`` messages become ``system``
    (their content, or a list of their text blocks when there are several); tool results become
    ``tool_result`` blocks of one ``user`` message per run of results; ``tool_call`` and
    ``thinking`` blocks become ``tool_use`` and ``thinking``; a message id the source gave is
    kept as ``id``; every other key the message arrived with follows, in stored order."""
    system: Any = None
    systems: list[Any] = []
    out: list[dict[str, Any]] = []
    results: dict[str, Any] | None = None
    for message in messages:
        if message.role == "system" and not out and results is None:
            systems.append(message.content)
            continue
        if message.tool_call_id:
            if results is None:
                results = {"role": "user", "content": []}
                out.append(results)
            results["content"].append(_anthropic_result(message))
            continue
        results = None
        line: dict[str, Any] = {}
        if not MADE_UP_ID.fullmatch(message.message_id):
            line["id"] = message.message_id
        content = message.content
        line["role"] = message.role
        line["content"] = (
            [_anthropic_block(b) for b in content] if isinstance(content, list) else content
        )
        for key, value in (message.extra or {}).items():
            line.setdefault(key, value)
        out.append(line)
    if len(systems) == 1:
        system = systems[0]
    elif systems:
        system = [
            {"type": "text", "text": text} if isinstance(text, str) else text for text in systems
        ]
    return system, out


def export_anthropic(conversation: Conversation) -> Iterator[str]:
    """The conversation as an Anthropic Messages list: a compact JSON array and a newline, or a
    request body ``{"system", "messages"}`` when the record starts with a system prompt."""
    system, messages = anthropic_messages(
        message for chunk in _messages(conversation) for message in chunk
    )
    body: Any = messages if system is None else {"system": system, "messages": messages}
    yield jsonenc.dumps(body)
    yield "\n"


def _records(conversation: Conversation) -> Iterator[dict[str, Any]]:
    for chunk in _messages(conversation):
        for message in chunk:
            yield record_message(message)


def export_vercel_ui(conversation: Conversation) -> Iterator[str]:
    """The conversation as a Vercel AI SDK 5 ``UIMessage`` list (``frontends.vercel_ui``): one
    compact JSON array and a newline."""
    yield jsonenc.dumps(to_vercel_ui(_records(conversation), conversation_id=str(conversation.pk)))
    yield "\n"


def export_ag_ui(conversation: Conversation) -> Iterator[str]:
    """The conversation as AG-UI messages (``frontends.ag_ui``): one JSON array and a newline."""
    yield jsonenc.dumps(to_ag_ui(_records(conversation), conversation_id=str(conversation.pk)))
    yield "\n"


def export_openai_items(conversation: Conversation) -> Iterator[str]:
    """The conversation as OpenAI Conversations items (``frontends.openai_items``): one JSON
    array and a newline."""
    yield jsonenc.dumps(to_openai_items(_records(conversation)))
    yield "\n"


#: The sources of conversations imported from OTLP traces: their key is the conversation id of
#: the spans, which an OTLP export names again.
OTLP_SOURCES: Final = frozenset({"otlp-json", "otlp-proto"})
#: The resource and instrumentation scope of exported spans.
OTLP_RESOURCE: Final = {"service.name": "murmur_conversations"}
OTLP_SCOPE: Final = "murmur_conversations"
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def _nanoseconds(at: datetime) -> int:
    """A time as nanoseconds since the epoch (exact to the microsecond a time holds)."""
    return (at - _EPOCH) // timedelta(microseconds=1) * 1000


def otlp_spans(conversation: Conversation) -> list[otlp.Span]:
    """The conversation's record as GenAI spans (``traces.genai.spans_of``), in one trace keyed
    by its OTLP conversation id (the key it was imported under from a trace, else its id), each
    message dated by its ``created_at``."""
    key = (
        conversation.external_id
        if conversation.source in OTLP_SOURCES and conversation.external_id
        else str(conversation.pk)
    )
    records = [
        (record_message(m), _nanoseconds(m.created_at))
        for chunk in _messages(conversation)
        for m in chunk
    ]
    return genai.spans_of(key, records)


def export_otlp_json(conversation: Conversation) -> Iterator[str]:
    """The conversation as OTLP JSON (docs/formats.md "OpenTelemetry GenAI traces"): one
    ``ExportTraceServiceRequest`` per line, each holding one span (:func:`otlp_spans`), as a
    collector's file exporter writes them."""
    for span in otlp_spans(conversation):
        request = otlp.request_of([span], resource=OTLP_RESOURCE, scope=OTLP_SCOPE)
        yield jsonenc.dumps(otlp.json_of(request))
        yield "\n"


def export_otlp_proto(conversation: Conversation) -> Iterator[bytes]:
    """The conversation as ``otlp-proto`` frames (the requests of :func:`export_otlp_json`, each
    its length as 4 big-endian bytes, then its protobuf encoding)."""
    for span in otlp_spans(conversation):
        yield otlp.frame(otlp.request_of([span], resource=OTLP_RESOURCE, scope=OTLP_SCOPE))


EXPORTERS: Final = {
    "murmur": export_murmur,
    "openai": export_openai,
    "anthropic": export_anthropic,
    "vercel-ui": export_vercel_ui,
    "ag-ui": export_ag_ui,
    "openai-items": export_openai_items,
    "otlp-json": export_otlp_json,
}
#: Exports that are bytes, not text: written by ``export_conversation`` only (the REST export
#: serves text formats).
BINARY_EXPORTERS: Final = {"otlp-proto": export_otlp_proto}
