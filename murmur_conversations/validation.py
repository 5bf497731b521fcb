"""Input hygiene for the write path: the bad-text rule, size limits and display content shapes.

Bad text (docs/write-path.md): NUL characters and lone surrogates become U+FFFD on every path,
identically on SQLite and PostgreSQL; a surrogate pair given as two code points is joined into its
character; the rest of the text is kept. Sizes are UTF-8 bytes of compact JSON.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any, Final

from murmur_conversations import jsonenc
from murmur_conversations.exceptions import InvalidContent
from murmur_conversations.jsonenc import clean_text
from murmur_conversations.models import ContentType

#: Deepest nesting of arrays and objects a stored JSON value may have. Deeper values would overflow
#: the interpreter's recursion limit when encoded or decoded (a ``RecursionError``, not an answer).
MAX_JSON_DEPTH = 100


#: Longest source key (``Conversation.external_id``) stored as it is; longer ones are hashed.
MAX_SOURCE_KEY: Final = 255


def source_key(key: str) -> str:
    """The ``external_id`` a source's conversation key is stored, hashed and looked up under
    (docs/formats.md "Deleted conversations stay deleted"): a key longer than
    :data:`MAX_SOURCE_KEY` characters becomes ``"sha256:"`` and the hex sha256 of its UTF-8
    bytes, then bad text is repaired (:func:`clean_text`: NUL and lone surrogates become U+FFFD).
    Idempotent; never raises for any ``str``."""
    if len(key) > MAX_SOURCE_KEY:
        key = "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return clean_text(key)


def clean_json(value: Any, *, _depth: int = 0) -> Any:
    """Apply :func:`clean_text` to every string of a JSON value, keys included.

    Raises ``InvalidContent`` for values JSON cannot hold (sets, bytes, objects, non-finite floats)
    and for arrays and objects nested deeper than :data:`MAX_JSON_DEPTH`.
    """
    if isinstance(value, list | tuple | dict):
        _depth += 1
        if _depth > MAX_JSON_DEPTH:
            raise InvalidContent(f"JSON is nested deeper than {MAX_JSON_DEPTH} arrays and objects")
    if isinstance(value, str):
        return clean_text(value)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidContent("JSON cannot hold NaN or infinity")
        return value
    if isinstance(value, list | tuple):
        return [clean_json(item, _depth=_depth) for item in value]
    if isinstance(value, dict):
        cleaned: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidContent(f"JSON object keys must be strings, not {type(key).__name__}")
            cleaned[clean_text(key)] = clean_json(item, _depth=_depth)
        return cleaned
    raise InvalidContent(f"{type(value).__name__} is not a JSON value")


def json_size(value: Any) -> int:
    """UTF-8 bytes of the compact JSON of ``value`` (:func:`jsonenc.size`, the unit of every size
    limit); ``InvalidContent`` when it cannot be written as JSON (a non-finite number, nesting too
    deep, an integer of more digits than Python converts to text)."""
    try:
        return jsonenc.size(value)
    except (ValueError, TypeError, RecursionError) as error:
        raise InvalidContent(f"the value cannot be written as JSON: {error}") from None


def check_size(value: Any, *, limit: int, what: str) -> None:
    """Raise ``InvalidContent`` when ``value`` is larger than ``limit`` bytes of compact JSON."""
    size = json_size(value)
    if size > limit:
        raise InvalidContent(
            f"{what} is {size} bytes of JSON; the limit is {limit} "
            "(MURMUR_CONVERSATIONS MAX_CONTENT_BYTES / MAX_METADATA_BYTES)"
        )


def check_object(value: Any, *, what: str, limit: int) -> dict[str, Any]:
    """Clean and size-check a JSON object (metadata); ``InvalidContent`` if it is not a dict."""
    if not isinstance(value, dict):
        raise InvalidContent(f"{what} must be a JSON object, not {type(value).__name__}")
    cleaned: dict[str, Any] = clean_json(value)
    check_size(cleaned, limit=limit, what=what)
    return cleaned


def check_short_string(
    value: Any, *, what: str, max_length: int = 255, allow_empty: bool = True
) -> str:
    """Clean a short string field (ids, names, roles); ``InvalidContent`` when it does not fit."""
    if not isinstance(value, str):
        raise InvalidContent(f"{what} must be a string, not {type(value).__name__}")
    text = clean_text(value)
    if not allow_empty and not text:
        raise InvalidContent(f"{what} must be a non-empty string")
    if len(text) > max_length:
        raise InvalidContent(f"{what} is {len(text)} characters; at most {max_length} fit")
    return text


_REQUIRED: dict[str, tuple[tuple[str, ...], ...]] = {
    ContentType.TEXT: (("text",),),
    ContentType.THINKING: (("text",),),
    ContentType.NOTIFICATION: (("text",),),
    ContentType.ERROR: (("text",),),
    ContentType.IMAGE: (("url",), ("data", "mime_type")),
    ContentType.FILE_REFERENCE: (("path", "name"),),
    ContentType.STRUCTURED_DATA: (("format", "data"),),
    ContentType.TOOL_CALL: (("call_id", "name", "arguments"),),
    ContentType.TOOL_RESULT: (("tool_call_id", "name", "content"),),
    ContentType.TODO_SNAPSHOT: (("todos",),),
}


def check_items(value: Any, *, what: str) -> list[Any]:
    """``value`` as a list when it is a list, a tuple or another iterable that is not text, bytes
    or a mapping (a generator of messages); ``InvalidContent`` naming ``what`` otherwise (an int,
    None, a string, a single dict). The caller's wrong type is a clear error, never a
    ``TypeError`` from deep inside a write."""
    if isinstance(value, str | bytes | bytearray | dict) or value is None:
        raise InvalidContent(f"{what} must be a list, not {type(value).__name__}")
    try:
        return list(value)
    except TypeError:
        raise InvalidContent(f"{what} must be a list, not {type(value).__name__}") from None


def check_display_content(content_type: str, content: Any) -> None:
    """Raise ``InvalidContent("invalid structure for content_type <ct>")`` unless ``content`` has the
    keys ``_REQUIRED`` above lists for ``content_type`` (extra keys allowed)."""
    alternatives = _REQUIRED.get(content_type)
    if alternatives is None:
        raise InvalidContent(
            f"unknown content_type {content_type!r}; one of {', '.join(ContentType.values)}"
        )
    if not isinstance(content, dict) or not any(
        all(key in content for key in keys) for keys in alternatives
    ):
        raise InvalidContent(f"invalid structure for content_type {content_type}")


def check_time(value: Any, *, what: str) -> datetime | None:
    """A time a writer gives (docs/write-path.md "Times"): None, or a timezone-aware
    ``datetime``; ``InvalidContent`` otherwise (a naive time would be read in the server's zone)."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidContent(f"{what} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidContent(f"{what} must be timezone-aware")
    return value


#: At most this many tags per conversation.
MAX_TAGS: Final = 20
#: At most this many characters per tag.
MAX_TAG_CHARS: Final = 32
#: The characters no tag may hold, as the body of a regular-expression class (Python and
#: ECMA-262 alike, so the OpenAPI schema states the same rule): the control characters that are
#: not whitespace, and the invisible format characters of the Basic Multilingual Plane (soft
#: hyphen, zero-width characters, bidirectional controls, the byte order mark).
TAG_FORBIDDEN_CHARS: Final = (
    r"\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f"
    r"\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    r"\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
)
#: A tag as a client may send it (before trimming and lower-casing): at least one character that
#: is neither whitespace nor forbidden, and no forbidden one.
TAG_PATTERN: Final = (
    rf"^[^{TAG_FORBIDDEN_CHARS}]*[^\s{TAG_FORBIDDEN_CHARS}][^{TAG_FORBIDDEN_CHARS}]*$"
)
_TAG_FORBIDDEN: Final = re.compile(f"[{TAG_FORBIDDEN_CHARS}]")


def clean_flag(value: Any, *, what: str) -> bool:
    """``value`` if it is a boolean; ``InvalidContent`` otherwise."""
    if not isinstance(value, bool):
        raise InvalidContent(f"{what} must be true or false, not {value!r}")
    return value


def clean_tag(value: Any) -> str:
    """One tag as stored: a string without :data:`TAG_FORBIDDEN_CHARS` (control and invisible
    format characters), bad text repaired, whitespace trimmed and runs of it made one space,
    lower case, 1 to :data:`MAX_TAG_CHARS` characters; ``InvalidContent`` otherwise."""
    if not isinstance(value, str):
        raise InvalidContent(f"a tag must be a string, not {type(value).__name__}")
    if _TAG_FORBIDDEN.search(value):
        # Checked before the repair, which would turn a NUL into U+FFFD and let it through.
        raise InvalidContent(f"a tag must not contain control characters: {value!r}")
    tag = " ".join(clean_text(value).split()).lower()
    if not tag:
        raise InvalidContent("a tag must not be empty or blank")
    if len(tag) > MAX_TAG_CHARS:
        raise InvalidContent(f"a tag may hold at most {MAX_TAG_CHARS} characters: {tag[:40]!r}")
    return tag


def clean_tags(value: Any) -> list[str]:
    """The tag list as stored: a list of at most :data:`MAX_TAGS` tags (:func:`clean_tag`), the
    first of equal tags kept, order kept; ``InvalidContent`` otherwise."""
    if not isinstance(value, list | tuple):
        raise InvalidContent(f"tags must be a list of strings, not {type(value).__name__}")
    tags: list[str] = []
    for item in value:
        tag = clean_tag(item)
        if tag not in tags:
            tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise InvalidContent(f"a conversation may have at most {MAX_TAGS} tags, not {len(tags)}")
    return tags
