"""Reading a source as lines: UTF-8 only, BOM and CRLF removed, blank lines skipped, a torn last
line marked (docs/formats.md, "What every import does"). No Django here."""

from __future__ import annotations

import codecs
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import IO

from murmur_conversations.importers.records import SourceLine

_CHUNK = 1 << 16
_BOM = "\ufeff"


class NotUTF8(ValueError):
    """The source is not UTF-8 text; it is refused whole. ``str()`` says where and why."""


def check_utf8(stream: IO[bytes], start: int = 0) -> None:
    """Read ``stream`` to its end in chunks (memory stays bounded) and raise ``NotUTF8`` naming the
    byte offset of the first invalid sequence; a UTF-16 or UTF-32 byte-order mark is named as such.
    ``start`` is the offset the stream is read from (an appended part). The caller rewinds the
    stream."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    offset = start
    first = start == 0
    while True:
        chunk = stream.read(_CHUNK)
        if first and chunk[:2] in (b"\xff\xfe", b"\xfe\xff"):
            raise NotUTF8("the file is UTF-16 or UTF-32 (byte-order mark); convert it to UTF-8")
        first = False
        try:
            decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as error:
            data = bytes(error.object)  # bytes held from the previous chunk, then this chunk
            at = offset - (len(data) - len(chunk)) + error.start
            raise NotUTF8(
                f"the file is not UTF-8 (byte 0x{data[error.start]:02x} at offset {at}); "
                "convert it to UTF-8"
            ) from None
        if not chunk:
            return
        offset += len(chunk)


def spool(stream: IO[bytes]) -> IO[bytes]:
    """Copy ``stream`` (stdin) into a temporary file, so it can be checked whole and then read; the
    copy is on disk, so memory stays bounded. The caller closes it."""
    copy = tempfile.TemporaryFile()  # noqa: SIM115 (returned open, closed by the caller)
    shutil.copyfileobj(stream, copy, _CHUNK)
    copy.seek(0)
    return copy


def decode_line(raw: bytes, number: int) -> SourceLine | None:
    """One raw line (with or without its ``\\n``) as a ``SourceLine``, or None for a blank line.
    Raises ``NotUTF8`` naming the line when it is not UTF-8 (streams read with ``--follow`` cannot
    be checked whole first)."""
    complete = raw.endswith(b"\n")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotUTF8(
            f"line {number} is not UTF-8 (byte 0x{raw[error.start]:02x} at column {error.start + 1})"
        ) from None
    if number == 1 and text.startswith(_BOM):
        text = text[1:]
    text = text.rstrip("\n").rstrip("\r")
    if not text.strip():
        return None
    return SourceLine(number=number, text=text, complete=complete)


def iter_lines(stream: IO[bytes]) -> Iterator[SourceLine]:
    """The non-blank lines of ``stream``, numbered from 1 (blank lines keep their numbers)."""
    for number, raw in enumerate(stream, start=1):
        line = decode_line(raw, number)
        if line is not None:
            yield line


def follow_lines(
    stream: IO[bytes],
    *,
    wait: Callable[[], None] | None,
    refuse: Callable[[int, str, bytes], None],
) -> Iterator[SourceLine]:
    """The lines of a live ``stream`` as they arrive (``--follow``), numbered like
    :func:`iter_lines`. With ``wait`` None (a pipe, stdin) it ends at the end of the stream; with a
    ``wait`` (a file) it calls ``wait()`` at the end of the file and reads again, so appended
    lines are read, until ``wait`` raises ``KeyboardInterrupt``. A line is given only once its
    ``\\n`` has arrived; what is left when the stream ends is given as an incomplete last line. A
    line that is not UTF-8 cannot be refused with its whole source here: it is passed to
    ``refuse(number, reason, raw)`` and skipped."""
    number = 0
    pending = b""
    try:
        while True:
            raw = stream.readline()
            if raw.endswith(b"\n"):
                number += 1
                data, pending = pending + raw, b""
                line = _decode_or_refuse(data, number, refuse)
                if line is not None:
                    yield line
                continue
            pending += raw
            if wait is None:
                if not raw:
                    break
                continue
            wait()
    except KeyboardInterrupt:
        pass  # the person stopped following: what has arrived is finished below
    if pending:
        line = _decode_or_refuse(pending, number + 1, refuse)
        if line is not None:
            yield line


def _decode_or_refuse(
    raw: bytes, number: int, refuse: Callable[[int, str, bytes], None]
) -> SourceLine | None:
    try:
        return decode_line(raw, number)
    except NotUTF8 as error:
        refuse(number, str(error), raw)
        return None


class LineCursor:
    """The non-blank lines of a file ``stream`` from byte ``offset`` on, numbered after ``line``
    (the number of the last line read before; docs/formats.md "Whole folders"). While iterating,
    ``offset`` and ``line`` follow the end of the last *complete* line read, so an import that
    stops there, or at a last line still being written, goes on from the right place next time.
    ``on_line(size)`` is called with the byte size of each line read (for a progress bar)."""

    def __init__(
        self,
        stream: IO[bytes],
        *,
        offset: int = 0,
        line: int = 0,
        on_line: Callable[[int], None] | None = None,
    ) -> None:
        self.stream = stream
        self.offset = offset
        self.line = line
        self.on_line = on_line

    def __iter__(self) -> Iterator[SourceLine]:
        self.stream.seek(self.offset)
        number = self.line
        for raw in self.stream:
            number += 1
            if self.on_line is not None:
                self.on_line(len(raw))
            if raw.endswith(b"\n"):
                self.offset += len(raw)
                self.line = number
            line = decode_line(raw, number)
            if line is not None:
                yield line


class FrameCursor(LineCursor):
    """The frames of a binary ``otlp-proto`` ``stream`` (``traces.otlp.frames``) from byte
    ``offset`` on, as ``SourceLine`` values numbered after ``line`` (``data`` the frame's bytes).
    ``offset`` and ``line`` follow the end of the last whole frame read, as for
    :class:`LineCursor`; a torn frame ends the stream as a last incomplete line (empty ``data``,
    ``text`` saying why)."""

    def __iter__(self) -> Iterator[SourceLine]:
        from murmur_conversations.traces.otlp import frames

        self.stream.seek(self.offset)
        number = self.line
        start = self.offset
        for end, data, reason in frames(self.stream):
            number += 1
            if data is None:
                yield SourceLine(number=number, text=reason, complete=False, data=b"")
                return
            if self.on_line is not None:
                self.on_line(len(data) + 4)
            self.offset = start + end
            self.line = number
            yield SourceLine(number=number, text="", data=data)
