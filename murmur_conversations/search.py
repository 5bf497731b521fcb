"""Full-text search over conversations (docs/search.md): the query language, hits and snippets.

Reads only. Every function takes the conversations to search as a queryset (the API passes
``selectors.conversations_for(user)``, the list's exact scope), so a search can never reach a row
outside it. The index itself is kept by the database (``search_index``).

**The query language** is PostgreSQL's ``websearch_to_tsquery``: words (stemmed: "tokenizers"
finds "tokenizer"), ``"quoted phrases"``, ``-word`` or ``-"a phrase"`` to exclude (a ``-`` that
begins a term, followed by a letter, a digit or a quote: ``--dry-run`` and ``a-b`` are text), and
``or`` between alternatives (``a b or c`` is ``(a and b) or c``). :func:`parse_query` reads it once, in
Python, into :class:`SearchQuery`, which is written back as a canonical ``websearch_to_tsquery``
text for PostgreSQL and as an FTS5 expression for SQLite in which every word and phrase is quoted,
so no user text ever reaches FTS5's syntax. Other punctuation separates words, and CJK runs
are read as overlapping bigrams (``bigrams``), in the index and in queries alike. An alternative
with nothing but exclusions is dropped (it would match almost every row); a query left with
nothing to find finds nothing.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import (
    BooleanField,
    FloatField,
    Func,
    Q,
    QuerySet,
    TextField,
    Value,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast
from django.utils.dateparse import parse_datetime

from murmur_conversations import bigrams, search_index
from murmur_conversations.exceptions import InvalidSearch
from murmur_conversations.jsonenc import clean_text
from murmur_conversations.models import Conversation, DisplayMessage

#: Longest query, in characters.
MAX_QUERY_CHARS: Final = 500
#: Longest snippet, in characters (its highlights stay inside).
SNIPPET_CHARS: Final = 300
#: Characters of context either side of a match in a snippet built in Python (fallback).
_CONTEXT_CHARS: Final = 80
# Marks around matched words while a snippet is built (private-use characters; PostgreSQL's
# text has them removed first, so they cannot be confused with the text's own characters).
_START: Final = "\ue000\ue001"
_STOP: Final = "\ue001\ue000"
_CUT: Final = "\ue002"
_PUA: Final = "\ue000\ue001\ue002"
_FRAGMENTS: Final = " … "
_OR: Final = "or"
_TOKEN = re.compile(r'"|[^\s"]+')
_MARKS = re.compile(f"({_START}|{_STOP})")


@dataclass(frozen=True)
class Term:
    """A word or a quoted phrase; ``negated`` for ``-word`` / ``-"phrase"``."""

    text: str
    phrase: bool = False
    negated: bool = False


#: Words too common to find anything by, dropped from SQLite queries as PostgreSQL's ``english``
#: configuration drops its stop words (a short list of our own; inside quoted phrases they stay).
# fmt: off
STOP_WORDS: Final = frozenset((
    "a", "about", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "did", "do",
    "does", "for", "from", "had", "has", "have", "he", "her", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or", "our", "she", "so",
    "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those",
    "to", "too", "us", "was", "we", "were", "what", "when", "where", "which", "who", "why",
    "will", "with", "you", "your",
))
# fmt: on


@dataclass(frozen=True)
class SearchQuery:
    """A parsed query: alternatives (OR) of terms that must all hold (AND)."""

    raw: str
    groups: tuple[tuple[Term, ...], ...] = ()

    @property
    def empty(self) -> bool:
        """True when nothing is left to find (only stop words on PostgreSQL find nothing too)."""
        return not self.groups

    def websearch(self) -> str:
        """The canonical ``websearch_to_tsquery`` text of this query."""

        def term(t: Term) -> str:
            # Words as the index reads them: "src/lexer.py" is the phrase "src lexer py",
            # "東京都" the phrase "東京 京都". No text of a term is syntax: word breaks took
            # every "-" out, and a phrase, several words or the word "or" are quoted.
            words = search_index.index_words(t.text).split()
            joined = " ".join(words)
            quote = t.phrase or len(words) != 1 or joined.lower() == _OR
            text = f'"{joined}"' if quote else joined
            return f"-{text}" if t.negated else text

        return " or ".join(" ".join(term(t) for t in group) for group in self.groups)

    def fts5(self) -> str:
        """The FTS5 MATCH expression of this query: every term quoted, alternatives joined with
        OR, exclusions with NOT."""

        def quoted(t: Term) -> str:
            # CJK runs as bigrams, as the index reads them ("東京都": the phrase "東京 京都").
            return '"' + bigrams.expand(t.text).replace('"', '""') + '"'

        alternatives = []
        for group in self.groups:
            expression = " AND ".join(quoted(t) for t in group if not t.negated)
            for excluded in (t for t in group if t.negated):
                expression = f"({expression}) NOT {quoted(excluded)}"
            alternatives.append(f"({expression})")
        return " OR ".join(alternatives)

    def without_stop_words(self) -> SearchQuery:
        """This query without :data:`STOP_WORDS` outside phrases (alternatives left with nothing
        to find are dropped): what SQLite searches for."""
        groups = []
        for group in self.groups:
            kept = tuple(t for t in group if t.phrase or t.text.lower() not in STOP_WORDS)
            if any(not t.negated for t in kept):
                groups.append(kept)
        return SearchQuery(raw=self.raw, groups=tuple(groups))

    def wanted(self) -> list[str]:
        """The words and phrases searched for (not excluded), for the ``icontains`` fallback."""
        return [t.text for group in self.groups for t in group if not t.negated]


def _has_word(text: str) -> bool:
    return any(character.isalnum() for character in text)


def _excludes(text: str, start: int, token: str) -> bool:
    """Whether ``token``, found at ``start`` of ``text``, is an exclusion: one ``-`` that begins
    a term (at the start of the query or after whitespace) directly followed by a letter, a
    digit or a quote. ``--dry-run``, ``x-y``, ``-`` alone and ``-_x`` are text."""
    if not token.startswith("-") or token.startswith("--"):
        return False
    if start > 0 and not text[start - 1].isspace():
        return False
    if len(token) > 1:
        return token[1].isalnum()
    return text[start + 1 : start + 2] == '"'


def parse_query(raw: Any) -> SearchQuery:
    """Read a query (module docstring). Raises ``InvalidSearch`` for a query that is not a
    string, is blank, is longer than :data:`MAX_QUERY_CHARS` characters or holds a NUL
    character. Lone surrogates are repaired (U+FFFD), as in stored text. An unbalanced quote
    quotes to the end."""
    if not isinstance(raw, str):
        raise InvalidSearch("q must be a string")
    if "\x00" in raw:
        raise InvalidSearch("q must not contain NUL characters")
    if len(raw) > MAX_QUERY_CHARS:
        raise InvalidSearch(f"q is {len(raw)} characters; at most {MAX_QUERY_CHARS}")
    text = clean_text(raw)
    if not text.strip():
        raise InvalidSearch("q is empty; give at least one word")
    groups: list[list[Term]] = [[]]
    pending_or = False
    position = 0
    while position < len(text):
        match = _TOKEN.search(text, position)
        if match is None:
            break
        token = match.group()
        position = match.end()
        negated = False
        if _excludes(text, match.start(), token):
            negated = True
            token = token[1:]
            if not token:  # -"a phrase"
                token = '"'
                position += 1
        if token == '"' or (token.startswith('"') and not negated):
            close = text.find('"', position)
            phrase = text[position:] if close < 0 else text[position:close]
            position = len(text) if close < 0 else close + 1
            new: Term | None = (
                Term(" ".join(phrase.split()), phrase=True, negated=negated)
                if _has_word(phrase)
                else None
            )
        elif token.lower() == _OR and not negated:
            pending_or = True
            continue
        else:
            new = Term(token, negated=negated) if _has_word(token) else None
        if new is None:
            continue
        if pending_or and groups[-1]:
            groups.append([])
        pending_or = False
        groups[-1].append(new)
    kept = tuple(tuple(g) for g in groups if any(not t.negated for t in g))
    return SearchQuery(raw=raw, groups=kept)


# --------------------------------------------------------------------------- SQL pieces


class _Sql(Func):
    """SQL around compiled arguments: ``sql`` with ``{0}``, ``{1}``... for them, each used once
    and in order (so their parameters stay in order)."""

    def __init__(self, sql: str, *expressions: Any, output_field: Any) -> None:
        self.sql = sql
        super().__init__(*expressions, output_field=output_field)

    def as_sql(  # type: ignore[override]  # no function/template: the SQL is fixed
        self, compiler: Any, connection: Any, **extra: Any
    ) -> tuple[str, tuple[Any, ...]]:
        parts: list[str] = []
        params: list[Any] = []
        for expression in self.get_source_expressions():
            sql, expression_params = compiler.compile(expression)
            parts.append(sql)
            params.extend(expression_params)
        return self.sql.format(*parts), tuple(params)


_TSQUERY = f"websearch_to_tsquery('{search_index.PG_CONFIG}'::regconfig, {{1}})"


def _vector() -> RawSQL:
    return RawSQL(search_index.VECTOR_COLUMN, ())


def _pg_matches(query: SearchQuery) -> _Sql:
    # querytree() is 'T' for a query only an exclusion is left of once stop words are dropped,
    # and '' for none at all: such a query would read every row, and finds nothing instead.
    return _Sql(
        f"({{0}} @@ {_TSQUERY} AND querytree({_TSQUERY.replace('{1}', '{2}')}) NOT IN ('T', ''))",
        _vector(),
        Value(query.websearch()),
        Value(query.websearch()),
        output_field=BooleanField(),
    )


def _pg_rank(query: SearchQuery) -> _Sql:
    # As double precision: ts_rank's real would reach Python as the decimal text of a float4,
    # which does not compare equal to the real in the next page's keyset condition.
    return _Sql(
        f"CAST(ts_rank({{0}}, {_TSQUERY}) AS double precision)",
        _vector(),
        Value(query.websearch()),
        output_field=FloatField(),
    )


def _pg_title_ids(query: SearchQuery) -> RawSQL:
    return RawSQL(
        f'SELECT conversation_id FROM "{search_index.TITLE_VECTORS}" '
        f"WHERE vector @@ {_TSQUERY.replace('{1}', '%s')}",
        (query.websearch(),),
    )


def _sqlite_ids(query: SearchQuery) -> RawSQL:
    table = search_index.DISPLAY_FTS
    return RawSQL(f"SELECT rowid FROM {table} WHERE {table} MATCH %s", (query.fts5(),))


def _sqlite_title_ids(query: SearchQuery) -> RawSQL:
    doc, fts = search_index.TITLE_DOC, search_index.TITLE_FTS
    return RawSQL(
        f"SELECT {doc}.conversation_id FROM {doc} JOIN {fts} ON {fts}.rowid = {doc}.id "
        f"WHERE {fts} MATCH %s",
        (query.fts5(),),
    )


def _fallback_matches(query: SearchQuery, field_name: str) -> Q:
    condition = Q()
    for group in query.groups:
        both = Q()
        for term in group:
            found = Q(**{f"{field_name}__icontains": term.text})
            both &= ~found if term.negated else found
        condition |= both
    return condition


def backend_of(queryset: QuerySet[Any]) -> search_index.Backend:
    """The index the database of ``queryset`` has (``search_index.backend_for``)."""
    return search_index.backend_for(connections[queryset.db].vendor)


# --------------------------------------------------------------------------- conversations


def matching_conversations(
    conversations: QuerySet[Conversation], query: SearchQuery
) -> QuerySet[Conversation]:
    """``conversations`` narrowed to those whose title matches ``query`` or that hold a display
    row matching it (the whole query, in one row), in them or in a conversation below them
    (their subagents, at any depth: ``GET search/`` finds those rows too), in their order. None
    for an empty query."""
    backend = backend_of(conversations)
    if backend == "sqlite":
        query = query.without_stop_words()
    if query.empty:
        return conversations.none()
    rows = DisplayMessage.objects.using(conversations.db)
    if backend == "postgresql":
        # Titles through their own table's index, answered once as a subquery.
        titled = Q(pk__in=_pg_title_ids(query))
        rows = rows.filter(_pg_matches(query))
    elif backend == "sqlite":
        titled = Q(pk__in=_sqlite_title_ids(query))
        rows = rows.filter(pk__in=_sqlite_ids(query))
    else:
        titled = _fallback_matches(query, "title")
        text = Cast("content", output_field=TextField())
        rows = rows.annotate(search_text=text).filter(_fallback_matches(query, "search_text"))
    try:
        held = _holding(conversations, rows)
    except EmptyResultSet:
        return conversations.none()
    return conversations.filter(titled | held)


def _holding(conversations: QuerySet[Conversation], rows: QuerySet[DisplayMessage]) -> Q:
    """Those of ``conversations`` that hold one of ``rows``, themselves or in a conversation
    below them (any depth): a recursive walk down from them. ``EmptyResultSet`` when
    ``conversations`` or ``rows`` can match nothing."""
    table = Conversation._meta.db_table
    connection = connections[conversations.db]
    candidates = conversations.order_by().values("pk").query
    found = rows.order_by().values("conversation_id").query
    candidates_sql, candidates_params = candidates.get_compiler(connection=connection).as_sql()
    found_sql, found_params = found.get_compiler(connection=connection).as_sql()
    sql = (
        f'WITH RECURSIVE tree(root, id) AS (SELECT id, id FROM "{table}" '
        f"WHERE id IN ({candidates_sql}) UNION ALL SELECT tree.root, below.id FROM tree "
        f'JOIN "{table}" AS below ON below.parent_id = tree.id) '
        f"SELECT root FROM tree WHERE id IN ({found_sql})"
    )
    return Q(pk__in=RawSQL(sql, (*candidates_params, *found_params)))


# --------------------------------------------------------------------------- hits


@dataclass
class Hit:
    """One display row that matched: where it is, what it is, how well it matched (``rank``:
    higher is better) and a ``snippet`` of its text with the matched words at ``highlights``
    (``[start, end)`` offsets in Unicode code points)."""

    display_message_id: int
    conversation_id: uuid.UUID
    conversation_title: str
    seq: int
    role: str
    content_type: str
    created_at: datetime
    rank: float
    snippet: str = ""
    highlights: list[tuple[int, int]] = field(default_factory=list)


_HIT_FIELDS: Final = (
    "id",
    "conversation_id",
    "seq",
    "message_type",
    "content_type",
    "created_at",
    "rank",
)


def search_hits(
    conversations: QuerySet[Conversation],
    query: SearchQuery,
    *,
    after: tuple[float, int] | None = None,
    limit: int = 50,
) -> tuple[list[Hit], bool]:
    """The display rows of ``conversations`` that match ``query``, best first (``rank`` desc,
    then ``id`` desc: newer first among equals), after the keyset ``after`` (``(rank, id)`` of
    the last hit served). Returns at most ``limit`` hits with their snippets, and whether more
    follow. Two queries: the page (ranked in the database), then the snippets of its rows."""
    backend = backend_of(conversations)
    if backend == "sqlite":
        query = query.without_stop_words()
    if query.empty:
        return [], False
    titles: dict[int, str] = {}
    if backend == "sqlite":
        fetched = _sqlite_page(conversations, query, after, limit + 1, titles)
    else:
        rows = DisplayMessage.objects.using(conversations.db).filter(
            conversation__in=conversations.order_by().values("pk")
        )
        if backend == "postgresql":
            rows = rows.filter(_pg_matches(query)).annotate(rank=_pg_rank(query))
        else:
            rows = (
                rows.annotate(search_text=Cast("content", output_field=TextField()))
                .filter(_fallback_matches(query, "search_text"))
                .annotate(rank=Value(0.0, output_field=FloatField()))
            )
        if after is not None:
            rank, pk = after
            rows = rows.filter(Q(rank__lt=rank) | Q(rank=rank, pk__lt=pk))
        fetched = list(rows.order_by("-rank", "-pk").values_list(*_HIT_FIELDS)[: limit + 1])
    hits = [
        Hit(
            display_message_id=pk,
            conversation_id=conversation_id,
            conversation_title=titles.get(pk, ""),
            seq=seq,
            role=role,
            content_type=content_type,
            created_at=created_at,
            rank=float(rank or 0.0),
        )
        for pk, conversation_id, seq, role, content_type, created_at, rank in fetched[:limit]
    ]
    # Titles and snippets are read for the page only, after the ranking.
    _add_snippets(hits, query, backend, conversations.db, need_titles=not titles)
    return hits, len(fetched) > limit


def _sqlite_page(
    conversations: QuerySet[Conversation],
    query: SearchQuery,
    after: tuple[float, int] | None,
    count: int,
    titles: dict[int, str],
) -> list[tuple[Any, ...]]:
    """The next ``count`` hits on SQLite, as ``_HIT_FIELDS`` tuples (their conversations' titles
    go to ``titles``, by display row id), in one statement. The rank
    is the number of places the query matched in the row (FTS5's bm25 depends on the whole
    index, so a rank from it would move while rows are written and break keyset pages); it is
    computed for the rows in scope only, in the same pass over the index."""
    try:
        scope, scope_params = conversations.order_by().values("pk").query.sql_with_params()
    except EmptyResultSet:
        return []
    fts = search_index.DISPLAY_FTS
    display, conversation = DisplayMessage._meta.db_table, Conversation._meta.db_table
    rank = f"CAST(length(highlight({fts}, 0, char(1), '')) - length({fts}.body) AS REAL)"
    matched = (
        f"SELECT d.id AS id, d.conversation_id AS cid, c.title AS title, d.seq AS seq, "
        f"d.message_type AS role, d.content_type AS ct, d.created_at AS created, {rank} AS rank "
        f'FROM {fts} JOIN "{display}" AS d ON d.id = {fts}.rowid '
        f'JOIN "{conversation}" AS c ON c.id = d.conversation_id '
        f"WHERE {fts} MATCH %s AND d.conversation_id IN ({scope})"
    )
    params: list[Any] = [query.fts5(), *scope_params]
    where = ""
    if after is not None:
        where = "WHERE rank < %s OR (rank = %s AND id < %s)"
        params += [after[0], after[0], after[1]]
    with connections[conversations.db].cursor() as cursor:
        cursor.execute(
            f"SELECT * FROM ({matched}) {where} ORDER BY rank DESC, id DESC LIMIT %s",
            [*params, count],
        )
        rows = cursor.fetchall()
    titles.update((pk, title) for pk, _cid, title, *_rest in rows)
    return [
        (pk, uuid.UUID(str(cid)), seq, role, ct, _sqlite_time(created), rank)
        for pk, cid, _title, seq, role, ct, created, rank in rows
    ]


def _sqlite_time(value: Any) -> datetime:
    """A datetime column as SQLite returns it to a raw cursor (UTC text), as an aware datetime."""
    if isinstance(value, datetime):
        parsed: datetime | None = value
    else:
        parsed = parse_datetime(str(value))
    if parsed is None:
        raise ValueError(f"not a datetime: {value!r}")
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _add_snippets(
    hits: list[Hit], query: SearchQuery, backend: str, using: str, *, need_titles: bool
) -> None:
    """Each hit's snippet and highlights, and its conversation's title when ``need_titles``:
    one query for the page. The database makes the snippet on the text as indexed (CJK runs as
    bigrams, word breaks as spaces); :func:`_restore` puts it back on the text itself."""
    ids = [hit.display_message_id for hit in hits]
    if not ids:
        return
    marked: dict[int, str] = {}
    titles: dict[int, str] = {}
    display, conversation = DisplayMessage._meta.db_table, Conversation._meta.db_table
    if backend == "postgresql":
        options = (
            f'StartSel="{_START}", StopSel="{_STOP}", MaxWords=24, MinWords=10, ShortWord=0, '
            f'MaxFragments=2, FragmentDelimiter="{_CUT}"'
        )
        text = search_index.pg_text_sql("d.content_type", "d.content", "d.metadata")
        for character in _PUA:  # the marks cannot be confused with the text's own characters
            text = f"replace({text}, '{character}', '')"
        with connections[using].cursor() as cursor:
            cursor.execute(
                f"SELECT id, original, ts_headline('{search_index.PG_CONFIG}'::regconfig, "
                f"{search_index.pg_index_text_sql('original')}, websearch_to_tsquery("
                f"'{search_index.PG_CONFIG}'::regconfig, %s), %s), title "
                f'FROM (SELECT d.id, c.title, {text} AS original FROM "{display}" AS d '
                f'JOIN "{conversation}" AS c ON c.id = d.conversation_id '
                f"WHERE d.id = ANY(%s)) AS t",
                [query.websearch(), options, ids],
            )
            for pk, original, headline, title in cursor.fetchall():
                marked[pk] = _restore(headline, original, words=True).replace(_CUT, _FRAGMENTS)
                titles[pk] = title
    elif backend == "sqlite":
        table = search_index.DISPLAY_FTS
        placeholders = ", ".join(["%s"] * len(ids))
        with connections[using].cursor() as cursor:
            cursor.execute(
                f"SELECT {table}.rowid, snippet({table}, 0, %s, %s, %s, 24), "
                f"{search_index.sqlite_text_sql('d')} FROM {table} "
                f'JOIN "{display}" AS d ON d.id = {table}.rowid '
                f"WHERE {table} MATCH %s AND {table}.rowid IN ({placeholders})",
                [_START, _STOP, _CUT, query.fts5(), *ids],
            )
            for pk, snippet, original in cursor.fetchall():
                marked[pk] = _restore(snippet, original, words=False).replace(_CUT, "…")
    else:
        rows = DisplayMessage.objects.using(using).filter(pk__in=ids)
        fields = ("pk", "content_type", "content", "metadata", "conversation__title")
        for pk, content_type, content, metadata, title in rows.values_list(*fields):
            text = search_index.searchable_text(content_type, content, metadata)
            marked[pk] = _fallback_snippet(text, query.wanted())
            titles[pk] = title
    for hit in hits:
        hit.snippet, hit.highlights = unmark(marked.get(hit.display_message_id) or "")
        if need_titles:
            hit.conversation_title = titles.get(hit.display_message_id, "")


def _restore(marked: str, original: str, *, words: bool) -> str:
    """A snippet the database made of ``original`` as indexed (``bigrams.expand``, then, when
    ``words``, ``search_index.break_words``), with marks around matched words and :data:`_CUT`
    between fragments or where the text was cut, put back on the characters of ``original``:
    each fragment is the stretch of ``original`` it stands for, with its marks where their
    words are (the two bigrams of "東京都" mark one stretch). A fragment that cannot be placed
    is kept as it came."""
    expansion = bigrams.Expansion.of(original)
    indexed = search_index.break_words(expansion.text) if words else expansion.text
    restored: list[str] = []
    start = 0
    for fragment in marked.split(_CUT):
        plain = fragment.replace(_START, "").replace(_STOP, "")
        found = indexed.find(plain, start) if plain else -1
        if found < 0:
            restored.append(fragment)
            continue
        start = found + len(plain)
        low, high = expansion.span(found, start)
        spans: list[list[int]] = []
        offset = found
        opened: int | None = None
        for piece in _MARKS.split(fragment):
            if piece == _START:
                opened = offset
            elif piece == _STOP:
                if opened is not None and offset > opened:
                    lo, hi = expansion.span(opened, offset)
                    if spans and lo <= spans[-1][1]:
                        spans[-1][1] = max(spans[-1][1], hi)
                    elif hi > lo:
                        spans.append([lo, hi])
                opened = None
            else:
                offset += len(piece)
        pieces: list[str] = []
        at = low
        for lo, hi in spans:
            pieces += [original[at:lo], _START, original[lo:hi], _STOP]
            at = hi
        pieces.append(original[at:high])
        restored.append("".join(pieces))
    return _CUT.join(restored)


def _fallback_snippet(text: str, wanted: Iterable[str]) -> str:
    """Context around the first place a wanted word or phrase occurs (any case), marked."""
    lowered = text.lower()
    found = [(lowered.find(w.lower()), w) for w in wanted if w and w.lower() in lowered]
    if not found:
        return text[: _CONTEXT_CHARS * 2]
    start, word = min(found)
    end = start + len(word)
    left = max(0, start - _CONTEXT_CHARS)
    right = min(len(text), end + _CONTEXT_CHARS)
    prefix = "…" if left else ""
    suffix = "…" if right < len(text) else ""
    clean = (text[left:start] + _START + text[start:end] + _STOP + text[end:right]).replace(
        "\n", " "
    )
    return prefix + clean + suffix


_WHITESPACE = re.compile(r"\s+")
_NO_PUA: Final = str.maketrans("", "", _PUA)


def unmark(marked: str) -> tuple[str, list[tuple[int, int]]]:
    """A snippet with its marks taken out: the plain text (at most :data:`SNIPPET_CHARS`
    characters, whitespace runs as one space) and the ``[start, end)`` offsets of the marked
    parts, in code points."""
    pieces: list[str] = []
    highlights: list[tuple[int, int]] = []
    length = 0
    opened: int | None = None
    for piece in _MARKS.split(_WHITESPACE.sub(" ", marked)):
        if piece == _START:
            opened = length if opened is None else opened
        elif piece == _STOP:
            if opened is not None and length > opened:
                highlights.append((opened, length))
            opened = None
        else:
            piece = piece.translate(_NO_PUA)
            if length == 0:
                piece = piece.lstrip(" ")
            elif pieces[-1].endswith(" ") and piece.startswith(
                " "
            ):  # a space either side of a mark
                piece = piece[1:]
            piece = piece[: SNIPPET_CHARS - length]
            if piece:
                pieces.append(piece)
                length += len(piece)
    if opened is not None and length > opened:
        highlights.append((opened, length))
    plain = "".join(pieces).rstrip()
    return plain, [(start, min(end, len(plain))) for start, end in highlights if start < len(plain)]
