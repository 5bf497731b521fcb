"""The PostgreSQL backend: a plan (``services/plan.py``) becomes ONE statement.

Data-modifying CTEs update the conversation's counters by the plan's deltas (which locks its row
and gives the numbers the rows take: a plan's offsets added to the counters as they stood), insert
the record rows, the display rows, the usage rows and the redaction counts, and return the
conversation's columns and the new rows' primary keys. Rows travel as one JSON text per table
(read by ``jsonb_to_recordset``), so binding costs the same for one row or a hundred; JSON values
are wrapped in a one-element array so that JSON null stays JSON null. The guard of the plan (no
given id already stored; a status change's) is a condition of the conversation's ``UPDATE``: when it fails the
statement writes nothing and returns no row. Private to ``murmur_conversations.services``.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from django.db import IntegrityError, models

from murmur_conversations import jsonenc
from murmur_conversations.models import (
    Conversation,
    DisplayMessage,
    Message,
    MessageUsage,
    RedactionCount,
)
from murmur_conversations.services import statements
from murmur_conversations.services.backends import Applied, Finish
from murmur_conversations.services.plan import Plan
from murmur_conversations.services.writing import database_errors
from murmur_conversations.usage import COUNTERS

T = TypeVar("T")

_CONVERSATION = [f.attname for f in Conversation._meta.concrete_fields]
_JSON_FIELDS = [
    f.attname for f in Conversation._meta.concrete_fields if isinstance(f, models.JSONField)
]


def _q(name: str) -> str:
    return f'"{name}"'


def usage_update_sql() -> str:
    """The conversation's token counters (``%(t_<counter>)s``) and ``usage_by_model``
    (``%(u_by_model)s``, each model's counters added one by one) gaining a write's deltas, as
    assignments of its ``UPDATE`` (each ending with a comma)."""
    conv = Conversation._meta.db_table
    counters = "".join(f"\n    {_q(name)} = {_q(name)} + %(t_{name})s," for name in COUNTERS)
    merged = ", ".join(
        f"'{name}', COALESCE((o.value ->> '{name}')::bigint, 0) "
        f"+ COALESCE((n.value ->> '{name}')::bigint, 0)"
        for name in COUNTERS
    )
    return f"""{counters}
    "usage_by_model" = (
      SELECT COALESCE(jsonb_object_agg(COALESCE(o.key, n.key), CASE WHEN n.key IS NULL
        THEN o.value ELSE jsonb_build_object({merged}) END), '{{}}'::jsonb)
      FROM jsonb_each({_q(conv)}."usage_by_model") AS o
      FULL JOIN jsonb_each(%(u_by_model)s::jsonb) AS n ON o.key = n.key),"""


def _usage_insert_sql() -> str:
    """The usage rows' insert (rows from ``%(u)s``)."""
    names = ", ".join(_q(name) for name in COUNTERS)
    typed = ", ".join(f"{name} bigint" for name in COUNTERS)
    return f""", u AS (
  INSERT INTO {_q(MessageUsage._meta.db_table)} ("conversation_id", "message_id", "model",
    {names}, "cost_nanocents", "priced_with", "created_at")
  SELECT c."id", m."id", x.model, {", ".join(f"x.{name}" for name in COUNTERS)}, x.cost, x.pw, x.t
  FROM c, jsonb_to_recordset(%(u)s::jsonb)
       AS x(r int, model varchar, {typed}, cost bigint, pw varchar, t timestamptz)
  JOIN m ON m."position" = (SELECT "record_length" FROM c) - %(n)s + x.r
  RETURNING 1
)"""


def _redactions_sql() -> str:
    table = _q(RedactionCount._meta.db_table)
    return f""", x AS (
  INSERT INTO {table} ("conversation_id", "detector", "count")
  SELECT c."id", y.detector, y.n FROM c, jsonb_to_recordset(%(x)s::jsonb) AS y(detector varchar, n bigint)
  ON CONFLICT ("conversation_id", "detector") DO UPDATE SET "count" = {table}."count" + EXCLUDED."count"
  RETURNING 1
)"""


_STATUS_SET = """
    "status" = %(st)s,
    "status_event_seq" = "last_event_seq" + 1,
    "pending_ask_event_seq" = CASE WHEN "pending_ask" IS DISTINCT FROM %(ask)s::jsonb
                              THEN "last_event_seq" + 1 ELSE "pending_ask_event_seq" END,
    "pending_ask" = %(ask)s::jsonb,"""
_STATUS_GUARD = """ AND "parent_id" IS NULL
    AND ("status" <> %(st)s OR "pending_ask" IS DISTINCT FROM %(ask)s::jsonb)"""


@functools.cache
def append_sql(usage: bool, guard: bool, redactions: bool, status: bool = False) -> str:
    """The statement of a plan with (or without) usage rows, a guard, redaction counts and a
    status change (``plan.StatusChange``: its assignments and its guard)."""
    conv, msg = _q(Conversation._meta.db_table), _q(Message._meta.db_table)
    usage_update, usage_insert = (usage_update_sql(), _usage_insert_sql()) if usage else ("", "")
    known = f""" AND NOT EXISTS (
    SELECT 1 FROM {msg} WHERE "conversation_id" = %(conversation)s
      AND "message_id" IN (SELECT jsonb_array_elements_text(%(ids)s::jsonb)))"""
    return f"""
WITH c AS (
  UPDATE {conv} SET
    "record_length" = "record_length" + %(n)s,
    "transcript_count" = "transcript_count" + %(t)s,
    "last_seq" = "last_seq" + %(r)s,
    "last_event_seq" = "last_event_seq" + 1,{usage_update}{_STATUS_SET if status else ""}
    "saved_at" = GREATEST("saved_at", %(saved)s),
    "retained_at" = GREATEST("retained_at", %(kept)s)
  WHERE "id" = %(conversation)s{known if guard else ""}{_STATUS_GUARD if status else ""}
  RETURNING {", ".join(_q(str(f.column)) for f in Conversation._meta.concrete_fields)}
), m AS (
  INSERT INTO {msg} ("conversation_id", "position", "message_id", "role", "content",
                     "tool_call_id", "is_error", "source_id", "extra", "created_at")
  SELECT c."id", c."record_length" - %(n)s + v.o, v.id, v.role, v.c -> 0, v.tc, v.e, v.s,
         v.x -> 0, v.t
  FROM c, jsonb_to_recordset(%(m)s::jsonb) AS v(o int, id varchar, role varchar, c jsonb,
       tc varchar, e bool, s varchar, x jsonb, t timestamptz)
  RETURNING "id", "position"
), d AS (
  INSERT INTO {_q(DisplayMessage._meta.db_table)} ("conversation_id", "message_id", "seq",
    "message_type", "content_type", "content", "status", "tool_call_id", "metadata",
    "created_event_seq", "event_seq", "created_at", "updated_at")
  SELECT c."id", m."id", c."last_seq" - %(r)s + w.o, w.mt, w.ct, w.c -> 0, w.st, NULL,
         w.md -> 0, c."last_event_seq", c."last_event_seq", w.t, w.t
  FROM c, jsonb_to_recordset(%(d)s::jsonb) AS w(o int, r int, mt varchar, ct varchar, c jsonb,
       st varchar, md jsonb, t timestamptz)
  LEFT JOIN m ON m."position" = (SELECT "record_length" FROM c) - %(n)s + w.r
  RETURNING "id", "seq"
){usage_insert}{_redactions_sql() if redactions else ""}
SELECT c.*, (SELECT COALESCE(array_agg(d."id" ORDER BY d."seq"), '{{}}') FROM d),
       (SELECT COALESCE(array_agg(m."id" ORDER BY m."position"), '{{}}') FROM m)
FROM c
"""


def parameters(plan: Plan) -> dict[str, Any]:
    """The statement's parameters for ``plan``."""
    params: dict[str, Any] = {
        "conversation": plan.conversation,
        "n": len(plan.records),
        "t": plan.transcript,
        "r": len(plan.displays),
        "saved": plan.saved_at,
        "kept": plan.retained_at,
        "m": jsonenc.dumps(
            [
                {
                    "o": r.offset,
                    "id": r.message_id,
                    "role": r.role,
                    "c": None if r.content is None else [r.content],
                    "tc": r.tool_call_id,
                    "e": r.is_error,
                    "s": r.source_id,
                    "x": [r.extra],
                    "t": r.created_at.isoformat(),
                }
                for r in plan.records
            ]
        ),
        "d": jsonenc.dumps(
            [
                {
                    "o": d.offset,
                    "r": d.record,
                    "mt": d.message_type,
                    "ct": d.content_type,
                    "c": [d.content],
                    "st": d.status,
                    "md": [d.metadata],
                    "t": d.created_at.isoformat(),
                }
                for d in plan.displays
            ]
        ),
    }
    if plan.unknown_ids:
        params["ids"] = jsonenc.dumps(plan.unknown_ids)
    if plan.status is not None:
        ask = plan.status.pending_ask
        params["st"] = plan.status.status
        params["ask"] = None if ask is None else jsonenc.dumps(ask)
    if plan.usage:
        params.update({f"t_{name}": plan.tokens.get(name, 0) for name in COUNTERS})
        params["u_by_model"] = jsonenc.dumps(plan.by_model)
        params["u"] = jsonenc.dumps(
            [
                {"r": u.record, "model": u.model, **u.counts, "cost": u.cost_nanocents}
                | {"pw": u.priced_with, "t": u.created_at.isoformat()}
                for u in plan.usage
            ]
        )
    if plan.redactions:
        params["x"] = jsonenc.dumps(
            [{"detector": name, "n": n} for name, n in sorted(plan.redactions.items())]
        )
    return params


def _applied(row: tuple[Any, ...]) -> Applied:
    values = dict(zip(_CONVERSATION, row[:-2], strict=True))
    for name in _JSON_FIELDS:  # Django's connection leaves jsonb as text for its fields to decode
        if isinstance(values[name], str):
            values[name] = jsonenc.loads(values[name])
    return Applied(conversation=values, record_pks=list(row[-1]), display_pks=list(row[-2]))


def apply(using: str, plan: Plan, finish: Finish[T]) -> T | None:
    """Write ``plan`` in one statement and run ``finish`` with what it allocated, in one
    transaction (the frame log's row commits with the write; docs/websocket.md "The frame log");
    inside the caller's transaction the statement runs in a savepoint. None when the plan does
    not apply (no such conversation, its guard failed, or a concurrent writer stored one of its
    ids first): nothing was written. Raises ``WriteConflict`` or ``InvalidContent``
    (``writing.database_errors``)."""
    sql = append_sql(
        bool(plan.usage), bool(plan.unknown_ids), bool(plan.redactions), plan.status is not None
    )
    params = parameters(plan)

    def work() -> T | None:
        with database_errors():
            try:
                rows = statements.run(using, sql, params)
            except IntegrityError:
                return None
        return finish(_applied(rows[0])) if rows else None

    return statements.logged(using, work)
