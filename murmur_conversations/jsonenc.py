"""The one JSON encoder of the app: what is stored, exported, handed to hooks and sent on a websocket.

The spelling (size limits: docs/write-path.md "Errors"; the websocket value cap: docs/websocket.md
"Large values"; export lines: docs/formats.md "Export"):

- compact: separators ``,`` and ``:``, no spaces; object keys in the order given;
- non-ASCII text is written as itself (``ensure_ascii=False``), never as ``\\uXXXX`` escapes, so a
  size measured on this text is the size of the UTF-8 bytes stored and sent;
- NaN and the infinities are not JSON (RFC 8259): :func:`dumps` refuses them with ``ValueError``
  and :func:`loads` refuses the ``NaN``, ``Infinity`` and ``-Infinity`` literals.

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
