"""Optional: the admin at scale on PostgreSQL (docs/admin.md).

Seeds a separate database (``<name>_admin_bench``, dropped at the end unless ``--keep``) with
plain SQL, in two stages: about 10,000 record messages, then about 1,100,000 (100,000
conversations, 500,000 display rows, 100,000 tool calls). At each stage it requests every admin
changelist (unfiltered, filtered, searched) and a conversation page with a logged-in superuser and
prints the median time and the number of queries of each.

    DATABASE_URL=postgres://... python -m bench.admin_scale [--scale 1.0] [--keep]

``--scale 0.01`` is a quick smoke run. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Django is set up at run time, in _setup
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.backends.utils import CursorWrapper
    from django.test import Client

STAGES = (  # (label, conversations, record messages per conversation)
    ("10k", 1_000, 10),
    ("1.1M", 100_000, 11),
)


def _setup(keep: bool) -> tuple[BaseDatabaseWrapper, str]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("admin_scale needs DATABASE_URL=postgres://...")
    import django

    django.setup()
    from django.db import connection

    database = connection.settings_dict
    database["TEST"]["NAME"] = f"{database['NAME']}_admin_bench"

    name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=keep)
    return connection, name


def seed(cursor: CursorWrapper, conversations: int, per: int, owner_id: int) -> None:
    """Top the tables up to ``conversations`` conversations of ``per`` record messages, half as
    many display rows and one tool call each (every tenth failed)."""
    cursor.execute("SELECT count(*) FROM murmur_conversations_conversation")
    have = cursor.fetchone()[0]
    if have >= conversations:
        return
    displays = max(1, per // 2)
    cursor.execute(
        """
        INSERT INTO murmur_conversations_conversation
          (id, owner_id, title, metadata, status, pending_ask, source, external_id,
           record_length, transcript_count, last_seq, last_event_seq, created_at, saved_at)
        SELECT gen_random_uuid(), CASE WHEN mod(g, 2) = 0 THEN %s END, 'bench ' || g, '{}',
               CASE WHEN mod(g, 7) = 0 THEN 'running' ELSE 'idle' END, NULL, '', '',
               %s, %s, %s, %s, now() - g * interval '1 second', now() - g * interval '1 second'
        FROM generate_series(%s + 1, %s) AS g
        """,
        [owner_id, per, per, displays, per, have, conversations],
    )
    new = "SELECT id, row_number() OVER () AS n FROM murmur_conversations_conversation c WHERE NOT EXISTS (SELECT 1 FROM murmur_conversations_message m WHERE m.conversation_id = c.id)"
    cursor.execute(
        f"""
        INSERT INTO murmur_conversations_message
          (conversation_id, position, message_id, role, content, tool_call_id, is_error,
           source_id, extra, created_at)
        SELECT c.id, p, 'msg_' || p, CASE WHEN mod(p, 2) = 1 THEN 'user' ELSE 'assistant' END,
               to_jsonb(repeat('payload ', 40) || p), '', false, '', '{{}}', now()
        FROM ({new}) c CROSS JOIN generate_series(1, %s) AS p
        """,
        [per],
    )
    cursor.execute(
        """
        INSERT INTO murmur_conversations_toolcall
          (conversation_id, call_id, name, arguments, status, interrupt_reason, display_text,
           result, error, started_at, finished_at, event_seq, created_at)
        SELECT c.id, 'call_1', CASE WHEN mod(n, 3) = 0 THEN 'bash' ELSE 'read_file' END,
               '{"cmd": "ls"}', CASE WHEN mod(n, 10) = 0 THEN 'failed' ELSE 'completed' END, '', '',
               '"ok"', NULL, now(), now(), 1, now()
        FROM (SELECT c.id, row_number() OVER () AS n FROM murmur_conversations_conversation c
              WHERE NOT EXISTS (SELECT 1 FROM murmur_conversations_toolcall t
                                WHERE t.conversation_id = c.id)) c
        """
    )
    cursor.execute(
        """
        INSERT INTO murmur_conversations_displaymessage
          (conversation_id, message_id, seq, message_type, content_type, content, status,
           tool_call_id, metadata, created_event_seq, event_seq, created_at, updated_at)
        SELECT c.id, NULL, s, 'user', 'text', jsonb_build_object('text', 'row ' || s),
               'completed', NULL, '{}', s, s, now(), now()
        FROM murmur_conversations_conversation c CROSS JOIN generate_series(1, %s) AS s
        WHERE NOT EXISTS (SELECT 1 FROM murmur_conversations_displaymessage d
                          WHERE d.conversation_id = c.id)
        """,
        [displays],
    )
    cursor.execute("ANALYZE")


def _measure(client: Client, url: str, runs: int = 5) -> tuple[float, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times = []
    for _ in range(runs):
        with CaptureQueriesContext(connection) as queries:
            start = time.perf_counter()
            response = client.get(url)
            times.append(time.perf_counter() - start)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), len(queries.captured_queries)


def main() -> int:
    """Seed, measure, print; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--keep", action="store_true")
    options = parser.parse_args()
    connection, name = _setup(options.keep)
    try:
        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.urls import reverse

        from murmur_conversations.models import Conversation

        user_model = get_user_model()
        admin_user = user_model.objects.filter(username="bench-admin").first()
        if admin_user is None:
            admin_user = user_model.objects.create_superuser(
                "bench-admin", "bench@example.com", "x"
            )
        client = Client()
        client.force_login(admin_user)
        for label, conversations, per in STAGES:
            with connection.cursor() as cursor:
                seed(cursor, max(1, int(conversations * options.scale)), per, admin_user.pk)
            some = Conversation.objects.order_by("-saved_at").first()
            assert some is not None
            base = "admin:murmur_conversations_{}_changelist"
            urls = {
                "conversations": reverse(base.format("conversation")),
                "conversations ?status=running": reverse(base.format("conversation"))
                + "?status__exact=running",
                "conversations ?tool_status=failed": reverse(base.format("conversation"))
                + "?tool_status=failed",
                "conversations ?q=<owner>": reverse(base.format("conversation")) + "?q=bench-admin",
                "conversations ?q=<title prefix>": reverse(base.format("conversation"))
                + "?q=bench+12",
                "record": reverse(base.format("message")),
                "display rows": reverse(base.format("displaymessage")),
                "tool calls": reverse(base.format("toolcall")),
                "tool calls ?status=failed": reverse(base.format("toolcall"))
                + "?status__exact=failed",
                "conversation page": reverse(
                    "admin:murmur_conversations_conversation_change", args=[some.pk]
                ),
            }
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM murmur_conversations_message")
                rows = cursor.fetchone()[0]
            print(f"== stage {label}: {rows} record messages")
            for what, url in urls.items():
                seconds, queries = _measure(client, url)
                print(f"  {what:36} {seconds * 1000:8.1f} ms  {queries:2d} queries")
    finally:
        if not options.keep:
            connection.creation.destroy_test_db(name, verbosity=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
