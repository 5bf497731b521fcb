"""The full-text index, kept by the database itself (docs/search.md "How the index is kept").

Every write path (the general one, PostgreSQL's single-statement append, bulk imports, raw SQL)
keeps the index in the same transaction as the rows (with no Python in between but SQLite's
bigram function):

- **PostgreSQL**: a stored generated ``tsvector`` column ``search_vector`` on the display table,
  ``to_tsvector('english', <searchable text>)``, the searchable text written inline
  (:func:`pg_text_sql`: built-in calls only, so no per-row function call), with CJK runs
  expanded into bigrams and :data:`WORD_BREAKS` turned into spaces first
  (:func:`pg_index_text_sql`), with a GIN index; titles in a table of their own
  (:data:`TITLE_VECTORS`: the same ``to_tsvector`` of each ``title``, with a GIN index), kept
  by triggers on the conversation table (:func:`pg_title_statements`).
- **SQLite**: an FTS5 table (``porter unicode61`` tokenizer) holding each display row's
  searchable text (CJK runs expanded into bigrams by the function :func:`register_sqlite` gives
  every connection) under the row's id, kept by triggers on the display table; titles in a
  second FTS5 table over ``murmur_title_doc`` (external content), kept by triggers on the
  conversation table.
- **Other databases**: nothing; reads fall back to ``icontains`` (system check ``W004``).

What a display row contributes (its *searchable text*), the same on every database:

- ``text``, ``thinking``, ``notification``, ``error``: ``content.text``, its first
  :data:`TEXT_CHARS` characters;
- ``tool_call`` (the card): the tool name, ``metadata.display_text``, and the first
  :data:`TOOL_CHARS` characters of the strings inside ``content.arguments``;
- ``tool_result``: the tool name and the first :data:`TOOL_CHARS` characters of the strings
  inside ``content.content``;
- anything else (images, files, structured data, todo lists): nothing.

"The strings inside" a JSON value: the value itself if it is a string, else every string in its
arrays and objects except the values of members named in :data:`SKIPPED_KEYS` (block types, ids,
signatures, base64 data).

:func:`install` and :func:`uninstall` are what migrations ``0006_search``, ``0013_search`` and
``0015_schema`` run (``0016_schema`` runs :func:`reinstall_titles`); :func:`ensure`
(run after every ``migrate``) puts back SQLite triggers that a later migration's table rebuild
dropped, and re-indexes when it had to.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Any, Final, Literal

from murmur_conversations import bigrams, jsonenc

#: Characters of a text, thinking, notice or error row that are indexed.
TEXT_CHARS: Final = 65_536
#: Characters of a tool call's arguments, or of a tool result, that are indexed.
TOOL_CHARS: Final = 16_384
#: PostgreSQL's text search configuration (stemming and stop words).
PG_CONFIG: Final = "english"

_OLD_FUNCTION: Final = "murmur_search_text"
VECTOR_COLUMN: Final = "search_vector"
DISPLAY_INDEX: Final = "murmur_display_search_idx"
#: The GIN expression index on the conversation's title that migrations 0006 to 0015 made.
_OLD_TITLE_INDEX: Final = "murmur_conv_title_search_idx"
TITLE_VECTORS: Final = "murmur_title_search"
TITLE_INDEX: Final = "murmur_title_search_idx"
_TITLE_KEEP: Final = "murmur_title_search_keep"
_TITLE_EMPTY: Final = "murmur_title_search_empty"
_PG_TRIGGERS: Final = (
    "murmur_title_search_ai",
    "murmur_title_search_au",
    "murmur_title_search_ad",
    "murmur_title_search_at",
)
DISPLAY_FTS: Final = "murmur_display_fts"
TITLE_DOC: Final = "murmur_title_doc"
TITLE_FTS: Final = "murmur_title_fts"
_SQLITE_TRIGGERS: Final = (
    "murmur_display_fts_ai",
    "murmur_display_fts_au",
    "murmur_display_fts_ad",
    "murmur_title_fts_ai",
    "murmur_title_fts_au",
    "murmur_title_fts_ad",
)
_TOKENIZER: Final = "porter unicode61 remove_diacritics 0"
_EXPAND: Final = bigrams.SQLITE_FUNCTION
_TEXT_TYPES: Final = "('text', 'thinking', 'notification', 'error')"

Backend = Literal["postgresql", "sqlite", "fallback"]


def _tables() -> tuple[str, str]:
    from murmur_conversations.models import Conversation, DisplayMessage

    return DisplayMessage._meta.db_table, Conversation._meta.db_table


@functools.cache
def sqlite_has_fts5() -> bool:
    """Whether this Python's SQLite library has FTS5 (no database connection needed)."""
    try:
        with sqlite3.connect(":memory:") as probe:
            probe.execute("CREATE VIRTUAL TABLE probe USING fts5(body)")
    except sqlite3.Error:
        return False
    return True


def backend_for(vendor: str) -> Backend:
    """Which index a database of ``vendor`` (Django's ``connection.vendor``) has."""
    if vendor == "postgresql":
        return "postgresql"
    if vendor == "sqlite" and sqlite_has_fts5():
        return "sqlite"
    return "fallback"


# --------------------------------------------------------------------------- PostgreSQL


#: Characters PostgreSQL's parser reads as part of a path, host, e-mail address, URL, version
#: number or hyphenated word ("src/lexer.py" and "foo-bar-baz" are one token each): in the
#: index and in queries they separate words, as on SQLite, so a word inside a path, an address
#: or a flag ("bar-baz" in "--foo-bar-baz") is found.
WORD_BREAKS: Final = "/\\.@:?=&#~-"
_BREAKS_TABLE: Final = str.maketrans(WORD_BREAKS, " " * len(WORD_BREAKS))


def break_words(text: str) -> str:
    """``text`` with :data:`WORD_BREAKS` replaced by spaces (same length, offsets unchanged)."""
    return text.translate(_BREAKS_TABLE)


def pg_words_sql(text: str) -> str:
    """:func:`break_words` in SQL, over the text expression ``text``: nested ``replace()`` calls,
    as ``translate()`` costs about as much as ``to_tsvector`` itself on PostgreSQL 15."""
    for character in WORD_BREAKS:
        text = f"replace({text}, '{character}', ' ')"
    return text


def pg_index_text_sql(text: str) -> str:
    """The text expression ``text`` as the index reads it: CJK runs as bigrams
    (``bigrams.pg_expand_sql``), then :data:`WORD_BREAKS` as spaces."""
    return pg_words_sql(bigrams.pg_expand_sql(text))


def index_words(text: str) -> str:
    """:func:`pg_index_text_sql` in Python: the words PostgreSQL's index reads in ``text``."""
    return break_words(bigrams.expand(text))


def pg_vector_sql(text: str) -> str:
    """The ``tsvector`` of the text expression ``text``, as the index computes it."""
    return f"to_tsvector('{PG_CONFIG}'::regconfig, {pg_index_text_sql(text)})"


#: Members whose string values are not searched inside arguments and results: block types, ids,
#: signatures and inline data (base64), which are not words anyone looks for.
SKIPPED_KEYS: Final = (
    "type",
    "id",
    "data",
    "signature",
    "media_type",
    "mime_type",
    "tool_use_id",
    "tool_call_id",
    "call_id",
)


#: The jsonpaths whose string results, in this order, are "the strings inside" a jsonb value:
#: the value itself, the strings in its arrays, the strings of its members but
#: :data:`SKIPPED_KEYS` (``$.**`` walks every level).
PG_STRING_PATHS: Final = (
    'strict $ ? (@.type() == "string")',
    'strict $.** ? (@.type() == "array")[*] ? (@.type() == "string")',
    'strict $.** ? (@.type() == "object").keyvalue() ? '
    f'(@.value.type() == "string" && !(@.key like_regex "^({"|".join(SKIPPED_KEYS)})$")).value',
)
#: How PostgreSQL's jsonb output writes a character inside a string (``escape_json``): a
#: short escape for these, ``\u00xx`` (lower-case hex) for every other control character.
_PG_SHORT_ESCAPES: Final = {'"': '"', "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


#: Characters of a jsonb array's text read before unescaping: an escape is at most 6 characters
#: (``\u001f``) for one, so the first ``6 * TOOL_CHARS`` characters (and a partial escape after
#: them) hold every character the cut keeps, and no pass reads the rest of a long text.
_PG_ESCAPED_CHARS: Final = 6 * TOOL_CHARS + 8


def _pg_unescape_sql(text: str, *, controls: bool) -> str:
    """The JSON text ``text`` (the inside of jsonb string output) as the string it spells. A
    backslash that is itself escaped is set apart first as ``\\x`` (after it, a backslash only
    starts an escape, and ``\\x`` is none), then the escapes are read, then ``\\x`` back.
    ``controls``: also read the ``\\u00xx`` escapes (26 more passes over the text); without
    them the result is exact only for a text that has none."""
    text = f"replace({text}, '\\\\', '\\x')"
    for letter, character in _PG_SHORT_ESCAPES.items():
        text = f"replace({text}, '\\{letter}', {_pg_char(character)})"
    if controls:
        for code in range(1, 32):
            if chr(code) not in _PG_SHORT_ESCAPES.values():
                text = f"replace({text}, '\\u{code:04x}', chr({code}))"
    return f"replace({text}, '\\x', '\\')"


def _pg_char(character: str) -> str:
    return "'\"'" if character == '"' else f"chr({ord(character)})"


def _pg_strings(value: str) -> str:
    """The string values inside the jsonb ``value`` (:data:`PG_STRING_PATHS`), joined by
    spaces, then cut to :data:`TOOL_CHARS`: one expression, no subquery (so it can be a generated
    column's, and costs no per-row function call). The strings are gathered into one jsonb array,
    whose text ``["a", "b"]`` loses its brackets and all but its first
    :data:`_PG_ESCAPED_CHARS` characters, turns each ``", "`` (which inside a string is always
    written ``\\", \\"``) into a space, and is unescaped; the ``\\u00xx`` escapes of control
    characters only when the text of ``value`` has one (the same escapes: else they are 26
    passes over every text for characters it hardly ever holds)."""
    gathered = " || ".join(f"jsonb_path_query_array({value}, '{path}')" for path in PG_STRING_PATHS)
    inside = f"left(left(substr(({gathered})::text, 3), {_PG_ESCAPED_CHARS}), -2)"
    joined = f"replace({inside}, '\", \"', ' ')"
    return (
        f"left(coalesce(CASE WHEN strpos(({value})::text, '\\u00') > 0 "
        f"THEN {_pg_unescape_sql(joined, controls=True)} "
        f"ELSE {_pg_unescape_sql(joined, controls=False)} END, ''), {TOOL_CHARS})"
    )


def pg_text_sql(content_type: str, content: str, metadata: str) -> str:
    """The searchable text of a display row, as one PostgreSQL expression over these column
    expressions: no subquery and no function of ours, so it can be the generated column's
    expression and costs nothing but its built-in calls (the SQL function that computed it until
    migration 0015 had a subquery, so PostgreSQL never inlined it and planned its body again in
    every statement that inserted a display row)."""
    return f"""CASE
  WHEN {content_type} IN {_TEXT_TYPES} THEN left(coalesce({content} ->> 'text', ''), {TEXT_CHARS})
  WHEN {content_type} = 'tool_call' THEN
    coalesce({content} ->> 'name', '') || ' ' || coalesce({metadata} ->> 'display_text', '')
    || ' ' || {_pg_strings(f"{content} -> 'arguments'")}
  WHEN {content_type} = 'tool_result' THEN
    coalesce({content} ->> 'name', '') || ' ' || {_pg_strings(f"{content} -> 'content'")}
  ELSE ''
END"""


def pg_statements() -> list[str]:
    """The PostgreSQL objects: the generated column and its GIN index, then the titles'
    (:func:`pg_title_statements`)."""
    display, _conversation = _tables()
    return [
        f"""ALTER TABLE "{display}" ADD COLUMN "{VECTOR_COLUMN}" tsvector GENERATED ALWAYS AS
    ({pg_vector_sql(pg_text_sql('"content_type"', '"content"', '"metadata"'))}) STORED""",
        f'CREATE INDEX "{DISPLAY_INDEX}" ON "{display}" USING gin ("{VECTOR_COLUMN}")',
        *pg_title_statements(),
    ]


def pg_title_statements() -> list[str]:
    """The titles' index on PostgreSQL, off the conversation row: a table of their
    ``tsvector`` (:data:`TITLE_VECTORS`, one row per conversation) with a GIN index, kept by
    triggers on the conversation table (insert, a changed title, delete, truncate), then filled
    from the stored conversations. An index on the conversation row itself would get entries on
    every write that moves ``saved_at``, which PostgreSQL cannot update in place while the
    sidebar's index holds it; an update that leaves the title alone fires no trigger."""
    _display, conversation = _tables()
    vector, title = pg_vector_sql("NEW.title"), '"title"'
    return [
        f"""CREATE TABLE "{TITLE_VECTORS}" (conversation_id uuid PRIMARY KEY,
    vector tsvector NOT NULL)""",
        f'CREATE INDEX "{TITLE_INDEX}" ON "{TITLE_VECTORS}" USING gin (vector)',
        f"""CREATE FUNCTION {_TITLE_KEEP}() RETURNS trigger LANGUAGE plpgsql AS $murmur$
BEGIN
  IF TG_OP = 'DELETE' THEN
    DELETE FROM "{TITLE_VECTORS}" WHERE conversation_id = OLD.id;
  ELSE
    INSERT INTO "{TITLE_VECTORS}" (conversation_id, vector) VALUES (NEW.id, {vector})
    ON CONFLICT (conversation_id) DO UPDATE SET vector = EXCLUDED.vector;
  END IF;
  RETURN NULL;
END
$murmur$""",
        f"""CREATE FUNCTION {_TITLE_EMPTY}() RETURNS trigger LANGUAGE plpgsql AS $murmur$
BEGIN
  TRUNCATE "{TITLE_VECTORS}";
  RETURN NULL;
END
$murmur$""",
        f"""CREATE TRIGGER murmur_title_search_ai AFTER INSERT ON "{conversation}"
    FOR EACH ROW EXECUTE FUNCTION {_TITLE_KEEP}()""",
        f"""CREATE TRIGGER murmur_title_search_au AFTER UPDATE OF title ON "{conversation}"
    FOR EACH ROW WHEN (OLD.title IS DISTINCT FROM NEW.title)
    EXECUTE FUNCTION {_TITLE_KEEP}()""",
        f"""CREATE TRIGGER murmur_title_search_ad AFTER DELETE ON "{conversation}"
    FOR EACH ROW EXECUTE FUNCTION {_TITLE_KEEP}()""",
        f"""CREATE TRIGGER murmur_title_search_at AFTER TRUNCATE ON "{conversation}"
    FOR EACH STATEMENT EXECUTE FUNCTION {_TITLE_EMPTY}()""",
        f'INSERT INTO "{TITLE_VECTORS}" (conversation_id, vector) '
        f'SELECT id, {pg_vector_sql(title)} FROM "{conversation}"',
    ]


def pg_title_drop_statements() -> list[str]:
    """Undo :func:`pg_title_statements` (and drop the title index of migrations before 0016)."""
    _display, conversation = _tables()
    return [
        *(f'DROP TRIGGER IF EXISTS {name} ON "{conversation}"' for name in _PG_TRIGGERS),
        f"DROP FUNCTION IF EXISTS {_TITLE_KEEP}()",
        f"DROP FUNCTION IF EXISTS {_TITLE_EMPTY}()",
        f'DROP TABLE IF EXISTS "{TITLE_VECTORS}"',
        f'DROP INDEX IF EXISTS "{_OLD_TITLE_INDEX}"',
    ]


def pg_drop_statements() -> list[str]:
    """Undo :func:`pg_statements`."""
    display, _conversation = _tables()
    return [
        *pg_title_drop_statements(),
        f'DROP INDEX IF EXISTS "{DISPLAY_INDEX}"',
        f'ALTER TABLE "{display}" DROP COLUMN IF EXISTS "{VECTOR_COLUMN}"',
        # The searchable-text function of migrations 0006 to 0014, if it is still there.
        f"DROP FUNCTION IF EXISTS {_OLD_FUNCTION}(varchar, jsonb, jsonb)",
    ]


def reinstall_titles(connection: Any) -> None:
    """On PostgreSQL, build the titles' index again as :func:`pg_title_statements` defines it
    (migration ``0016_schema``); nothing elsewhere (SQLite's title index is its own)."""
    if backend_for(connection.vendor) != "postgresql":
        return
    with connection.cursor() as cursor:
        for statement in [*pg_title_drop_statements(), *pg_title_statements()]:
            cursor.execute(statement)


# --------------------------------------------------------------------------- SQLite


def register_sqlite(connection: sqlite3.Connection) -> None:
    """Give the ``sqlite3`` connection ``connection`` the SQL function the index's triggers call
    (``bigrams.SQLITE_FUNCTION``: CJK runs as bigrams). Every Django connection gets it when it
    opens (``apps``); a connection of its own that writes display rows or titles needs this
    call first, or SQLite refuses the write ("no such function"), writing nothing."""
    connection.create_function(
        bigrams.SQLITE_FUNCTION, 1, bigrams.sqlite_expand, deterministic=True
    )


def _sqlite_strings(row: str, path: str) -> str:
    skipped = ", ".join(f"'{key}'" for key in SKIPPED_KEYS)
    return (
        f"substr(coalesce((SELECT group_concat(value, ' ') FROM json_tree({row}.content, "
        f"'{path}') WHERE type = 'text' AND (parent IS NULL OR typeof(key) <> 'text' "
        f"OR key NOT IN ({skipped}))), ''), 1, {TOOL_CHARS})"
    )


def sqlite_text_sql(row: str) -> str:
    """The searchable text of a display row, as an SQLite expression over the columns of
    ``row`` (a table name or alias, or ``new``/``old`` in a trigger)."""
    return f"""CASE
  WHEN {row}.content_type IN {_TEXT_TYPES} THEN
    substr(coalesce(json_extract({row}.content, '$.text'), ''), 1, {TEXT_CHARS})
  WHEN {row}.content_type = 'tool_call' THEN
    coalesce(json_extract({row}.content, '$.name'), '') || ' '
    || coalesce(json_extract({row}.metadata, '$.display_text'), '') || ' '
    || {_sqlite_strings(row, "$.arguments")}
  WHEN {row}.content_type = 'tool_result' THEN
    coalesce(json_extract({row}.content, '$.name'), '') || ' '
    || {_sqlite_strings(row, "$.content")}
  ELSE ''
END"""


def _sqlite_objects() -> list[str]:
    # The display index keeps its own copy of each row's searchable text (a regular FTS5 table,
    # rowid = the display row's id), not an external-content table over a view of the display
    # table: such a view makes Django's table rebuild on SQLite (any later AlterField) fail.
    return [
        # columnsize=0: no per-row token counts, which only bm25 reads (ranks here do not).
        f"""CREATE VIRTUAL TABLE IF NOT EXISTS {DISPLAY_FTS} USING fts5(body,
    tokenize='{_TOKENIZER}', columnsize=0)""",
        f"""CREATE TABLE IF NOT EXISTS {TITLE_DOC} (id INTEGER PRIMARY KEY,
    conversation_id char(32) NOT NULL UNIQUE, title TEXT NOT NULL)""",
        f"""CREATE VIRTUAL TABLE IF NOT EXISTS {TITLE_FTS} USING fts5(title,
    content='{TITLE_DOC}', content_rowid='id', tokenize='{_TOKENIZER}')""",
    ]


def _sqlite_triggers() -> list[str]:
    display, conversation = _tables()
    add = (
        f"INSERT INTO {DISPLAY_FTS}(rowid, body) SELECT new.id, {_EXPAND}(body) FROM "
        f"(SELECT {sqlite_text_sql('new')} AS body) WHERE body <> '';"
    )
    remove = f"DELETE FROM {DISPLAY_FTS} WHERE rowid = old.id;"
    title_remove = (
        f"INSERT INTO {TITLE_FTS}({TITLE_FTS}, rowid, title) SELECT 'delete', id, title "
        f"FROM {TITLE_DOC} WHERE conversation_id = old.id;"
    )
    title_add = (
        f"INSERT INTO {TITLE_FTS}(rowid, title) SELECT id, title FROM {TITLE_DOC} "
        f"WHERE conversation_id = new.id;"
    )
    return [
        f"""CREATE TRIGGER IF NOT EXISTS murmur_display_fts_ai AFTER INSERT ON "{display}"
    BEGIN {add} END""",
        f"""CREATE TRIGGER IF NOT EXISTS murmur_display_fts_au AFTER UPDATE OF content_type,
    content, metadata ON "{display}" BEGIN {remove} {add} END""",
        f"""CREATE TRIGGER IF NOT EXISTS murmur_display_fts_ad AFTER DELETE ON "{display}"
    BEGIN {remove} END""",
        f"""CREATE TRIGGER IF NOT EXISTS murmur_title_fts_ai AFTER INSERT ON "{conversation}"
    BEGIN INSERT INTO {TITLE_DOC}(conversation_id, title) VALUES (new.id, {_EXPAND}(new.title));
    {title_add} END""",
        f"""CREATE TRIGGER IF NOT EXISTS murmur_title_fts_au AFTER UPDATE OF title
    ON "{conversation}" WHEN old.title IS NOT new.title BEGIN {title_remove}
    UPDATE {TITLE_DOC} SET title = {_EXPAND}(new.title) WHERE conversation_id = old.id;
    {title_add} END""",
        f"""CREATE TRIGGER IF NOT EXISTS murmur_title_fts_ad AFTER DELETE ON "{conversation}"
    BEGIN {title_remove} DELETE FROM {TITLE_DOC} WHERE conversation_id = old.id; END""",
    ]


def _sqlite_rebuild() -> list[str]:
    """Index every existing row again (after creating the objects, or repairing triggers)."""
    display, conversation = _tables()
    return [
        f"DELETE FROM {DISPLAY_FTS}",
        f"""INSERT INTO {DISPLAY_FTS}(rowid, body) SELECT id, {_EXPAND}(body) FROM
    (SELECT d.id AS id, {sqlite_text_sql("d")} AS body FROM "{display}" AS d) WHERE body <> ''""",
        f"DELETE FROM {TITLE_DOC}",
        f"INSERT INTO {TITLE_DOC}(conversation_id, title) "
        f'SELECT id, {_EXPAND}(title) FROM "{conversation}"',
        f"INSERT INTO {TITLE_FTS}({TITLE_FTS}) VALUES ('rebuild')",
    ]


def sqlite_statements() -> list[str]:
    """The SQLite objects (FTS5 tables, title documents, triggers), then a full index."""
    return [*_sqlite_objects(), *_sqlite_triggers(), *_sqlite_rebuild()]


def sqlite_drop_statements() -> list[str]:
    """Undo :func:`sqlite_statements`."""
    return [
        *(f"DROP TRIGGER IF EXISTS {name}" for name in _SQLITE_TRIGGERS),
        f"DROP TABLE IF EXISTS {TITLE_FTS}",
        f"DROP TABLE IF EXISTS {TITLE_DOC}",
        f"DROP TABLE IF EXISTS {DISPLAY_FTS}",
    ]


def sqlite_forget_statements() -> list[str]:
    """What takes deleted rows' words out of the SQLite index: FTS5 keeps the terms of a deleted
    row in its segments (with a delete marker) until they are merged, so ``optimize`` merges
    every segment of both tables into one, which drops them. It rewrites the whole index: its
    cost grows with the index (docs/security.md "What deletion removes")."""
    return [
        f"INSERT INTO {table}({table}) VALUES ('optimize')" for table in (DISPLAY_FTS, TITLE_FTS)
    ]


def forget_deleted(connection: Any) -> None:
    """After rows were deleted, in the same transaction: on SQLite, run
    :func:`sqlite_forget_statements`, so no segment keeps a deleted row's words; nothing elsewhere
    (on PostgreSQL the GIN entries and the row versions are the server's to ``VACUUM``)."""
    if backend_for(connection.vendor) != "sqlite":
        return
    with connection.cursor() as cursor:
        for statement in sqlite_forget_statements():
            cursor.execute(statement)


# --------------------------------------------------------------------------- install


def install(connection: Any) -> None:
    """Create the index of ``connection``'s database (migration ``0006_search``); nothing for a
    database without one (a system check warns)."""
    backend = backend_for(connection.vendor)
    if backend == "fallback":
        return
    statements = pg_statements() if backend == "postgresql" else sqlite_statements()
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def uninstall(connection: Any) -> None:
    """Drop what :func:`install` created."""
    backend = backend_for(connection.vendor)
    if backend == "fallback":
        return
    statements = pg_drop_statements() if backend == "postgresql" else sqlite_drop_statements()
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def ensure(connection: Any) -> bool:
    """On SQLite, once the index exists: put back any of its triggers that are missing (Django
    rebuilds a table to alter it on SQLite, which drops the table's triggers) and index every row
    again. Returns whether it repaired anything. Nothing to do on other databases."""
    if backend_for(connection.vendor) != "sqlite":
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT type, name FROM sqlite_master WHERE name IN (%s, %s, %s)",
            [DISPLAY_FTS, TITLE_DOC, TITLE_FTS],
        )
        present = {name for _type, name in cursor.fetchall()}
        if DISPLAY_FTS not in present:
            return False  # migration 0003 is not applied
        placeholders = ", ".join(["%s"] * len(_SQLITE_TRIGGERS))
        cursor.execute(
            f"SELECT name FROM sqlite_master WHERE type = 'trigger' AND name IN ({placeholders})",
            list(_SQLITE_TRIGGERS),
        )
        triggers = {row[0] for row in cursor.fetchall()}
        if triggers == set(_SQLITE_TRIGGERS) and len(present) == 3:
            return False
        for statement in [*_sqlite_objects(), *_sqlite_triggers(), *_sqlite_rebuild()]:
            cursor.execute(statement)
    return True


# --------------------------------------------------------------------------- the same, in Python


def _strings(value: Any, out: list[str], key: str | None = None) -> None:
    if isinstance(value, str):
        if key not in SKIPPED_KEYS:
            out.append(value)
    elif isinstance(value, dict):
        for name, item in value.items():
            _strings(item, out, name)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def _json_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return jsonenc.dumps(value)


def searchable_text(content_type: str, content: Any, metadata: Any) -> str:
    """The searchable text of a display row, computed in Python as the database computes it
    (the ``icontains`` fallback and its snippets read this). String values inside arguments and
    results are taken in document order."""
    content = content if isinstance(content, dict) else {}
    metadata = metadata if isinstance(metadata, dict) else {}
    if content_type in ("text", "thinking", "notification", "error"):
        return _json_text(content.get("text"))[:TEXT_CHARS]
    if content_type in ("tool_call", "tool_result"):
        strings: list[str] = []
        _strings(content.get("arguments" if content_type == "tool_call" else "content"), strings)
        parts = [_json_text(content.get("name"))]
        if content_type == "tool_call":
            parts.append(_json_text(metadata.get("display_text")))
        parts.append(" ".join(strings)[:TOOL_CHARS])
        return " ".join(parts)
    return ""
