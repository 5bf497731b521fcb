"""Identifiers the app makes up: ``msg_`` and ``call_`` + 32 hex of a UUIDv7 (RFC 9562)."""

from __future__ import annotations

import os
import time
import uuid


def uuid7() -> uuid.UUID:
    """A time-ordered UUID version 7: 48 bits of Unix milliseconds, then 74 random bits."""
    builtin = getattr(uuid, "uuid7", None)  # Python 3.14+
    if builtin is not None:
        value: uuid.UUID = builtin()
        return value
    millis = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    number = (millis & ((1 << 48) - 1)) << 80 | rand & ((1 << 80) - 1)
    number = (number & ~(0xF << 76)) | (0x7 << 76)  # version 7
    number = (number & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return uuid.UUID(int=number)


def new_message_id() -> str:
    """``msg_`` + 32 lowercase hex digits of a UUIDv7: the id of a message given without one."""
    return "msg_" + uuid7().hex


def new_call_id() -> str:
    """``call_`` + 32 lowercase hex digits of a UUIDv7: the id of a tool call given without one."""
    return "call_" + uuid7().hex
