"""``claude -p --output-format stream-json --verbose`` output (docs/formats.md). Pure.

The same message bodies as session transcripts (see ``claude_session``), in another envelope: the
key is ``session_id``; lines with a non-null ``parent_tool_use_id`` were written by a subagent
launched by that ``Task``/``Agent`` call and are kept only as source records; order is file order;
assistant lines sharing ``message.id`` are merged. The final ``result`` line is kept; it sets the
status ``idle``, or, when ``is_error`` is true or its ``subtype`` is not ``success``, saves an
``error`` notice and sets ``error`` (its ``result`` text repeats the last answer and is not stored
again). ``stream_event`` lines (``--include-partial-messages``) are kept, and their text deltas are
streamed live by ``--follow``. ``system`` lines (``init``, ``thinking_tokens``, ``task_*``) and
``rate_limit_event`` lines are kept only.
"""

from __future__ import annotations

from typing import Any

from murmur_conversations.importers.claude_session import ClaudeParser
from murmur_conversations.importers.records import (
    Delta,
    Item,
    Notice,
    SourceLine,
    StatusChange,
)

KNOWN_TYPES = frozenset(
    {"system", "assistant", "user", "result", "rate_limit_event", "stream_event"}
)


class StreamParser(ClaudeParser):
    """Parser for one stream-json output; see the module docstring."""

    KEY_FIELD = "session_id"
    KNOWN = KNOWN_TYPES

    def side(self, value: dict[str, Any]) -> bool:
        """Subagent lines: a non-null ``parent_tool_use_id``."""
        return value.get("parent_tool_use_id") is not None

    def other(self, value: dict[str, Any], line: SourceLine) -> list[Item]:
        """The ``result`` line (the run's end) and ``stream_event`` text deltas."""
        kind = value.get("type")
        if kind == "stream_event" and not self.side(value):
            event = value.get("event")
            delta = event.get("delta") if isinstance(event, dict) else None
            text = delta.get("text") if isinstance(delta, dict) else None
            if isinstance(text, str) and text:
                return [Delta(self.key or "", text)]
            return []
        if kind != "result":
            return []
        out = self._close()
        subtype = value.get("subtype")
        if value.get("is_error") is not True and subtype == "success":
            out.append(StatusChange("idle"))
            return out
        reason = value.get("result")
        if not isinstance(reason, str) or not reason:
            reason = f"The run ended with {subtype or 'an error'}."
        error_type = subtype if isinstance(subtype, str) else "error"
        content = {"text": reason, "error_type": error_type, "stop_reason": error_type}
        out.append(
            Notice(f"claude:result:{line.number}", "system", "error", content, {}, line.number)
        )
        out.append(StatusChange("error"))
        return out
