"""Codex CLI session rollouts, ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`` (docs/formats.md
"Codex"). Pure.

Every line is kept verbatim as a source record. Each line is ``{timestamp, type, payload}``; every
``type`` and every ``response_item`` payload type of current Codex versions is read on purpose
(the tables in docs/formats.md are the contract):

- ``response_item`` payloads are the conversation the model saw: messages, reasoning, calls of
  every kind (``function_call``, ``custom_tool_call``, ``local_shell_call``, ``tool_search_call``)
  with their outputs (``function_call_output``, ``custom_tool_call_output``,
  ``tool_search_output``), linked by ``call_id``; web searches and image generations are tool-call
  cards completed at once. An unknown payload type is counted by name (``response_item.<type>``).
- ``event_msg`` lines echo the response items and carry usage; the ones a reader should see that
  have no response item (an error, an aborted turn) are notices, a thread name is the title.
  ``token_count`` events carry cumulative totals: each model response's items are held until the
  next one, and the growth of ``total_token_usage`` since the previous one goes on the last
  assistant message of the response as ``usage`` (with the ``model`` of the turn), so the usage
  of the messages sums to the last total (docs/formats.md "Usage"). A fork (``codex fork``: its
  ``session_meta`` names ``forked_from_id``) replays its original's lines, totals included, right
  after its ``session_meta``: the replayed totals are the original's, and only their growth after
  the replay is the fork's.
- ``compacted`` lines are compaction notices; ``session_meta`` gives the key; the other line types
  are source records only.

Key: ``session_meta.payload.id``, else ``--conversation-id``. Message ids follow the ``imp_`` rule
with the 0-based line index, stable as the rollout grows.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Final

from murmur_conversations import jsonenc
from murmur_conversations.exits import exit_status
from murmur_conversations.importers.records import (
    MISSING,
    TITLE_CUSTOM,
    TITLE_PROMPT,
    HeldUntilKeyed,
    Item,
    Kept,
    Notice,
    ParseContext,
    Parsed,
    Problem,
    SourceLine,
    Title,
    ToolUpdate,
    kind_of,
    parse_line,
    parse_time,
    prompt_title,
    unknown_key,
    wrong_type,
)

#: Rollout line types (``RolloutItem``, openai/codex ``codex-rs/protocol``).
KNOWN_LINES: Final = frozenset(
    {
        "session_meta",
        "turn_context",
        "response_item",
        "event_msg",
        "compacted",
        "world_state",
        "inter_agent_communication",
        "inter_agent_communication_metadata",
    }
)
#: ``response_item`` payload types kept as source records only: encrypted compaction state, the
#: harness's undo snapshots, tool lists, request controls, messages between agents.
RECORD_ONLY_ITEMS: Final = frozenset(
    {
        "compaction",
        "compaction_summary",
        "context_compaction",
        "compaction_trigger",
        "ghost_snapshot",
        "additional_tools",
        "agent_message",
        "other",
    }
)
CALL_ITEMS: Final = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"}
)
OUTPUT_ITEMS: Final = frozenset(
    {"function_call_output", "custom_tool_call_output", "tool_search_output"}
)
CARD_ITEMS: Final = frozenset({"web_search_call", "image_generation_call"})
#: The longest pause between two lines of a fork's replay of its original (``_replaying``).
REPLAY_GAP: Final = timedelta(seconds=2)
READ_ITEMS: Final = frozenset({"message", "reasoning"}) | CALL_ITEMS | OUTPUT_ITEMS | CARD_ITEMS
_INJECTED_PREFIXES: Final = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions",
    "# AGENTS.md",
    "<INSTRUCTIONS>",
)


def _text_blocks(content: Any) -> list[Any]:
    blocks: list[Any] = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        else:
            blocks.append(part)
    if isinstance(content, str):
        blocks.append({"type": "text", "text": content})
    return blocks


def _wrong_line(value: dict[str, Any], line: SourceLine) -> Problem | None:
    """The refusal of a rollout line this version cannot read whole, else None: a ``type`` (or a
    ``response_item``'s ``payload.type``) that is not a string, a known line whose ``payload``
    is not an object, a message whose ``content`` is neither text nor a list. (A line without a
    ``type`` is an unknown record.)"""
    kind = kind_of(value, "type", line)
    if isinstance(kind, Problem):
        return kind
    if kind not in KNOWN_LINES:
        return None
    payload = value.get("payload", MISSING)
    if not isinstance(payload, dict):
        return wrong_type(line, "payload", payload, "an object")
    if kind != "response_item":
        return None
    item = kind_of(payload, "type", line)
    if isinstance(item, Problem):
        return wrong_type(line, "payload.type", payload["type"], "a string")
    content = payload.get("content")
    if item == "message" and content is not None and not isinstance(content, str | list):
        return wrong_type(line, "payload.content", content, "a string or an array")
    return None


def _injected(role: Any, blocks: list[Any]) -> bool:
    if role == "developer":
        return True
    texts = [b.get("text", "") for b in blocks if isinstance(b, dict)]
    return (
        role == "user"
        and bool(texts)
        and all(isinstance(t, str) and t.lstrip().startswith(_INJECTED_PREFIXES) for t in texts)
    )


def _arguments(value: Any) -> Any:
    """JSON ``arguments`` text parsed, else kept as the string (also for NaN and nesting too deep
    to read, as ``messages`` does for OpenAI arguments)."""
    return jsonenc.loads_or_given(value)


def _output(value: Any) -> str:
    """An output as text: a string as it is, structured content items (images) as JSON text."""
    return value if isinstance(value, str) else json.dumps(value)


def _call(call_id: Any, name: str, arguments: Any, **rest: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_call", "id": call_id, "name": name, "input": arguments}
    block.update({k: v for k, v in rest.items() if v is not None})
    return {"role": "assistant", "content": [block]}


def message_of(payload: dict[str, Any], call_id: str | None = None) -> dict[str, Any] | None:
    """The record message of one ``response_item`` payload, or None for a type that is not a
    message (cards, records-only, unknown). ``call_id`` replaces a missing call id (tool search)."""
    kind = payload.get("type")
    rest = {k: v for k, v in payload.items() if k not in ("type", "role", "content")}
    if kind == "message":
        blocks = _text_blocks(payload.get("content"))
        message: dict[str, Any] = {"role": payload.get("role"), "content": blocks, **rest}
        if _injected(payload.get("role"), blocks):
            message["injected"] = True
        return message
    if kind == "reasoning":
        summary = payload.get("summary")
        texts = (
            [s["text"] for s in summary if isinstance(s, dict) and isinstance(s.get("text"), str)]
            if isinstance(summary, list)
            else []
        )
        return {"role": "assistant", "content": [{"type": "thinking", "text": "\n\n".join(texts)}]}
    if kind in ("function_call", "custom_tool_call"):
        args = payload.get("arguments", payload.get("input", {}))
        return _call(
            payload.get("call_id"),
            payload.get("name") or "",
            _arguments(args),
            namespace=payload.get("namespace"),
        )
    if kind == "local_shell_call":
        action = payload.get("action")
        return _call(call_id or payload.get("call_id") or payload.get("id"), "local_shell", action)
    if kind == "tool_search_call":
        arguments = {"execution": payload.get("execution"), "arguments": payload.get("arguments")}
        return _call(call_id or payload.get("call_id"), "tool_search", arguments)
    if kind in ("function_call_output", "custom_tool_call_output"):
        # Not jsonenc: this text is stored content, hashed into the ids of imported messages
        # (docs/formats.md), so it stays spelled as it always was.
        return {
            "role": "tool",
            "tool_call_id": payload.get("call_id"),
            "content": _output(payload.get("output", "")),
        }
    if kind == "tool_search_output":
        tools = payload.get("tools")
        return {
            "role": "tool",
            "tool_call_id": call_id or payload.get("call_id"),
            "content": json.dumps(tools, ensure_ascii=False),
            "is_error": payload.get("status") not in (None, "completed"),
        }
    return None


class RolloutParser(HeldUntilKeyed):
    """Parser for one rollout; see the module docstring."""

    def after_id(self, message: dict[str, Any]) -> dict[str, Any]:
        """An output that reports a non-zero exit status (``exits.exit_status``: the JSON
        envelope's ``metadata.exit_code``, or a first line ``Exit code: N``) fails its call:
        ``is_error`` is set after the id, which stays what it always was."""
        if message.get("role") != "tool" or "is_error" in message:
            return message
        code = exit_status(message.get("content"))
        return message if code in (None, 0) else {**message, "is_error": True}

    def __init__(self, context: ParseContext) -> None:
        super().__init__(context)
        resume = context.resume or {}
        if self.key is None and isinstance(resume.get("key"), str):
            self.key = resume["key"]
        self.prompt_titled = bool(resume.get("prompt_titled"))
        #: tool_search calls executed without a call id, waiting for their output (by line)
        self.searches: list[str] = list(resume.get("searches") or ())
        #: the last cumulative ``total_token_usage``, the usage not yet on a message, the model
        self.total: dict[str, int] = _counts(resume.get("usage_total"))
        self.unplaced: dict[str, int] = _counts(resume.get("usage_unplaced"))
        model = resume.get("model")
        self.model: str | None = model if isinstance(model, str) else None
        #: items of the model response under way, held until its token_count
        self.response: list[Item] = []
        #: a fork (``codex fork``) replaying its original's lines: the time of the last replayed
        #: line while the replay goes on (``_replaying``), else None
        self.replay_at: datetime | None = parse_time(resume.get("replay_at"))
        self.replaying = bool(resume.get("replaying"))
        forked_from = resume.get("forked_from")
        self.forked_from = forked_from if isinstance(forked_from, str) else None

    def snapshot(self) -> dict[str, Any] | None:
        """The key, whether the first prompt gave the title, unanswered tool searches, and the
        usage state: the last cumulative total, usage no message carries yet, the model."""
        if self.key is None:
            return None
        return {
            "key": self.key,
            "prompt_titled": self.prompt_titled,
            "searches": self.searches,
            "usage_total": self.total,
            "usage_unplaced": self.unplaced,
            "model": self.model,
            "forked_from": self.forked_from,
            "replaying": self.replaying,
            "replay_at": None if self.replay_at is None else self.replay_at.isoformat(),
        }

    def finish(self) -> list[Item]:
        """What is held: the items waiting for their key, the response waiting for its usage."""
        return [*self._responses(super().finish()), *self._place()]

    # ------------------------------------------------------------------ usage

    def _replaying(self, at: datetime | None) -> None:
        """Whether a fork's line at ``at`` is still part of the replay of its original: Codex
        writes the replay in one burst when the fork starts, every line stamped at that moment;
        a line more than :data:`REPLAY_GAP` after the line before it is the fork's own (no model
        answers that fast), and so is every line after it. A line without a time goes on with
        the burst."""
        if at is None or self.replay_at is None:
            self.replay_at = self.replay_at or at
            return
        if at - self.replay_at > REPLAY_GAP:
            self.replaying, self.replay_at = False, None
        else:
            self.replay_at = max(at, self.replay_at)

    def _responses(self, released: list[Item], total: dict[str, int] | None = None) -> list[Item]:
        """Hold a model response's items (from its first assistant message on) until the
        ``token_count`` that ``total`` comes from; give them, the growth of the total on the last
        assistant message, when it comes, or when a message of another role shows the response
        is over (the usage then waits for the next assistant message). Items already have their
        ids: the usage and model added here do not change them."""
        out: list[Item] = []
        for item in released:
            assistant = isinstance(item, Parsed) and item.message.get("role") == "assistant"
            if isinstance(item, Parsed) and not assistant and self.response:
                out.extend(self._place())
            if self.response or assistant:
                self.response.append(item)
            else:
                out.append(item)
        if total is not None:
            grown = _growth(self.total, total)
            self.total = total
            for name, value in grown.items():
                self.unplaced[name] = self.unplaced.get(name, 0) + value
            out.extend(self._place())
        return out

    def _place(self) -> list[Item]:
        """The held response, its last assistant message carrying the usage not yet placed."""
        held, self.response = self.response, []
        if any(self.unplaced.values()):
            for index in range(len(held) - 1, -1, -1):
                item = held[index]
                if isinstance(item, Parsed) and item.message.get("role") == "assistant":
                    message = {**item.message, "usage": dict(self.unplaced)}
                    if self.model is not None:
                        message["model"] = self.model
                    held[index] = replace(item, message=message)
                    self.unplaced = {}
                    break
        return held

    def feed(self, line: SourceLine) -> list[Item]:
        """One rollout line: kept, and read by its type."""
        value = parse_line(line)
        if isinstance(value, Problem):
            return [value]
        refused = _wrong_line(value, line)
        if refused is not None:
            return [refused]
        kind = value.get("type")
        payload = value.get("payload")
        at = parse_time(value.get("timestamp"))
        meta_id = (
            payload.get("id") if kind == "session_meta" and isinstance(payload, dict) else None
        )
        if self.key is None and isinstance(meta_id, str) and meta_id:
            self.key = meta_id
            forked_from = payload.get("forked_from_id") if isinstance(payload, dict) else None
            self.replaying = isinstance(forked_from, str) and bool(forked_from)
            self.replay_at = at
            self.forked_from = forked_from if self.replaying else None
        elif self.replaying:
            self._replaying(at)
        record_type = kind[:64] if isinstance(kind, str) else "unknown"
        known = isinstance(kind, str) and kind in KNOWN_LINES and isinstance(payload, dict)
        item_kind = ""
        if kind == "response_item" and isinstance(payload, dict):
            ptype = payload.get("type")
            if not isinstance(ptype, str) or ptype not in READ_ITEMS | RECORD_ONLY_ITEMS:
                known = False
                item_kind = f"response_item.{ptype if isinstance(ptype, str) else 'unknown'}"
        items: list[Item] = [
            Kept(
                unknown_key(line.text),
                line.number,
                line.text,
                record_type,
                unknown=not known,
                at=at,
                kind=item_kind,
            )
        ]
        if not known or not isinstance(payload, dict):
            return self._responses(self._release(items))
        if kind == "turn_context" and isinstance(payload.get("model"), str):
            self.model = payload["model"]
        total = _token_total(payload) if kind == "event_msg" else None
        if total is not None and self.replaying:
            self.total, total = total, None  # the original's: the fork's usage grows from it
        if kind == "response_item":
            items.extend(self._response_item(payload, line.number, at))
        elif kind == "event_msg":
            items.extend(self._event(payload, line, at))
        elif kind == "compacted":
            text = payload.get("message")
            content = {"text": text if isinstance(text, str) and text else "Conversation compacted"}
            metadata = {"codex_type": "compacted"}
            notice = Notice(
                f"codex:{unknown_key(line.text)}",
                "system",
                "notification",
                content,
                metadata,
                line.number,
                at,
            )
            items.append(notice)
        return self._responses(self._release(items), total)

    def _response_item(self, payload: dict[str, Any], line: int, at: datetime | None) -> list[Item]:
        kind = payload.get("type")
        call_id: str | None = None
        if kind == "tool_search_call" and not payload.get("call_id"):
            call_id = f"tool_search:{line}"
            self.searches.append(call_id)
        elif kind == "tool_search_output" and not payload.get("call_id"):
            call_id = self.searches.pop(0) if self.searches else None
        if kind in CARD_ITEMS:
            return self._card(payload, line, at)
        message = message_of(payload, call_id)
        if message is None:
            return []
        out: list[Item] = []
        if not self.prompt_titled and message.get("role") == "user" and not message.get("injected"):
            title = prompt_title(message.get("content"))
            if title:
                self.prompt_titled = True
                out.append(Title(title, TITLE_PROMPT))
        out.append(Parsed(message, line, at))
        return out

    def _card(self, payload: dict[str, Any], line: int, at: datetime | None) -> list[Item]:
        """A web search or image generation: a tool-call card, completed (or failed) at once."""
        kind = payload.get("type")
        call_id = payload.get("id") or f"{kind}:{line}"
        status = payload.get("status")
        if kind == "web_search_call":
            name, arguments = "web_search", payload.get("action") or {}
            result: Any = {"status": status, "action": payload.get("action")}
        else:
            name = "image_generation"
            arguments = {"revised_prompt": payload.get("revised_prompt")}
            result = {"status": status, "revised_prompt": payload.get("revised_prompt")}
        out: list[Item] = [Parsed(_call(call_id, name, arguments), line, at)]
        if status in ("failed", "incomplete"):
            out.append(ToolUpdate("failed", {"call_id": call_id, "error": result}, line, at))
        elif status != "in_progress":
            out.append(ToolUpdate("completed", {"call_id": call_id, "result": result}, line, at))
        return out

    def _event(self, payload: dict[str, Any], line: SourceLine, at: datetime | None) -> list[Item]:
        kind = payload.get("type")
        key = f"codex:{unknown_key(line.text)}"
        if kind == "thread_name_updated":
            name = payload.get("thread_name")
            return (
                [Title(name.strip(), TITLE_CUSTOM)]
                if isinstance(name, str) and name.strip()
                else []
            )
        if kind == "error":
            text = payload.get("message")
            content = {
                "text": text if isinstance(text, str) and text else "Error",
                "error_type": "error",
            }
            return [Notice(key, "system", "error", content, {"codex_type": kind}, line.number, at)]
        if kind == "turn_aborted":
            reason = payload.get("reason")
            text = f"Turn aborted ({reason})" if isinstance(reason, str) else "Turn aborted"
            content = {"text": text}
            return [
                Notice(
                    key, "system", "notification", content, {"codex_type": kind}, line.number, at
                )
            ]
        return []


def _counts(value: Any) -> dict[str, int]:
    """The integer counts of a usage object (others left out)."""
    if not isinstance(value, dict):
        return {}
    return {
        k: v
        for k, v in value.items()
        if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
    }


def _token_total(payload: dict[str, Any]) -> dict[str, int] | None:
    """The cumulative ``total_token_usage`` of a ``token_count`` event (None for another event,
    or ``info: null``)."""
    if payload.get("type") != "token_count":
        return None
    info = payload.get("info")
    total = _counts(info.get("total_token_usage")) if isinstance(info, dict) else {}
    return total or None


def _growth(before: dict[str, int], now: dict[str, int]) -> dict[str, int]:
    """How much each count of a cumulative total grew; a total lower than the one before (a
    count that started again) counts whole."""
    if any(now.get(name, 0) < value for name, value in before.items()):
        return dict(now)
    return {name: value - before.get(name, 0) for name, value in now.items()}


def sniff(first: dict[str, Any]) -> bool:
    """Whether a line looks like a rollout line: a known ``type`` with a ``payload``."""
    kind = first.get("type")
    return isinstance(kind, str) and kind in KNOWN_LINES and isinstance(first.get("payload"), dict)
