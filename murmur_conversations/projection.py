"""The transcript projection (agentfootprint ``session-transcript``), computed in one place.

The ``transcript_count`` counter and every transcript reader (REST, session wire) use
:func:`transcript_entry`, so the counter always equals the transcript's length.
"""

from __future__ import annotations

from typing import Any

TRANSCRIPT_ROLES = frozenset({"user", "assistant"})


def transcript_text(content: Any) -> str:
    """The text of a record message's content: the string itself, or its ``text`` blocks joined
    with a newline (other blocks ignored)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        )
    return ""


def transcript_entry(
    *, role: str, content: Any, tool_call_id: str = "", extra: dict[str, Any] | None = None
) -> dict[str, str] | None:
    """``{"role", "content"}`` for a record message that belongs in the transcript, else None.

    In: roles ``user`` and ``assistant`` with non-empty text. Out: other roles, tool results (a
    non-empty ``tool_call_id``), injected context (``extra["injected"]`` true) and empty text.
    """
    if role not in TRANSCRIPT_ROLES or tool_call_id or (extra or {}).get("injected") is True:
        return None
    text = transcript_text(content)
    if not text:
        return None
    return {"role": role, "content": text}
