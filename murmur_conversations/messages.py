"""How one incoming message becomes a record row and display rows (docs/write-path.md).

Pure functions, no database: ``normalize_message`` validates and cleans a message dict before any
write starts, and ``display_parts`` lists the display rows it shows as (sagents
``DisplayMessagePersistence``: text and thinking parts, then one card per tool call, or one result).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from murmur_conversations import jsonenc
from murmur_conversations.exceptions import InvalidContent
from murmur_conversations.ids import new_message_id
from murmur_conversations.models import ContentType, MessageType
from murmur_conversations.projection import transcript_entry, transcript_text
from murmur_conversations.redaction import redact
from murmur_conversations.usage import Usage, read_usage
from murmur_conversations.validation import check_short_string, check_size, clean_json

#: Keys stored in their own columns; every other key of a message goes to ``extra``, in order.
COLUMN_KEYS = ("role", "content", "id", "tool_call_id", "is_error", "source_id")
KNOWN_ROLES = frozenset({"user", "assistant", "system", "tool"})


@dataclass(frozen=True)
class CallRequest:
    """A tool call asked for by a message: ``call_id`` is None when the source gave none."""

    call_id: str | None
    name: str
    arguments: Any


@dataclass(frozen=True)
class DisplayPart:
    """One display row to create, before numbers are assigned."""

    message_type: str
    content_type: str
    content: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class NormalizedMessage:
    """A validated, cleaned message: the record row's values plus what the display needs."""

    message_id: str
    id_given: bool
    role: str
    content: str | list[Any]
    tool_call_id: str
    is_error: bool
    is_interrupt: bool
    injected: bool
    source_id: str
    extra: dict[str, Any]
    calls: list[CallRequest]
    #: Secrets replaced per detector (redaction.redact); the services count them in the write.
    redactions: dict[str, int] = field(default_factory=dict)
    #: The tokens of an assistant message that carried ``usage`` (docs/usage.md); None otherwise.
    usage: Usage | None = None
    #: The ``model`` of an assistant message that carried ``usage`` ("" when it named none).
    model: str = ""
    #: ``content`` was given as JSON null (or left out): the record keeps null, while ``content``
    #: is "" for the display rows and results (docs/write-path.md "The message as the model saw it").
    null_content: bool = False
    #: The ``max_content_bytes`` ``normalize_message`` checked this message against; None for an
    #: instance built by hand, which ``services.save_messages`` refuses (it was never validated,
    #: cleaned or redacted).
    checked_limit: int | None = field(default=None, repr=False)

    @property
    def record_content(self) -> str | list[Any] | None:
        """The content the record row stores: as given, null included."""
        return None if self.null_content else self.content

    @property
    def is_tool_result(self) -> bool:
        """A non-empty ``tool_call_id`` makes a message a tool result, whatever its role."""
        return bool(self.tool_call_id)

    @property
    def in_transcript(self) -> bool:
        """Whether the transcript projection shows this message."""
        return (
            transcript_entry(
                role=self.role,
                content=self.content,
                tool_call_id=self.tool_call_id,
                extra=self.extra,
            )
            is not None
        )


def _flag(message: dict[str, Any], key: str) -> bool:
    value = message.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidContent(f"message {key!r} must be true or false, not {value!r}")
    return value


def _no_null(arguments: Any) -> Any:
    """A call's arguments as stored: JSON ``null`` (an ``input`` or parsed ``arguments`` of null)
    means no arguments, ``{}``; the record keeps the message as given."""
    return {} if arguments is None else arguments


def _parse_arguments(arguments: Any) -> Any:
    """OpenAI ``function.arguments`` is JSON text: parsed when valid, else kept as the string.
    NaN and Infinity are not valid, nor is nesting too deep to store; the parsed value follows the
    bad-text rule like the rest of the message."""
    if isinstance(arguments, str):
        try:
            return clean_json(jsonenc.loads(arguments))
        except (ValueError, RecursionError):  # InvalidContent is a ValueError
            return arguments
    return arguments


def _call_id(value: Any, what: str) -> str | None:
    if value is None or value == "":
        return None
    return check_short_string(value, what=what)


def _calls(content: str | list[Any], message: dict[str, Any]) -> list[CallRequest]:
    calls: list[CallRequest] = []
    if isinstance(content, list):
        for block in content:
            if block.get("type") == "tool_call":
                calls.append(
                    CallRequest(
                        call_id=_call_id(block.get("id"), "tool_call block 'id'"),
                        name=check_short_string(
                            block.get("name") or "", what="tool_call block 'name'"
                        ),
                        arguments=_no_null(block.get("input")),
                    )
                )
    openai_calls = message.get("tool_calls")
    if openai_calls is not None:
        if not isinstance(openai_calls, list):
            raise InvalidContent("message 'tool_calls' must be a list")
        for call in openai_calls:
            if not isinstance(call, dict):
                raise InvalidContent("each of 'tool_calls' must be an object")
            function = call.get("function") or {}
            if not isinstance(function, dict):
                raise InvalidContent("'tool_calls[].function' must be an object")
            calls.append(
                CallRequest(
                    call_id=_call_id(call.get("id"), "'tool_calls[].id'"),
                    name=check_short_string(
                        function.get("name") or "", what="'tool_calls[].function.name'"
                    ),
                    arguments=_no_null(_parse_arguments(function.get("arguments"))),
                )
            )
    return calls


def normalize_message(message: Any, *, max_content_bytes: int) -> NormalizedMessage:
    """Validate and clean one message dict (the shape in docs/write-path.md).

    ``role`` a non-empty string; ``content`` a string, a list of block objects each with a string
    ``type``, or null (the record keeps null, ``record_content``; the display reads ""); ``id``, ``tool_call_id``, ``source_id`` strings of at most 255
    characters; ``is_error``, ``is_interrupt``, ``injected`` booleans. Other keys go to ``extra``.
    An assistant message's ``usage`` is read by ``usage.read_usage`` (its ``model`` a string of at
    most 255 characters). Raises ``InvalidContent`` naming the offending key; nothing is written
    before this passes.
    """
    if not isinstance(message, dict):
        raise InvalidContent(f"a message must be a JSON object, not {type(message).__name__}")
    message, redactions = redact(clean_json(message), record=True)  # write-path.md "Redaction"
    role = check_short_string(message.get("role"), what="message 'role'", allow_empty=False)
    content = message.get("content")
    null_content = content is None
    if content is None:
        content = ""
    if isinstance(content, list):
        for index, block in enumerate(content):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise InvalidContent(
                    f"content block {index} must be an object with a string 'type'"
                )
    elif not isinstance(content, str):
        raise InvalidContent(
            f"message 'content' must be a string or a list of blocks, not {type(content).__name__}"
        )
    check_size(content, limit=max_content_bytes, what="message content")
    given_id = message.get("id")
    id_given = given_id is not None and given_id != ""
    message_id = check_short_string(given_id, what="message 'id'") if id_given else new_message_id()
    tool_call_id = check_short_string(
        message.get("tool_call_id") or "", what="message 'tool_call_id'"
    )
    source_id = check_short_string(message.get("source_id") or "", what="message 'source_id'")
    extra = {key: value for key, value in message.items() if key not in COLUMN_KEYS}
    check_size(extra, limit=max_content_bytes, what="message extra keys")
    return NormalizedMessage(
        message_id=message_id,
        id_given=id_given,
        role=role,
        content=content,
        tool_call_id=tool_call_id,
        is_error=_flag(message, "is_error"),
        is_interrupt=_flag(message, "is_interrupt"),
        injected=_flag(message, "injected"),
        source_id=source_id,
        extra=extra,
        calls=[] if tool_call_id else _calls(content, message),
        redactions=redactions,
        null_content=null_content,
        checked_limit=max_content_bytes,
        **_usage(role, message),
    )


def _usage(role: str, message: dict[str, Any]) -> dict[str, Any]:
    """``usage`` and ``model`` of an assistant message (docs/usage.md); other roles' ``usage`` is
    kept in the record and not counted. The keys stay in ``extra`` as given either way."""
    given = message.get("usage")
    if role != "assistant" or given is None:
        return {}
    usage = read_usage(given)
    if usage is None:
        return {}
    model = message.get("model")
    if model is None:
        model = ""
    return {"usage": usage, "model": check_short_string(model, what="message 'model'")}


def _block_part(block: dict[str, Any], message_type: str) -> DisplayPart | None:
    """The display row of one content block (not tool calls), or None for an empty text."""
    kind = block["type"]
    rest = {key: value for key, value in block.items() if key != "type"}
    if kind == "text" and isinstance(block.get("text"), str):
        return DisplayPart(message_type, ContentType.TEXT, rest) if block["text"] else None
    if kind == "thinking":
        text = block.get("text", block.get("thinking"))
        if isinstance(text, str):
            rest.pop("thinking", None)
            return (
                DisplayPart(message_type, ContentType.THINKING, {**rest, "text": text})
                if text
                else None
            )
    if kind == "image" and ("url" in block or ("data" in block and "mime_type" in block)):
        return DisplayPart(message_type, ContentType.IMAGE, rest)
    return DisplayPart(message_type, ContentType.STRUCTURED_DATA, {"format": kind, "data": block})


def display_parts(message: NormalizedMessage) -> list[DisplayPart]:
    """The non-tool display rows of a message, in order (tool-call cards and results are added by
    the services, which know the conversation's calls).

    Injected context: one ``system``/``notification`` row with ``metadata.injected``. Unknown roles:
    text shows as ``system``/``notification`` with ``metadata.role``. Tool results: none here.
    """
    if message.injected:
        return [
            DisplayPart(
                MessageType.SYSTEM,
                ContentType.NOTIFICATION,
                {"text": transcript_text(message.content)},
                {"injected": True},
            )
        ]
    if message.is_tool_result:
        return []
    blocks = (
        [{"type": "text", "text": message.content}]
        if isinstance(message.content, str)
        else message.content
    )
    known = message.role in KNOWN_ROLES
    message_type = message.role if known else MessageType.SYSTEM
    parts: list[DisplayPart] = []
    for block in blocks:
        if block["type"] == "tool_call":
            continue
        part = _block_part(block, message_type)
        if part is None:
            continue
        if not known:
            content_type = (
                ContentType.NOTIFICATION
                if part.content_type == ContentType.TEXT
                else part.content_type
            )
            part = DisplayPart(message_type, content_type, part.content, {"role": message.role})
        parts.append(part)
    return parts
