"""The single-statement append for PostgreSQL: plain messages in one round trip.

``save_messages`` takes this path for messages that need no state from the database besides the
counters (no tool calls, no tool results, no source records) and falls back to the general path for
everything else, and whenever this path declines (a duplicate id, a race, a missing conversation).

One statement updates the conversation row (which locks it and numbers the batch), inserts the
record rows and inserts the display rows (and, for messages that carry usage, adds to the token
counters and inserts their usage rows), so the invariants hold exactly as on the general path:
positions and seqs come from the locked counters, and one event_seq is taken. The signals go
through ``writing.announce``, as on the general path; with the frame log on (docs/websocket.md
"The frame log") the statement and the log's row run in one transaction. Private to
``murmur_conversations.services``.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from django.db import IntegrityError, models

from murmur_conversations import jsonenc
from murmur_conversations.conf import app_settings
from murmur_conversations.messages import DisplayPart, NormalizedMessage, display_parts
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    MessageUsage,
    ToolStatus,
)
from murmur_conversations.services import statements
from murmur_conversations.services.writing import announce, database_errors, retention_time
from murmur_conversations.usage import COUNTERS, ByModel, Usage, add_by_model, row_cost

CONVERSATION_FIELDS = [f.attname for f in Conversation._meta.concrete_fields]
_JSON_FIELDS = {
    f.attname for f in Conversation._meta.concrete_fields if isinstance(f, models.JSONField)
}
_USAGE_ARRAYS = ("u_index", "u_model", *(f"u_{name}" for name in COUNTERS), "u_cost", "u_priced")


def eligible(connection_vendor: str, messages: list[NormalizedMessage], has_records: bool) -> bool:
    """Whether a batch can take the single-statement path (PostgreSQL, :func:`plain`)."""
    return connection_vendor == "postgresql" and plain(messages, has_records)


def plain(messages: list[NormalizedMessage], has_records: bool) -> bool:
    """Whether a batch needs no state from the database besides the counters, so a fixed
    sequence can append it (here, and ``fastlite`` on SQLite): messages without tool calls or
    results (injected ones may carry them), nothing redacted, no source records, no id twice."""
    return (
        bool(messages)
        and not has_records
        and all(m.injected or (not m.is_tool_result and not m.calls) for m in messages)
        and not any(m.redactions for m in messages)  # their counts take the general path
        and len({m.message_id for m in messages}) == len(messages)
    )


def usage_sql() -> tuple[str, str]:
    """The usage parts of the statement (docs/usage.md): the conversation's counters and its
    ``usage_by_model`` (merged as ``usage.add_by_model`` merges), and the usage rows' insert."""
    conv = Conversation._meta.db_table
    table = MessageUsage._meta.db_table
    counters = "".join(f'\n    "{name}" = "{name}" + %(t_{name})s,' for name in COUNTERS)
    merged = ", ".join(
        f"'{name}', COALESCE((o.value ->> '{name}')::bigint, 0) "
        f"+ COALESCE((n.value ->> '{name}')::bigint, 0)"
        for name in COUNTERS
    )
    update = f"""{counters}
    "usage_by_model" = (
      SELECT COALESCE(jsonb_object_agg(COALESCE(o.key, n.key), CASE WHEN n.key IS NULL
        THEN o.value ELSE jsonb_build_object({merged}) END), '{{}}'::jsonb)
      FROM jsonb_each("{conv}"."usage_by_model") AS o
      FULL JOIN jsonb_each(%(u_by_model)s::jsonb) AS n ON o.key = n.key),"""
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
    return update, insert


@functools.cache
def statement(with_usage: bool = False, check_ids: bool = True) -> str:
    """The statement; ``check_ids``: some id was given by the writer, so a known one makes the
    statement decline (a generated id is new; a collision would fail the insert, which declines
    too)."""
    conv = Conversation._meta.db_table
    msg = Message._meta.db_table
    disp = DisplayMessage._meta.db_table
    returning = ", ".join(f'"{name}"' for name in CONVERSATION_FIELDS)
    usage_update, usage_insert = usage_sql() if with_usage else ("", "")
    known = f""" AND NOT EXISTS (
    SELECT 1 FROM "{msg}" WHERE "conversation_id" = %(conversation)s
      AND "message_id" IN (SELECT jsonb_array_elements_text(%(ids)s::jsonb)))"""
    return f"""
WITH c AS (
  UPDATE "{conv}" SET
    "record_length" = "record_length" + %(n)s,
    "transcript_count" = "transcript_count" + %(t)s,
    "last_seq" = "last_seq" + %(r)s,
    "last_event_seq" = "last_event_seq" + 1,{usage_update}
    "saved_at" = GREATEST("saved_at", %(saved)s),
    "retained_at" = GREATEST("retained_at", %(kept)s)
  WHERE "id" = %(conversation)s{known if check_ids else ""}
  RETURNING {returning}
), m AS (
  INSERT INTO "{msg}" ("conversation_id", "position", "message_id", "role", "content",
                       "tool_call_id", "is_error", "source_id", "extra", "created_at")
  SELECT c."id", c."record_length" - %(n)s + v.i, v.id, v.role, v.c -> 0, '', v.e, v.s,
         v.x -> 0, v.t
  FROM c, jsonb_to_recordset(%(m)s::jsonb)
       AS v(i int, id varchar, role varchar, c jsonb, e bool, s varchar, x jsonb, t timestamptz)
  RETURNING "id", "position", "created_at"
), d AS (
  INSERT INTO "{disp}" ("conversation_id", "message_id", "seq", "message_type", "content_type",
                        "content", "status", "tool_call_id", "metadata", "created_event_seq",
                        "event_seq", "created_at", "updated_at")
  SELECT c."id", m."id", c."last_seq" - %(r)s + w.k, w.mt, w.ct, w.c -> 0, %(status)s, NULL,
         w.md -> 0, c."last_event_seq", c."last_event_seq", m."created_at", m."created_at"
  FROM c, jsonb_to_recordset(%(d)s::jsonb)
       AS w(k int, i int, mt varchar, ct varchar, c jsonb, md jsonb)
  JOIN m ON m."position" = (SELECT "record_length" FROM c) - %(n)s + w.i
  RETURNING "id", "seq", "message_id"
){usage_insert}
SELECT c.*, (SELECT COALESCE(array_agg(d."id" ORDER BY d."seq"), '{{}}') FROM d) AS display_ids,
       (SELECT COALESCE(array_agg(m."id" ORDER BY m."position"), '{{}}') FROM m) AS message_ids
FROM c
"""


def try_append(
    *,
    conversation_pk: Any,
    using: str,
    messages: list[NormalizedMessage],
    now: datetime,
    times: list[datetime | None] | None = None,
) -> tuple[Conversation, list[DisplayMessage]] | None:
    """Append ``messages`` in one statement and return the saved conversation and the new display
    rows (by ``seq``); None when this path declines (then nothing was written and the caller takes
    the general path). Sends the same signals as the general path. Raises ``WriteConflict`` or
    ``InvalidContent`` as the general path does (``writing.database_errors``). ``times`` (one
    aware datetime or None per message; docs/write-path.md "Times") stamps each message's rows as
    the general path does; ``saved_at`` becomes the latest of them (None: ``now``), never earlier
    than the stored one."""
    stamps = [t or now for t in (times or [None] * len(messages))]
    params, parts_by_message = parameters(conversation_pk, messages, now, stamps)

    def work() -> tuple[Conversation, list[DisplayMessage]] | None:
        row = _execute(using, statement("u_index" in params, "ids" in params), params)
        if row is None:
            return None
        conversation, rows = rebuild(using, row, parts_by_message, stamps)
        announce(conversation, using, conversation.last_event_seq, created=rows)
        return conversation, rows

    # With the frame log on, its row (written by announce) commits with the statement.
    return statements.logged(using, work)


def parameters(
    conversation_pk: Any, messages: list[NormalizedMessage], now: datetime, stamps: list[datetime]
) -> tuple[dict[str, Any], list[list[DisplayPart]]]:
    """The statement's parameters and the display parts of each message in order; ``stamps`` is
    each message's time. The rows travel as two JSON texts (read by ``jsonb_to_recordset``): one
    parameter each to bind, however many rows; JSON values are wrapped in a one-element array so
    a JSON null stays a JSON null (not SQL NULL)."""
    records: list[dict[str, Any]] = []
    displays: list[dict[str, Any]] = []
    parts_by_message = []
    transcript = 0
    for index, message in enumerate(messages, start=1):
        stamp = stamps[index - 1].isoformat()
        records.append(
            {
                "i": index,
                "id": message.message_id,
                "role": message.role,
                # JSON null content is SQL NULL, as the general path's JSONField stores it.
                "c": None if message.null_content else [message.content],
                "e": message.is_error,
                "s": message.source_id,
                "x": [message.extra],
                "t": stamp,
            }
        )
        transcript += message.in_transcript
        parts = display_parts(message)
        parts_by_message.append(parts)
        for part in parts:
            displays.append(
                {
                    "k": len(displays) + 1,
                    "i": index,
                    "mt": part.message_type,
                    "ct": part.content_type,
                    "c": [part.content],
                    "md": [part.metadata],
                }
            )
    params: dict[str, Any] = {
        "conversation": conversation_pk,
        "saved": max(stamps) if stamps else now,
        "kept": retention_time(max(stamps) if stamps else now),
        "n": len(messages),
        "t": transcript,
        "r": len(displays),
        "status": ToolStatus.COMPLETED,
        "m": jsonenc.dumps(records),
        "d": jsonenc.dumps(displays),
    }
    if any(message.id_given for message in messages):
        params["ids"] = jsonenc.dumps([message.message_id for message in messages])
    if any(message.usage is not None for message in messages):
        usage_parameters(params, messages, stamps)
    return params, parts_by_message


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


def _execute(using: str, sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    """Run the statement (prepared on the server once it is hot: ``statements.run``); its one
    result row, or None when it declined (no such conversation, a known id, or a concurrent
    writer stored one of the ids first)."""
    with database_errors():
        try:
            rows = statements.run(using, sql, params)
        except IntegrityError:
            return None
    return rows[0] if rows else None


def rebuild(
    using: str,
    row: tuple[Any, ...],
    parts_by_message: list[list[DisplayPart]],
    stamps: list[datetime],
) -> tuple[Conversation, list[DisplayMessage]]:
    """The saved Conversation and display rows, from the statement's result row (the conversation
    columns, then the display row ids by ``seq`` and the record row ids by position), built
    without ``Model.__init__`` (``statements.instance``)."""
    values = dict(zip(CONVERSATION_FIELDS, row[:-2], strict=True))
    for name in _JSON_FIELDS:  # Django leaves jsonb undecoded for its own fields to decode
        if isinstance(values[name], str):
            values[name] = jsonenc.loads(values[name])
    conversation = statements.instance(Conversation, using, values)
    display_ids, message_ids = row[-2], row[-1]
    rows = display_rows(using, conversation, parts_by_message, message_ids, display_ids, stamps)
    return conversation, rows


def display_rows(
    using: str,
    conversation: Conversation,
    parts_by_message: list[list[DisplayPart]],
    message_pks: list[int],
    display_pks: list[int],
    stamps: list[datetime],
) -> list[DisplayMessage]:
    """The new display rows of a plain append as the general path returns them: one per part of
    each message (``parts_by_message``, record row pks ``message_pks``, times ``stamps``), with
    the pks ``display_pks`` in ``seq`` order, the last ``len(display_pks)`` seqs of the saved
    ``conversation`` and its event_seq; built without ``Model.__init__``."""
    event_seq = conversation.last_event_seq
    first_seq = conversation.last_seq - len(display_pks) + 1
    rows: list[DisplayMessage] = []
    for parts, message_pk, stamp in zip(parts_by_message, message_pks, stamps, strict=True):
        for part in parts:
            display = statements.instance(
                DisplayMessage,
                using,
                {
                    "id": display_pks[len(rows)],
                    "conversation_id": conversation.pk,
                    "message_id": message_pk,
                    "seq": first_seq + len(rows),
                    "message_type": part.message_type,
                    "content_type": part.content_type,
                    "content": part.content,
                    "status": ToolStatus.COMPLETED,
                    "tool_call_id": None,
                    "metadata": dict(part.metadata),
                    "created_event_seq": event_seq,
                    "event_seq": event_seq,
                    "created_at": stamp,
                    "updated_at": stamp,
                    "owner_feedback": None,
                },
            )
            statements.relate(display, "conversation", conversation)
            rows.append(display)
    return rows
