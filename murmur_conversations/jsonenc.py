"""The one JSON encoder of the app: what is stored, exported, handed to hooks and sent on a websocket.

The spelling (size limits: docs/write-path.md "Errors"; the websocket value cap: docs/websocket.md
"Large values"; export lines: docs/formats.md "Export"):

- compact: separators ``,`` and ``:``, no spaces; object keys in the order given;
- non-ASCII text is written as itself (``ensure_ascii=False``), never as ``\\uXXXX`` escapes, so a
  size measured on this text is the size of the UTF-8 bytes stored and sent;
- NaN and the infinities are not JSON (RFC 8259): :func:`dumps` refuses them with ``ValueError``
  and :func:`loads` refuses the ``NaN``, ``Infinity`` and ``-Infinity`` literals.

:func:`encode` writes the same spelling as UTF-8 bytes, through orjson (a C encoder several times
faster than the standard library's): what is sent and served (websocket frames, the frame log,
REST bodies) is encoded once, by it.

Two documented exceptions keep bytes that already exist: :func:`canonical` is exactly the formula
of docs/formats.md that import ids and conversation keys hash (changing it would change the ids of
every import), and ``dumps(..., allow_non_finite=True)`` keeps the text of imported input that is
reported or kept verbatim, where refusing would lose the line.

The bad-text rule (docs/write-path.md) lives here too, below everything that stores or matches
text: :func:`clean_text` turns NULs and lone surrogates into U+FFFD (``validation`` applies it to
stored values; ``redaction`` to text RE2 must read, which UTF-8 has to encode).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import orjson

_BAD_TEXT: Final = re.compile("[\x00\ud800-\udfff]")
#: What a NUL or a lone surrogate becomes.
REPLACEMENT: Final = "\ufffd"

#: Compact separators: no space after ``,`` or ``:``.
SEPARATORS: Final = (",", ":")


def dumps(value: Any, *, allow_non_finite: bool = False) -> str:
    """Compact JSON text of ``value`` with non-ASCII text kept (the module's spelling).

    Raises ``ValueError`` for NaN and infinities (unless ``allow_non_finite``; then they are written
    ``NaN``/``Infinity`` as Python does) and for integers too long to convert, ``TypeError`` for
    values JSON cannot hold, ``RecursionError`` for nesting deeper than the interpreter allows.
    """
    return json.dumps(value, separators=SEPARATORS, ensure_ascii=False, allow_nan=allow_non_finite)


#: orjson's spelling of floats below 1e-4 in magnitude differs from :func:`dumps`' (``0.00001``
#: and ``1e-7`` where Python writes ``1e-05`` and ``1e-07``); every other float is spelled alike.
#: Output holding a number with ``e-`` or ``.0000`` is written by :func:`dumps` instead
#: (:func:`_respelled`).
_MARKS: Final = (b"e-", b".0000")
_NUMBER: Final = frozenset(b"0123456789.eE+-")
_BEFORE_NUMBER: Final = frozenset(b":,[")
_AFTER_NUMBER: Final = frozenset(b",]}")


def _respelled(text: bytes) -> bool:
    """Whether orjson's compact ``text`` may spell a float otherwise than :func:`dumps`: it holds
    ``e-`` or ``.0000`` inside a number (substring searches, then a look at the run of number
    characters around each find: a regular expression over a page body costs more than encoding
    it). Inside a string such a run is seldom delimited as a number is (a uuid's ``3e-8`` is
    not); when it is, the text is merely written by :func:`dumps`."""
    for mark in _MARKS:
        at = text.find(mark)
        while at >= 0:
            if _in_number(text, at):
                return True
            at = text.find(mark, at + len(mark))
    return False


def _in_number(text: bytes, at: int) -> bool:
    """Whether the run of number characters around ``text[at]`` stands where compact JSON puts a
    number: after ``:``, ``,``, ``[`` or the start, before ``,``, ``]``, ``}`` or the end."""
    start, end, size = at, at, len(text)
    while start > 0 and text[start - 1] in _NUMBER:
        start -= 1
    while end < size and text[end] in _NUMBER:
        end += 1
    return (start == 0 or text[start - 1] in _BEFORE_NUMBER) and (
        end == size or text[end] in _AFTER_NUMBER
    )


#: Types orjson would write that :func:`dumps` refuses: handed to ``_refuse`` (TypeError).
_ORJSON_OPTIONS: Final = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def encode(value: Any) -> bytes:
    """The UTF-8 bytes of :func:`dumps` of ``value``, written by orjson: THE encoder of what is
    sent and served (websocket frames, the frame log, REST bodies), called once per value.

    Byte for byte ``dumps(value).encode()`` for every value that holds no NaN or infinity:
    whatever orjson cannot write as :func:`dumps` does (integers beyond 64 bits, lone
    surrogates, non-string keys, nesting deeper than 254, small floats: see ``_respelled``) is
    written by :func:`dumps`. NaN and the infinities, which no stored value holds (:func:`dumps`
    refuses them on the way in), come out as ``null``. Raises ``TypeError`` for values JSON
    cannot hold (datetimes included), ``UnicodeEncodeError`` for a lone surrogate,
    ``RecursionError`` as :func:`dumps` does."""
    try:
        text = orjson.dumps(value, default=_refuse, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: see the docstring for what it refuses
        return dumps(value).encode("utf-8")
    if _respelled(text):
        return dumps(value).encode("utf-8")
    return text


def canonical(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``: the
    canonical JSON whose UTF-8 bytes import ids and conversation keys hash (docs/formats.md).
    Byte for byte that formula, non-finite numbers included, so existing ids never change."""
    return json.dumps(value, sort_keys=True, separators=SEPARATORS, ensure_ascii=False)


def utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8; a lone surrogate counts as the 3 bytes it would take."""
    return len(text.encode("utf-8", "surrogatepass"))


def size(value: Any) -> int:
    """Bytes of the UTF-8 of :func:`dumps` of ``value``: the unit of every size limit and of the
    websocket value cap, measured on exactly the text that is stored and sent. Raises what
    :func:`dumps` raises."""
    return utf8_size(dumps(value))


def loads_or_given(value: Any) -> Any:
    """``value`` parsed when it is JSON text (:func:`loads`), else ``value`` as given: a string
    that is not JSON (or nests too deep to read) stays the string, any other value is returned
    as it is. For fields that hold either JSON text or a value (tool call arguments)."""
    if isinstance(value, str):
        try:
            return loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(text: str | bytes) -> Any:
    """Parse JSON text (``bytes`` are decoded as UTF-8, -16 or -32 as ``json.loads`` does),
    refusing the ``NaN``, ``Infinity`` and ``-Infinity`` literals. Raises ``ValueError``
    (``json.JSONDecodeError`` with a position for malformed text), ``UnicodeError`` for bytes that
    are not text, ``RecursionError`` for nesting deeper than the interpreter allows."""
    if isinstance(text, str) and not text.startswith("\ufeff"):
        # one decoder for every call (``json.loads`` given an option builds a new one each time);
        # a leading BOM goes to ``json.loads`` for its own error
        return _DECODER.decode(text)
    return json.loads(text, parse_constant=_refuse_constant)


#: The decoder of :func:`loads` (``json.loads(text, parse_constant=_refuse_constant)``, built once).
_DECODER: Final = json.JSONDecoder(parse_constant=_refuse_constant)


def clean_text(text: str) -> str:
    """Return ``text`` with NULs and lone surrogates replaced by U+FFFD and split pairs joined."""
    if not _BAD_TEXT.search(text):
        return text
    # UTF-16 round trip: a high+low pair becomes its character, a lone surrogate U+FFFD.
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return joined.replace("\x00", REPLACEMENT)
