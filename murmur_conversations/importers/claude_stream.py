"""``claude -p --output-format stream-json --verbose`` output (docs/formats.md "Claude Code"). Pure.

The same message bodies as session transcripts (see ``claude_session``), in another envelope: the
key is ``session_id``; lines with a non-null ``parent_tool_use_id`` were written by a subagent
launched by that ``Task``/``Agent`` call and are kept only as source records; order is file order;
assistant lines sharing ``message.id`` are merged. The final ``result`` line is kept; it sets the
status ``idle``, or, when ``is_error`` is true or its ``subtype`` is not ``success``, saves an
``error`` notice and sets ``error`` (its ``result`` text repeats the last answer and is not stored
again). ``stream_event`` lines (``--include-partial-messages``) are kept, and their text deltas are
streamed live by ``--follow``. ``system`` lines: ``compact_boundary`` and ``api_retry`` are notices,
``init`` gives a title to fall back on (its ``cwd``), the others (``thinking_tokens``, ``task_*``,
``hook_*``, ``status``) and ``rate_limit_event``, ``tool_progress``, ``auth_status`` are kept only.
This stream carries no prompt unless ``--replay-user-messages`` echoes it, so the first answer's
text titles the conversation.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from murmur_conversations.importers.claude_session import ClaudeParser, Thread
from murmur_conversations.importers.records import (
    TITLE_FALLBACK,
    Delta,
    Item,
    Notice,
    SourceLine,
    StatusChange,
    Title,
    first_text,
    unknown_key,
)

KNOWN_TYPES: Final = frozenset(
    {
        "system",
        "assistant",
        "user",
        "result",
        "rate_limit_event",
        "stream_event",
        "tool_progress",
        "auth_status",
    }
)


class StreamParser(ClaudeParser):
    """Parser for one stream-json output; see the module docstring."""

    KEY_FIELD = "session_id"
    KNOWN = KNOWN_TYPES

    def snapshot(self) -> dict[str, Any] | None:
        """The session parser's state, and whether the first answer gave the title."""
        state = super().snapshot()
        return None if state is None else {**state, "answer_titled": self.main.answer_titled}

    def locate(self, value: dict[str, Any]) -> str | None:
        """Subagent lines: a non-null ``parent_tool_use_id``, the ``Task``/``Agent`` call that
        launched the subagent (one subagent per call)."""
        parent = value.get("parent_tool_use_id")
        if parent is None:
            return None
        agent = parent if isinstance(parent, str) and parent else "subagent"
        if isinstance(parent, str) and parent:
            self.agents.setdefault(agent, parent)
        return agent

    def _close(self, thread: Thread) -> list[Item]:
        held = thread.open
        out = super()._close(thread)
        if held is not None and not thread.answer_titled and not held.message.get("injected"):
            title = first_text(held.message.get("content"))
            if title:
                thread.answer_titled = True
                out.append(Title(title, TITLE_FALLBACK))
        return out

    def other(
        self, thread: Thread, value: dict[str, Any], line: SourceLine, at: datetime | None
    ) -> list[Item]:
        """The ``result`` line (the run's end), ``stream_event`` text deltas, ``system`` notices."""
        kind = value.get("type")
        if kind == "stream_event":
            event = value.get("event")
            delta = event.get("delta") if isinstance(event, dict) else None
            text = delta.get("text") if isinstance(delta, dict) else None
            if isinstance(text, str) and text:
                return [Delta(self.key or "", text)]
            return []
        if kind == "system":
            return self._stream_system(thread, value, line, at)
        if kind != "result":
            return []
        out = self._close(thread)
        subtype = value.get("subtype")
        if value.get("is_error") is not True and subtype == "success":
            out.append(StatusChange("idle", at=at))
            return out
        reason = value.get("result")
        if not isinstance(reason, str) or not reason:
            errors = value.get("errors")
            reason = (
                "; ".join(e for e in errors if isinstance(e, str))
                if isinstance(errors, list)
                else ""
            )
        if not reason:
            reason = f"The run ended with {subtype or 'an error'}."
        error_type = subtype if isinstance(subtype, str) else "error"
        content = {"text": reason, "error_type": error_type, "stop_reason": error_type}
        out.append(
            Notice(f"claude:result:{line.number}", "system", "error", content, {}, line.number, at)
        )
        out.append(StatusChange("error", at=at))
        return out

    def _stream_system(
        self, thread: Thread, value: dict[str, Any], line: SourceLine, at: datetime | None
    ) -> list[Item]:
        subtype = value.get("subtype")
        if subtype == "init":
            cwd = value.get("cwd")
            return [Title(cwd, TITLE_FALLBACK)] if isinstance(cwd, str) and cwd else []
        uuid = value.get("uuid")
        key = "claude:" + (uuid if isinstance(uuid, str) and uuid else unknown_key(line.text))
        if subtype == "compact_boundary":
            metadata: dict[str, Any] = {"claude_subtype": subtype}
            compact = value.get("compact_metadata")
            if isinstance(compact, dict):
                metadata["compact"] = compact
            content = {"text": "Conversation compacted"}
            notice = Notice(key, "system", "notification", content, metadata, line.number, at)
            return [*self._close(thread), notice]
        if subtype == "api_retry":
            error = value.get("error")
            text = (
                f"API error, retrying ({error})"
                if isinstance(error, str)
                else "API error, retrying"
            )
            content = {"text": text, "error_type": "api_retry"}
            metadata = {"claude_subtype": subtype}
            return [
                *self._close(thread),
                Notice(key, "system", "error", content, metadata, line.number, at),
            ]
        return []
