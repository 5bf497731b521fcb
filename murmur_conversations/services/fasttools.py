"""The single-statement append on PostgreSQL for messages with tool calls and a tool result.

``save_messages`` takes this path for a batch whose messages ask for tool calls and/or hold one
tool result (``services/plan.py`` plans the batches of plain messages). One statement:

- reads the conversation's ``last_event_seq`` and the answered call (the latest call of its id,
  docs/write-path.md "Call ids") as its snapshot sees them, then locks the conversation row with
  an ``UPDATE`` that only matches when ``last_event_seq`` is still that value: if another writer
  changed the conversation in between, nothing is written and the general path runs under the
  lock instead, so what the statement read is what the lock protects;
- inserts the record rows, the new tool calls (``pending``) and every display row (text, cards,
  the result row with its call's name, linked to its call, marked ``late`` when the call had
  ended, or ``orphan`` and counted in ``held_results`` when no call of that id exists yet: "Results
  before their call"), moves the answered call (``completed``; ``failed`` with its output and its
  short reason, "A failed call says why"; ``interrupted``) and its card, and adds to the counters
  (and usage);
- returns everything the signals need, which go through ``writing.announce`` as on the general
  path, the frame log's row in the same transaction (``statements.logged``).

It declines (nothing written; the general path runs) for a call id that names an open call (no
new call then) or that results are held for (they are adopted), a child conversation asking for
calls (its parent shows its steps), a result answering a call of the same batch, more than one
result, source records, redacted secrets, repeated ids, and any race.
``tests/test_fastpath_kinds.py`` proves it writes exactly what the general path writes. Private
to ``murmur_conversations.services``.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from murmur_conversations import jsonenc
from murmur_conversations.conf import app_settings
from murmur_conversations.exits import failure_reason
from murmur_conversations.ids import new_call_id
from murmur_conversations.messages import DisplayPart, NormalizedMessage, display_parts
from murmur_conversations.models import (
    OPEN_TOOL_STATUSES,
    TERMINAL_TOOL_STATUSES,
    ContentType,
    Conversation,
    DisplayMessage,
    InterruptReason,
    Message,
    MessageType,
    MessageUsage,
    ToolCall,
    ToolStatus,
)
from murmur_conversations.services import singles, statements
from murmur_conversations.services.backends.postgres import usage_update_sql
from murmur_conversations.services.writing import announce, retention_time
from murmur_conversations.usage import COUNTERS, ByModel, Usage, add_by_model, row_cost

_USAGE_ARRAYS = ("u_index", "u_model", *(f"u_{name}" for name in COUNTERS), "u_cost", "u_priced")

_TERMINAL = ", ".join(f"'{s}'" for s in sorted(TERMINAL_TOOL_STATUSES))
_OPEN = ", ".join(f"'{s}'" for s in sorted(OPEN_TOOL_STATUSES))


def eligible(messages: list[NormalizedMessage], has_records: bool) -> bool:
    """Whether a batch (already not plain) can take this path; see the module docstring (what
    only the database knows, open calls and held results, is checked by the statement)."""
    if not messages or has_records or any(m.redactions for m in messages):
        return False
    if len({m.message_id for m in messages}) != len(messages):
        return False
    live = [m for m in messages if not m.injected]
    if not any(m.calls or m.is_tool_result for m in live):
        return False  # plain messages: services/plan.py
    results = [m for m in live if m.is_tool_result]
    if len(results) > 1 or any(m.is_tool_result and m.calls for m in live):
        return False
    asked = [c.call_id for m in live for c in m.calls if c.call_id]
    if len(set(asked)) != len(asked):
        return False
    return not (results and results[0].tool_call_id in asked)


def usage_sql() -> tuple[str, str]:
    """The usage parts of the statement (docs/usage.md): the counters' and ``usage_by_model``'s
    update (``backends.postgres.usage_update_sql``), and the usage rows' insert."""
    table = MessageUsage._meta.db_table
    columns = ", ".join(f'"{name}"' for name in COUNTERS)
    arrays = ", ".join(f"%(u_{name})s::bigint[]" for name in COUNTERS)
    values = ", ".join(f"x.{name}" for name in COUNTERS)
    insert = f""", u AS (
  INSERT INTO "{table}" ("conversation_id", "message_id", "model", {columns},
                         "cost_nanocents", "priced_with", "created_at")
  SELECT c."id", m."id", x.model, {values}, x.cost, x.priced, m."created_at"
  FROM c, unnest(%(u_index)s::int[], %(u_model)s::varchar[], {arrays},
                 %(u_cost)s::bigint[], %(u_priced)s::varchar[])
       AS x(i, model, {", ".join(COUNTERS)}, cost, priced)
  JOIN m ON m."position" = (SELECT "record_length" FROM c) - %(n)s + x.i
  RETURNING 1
)"""
    return usage_update_sql(), insert


def usage_parameters(
    params: dict[str, Any], messages: list[NormalizedMessage], stamps: list[datetime]
) -> None:
    """The usage rows' arrays (each row priced at its message's time ``stamps[i]``:
    ``usage.row_cost``), the counters' increments and this batch's ``usage_by_model``."""
    params.update({name: [] for name in _USAGE_ARRAYS})
    total = Usage()
    by_model: ByModel = {}
    book = app_settings.prices
    for index, message in enumerate(messages, start=1):
        if message.usage is None:
            continue
        params["u_index"].append(index)
        params["u_model"].append(message.model)
        for name, value in message.usage.as_dict().items():
            params[f"u_{name}"].append(value)
        cost, priced_with = row_cost(message.model, message.usage, book, at=stamps[index - 1])
        params["u_cost"].append(cost)
        params["u_priced"].append(priced_with)
        total = total + message.usage
        by_model = add_by_model(by_model, message.model, message.usage)
    params.update({f"t_{name}": value for name, value in total.as_dict().items()})
    params["u_by_model"] = jsonenc.dumps(by_model)


@functools.cache
def statement(with_usage: bool, check_ids: bool, with_calls: bool) -> str:
    """The statement (see the module docstring); the flags leave out what the batch lacks."""
    conv = Conversation._meta.db_table
    msg = Message._meta.db_table
    disp = DisplayMessage._meta.db_table
    calls = ToolCall._meta.db_table
    usage_update, usage_insert = usage_sql() if with_usage else ("", "")
    known = (
        f"""
    AND NOT EXISTS (SELECT 1 FROM "{msg}" WHERE "conversation_id" = %(conversation)s::uuid
      AND "message_id" IN (SELECT jsonb_array_elements_text(%(ids)s::jsonb)))"""
        if check_ids
        else ""
    )
    # New calls: not in a child (its parent shows its steps), no open call of the same id (the
    # general path adds nothing for those), no held results to adopt.
    new_calls = (
        f"""
    AND "parent_id" IS NULL AND "held_results" = 0
    AND NOT EXISTS (SELECT 1 FROM "{calls}" WHERE "conversation_id" = %(conversation)s::uuid
      AND "status" IN ({_OPEN})
      AND "call_id" IN (SELECT x ->> 'id' FROM jsonb_array_elements(%(calls)s::jsonb) AS x))"""
        if with_calls
        else ""
    )
    return f"""
WITH snap AS (
  SELECT "last_event_seq" AS e FROM "{conv}" WHERE "id" = %(conversation)s::uuid
), o AS (
  SELECT "id", "call_id", "name", "status" FROM "{calls}"
  WHERE "conversation_id" = %(conversation)s::uuid AND "call_id" = %(rid)s::varchar
  ORDER BY "id" DESC LIMIT 1
), c AS (
  UPDATE "{conv}" SET
    "record_length" = "record_length" + %(n)s,
    "transcript_count" = "transcript_count" + %(t)s,
    "last_seq" = "last_seq" + %(r)s,
    "tool_call_count" = "tool_call_count" + %(nc)s,
    "held_results" = "held_results"
      + CASE WHEN %(rid)s::varchar <> '' AND NOT EXISTS (SELECT 1 FROM o) THEN 1 ELSE 0 END,
    "last_event_seq" = "last_event_seq" + 1,{usage_update}
    "saved_at" = GREATEST("saved_at", %(saved)s::timestamptz),
    "retained_at" = GREATEST("retained_at", %(kept)s::timestamptz)
  WHERE "id" = %(conversation)s::uuid AND "last_event_seq" = (SELECT e FROM snap){known}{new_calls}
  RETURNING {statements.returning(Conversation)}
), m AS (
  INSERT INTO "{msg}" ("conversation_id", "position", "message_id", "role", "content",
                       "tool_call_id", "is_error", "source_id", "extra", "created_at")
  SELECT c."id", c."record_length" - %(n)s + v.i, v.id, v.role, v.c -> 0, v.tc, v.e, v.s,
         v.x -> 0, v.t
  FROM c, jsonb_to_recordset(%(m)s::jsonb) AS v(i int, id varchar, role varchar, c jsonb,
       tc varchar, e bool, s varchar, x jsonb, t timestamptz)
  RETURNING "id", "position", "created_at"
), tc AS (
  INSERT INTO "{calls}" ("conversation_id", "call_id", "name", "arguments", "status",
                         "interrupt_reason", "display_text", "result", "error", "started_at",
                         "finished_at", "event_seq", "created_at")
  SELECT c."id", x.id, x.name, x.a -> 0, '{ToolStatus.PENDING}', '', '', NULL, NULL, NULL, NULL,
         c."last_event_seq", x.t
  FROM c, jsonb_to_recordset(%(calls)s::jsonb) AS x(id varchar, name varchar, a jsonb, t timestamptz)
  RETURNING "id", "call_id"
), mv AS (
  UPDATE "{calls}" AS t SET
    "status" = %(st)s::varchar,
    "event_seq" = c."last_event_seq",
    "result" = CASE WHEN %(st)s::varchar = '{ToolStatus.COMPLETED}' THEN %(rc)s::jsonb -> 0
                    WHEN %(st)s::varchar = '{ToolStatus.FAILED}'
                    THEN COALESCE(%(rc)s::jsonb -> 0, t."result")
               ELSE t."result" END,
    "error" = CASE WHEN %(st)s::varchar = '{ToolStatus.FAILED}' THEN %(re)s::jsonb -> 0
              ELSE t."error" END,
    "interrupt_reason" = CASE WHEN %(st)s::varchar = '{ToolStatus.INTERRUPTED}'
                         THEN '{InterruptReason.AWAITING_INPUT}' ELSE '' END,
    "finished_at" = CASE WHEN %(st)s::varchar IN ({_TERMINAL}) THEN %(rt)s::timestamptz
                    ELSE t."finished_at" END
  FROM c, o
  WHERE t."id" = o."id" AND o."status" NOT IN ({_TERMINAL}) AND o."status" <> %(st)s::varchar
  RETURNING {statements.returning(ToolCall, "t")}
), cd AS (
  UPDATE "{disp}" AS d SET
    "status" = mv."status",
    "metadata" = {singles.card_metadata("mv")},
    "event_seq" = mv."event_seq",
    "updated_at" = %(rt)s::timestamptz
  FROM mv
  WHERE d."id" = (SELECT "id" FROM "{disp}" WHERE "tool_call_id" = mv."id"
                  AND "content_type" = '{ContentType.TOOL_CALL}' ORDER BY "seq" LIMIT 1)
  RETURNING {statements.returning(DisplayMessage, "d")}
), d AS (
  INSERT INTO "{disp}" ("conversation_id", "message_id", "seq", "message_type", "content_type",
                        "content", "status", "tool_call_id", "metadata", "created_event_seq",
                        "event_seq", "created_at", "updated_at")
  SELECT c."id", m."id", c."last_seq" - %(r)s + w.k, w.mt, w.ct,
         CASE WHEN w.res THEN jsonb_build_object('tool_call_id', %(rid)s::varchar,
              'name', COALESCE((SELECT "name" FROM o), ''), 'content', w.c -> 0,
              'is_error', w.e, 'is_interrupt', w.ii)
         ELSE w.c -> 0 END,
         w.st,
         CASE WHEN w.res THEN (SELECT "id" FROM o) ELSE tc."id" END,
         CASE WHEN NOT w.res THEN w.md -> 0
              WHEN NOT EXISTS (SELECT 1 FROM o) THEN '{{"orphan": true}}'::jsonb
              WHEN (SELECT "status" FROM o) IN ({_TERMINAL}) THEN '{{"late": true}}'::jsonb
              ELSE '{{}}'::jsonb END,
         c."last_event_seq", c."last_event_seq", m."created_at", m."created_at"
  FROM c, jsonb_to_recordset(%(d)s::jsonb) AS w(k int, i int, mt varchar, ct varchar, c jsonb,
       md jsonb, st varchar, cid varchar, res bool, e bool, ii bool)
  JOIN m ON m."position" = (SELECT "record_length" FROM c) - %(n)s + w.i
  LEFT JOIN tc ON tc."call_id" = w.cid
  RETURNING "id", "seq"
){usage_insert}
SELECT c.*,
       (SELECT COALESCE(array_agg(d."id" ORDER BY d."seq"), '{{}}') FROM d),
       (SELECT COALESCE(array_agg(m."id" ORDER BY m."position"), '{{}}') FROM m),
       (SELECT COALESCE(jsonb_object_agg(tc."call_id", tc."id"), '{{}}') FROM tc),
       (SELECT jsonb_build_array("id", "name", "status") FROM o),
       mv.*, cd.*, ok.v
FROM (SELECT 1 / CASE WHEN (SELECT count(*) FROM cd) = (SELECT count(*) FROM mv) THEN 1
      ELSE 0 END AS v) AS ok
LEFT JOIN c ON true LEFT JOIN mv ON true LEFT JOIN cd ON true
"""


def _result_status(message: NormalizedMessage) -> str:
    if message.is_interrupt:
        return ToolStatus.INTERRUPTED
    if message.is_error:
        return ToolStatus.FAILED
    return ToolStatus.COMPLETED


def try_append(
    *,
    conversation_pk: Any,
    using: str,
    messages: list[NormalizedMessage],
    now: datetime,
    times: list[datetime | None] | None = None,
) -> tuple[Conversation, list[DisplayMessage]] | None:
    """Append ``messages`` (``eligible``) in one statement; the saved conversation and the new
    display rows by ``seq``, or None when it declined (nothing written). Signals, errors and
    times as the planned append (``applying.append``)."""
    stamps = [t or now for t in (times or [None] * len(messages))]
    records: list[dict[str, Any]] = []
    displays: list[dict[str, Any]] = []
    new_calls: list[dict[str, Any]] = []
    plan: list[tuple[int, str, Any]] = []  # per display row: message index, kind, its data
    result: NormalizedMessage | None = None
    result_stamp = now
    transcript = 0
    for index, message in enumerate(messages, start=1):
        stamp = stamps[index - 1]
        records.append(
            {
                "i": index,
                "id": message.message_id,
                "role": message.role,
                # JSON null content is SQL NULL, as the general path's JSONField stores it.
                "c": None if message.null_content else [message.content],
                "tc": message.tool_call_id,
                "e": message.is_error,
                "s": message.source_id,
                "x": [message.extra],
                "t": stamp.isoformat(),
            }
        )
        transcript += message.in_transcript
        rows: list[tuple[str, Any, dict[str, Any]]] = [
            (
                "part",
                part,
                {
                    "mt": part.message_type,
                    "ct": part.content_type,
                    "c": [part.content],
                    "md": [part.metadata],
                    "st": ToolStatus.COMPLETED,
                },
            )
            for part in display_parts(message)
        ]
        if not message.injected:
            for request in message.calls:
                call_id = request.call_id or new_call_id()
                content = {"call_id": call_id, "name": request.name, "arguments": request.arguments}
                new_calls.append(
                    {
                        "id": call_id,
                        "name": request.name,
                        "a": [request.arguments],
                        "t": stamp.isoformat(),
                    }
                )
                rows.append(
                    (
                        "card",
                        (call_id, request, content),
                        {
                            "mt": MessageType.ASSISTANT,
                            "ct": ContentType.TOOL_CALL,
                            "c": [content],
                            "md": [{}],
                            "st": ToolStatus.PENDING,
                            "cid": call_id,
                        },
                    )
                )
            if message.is_tool_result:
                result, result_stamp = message, stamp
                rows.append(
                    (
                        "result",
                        message,
                        {
                            "mt": MessageType.TOOL,
                            "ct": ContentType.TOOL_RESULT,
                            "c": [message.content],
                            "st": ToolStatus.COMPLETED,
                            "res": True,
                            "e": message.is_error,
                            "ii": message.is_interrupt,
                        },
                    )
                )
        for kind, data, fields in rows:
            displays.append({"k": len(displays) + 1, "i": index, "res": False, **fields})
            plan.append((index, kind, data))
    params: dict[str, Any] = {
        "conversation": conversation_pk,
        "saved": max(stamps) if stamps else now,
        "kept": retention_time(max(stamps) if stamps else now),
        "n": len(messages),
        "t": transcript,
        "r": len(displays),
        "nc": len(new_calls),
        "m": jsonenc.dumps(records),
        "d": jsonenc.dumps(displays),
        "calls": jsonenc.dumps(new_calls),
        "rid": result.tool_call_id if result is not None else "",
        "st": _result_status(result) if result is not None else "",
        # The result's content as the call keeps it, and a failed call's short reason.
        "rc": jsonenc.dumps([result.content]) if result is not None else None,
        "re": (
            jsonenc.dumps([failure_reason(result.content, result.extra)])
            if result is not None and _result_status(result) == ToolStatus.FAILED
            else None
        ),
        "rt": result_stamp,
    }
    if any(message.id_given for message in messages):
        params["ids"] = jsonenc.dumps([message.message_id for message in messages])
    if any(message.usage is not None for message in messages):
        usage_parameters(params, messages, stamps)
    sql = statement("u_index" in params, "ids" in params, bool(new_calls))

    def work() -> tuple[Conversation, list[DisplayMessage]] | None:
        rows_back = singles.run(using, sql, params)
        if not rows_back or rows_back[0][0] is None:
            return None
        return _rebuild(using, rows_back[0], plan, stamps, result)

    # With the frame log on, its row (written by announce) commits with the statement.
    return statements.logged(using, work)


def _rebuild(
    using: str,
    row: tuple[Any, ...],
    plan: list[tuple[int, str, Any]],
    stamps: list[datetime],
    result: NormalizedMessage | None,
) -> tuple[Conversation, list[DisplayMessage]]:
    n_conv = len(statements.columns(Conversation))
    n_call = len(statements.columns(ToolCall))
    saved = statements.load(Conversation, using, row[:n_conv])
    display_ids, message_ids, call_pks, old = row[n_conv : n_conv + 4]
    call_pks = jsonenc.loads(call_pks) if isinstance(call_pks, str) else call_pks
    old = jsonenc.loads(old) if isinstance(old, str) else old
    moved_values = row[n_conv + 4 : n_conv + 4 + n_call]
    card_values = row[n_conv + 4 + n_call : -1]
    moved = card = None
    if moved_values[0] is not None:
        moved = statements.load(ToolCall, using, moved_values)
        statements.relate(moved, "conversation", saved)
        card = statements.load(DisplayMessage, using, card_values)
        statements.relate(card, "conversation", saved)
        statements.relate(card, "tool_call", moved)
    event_seq = saved.last_event_seq
    first_seq = saved.last_seq - len(display_ids) + 1
    rows: list[DisplayMessage] = []
    for position, (index, kind, data) in enumerate(plan):
        stamp = stamps[index - 1]
        values: dict[str, Any] = {
            "id": display_ids[position],
            "conversation_id": saved.pk,
            "message_id": message_ids[index - 1],
            "seq": first_seq + position,
            "created_event_seq": event_seq,
            "event_seq": event_seq,
            "created_at": stamp,
            "updated_at": stamp,
            "owner_feedback": None,
            "status": ToolStatus.COMPLETED,
            "tool_call_id": None,
        }
        related: ToolCall | None = None
        if kind == "part":
            part: DisplayPart = data
            values.update(
                message_type=part.message_type,
                content_type=part.content_type,
                content=part.content,
                metadata=dict(part.metadata),
            )
        elif kind == "card":
            call_id, request, content = data
            related = statements.instance(
                ToolCall,
                using,
                {
                    "id": call_pks[call_id],
                    "conversation_id": saved.pk,
                    "call_id": call_id,
                    "name": request.name,
                    "arguments": request.arguments,
                    "status": ToolStatus.PENDING,
                    "interrupt_reason": "",
                    "display_text": "",
                    "result": None,
                    "error": None,
                    "started_at": None,
                    "finished_at": None,
                    "event_seq": event_seq,
                    "created_at": stamp,
                },
            )
            values.update(
                message_type=MessageType.ASSISTANT,
                content_type=ContentType.TOOL_CALL,
                content=content,
                metadata={},
                status=ToolStatus.PENDING,
                tool_call_id=related.pk,
            )
        else:
            assert result is not None
            metadata: dict[str, Any] = {}
            if old is None:
                metadata["orphan"] = True
            elif old[2] in TERMINAL_TOOL_STATUSES:
                metadata["late"] = True
            values.update(
                message_type=MessageType.TOOL,
                content_type=ContentType.TOOL_RESULT,
                content={
                    "tool_call_id": result.tool_call_id,
                    "name": old[1] if old is not None else "",
                    "content": result.content,
                    "is_error": result.is_error,
                    "is_interrupt": result.is_interrupt,
                },
                metadata=metadata,
                tool_call_id=None if old is None else old[0],
            )
            related = moved
        display = statements.instance(DisplayMessage, using, values)
        statements.relate(display, "conversation", saved)
        if related is not None:
            statements.relate(display, "tool_call", related)
        rows.append(display)
    announce(
        saved,
        using,
        event_seq,
        created=rows,
        updated=[card] if card is not None else [],
        calls=[moved] if moved is not None else [],
    )
    return saved, rows
