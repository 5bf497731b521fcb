"""The search benchmark (docs/search.md): full-text search over a million display rows, beside a
plain ``ILIKE`` scan of the same rows (``LIKE`` on SQLite, which is case-insensitive for ASCII).

One user owns ``search_rows`` display rows in conversations of 1,000 rows each, filled with
set-based SQL (the index is kept by the database as they go in, as for any write), then
``VACUUM ANALYZE`` (PostgreSQL) so GIN's pending list is merged, as autovacuum does. Each row's
text holds words of known frequency: ``w<n>`` (n < 97, about 1 % of the rows each), ``x<n>``
(n < 89), ``r<n>q`` (n < 9973, about 0.01 %), a Chinese sentence whose fifth character is one of
97 (``CJK_WORD``, a word in the middle of the run, in about 1 % of the rows), the flag ``--dry-run``
(about 1 %, ``--force`` in the others), and words every row has. "Ours" is what
``GET search/`` runs below HTTP: the scoped, ranked page of 50 hits with their snippets, as JSON-
ready dicts. The goal: under 50 ms p50 (a fixed 50 ms variant stands for it in the ratios).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.harness import Benchmark, RatioSpec, Variant
from bench.paths import Sizes, Track
from bench.stats import Target

ROWS_PER_CONVERSATION = 1000
GOAL = "goal: 50 ms"
#: The character of the Chinese sentence that varies: U+4E00 + (g mod 97).
_CJK_BASE = 0x4E00
#: A four-character word in the middle of the sentence of the rows where g mod 97 = 42.
CJK_WORD = f"论了{chr(_CJK_BASE + 42)}的"
QUERIES = {  # variant suffix: (query, ILIKE pattern or None)
    "rare word": ("r4242q", "%r4242q%"),
    "frequent word": ("w42", "% w42 %"),
    "phrase": ('"w42 x17"', "% w42 x17 %"),
    "word -word": ("w42 -x17", None),
    "stemmed word in every row": ("tokenizers", "%tokenizer%"),
    "CJK word": (CJK_WORD, f"%{CJK_WORD}%"),
    "flag": ("--dry-run", "%--dry-run%"),
}


def fill(alias: str, owner_id: Any, count: int) -> list[Any]:
    """Conversations of ``owner_id`` holding ``count`` text rows in all (set-based SQL), with
    matching counters; then the planner's statistics. Returns the conversation ids."""
    from django.db import connections, transaction

    from murmur_conversations import services
    from murmur_conversations.models import Conversation, DisplayMessage

    conv, display = Conversation._meta.db_table, DisplayMessage._meta.db_table
    connection = connections[alias]
    per = min(ROWS_PER_CONVERSATION, count)
    ids = [
        services.start_conversation(owner=owner_id, title=f"bench search {n}").pk
        for n in range(max(1, count // per))
    ]
    postgres = connection.vendor == "postgresql"
    character = "chr" if postgres else "char"
    text = (
        "'turn ' || g || ' about the parser w' || (g %% 97) || ' x' || (g %% 89) || ' r' "
        f"|| (g %% 9973) || 'q, then the tokenizer ran again. 我们讨论了' || "
        f"{character}({_CJK_BASE} + g %% 97) || '的设计 try ' || "
        "CASE WHEN g %% 97 = 42 THEN '--dry-run' ELSE '--force' END"
    )
    with transaction.atomic(using=alias), connection.cursor() as cur:
        for index, pk in enumerate(ids):
            start = index * per
            if postgres:
                cur.execute(
                    f"""INSERT INTO {display} (conversation_id, message_id, seq, message_type,
                        content_type, content, status, tool_call_id, metadata, created_event_seq,
                        event_seq, created_at, updated_at)
                    SELECT %s, NULL, n, CASE WHEN n %% 2 = 0 THEN 'assistant' ELSE 'user' END,
                        'text', jsonb_build_object('text', {text}), 'completed', NULL, '{{}}', n,
                        n, now(), now()
                    FROM generate_series(1, %s) AS n, LATERAL (SELECT %s + n AS g) AS x""",
                    [pk, per, start],
                )
            else:
                cur.execute(
                    f"""WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s
                        WHERE n < %s)
                    INSERT INTO {display} (conversation_id, message_id, seq, message_type,
                        content_type, content, status, tool_call_id, metadata, created_event_seq,
                        event_seq, created_at, updated_at)
                    SELECT %s, NULL, n, CASE WHEN n %% 2 = 0 THEN 'assistant' ELSE 'user' END,
                        'text', json_object('text', {text}), 'completed', NULL, '{{}}', n, n,
                        strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now'),
                        strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')
                    FROM (SELECT n, %s + n AS g FROM s)""",
                    [per, pk.hex, start],
                )
            cur.execute(
                f"UPDATE {conv} SET last_seq = %s, last_event_seq = %s WHERE id = %s",
                [per, per, pk if postgres else pk.hex],
            )
    with connection.cursor() as cur:  # outside the transaction: VACUUM cannot run in one
        if postgres:
            cur.execute(f"VACUUM ANALYZE {display}")
            cur.execute(f"ANALYZE {conv}")
        else:
            cur.execute("ANALYZE")
    return ids


def _ours(owner: Any, q: str) -> Callable[[], object]:
    from murmur_conversations.representations import search_hit_row
    from murmur_conversations.search import parse_query, search_hits
    from murmur_conversations.selectors import conversations_for

    def run() -> object:
        hits, _more = search_hits(conversations_for(owner), parse_query(q), limit=50)
        return [search_hit_row(hit) for hit in hits]

    return run


def _ilike(alias: str, owner_id: Any, pattern: str) -> Callable[[], object]:
    """The plain scan: the scoped rows whose text matches ``pattern``, newest 50 (no ranking,
    no stemming)."""
    from django.db import connections

    from murmur_conversations.models import Conversation, DisplayMessage

    conv, display = Conversation._meta.db_table, DisplayMessage._meta.db_table
    connection = connections[alias]
    if connection.vendor == "postgresql":
        text, like, owner = "content ->> 'text'", "ILIKE", owner_id
    else:
        text, like, owner = "json_extract(content, '$.text')", "LIKE", owner_id
    statement = (
        f"SELECT id, conversation_id, seq, {text} FROM {display} WHERE conversation_id IN "
        f"(SELECT id FROM {conv} WHERE owner_id = %s) AND {text} {like} %s "
        "ORDER BY id DESC LIMIT 50"
    )

    def run() -> object:
        with connection.cursor() as cursor:
            cursor.execute(statement, [owner, pattern])
            return cursor.fetchall()

    return run


def search(track: Track, sizes: Sizes) -> Benchmark:
    """Search ``sizes.search_rows`` display rows of one user: ours (ranked, 50 hits with
    snippets) and the ILIKE scan, for words of several frequencies. Unit: searches."""
    from django.contrib.auth import get_user_model

    owner = (
        get_user_model()
        ._default_manager.db_manager(track.alias)
        .create_user(username=f"bench-searcher-{track.name}")
    )
    fill(track.alias, owner.pk, sizes.search_rows)
    ops = sizes.search_ops
    scan_ops = max(1, ops // 5) if sizes.search_rows >= 100_000 else ops  # a scan is slow
    variants = [Variant(GOAL, lambda: 0.05, 1, measures=True)]
    ratios: list[RatioSpec] = []
    scan = "ILIKE" if track.is_postgres else "LIKE"
    for label, (q, pattern) in QUERIES.items():
        slow = label.startswith("stemmed")
        variants.append(Variant(f"ours: {label}", _ours(owner, q), 1 if slow else ops))
        ratios.append(
            RatioSpec(
                f"ours: {label} p50 / 50 ms",
                f"ours: {label}",
                GOAL,
                "p50",
                "time",
                None if slow else Target("<=", 1.0),
            )
        )
        if pattern is not None:
            variants.append(
                Variant(f"{scan} scan: {label}", _ilike(track.alias, owner.pk, pattern), scan_ops)
            )
            ratios.append(
                RatioSpec(
                    f"ours / {scan} scan: {label}",
                    f"ours: {label}",
                    f"{scan} scan: {label}",
                    "p50",
                    "time",
                )
            )
    count = sizes.search_rows
    label = f"{count // 1_000_000}M" if count >= 1_000_000 else f"{count // 1000}k"
    return Benchmark(
        name=f"{track.name}: search @{label}",
        description=(
            f"full-text search over {count} display rows of one user, a page of 50 ranked hits "
            f"with snippets, beside a {scan} scan (newest 50 matches, no ranking)"
        ),
        unit="search",
        variants=variants,
        ratios=ratios,
    )
