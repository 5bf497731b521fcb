"""Why a tool call failed: the exit status a result reports and the short reason a failed call
carries (docs/write-path.md "A failed call says why"). Pure, no Django: the write path and the
importers' parsers both read it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

#: Keys that carry a command's exit status in a tool result (its keys or its ``metadata``).
EXIT_KEYS: Final = ("exit_code", "exitCode", "exit_status", "returncode")
#: How much of a failed call's output its reason carries: the last lines, at most this many
#: characters.
REASON_TAIL_CHARS: Final = 300
REASON_TAIL_LINES: Final = 5
_EXIT_TEXT: Final = re.compile(r"\A\s*(?:Error:\s*)?Exit code:?\s*(-?\d{1,6})\b", re.IGNORECASE)


def _exit_of(mapping: Any) -> int | None:
    if not isinstance(mapping, dict):
        return None
    for key in EXIT_KEYS:
        value = mapping.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _json_object(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _text(content: Any) -> str:
    """A result's content as text: a string as it is, the texts of a block list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text"))
            for block in content
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        )
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def output_text(content: Any) -> str:
    """A result's output as text: the ``output`` of Codex's JSON envelope ``{"output",
    "metadata"}``, else the content's text."""
    text = _text(content)
    envelope = _json_object(text)
    if envelope is not None and isinstance(envelope.get("output"), str):
        return str(envelope["output"])
    return text


def exit_status(content: Any, extra: dict[str, Any] | None = None) -> int | None:
    """The exit status a tool result reports, or None: an ``exit_code`` (or ``exitCode``,
    ``exit_status``, ``returncode``) key of the message or of its ``metadata`` object; in its
    text, Codex's JSON envelope ``{"output", "metadata": {"exit_code"}}`` or a first line
    ``Exit code: N`` / ``Error: Exit code N`` (Codex, Claude Code)."""
    extra = extra or {}
    found = _exit_of(extra)
    if found is None:
        found = _exit_of(extra.get("metadata"))
    if found is None:
        text = _text(content)
        envelope = _json_object(text)
        if envelope is not None:
            found = _exit_of(envelope.get("metadata"))
            if found is None:
                found = _exit_of(envelope)
        else:
            match = _EXIT_TEXT.match(text)
            found = int(match.group(1)) if match else None
    return found


def failure_reason(content: Any, extra: dict[str, Any] | None = None) -> str:
    """The short reason a failed call's card shows: ``exit code N`` when the result reports an
    exit status (:func:`exit_status`), then the tail of its output (the last
    :data:`REASON_TAIL_LINES` non-blank lines, at most :data:`REASON_TAIL_CHARS` characters),
    one per line; ``failed`` when there is neither."""
    code = exit_status(content, extra)
    lines = [line.rstrip() for line in output_text(content).splitlines() if line.strip()]
    tail = "\n".join(lines[-REASON_TAIL_LINES:])
    if len(tail) > REASON_TAIL_CHARS:
        tail = "..." + tail[-(REASON_TAIL_CHARS - 3) :]
    parts = ([f"exit code {code}"] if code is not None else []) + ([tail] if tail else [])
    return "\n".join(parts) or "failed"
