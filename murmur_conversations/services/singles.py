"""Single-statement writes on PostgreSQL: a tool status move, an answer to an interrupted result.

Each function here is the one-round-trip twin of a general-path service body (``tools``): one
statement whose data-modifying CTEs lock and update the conversation row (taking one event_seq, moving ``saved_at`` never backwards), change or insert the
rows, and ``RETURNING`` everything the signals need. The signals go through ``writing.announce``,
as on the general path. Each returns None when it **declines** (nothing was written): whatever is
not the plain successful case (a no-op, an error to raise, a child conversation whose parent must
hear of it, a race) takes the general path, which is the reference and raises the right error.
``tests/test_fastpath_kinds.py`` proves each writes exactly what the general path writes.

Private to ``murmur_conversations.services``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import DataError, IntegrityError, connections

from murmur_conversations import jsonenc
from murmur_conversations.models import (
    TERMINAL_TOOL_STATUSES,
    ContentType,
    Conversation,
    DisplayMessage,
    ToolCall,
    ToolStatus,
)
from murmur_conversations.services import statements
from murmur_conversations.services.lifecycle import ALLOWED_MOVES
from murmur_conversations.services.writing import (
    announce,
    conversation_pk,
    database_errors,
    retention_time,
)

#: SQLSTATE of division by zero: the statement's own "abort, nothing written" signal.
_ABORT = "22012"


def available(using: str) -> bool:
    """Whether the single-statement writes apply to this database (PostgreSQL)."""
    return connections[using].vendor == "postgresql"


def run(using: str, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]] | None:
    """The rows of one of the single statements; None when it aborted itself (a race it cannot settle) or hit a
    unique constraint: nothing was written then."""
    with database_errors():
        try:
            return statements.run(using, sql, params)
        except IntegrityError:
            return None
        except DataError as error:
            if getattr(error.__cause__, "sqlstate", None) == _ABORT:
                return None
            raise


def _conversation_update(extra: str = "") -> str:
    conv = Conversation._meta.db_table
    return f"""UPDATE "{conv}" SET "last_event_seq" = "last_event_seq" + 1,{extra}
    "saved_at" = GREATEST("saved_at", %(now)s::timestamptz),
    "retained_at" = GREATEST("retained_at", %(kept)s::timestamptz)"""


# --------------------------------------------------------------------------- update_tool_status


@functools.cache
def _tool_status_sql() -> str:
    conv = Conversation._meta.db_table
    calls = ToolCall._meta.db_table
    disp = DisplayMessage._meta.db_table
    terminal = ", ".join(f"'{s}'" for s in sorted(TERMINAL_TOOL_STATUSES))
    # ``snap`` and ``tc`` read before the conversation row is locked: ``c`` only matches while
    # ``last_event_seq`` is still what ``snap`` saw, so a writer that committed in between makes
    # the statement decline (nothing written) and the general path run under the lock.
    return f"""
WITH snap AS (
  SELECT "last_event_seq" AS e FROM "{conv}" WHERE "id" = %(conversation)s::uuid
), tc AS (
  SELECT "id", "status" FROM "{calls}"
  WHERE "conversation_id" = %(conversation)s::uuid AND "call_id" = %(call_id)s::varchar
  ORDER BY "id" DESC LIMIT 1
), c AS (
  {_conversation_update()}
  WHERE "id" = %(conversation)s::uuid AND "last_event_seq" = (SELECT e FROM snap)
    AND EXISTS (SELECT 1 FROM tc WHERE tc."status" = ANY(%(from)s::varchar[]))
  RETURNING {statements.returning(Conversation)}
), t AS (
  UPDATE "{calls}" AS t SET
    "status" = %(status)s::varchar,
    "event_seq" = c."last_event_seq",
    "name" = CASE WHEN %(name)s::varchar <> '' THEN %(name)s::varchar ELSE t."name" END,
    "display_text" = COALESCE(%(display_text)s::text, t."display_text"),
    "started_at" = CASE WHEN %(status)s::varchar = '{ToolStatus.EXECUTING}'
                   THEN COALESCE(t."started_at", %(now)s::timestamptz) ELSE t."started_at" END,
    "result" = CASE WHEN %(status)s::varchar = '{ToolStatus.COMPLETED}' THEN %(result)s::jsonb
                    WHEN %(status)s::varchar = '{ToolStatus.FAILED}'
                    THEN COALESCE(%(result)s::jsonb, t."result")
               ELSE t."result" END,
    "error" = CASE WHEN %(status)s::varchar = '{ToolStatus.FAILED}' THEN %(error)s::jsonb
              ELSE t."error" END,
    "interrupt_reason" = CASE WHEN %(status)s::varchar = '{ToolStatus.INTERRUPTED}'
                         THEN %(reason)s::varchar ELSE '' END,
    "finished_at" = CASE WHEN %(status)s::varchar IN ({terminal}) THEN %(now)s::timestamptz
                    ELSE t."finished_at" END
  FROM c
  WHERE t."id" = (SELECT "id" FROM tc) AND t."status" = ANY(%(from)s::varchar[])
  RETURNING {statements.returning(ToolCall, "t")}
), r AS (
  UPDATE "{disp}" AS d SET
    "status" = t."status",
    "content" = CASE WHEN %(name)s::varchar <> ''
                THEN d."content" || jsonb_build_object('name', %(name)s::varchar)
                ELSE d."content" END,
    "metadata" = {card_metadata("t")},
    "event_seq" = t."event_seq",
    "updated_at" = %(now)s::timestamptz
  FROM t
  WHERE d."id" = (SELECT "id" FROM "{disp}" WHERE "tool_call_id" = t."id"
                  AND "content_type" = '{ContentType.TOOL_CALL}' ORDER BY "seq" LIMIT 1)
  RETURNING {statements.returning(DisplayMessage, "d")}
)
SELECT c.*, t.*, r.*, ok.v
FROM (SELECT 1 / CASE WHEN (SELECT count(*) FROM c) = (SELECT count(*) FROM r) THEN 1 ELSE 0 END
      AS v) AS ok
LEFT JOIN (c CROSS JOIN t CROSS JOIN r) ON true
"""


def card_metadata(call: str) -> str:
    """``lifecycle.update_card`` in SQL: the card ``d``'s metadata after its call (the CTE or
    table alias ``call``) moved: ``display_text`` (executing, completed, interrupted; when not
    empty), ``result`` (completed; failed when it has one), ``error`` (failed)."""
    shown = ", ".join(
        f"'{s}'" for s in (ToolStatus.EXECUTING, ToolStatus.COMPLETED, ToolStatus.INTERRUPTED)
    )
    return f"""d."metadata"
      || CASE WHEN {call}."display_text" <> '' AND {call}."status" IN ({shown})
         THEN jsonb_build_object('display_text', {call}."display_text") ELSE '{{}}' END
      || CASE WHEN {call}."status" = '{ToolStatus.COMPLETED}'
           OR ({call}."status" = '{ToolStatus.FAILED}' AND {call}."result" IS NOT NULL)
         THEN jsonb_build_object('result', {call}."result") ELSE '{{}}' END
      || CASE WHEN {call}."status" = '{ToolStatus.FAILED}'
         THEN jsonb_build_object('error', {call}."error") ELSE '{{}}' END"""


def _json(value: Any) -> str | None:
    """A JSON value as the text of a ``jsonb`` parameter; None (Python's) stays SQL NULL, as the
    ORM stores None in a nullable JSON field."""
    return None if value is None else jsonenc.dumps(value)


def update_tool_status(
    *,
    conversation: Any,
    using: str,
    call_id: str,
    status: str,
    name: str | None,
    display_text: str | None,
    result: Any,
    error: Any,
    reason: str,
    now: datetime,
) -> DisplayMessage | None:
    """Move the latest call of ``call_id`` to ``status`` in one statement
    (``services.update_tool_status`` with its arguments checked and redacted by the caller,
    nothing found to count) and return its card; None when it declines, nothing written (no such
    call, the same status, a move not allowed, a call without a card, a concurrent write): the
    general path then runs and raises or returns what it should."""
    sources = sorted(s for s, targets in ALLOWED_MOVES.items() if status in targets)
    params = {
        "conversation": conversation_pk(conversation),
        "call_id": call_id,
        "status": status,
        "from": sources,
        "name": name or "",
        "display_text": display_text,
        "result": _json(result),
        "error": _json(error),
        "reason": reason,
        "now": now,
        "kept": retention_time(now),
    }

    def work() -> tuple[Conversation, DisplayMessage] | None:
        rows = run(using, _tool_status_sql(), params)
        if not rows or rows[0][0] is None:  # declined: c (and so t and r) changed nothing
            return None
        row = rows[0]
        n_conv = len(statements.columns(Conversation))
        n_call = len(statements.columns(ToolCall))
        saved = statements.load(Conversation, using, row[:n_conv])
        call = statements.load(ToolCall, using, row[n_conv : n_conv + n_call])
        card = statements.load(DisplayMessage, using, row[n_conv + n_call : -1])
        statements.relate(call, "conversation", saved)
        statements.relate(card, "conversation", saved)
        statements.relate(card, "tool_call", call)
        announce(saved, using, saved.last_event_seq, updated=[card], calls=[call])
        return saved, card

    return _written(conversation, using, work)


# --------------------------------------------------------------------------- resolve_tool_result


@functools.cache
def _resolve_sql() -> str:
    conv = Conversation._meta.db_table
    calls = ToolCall._meta.db_table
    disp = DisplayMessage._meta.db_table
    terminal = ", ".join(f"'{s}'" for s in sorted(TERMINAL_TOOL_STATUSES))
    return f"""
WITH snap AS (
  SELECT "last_event_seq" AS e FROM "{conv}" WHERE "id" = %(conversation)s::uuid
), tc AS (
  SELECT "id" FROM "{calls}"
  WHERE "conversation_id" = %(conversation)s::uuid AND "call_id" = %(call_id)s::varchar
  ORDER BY "id" DESC LIMIT 1
), rr AS (
  SELECT "id" FROM "{disp}"
  WHERE "conversation_id" = %(conversation)s::uuid AND "tool_call_id" = (SELECT "id" FROM tc)
    AND "content_type" = '{ContentType.TOOL_RESULT}' AND "content" -> 'is_interrupt' = 'true'
  ORDER BY "seq" DESC LIMIT 1
), c AS (
  {_conversation_update()}
  WHERE "id" = %(conversation)s::uuid AND "last_event_seq" = (SELECT e FROM snap)
    AND EXISTS (SELECT 1 FROM rr)
  RETURNING {statements.returning(Conversation)}
), r AS (
  UPDATE "{disp}" AS d SET
    "content" = d."content"
      || jsonb_build_object('content', %(result)s::jsonb -> 0, 'is_interrupt', false),
    "event_seq" = c."last_event_seq",
    "updated_at" = %(now)s::timestamptz
  FROM c
  WHERE d."id" = (SELECT "id" FROM rr)
  RETURNING {statements.returning(DisplayMessage, "d")}
), t AS (
  UPDATE "{calls}" AS t SET
    "status" = '{ToolStatus.COMPLETED}',
    "event_seq" = c."last_event_seq",
    "result" = NULLIF(%(result)s::jsonb -> 0, 'null'::jsonb),
    "interrupt_reason" = '',
    "finished_at" = %(now)s::timestamptz
  FROM c
  WHERE t."id" = (SELECT "id" FROM tc) AND t."status" NOT IN ({terminal})
  RETURNING {statements.returning(ToolCall, "t")}
), cd AS (
  UPDATE "{disp}" AS d SET
    "status" = t."status",
    "metadata" = {card_metadata("t")},
    "event_seq" = t."event_seq",
    "updated_at" = %(now)s::timestamptz
  FROM t
  WHERE d."id" = (SELECT "id" FROM "{disp}" WHERE "tool_call_id" = t."id"
                  AND "content_type" = '{ContentType.TOOL_CALL}' ORDER BY "seq" LIMIT 1)
  RETURNING {statements.returning(DisplayMessage, "d")}
)
SELECT c.*, r.*, t.*, cd.*
FROM c JOIN r ON true LEFT JOIN t ON true LEFT JOIN cd ON true
"""


def resolve_tool_result(
    *, conversation: Any, using: str, call_id: str, result: Any, now: datetime
) -> DisplayMessage | None:
    """Answer the interrupted result of the latest call of ``call_id`` in one statement
    (``services.resolve_tool_result`` with the content checked and redacted by the caller,
    nothing found to count): the result row gets ``result`` and ``is_interrupt`` false, the call
    (unless it ended) is completed with it, and its card follows. Returns the result row; None
    when it declines, nothing written (no such call or interrupted result, a concurrent write):
    the general path then runs and raises."""
    params = {
        "conversation": conversation_pk(conversation),
        "call_id": call_id,
        "result": jsonenc.dumps([result]),
        "now": now,
        "kept": retention_time(now),
    }

    def work() -> tuple[Conversation, DisplayMessage] | None:
        rows = run(using, _resolve_sql(), params)
        if not rows:
            return None
        row = rows[0]
        n_conv = len(statements.columns(Conversation))
        n_row = len(statements.columns(DisplayMessage))
        n_call = len(statements.columns(ToolCall))
        saved = statements.load(Conversation, using, row[:n_conv])
        answered = statements.load(DisplayMessage, using, row[n_conv : n_conv + n_row])
        statements.relate(answered, "conversation", saved)
        updated, calls = [answered], []
        call_values = row[n_conv + n_row : n_conv + n_row + n_call]
        if call_values[0] is not None:
            call = statements.load(ToolCall, using, call_values)
            statements.relate(call, "conversation", saved)
            statements.relate(answered, "tool_call", call)
            calls.append(call)
            card_values = row[n_conv + n_row + n_call :]
            if card_values[0] is not None:
                card = statements.load(DisplayMessage, using, card_values)
                statements.relate(card, "conversation", saved)
                statements.relate(card, "tool_call", call)
                updated.append(card)
        announce(saved, using, saved.last_event_seq, updated=updated, calls=calls)
        return saved, answered

    return _written(conversation, using, work)


def _written(
    conversation: Any, using: str, work: Callable[[], tuple[Conversation, DisplayMessage] | None]
) -> DisplayMessage | None:
    """Run ``work`` (a statement, then ``announce``) with the frame log's row in its transaction
    (``statements.logged``); the row it returns, the caller's Conversation refreshed; None when
    it declined."""
    done = statements.logged(using, work)
    if done is None:
        return None
    _refresh(conversation, done[0])
    return done[1]


def _refresh(conversation: Any, saved: Conversation) -> None:
    """A Conversation instance the caller passed in gets the saved state, as on the general path."""
    if isinstance(conversation, Conversation) and conversation is not saved:
        for name in statements.columns(Conversation):
            setattr(conversation, name, getattr(saved, name))
