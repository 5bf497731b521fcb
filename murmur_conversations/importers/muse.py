"""``muse exec --json`` journals, ``--format muse`` (docs/formats.md). Pure.

Every line is kept verbatim as a source record (unknown payload types too, counted). An envelope
(``stream.id``, a positive integer ``sequence``, ``payload_type``, ``payload``) is read:

- ``turn.input.user`` -> the user message (``prompt``); ``run.lifecycle.started`` repeats the prompt
  and gives the user message only when its run had no ``turn.input.user``.
- ``run.terminal.<state>`` -> the assistant answer (``text``), with the terminal's ``usage`` where
  it has one and the ``model_id`` of ``run.model.configured`` (docs/formats.md "Usage"). ``run.output.delta`` is a live
  preview only (``Delta``, broadcast by ``--follow``), never stored, so the answer is not doubled.
  A terminal other than ``completed`` is the run's error: an ``error`` notice and status ``error``
  (``cancelled`` and ``interrupted`` terminals set those statuses); ``completed`` sets ``idle``.
- ``task.lifecycle.*`` of a task whose ``task_kind`` is ``tool.<name>`` -> a tool call named
  ``<name>``: its call message once started (or scheduled), ``executing`` on ``started``, ``failed``
  with the ``reason``, ``cancelled`` when rejected or cancelled. The call id is the muse
  ``call_id`` from the task's ``idempotency_key`` (``tool:<call_id>``), else the task id.
- ``tool.result`` -> the call's result (``is_error`` when ``correlation_facts.outcome`` is
  ``failure``), linked to its task by ``call_id`` when the idempotency key named it, else by tool
  name and order (the "tool.result task_id gap"). A completed tool task whose result never came is
  completed when the journal ends.
- A failed task that is not a tool (a model response, a reminder plugin) is an ``error`` notice and
  never fails the run.

Key: ``stream.id`` (one conversation per session), else ``--conversation-id``. Message ids follow the
``imp_`` rule with the index ``2 * (sequence - 1)`` (``+ 1`` for a second message of one envelope),
stable however the journal is cut or re-read.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Final

from murmur_conversations.importers.records import (
    MISSING,
    Begin,
    Delta,
    Item,
    Kept,
    Notice,
    ParseContext,
    Parsed,
    Problem,
    SourceLine,
    StatusChange,
    ToolUpdate,
    known,
    parse_line,
    parse_time,
    refuse,
    sha256_hex,
    unknown_key,
    with_id,
    wrong_type,
)

NAME = "muse"

KNOWN_TYPES = frozenset(
    {
        "runtime.command.accepted",
        "session.run.linked",
        "run.model.configured",
        "turn.input.user",
        "run.lifecycle.started",
        "run.output.delta",
        "task.stream.linked",
        "tool.result",
    }
)
KNOWN_PREFIXES = ("task.lifecycle.", "run.terminal.")
_TOOL_PREFIX = "tool."
_KEY_PREFIX = "tool:"
_TERMINAL_STATUS = {"cancelled": "cancelled", "canceled": "cancelled", "interrupted": "interrupted"}


@dataclass
class _Task:
    """What is known of one task: its kind, its tool (None for other tasks), its call id once the
    call message was given, and the call id named by its idempotency key."""

    kind: str
    tool: str | None
    call_id: str | None = None
    named_call_id: str | None = None
    completed: bool = False
    has_result: bool = False


@dataclass
class _Session:
    """Per-conversation state: ids only, so memory is bounded by one conversation's ids."""

    tasks: dict[str, _Task] = field(default_factory=dict)
    prompted_runs: set[str] = field(default_factory=set)
    model: str | None = None  # the model ``run.model.configured`` names


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _envelope(value: dict[str, Any]) -> tuple[str, int, str, dict[str, Any]] | None:
    """``(stream id, sequence, payload_type, payload)`` of a journal envelope, else None."""
    stream = value.get("stream")
    stream_id = _str(stream.get("id")) if isinstance(stream, dict) else None
    sequence = value.get("sequence")
    payload_type = _str(value.get("payload_type"))
    payload = value.get("payload")
    if (
        stream_id is None
        or not isinstance(sequence, int)
        or isinstance(sequence, bool)
        or sequence < 1
        or payload_type is None
        or not isinstance(payload, dict)
    ):
        return None
    return stream_id, sequence, payload_type, payload


#: The fields of a journal envelope: a line that has them all is read as one.
ENVELOPE_FIELDS: Final = ("stream", "sequence", "payload_type", "payload")


def _wrong_envelope(value: dict[str, Any], line: SourceLine) -> Problem | None:
    """The refusal of a line that has every field of an envelope but one of the wrong type (a
    line lacking some is an unknown record), else None."""
    if not all(name in value for name in ENVELOPE_FIELDS):
        return None
    stream, sequence = value["stream"], value["sequence"]
    if not isinstance(stream, dict):
        return wrong_type(line, "stream", stream, "an object")
    if _str(stream.get("id")) is None:
        return wrong_type(line, "stream.id", stream.get("id", MISSING), "a non-empty string")
    if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 1:
        return wrong_type(line, "sequence", sequence, "a positive integer")
    if _str(value["payload_type"]) is None:
        return wrong_type(line, "payload_type", value["payload_type"], "a non-empty string")
    if not isinstance(value["payload"], dict):
        return wrong_type(line, "payload", value["payload"], "an object")
    return None


def _wrong_payload(payload_type: str, payload: dict[str, Any], line: SourceLine) -> Problem | None:
    """The refusal of a payload whose fields this version reads hold the wrong type (a terminal's
    ``text``, a task event's ``task_kind`` or ``idempotency_key``...), else None. Null stands for
    a field left out."""
    checks: list[tuple[str, Any]] = []
    if payload_type.startswith("run.terminal."):
        checks = [("payload.text", payload.get("text")), ("payload.reason", payload.get("reason"))]
    elif payload_type.startswith("task.lifecycle."):
        event = payload.get("event")
        if event is not None and not isinstance(event, dict):
            return wrong_type(line, "payload.event", event, "an object")
        event = event or {}
        checks = [("payload.task_id", payload.get("task_id"))] + [
            (f"payload.event.{name}", event.get(name))
            for name in ("task_id", "kind", "task_kind", "idempotency_key", "reason")
        ]
    elif payload_type == "tool.result":
        facts = payload.get("correlation_facts")
        if facts is not None and not isinstance(facts, dict):
            return wrong_type(line, "payload.correlation_facts", facts, "an object")
        checks = [
            ("payload.call_id", payload.get("call_id")),
            ("payload.text", payload.get("text")),
        ]
    for name, found in checks:
        if found is not None and not isinstance(found, str):
            return wrong_type(line, name, found, "a string")
    return None


def _known(payload_type: str) -> bool:
    return payload_type in KNOWN_TYPES or payload_type.startswith(KNOWN_PREFIXES)


def _run_id(value: dict[str, Any], payload: dict[str, Any]) -> str:
    stream = payload.get("run_stream")
    run = _str(stream.get("id")) if isinstance(stream, dict) else None
    return run or _str(payload.get("command_id")) or _str(value.get("causation_id")) or ""


class MuseParser:
    """Parser for one ``muse exec --json`` journal; see the module docstring."""

    def __init__(self, context: ParseContext) -> None:
        self.fixed: str | None = context.conversation_id or None
        self.key: str | None = None
        self.sessions: dict[str, _Session] = {}
        self.held: list[Kept] = []  # lines before the first envelope
        self.line = 0
        self.source_line = SourceLine(0, "")  # the line being read
        self.sequence = 0
        self.slot = 0
        #: task streams the journal linked: task stream id -> (session key, task id)
        self.linked: dict[str, tuple[str, str]] = {}
        self.parents: dict[str, tuple[str, str]] = {}  # child key -> its session key, task id

    # ------------------------------------------------------------------ lines

    def feed(self, line: SourceLine) -> list[Item]:
        """One journal line: kept, and read when it is an envelope."""
        value = parse_line(line)
        if isinstance(value, Problem):
            return [value]
        refused = _wrong_envelope(value, line)
        if refused is not None:
            return [refused]
        envelope = _envelope(value)
        if envelope is not None:
            refused = _wrong_payload(envelope[2], envelope[3], line)
            if refused is not None:
                return [refused]
        payload_type = _str(value.get("payload_type"))
        kept = Kept(
            unknown_key(line.text),
            line.number,
            line.text,
            (payload_type or "unknown")[:64],
            unknown=envelope is None or not _known(envelope[2]),
            at=parse_time(value.get("recorded_at")),
        )
        if envelope is None:
            if self.key is None and self.fixed is None:
                self.held.append(kept)
                return []
            return [*self._switch(self.key or self.fixed or ""), kept]
        stream_id, sequence, payload_type, payload = envelope
        stream = value.get("stream")
        kind = stream.get("kind") if isinstance(stream, dict) else None
        launched = self.linked.get(stream_id) if kind == "task" else None
        if launched is not None:
            # docs/formats.md "Subagents": a linked task's own stream is a child conversation
            key = f"{self.fixed}/{stream_id}" if self.fixed else stream_id
            self.parents.setdefault(key, launched)
        else:
            key = self.fixed or stream_id
        out = self._switch(key)
        out.append(kept)
        self.line, self.sequence, self.slot = line.number, sequence, 0
        self.source_line = line
        out.extend(self._read(value, payload_type, payload))
        return out

    def finish(self) -> list[Item]:
        """Tool tasks that completed without a result are completed; a journal without any
        envelope is keyed by ``--conversation-id`` or the hash of its first line."""
        out: list[Item] = []
        if self.held:
            out.extend(self._switch(self.fixed or sha256_hex(self.held[0].raw)))
        for key, session in self.sessions.items():
            ends = [
                ToolUpdate("completed", {"call_id": task.call_id})
                for task in session.tasks.values()
                if task.completed and not task.has_result and task.call_id
            ]
            if ends:
                out.append(self._begin(key))
                self.key = key
                out.extend(ends)
        return out

    def _begin(self, key: str) -> Begin:
        """``Begin`` of ``key``; a linked task stream names its session and the task's call (a
        tool task's call id; a task of another kind launched no call)."""
        if key not in self.parents:
            return Begin(key)
        parent, task_id = self.parents[key]
        task = self.sessions[parent].tasks.get(task_id) if parent in self.sessions else None
        call_id = (task.named_call_id or task_id) if task is not None and task.tool else None
        return Begin(key, parent, call_id)

    def _switch(self, key: str) -> list[Item]:
        """``Begin`` when the conversation changes (then the lines held before the first key)."""
        if key == self.key:
            return []
        self.key = key
        self.sessions.setdefault(key, _Session())
        out: list[Item] = [self._begin(key), *self.held]
        self.held = []
        return out

    def _link(self, payload: dict[str, Any]) -> None:
        """``task.stream.linked``: the task's own stream, if the journal writes one, is a child
        of this session, launched by the task's call (a tool task's call id; none otherwise)."""
        task_stream = payload.get("task_stream")
        stream_id = _str(task_stream.get("id")) if isinstance(task_stream, dict) else None
        task_id = _str(payload.get("task_id"))
        if stream_id is None or task_id is None or self.key is None or stream_id == self.key:
            return
        self.linked.setdefault(stream_id, (self.key, task_id))

    @property
    def session(self) -> _Session:
        key = known(self.key)
        return self.sessions[key]

    def _message(self, message: dict[str, Any]) -> Parsed:
        key = known(self.key)
        index = (self.sequence - 1) * 2 + min(self.slot, 1)
        self.slot += 1
        return Parsed(with_id(key, index, message), self.line)

    def _problem(self, reason: str, payload: dict[str, Any]) -> Problem:
        return refuse(self.source_line, reason)

    # ------------------------------------------------------------------ payloads

    def _read(
        self, value: dict[str, Any], payload_type: str, payload: dict[str, Any]
    ) -> list[Item]:
        run = _run_id(value, payload)
        if payload_type in ("turn.input.user", "run.lifecycle.started"):
            return self._prompt(payload_type, run, payload)
        if payload_type == "run.output.delta":
            text = payload.get("text")
            return [Delta(run or self.key or "", text)] if isinstance(text, str) and text else []
        if payload_type.startswith("run.terminal."):
            return self._terminal(payload_type, payload)
        if payload_type.startswith("task.lifecycle."):
            return self._task(payload)
        if payload_type == "tool.result":
            return self._result(payload)
        if payload_type == "run.model.configured":
            self.session.model = _str(payload.get("model_id")) or self.session.model
        if payload_type == "task.stream.linked":
            self._link(payload)
        return []

    def _prompt(self, payload_type: str, run: str, payload: dict[str, Any]) -> list[Item]:
        prompt = payload.get("prompt")
        if run in self.session.prompted_runs and payload_type == "run.lifecycle.started":
            return []
        if not isinstance(prompt, str):
            return [self._problem(f"{payload_type} without a string payload.prompt", payload)]
        self.session.prompted_runs.add(run)
        message = {"role": "user", "content": [{"type": "text", "text": prompt}]}
        return [self._message(message)]

    def _terminal(self, payload_type: str, payload: dict[str, Any]) -> list[Item]:
        terminal = _str(payload.get("terminal")) or payload_type.removeprefix("run.terminal.")
        text = payload.get("text")
        out: list[Item] = []
        if isinstance(text, str) and text:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": [{"type": "text", "text": text}],
            }
            if terminal != "completed":
                message["terminal"] = terminal
            answer = self._message(message)
            # Usage and model after the id, so a journal imported before keeps its ids.
            usage = payload.get("usage")
            extra: dict[str, Any] = {"usage": usage} if isinstance(usage, dict) else {}
            if self.session.model is not None:
                extra["model"] = self.session.model
            if extra:
                answer = replace(answer, message={**answer.message, **extra})
            out.append(answer)
        if terminal == "completed":
            out.append(StatusChange("idle"))
            return out
        reason = _str(payload.get("reason"))
        notice = {
            "text": reason or f"The run ended {terminal}.",
            "error_type": terminal,
            "stop_reason": terminal,
        }
        out.append(
            Notice(f"muse:{self.sequence}:terminal", "system", "error", notice, {}, self.line)
        )
        out.append(StatusChange(_TERMINAL_STATUS.get(terminal, "error")))
        return out

    # ------------------------------------------------------------------ tasks and tools

    def _task(self, payload: dict[str, Any]) -> list[Item]:
        event = payload.get("event")
        event = event if isinstance(event, dict) else {}
        task_id = _str(payload.get("task_id")) or _str(event.get("task_id"))
        kind = _str(event.get("kind"))
        if task_id is None or kind is None:
            return [self._problem("task.lifecycle without a task_id or event.kind", payload)]
        task = self.session.tasks.get(task_id)
        if task is None:
            task_kind = _str(event.get("task_kind")) or ""
            tool = (
                task_kind.removeprefix(_TOOL_PREFIX) if task_kind.startswith(_TOOL_PREFIX) else None
            )
            task = self.session.tasks[task_id] = _Task(task_kind, tool or None)
        reason = event.get("reason")
        if task.tool is None:
            if kind != "failed":
                return []
            text = f"{task.kind or 'task'} failed: {reason if isinstance(reason, str) else ''}"
            metadata = {"task_id": task_id, "task_kind": task.kind}
            content = {"text": text.rstrip(": "), "error_type": "task_failed"}
            return [
                Notice(
                    f"muse:{self.sequence}:task", "system", "error", content, metadata, self.line
                )
            ]
        named = _str(event.get("idempotency_key"))
        if named and named.startswith(_KEY_PREFIX) and len(named) > len(_KEY_PREFIX):
            task.named_call_id = task.named_call_id or named[len(_KEY_PREFIX) :]
        return self._tool_event(task_id, task, kind, event)

    def _tool_event(
        self, task_id: str, task: _Task, kind: str, event: dict[str, Any]
    ) -> list[Item]:
        if kind == "proposed" or kind == "accepted":
            return []
        if kind in ("scheduled", "side_effect_intent") and task.named_call_id is None:
            return []
        out = self._call(task_id, task)
        call_id = task.call_id
        reason = event.get("reason")
        if kind == "started":
            out.append(ToolUpdate("executing", {"call_id": call_id}, self.line))
        elif kind == "output":
            chunk = event.get("chunk")
            if isinstance(chunk, str) and chunk and call_id:
                out.append(Delta(call_id, chunk))
        elif kind == "completed":
            task.completed = True
        elif kind == "failed":
            error = reason if isinstance(reason, str) else "failed"
            out.append(ToolUpdate("failed", {"call_id": call_id, "error": error}, self.line))
        elif kind in ("rejected", "cancelled"):
            info = {"call_id": call_id}
            if isinstance(reason, str):
                info["display_text"] = reason
            out.append(ToolUpdate("cancelled", info, self.line))
        return out

    def _call(self, task_id: str, task: _Task) -> list[Item]:
        """The call message of a tool task, the first time it is needed."""
        if task.call_id is not None:
            return []
        task.call_id = task.named_call_id or task_id
        call: dict[str, Any] = {
            "type": "tool_call",
            "id": task.call_id,
            "name": task.tool,
            "input": {},
        }
        message: dict[str, Any] = {
            "role": "assistant",
            "content": [call],
            "task_id": task_id,
            "task_kind": task.kind,
        }
        return [self._message(message)]

    def _match(self, call_id: str | None, tool: str | None) -> tuple[str, _Task] | None:
        """The tool task a ``tool.result`` answers: by the call id its idempotency key named,
        else the first tool task of that name without a result (proposal order)."""
        open_tasks = [(i, t) for i, t in self.session.tasks.items() if t.tool and not t.has_result]
        if call_id is not None:
            for task_id, task in open_tasks:
                if call_id in (task.named_call_id, task.call_id):
                    return task_id, task
        for task_id, task in open_tasks:
            if task.tool == tool and task.named_call_id in (None, call_id):
                return task_id, task
        return None

    def _result(self, payload: dict[str, Any]) -> list[Item]:
        call_id = _str(payload.get("call_id"))
        facts = payload.get("correlation_facts")
        facts = facts if isinstance(facts, dict) else {}
        found = self._match(call_id, _str(facts.get("tool_name")))
        out: list[Item] = []
        if found is not None:
            task_id, task = found
            out.extend(self._call(task_id, task))
            task.has_result = True
            call_id = task.call_id
        if call_id is None:
            return [self._problem("tool.result without a call_id, matching no tool task", payload)]
        text = payload.get("text")
        message: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": call_id,
            "content": text if isinstance(text, str) else "",
            "is_error": facts.get("outcome") == "failure",
        }
        for name in ("call_id", "correlation_facts", "edit_facts"):
            if name in payload:
                message["muse_" + name if name == "call_id" else name] = payload[name]
        out.append(self._message(message))
        return out


def parser(context: ParseContext) -> MuseParser:
    """A parser for one ``muse exec --json`` journal."""
    return MuseParser(context)


def sniff(first: dict[str, Any]) -> bool:
    """Whether a first line looks like a muse journal envelope."""
    return "schema_version" in first and "payload_type" in first
