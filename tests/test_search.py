"""Full-text search (docs/search.md): the query language, the index kept by every write path on
SQLite and PostgreSQL, ``GET search/`` and ``GET conversations/?q=``, scope, bad queries, pages."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pytest_django import Settings
from rest_framework.test import APIClient

from murmur_conversations import bigrams, checks, search_index, services
from murmur_conversations.exceptions import InvalidSearch
from murmur_conversations.models import Conversation, DisplayMessage
from murmur_conversations.search import (
    MAX_QUERY_CHARS,
    SNIPPET_CHARS,
    Term,
    matching_conversations,
    parse_query,
    search_hits,
    unmark,
)
from murmur_conversations.services import plan
from tests.api_helpers import API, Params, token_client
from tests.helpers import MakeConversation, MakeUser
from tests.import_helpers import JSON

# ----------------------------------------------------------------------------- the language


@pytest.mark.parametrize(
    ("raw", "websearch", "fts5"),
    [
        ("tokenizers", "tokenizers", '("tokenizers")'),
        ("Tab  handling", "Tab handling", '("Tab" AND "handling")'),
        ('"rewrote the  tokenizer"', '"rewrote the tokenizer"', '("rewrote the tokenizer")'),
        ("tokenizer -tabs", "tokenizer -tabs", '(("tokenizer") NOT "tabs")'),
        ('lexer -"the parser"', 'lexer -"the parser"', '(("lexer") NOT "the parser")'),
        ("lexer or newline", "lexer or newline", '("lexer") OR ("newline")'),
        ("a b OR c", "a b or c", '("a" AND "b") OR ("c")'),
        ('"unbalanced quote', '"unbalanced quote"', '("unbalanced quote")'),
        ("or tokenizer or", "tokenizer", '("tokenizer")'),
        ("-tabs", "", ""),  # only exclusions: nothing to find
        ("dog or -cat", "dog", '("dog")'),
        ("--- !!! *", "", ""),
        ('NEAR(a b) x* ^y body:z AND "', 'NEAR(a b) x* ^y "body z" AND', None),
        ("src/lexer.py", '"src lexer py"', '("src/lexer.py")'),
        ("foo-bar", '"foo bar"', '("foo-bar")'),
    ],
)
def test_queries_read_like_websearch_to_tsquery(raw: str, websearch: str, fts5: str | None) -> None:
    query = parse_query(raw)
    assert query.websearch() == websearch
    if fts5 is not None:
        assert query.fts5() == fts5
    assert query.empty == (websearch == "")


def test_fts5_text_quotes_every_term() -> None:
    query = parse_query("NEAR(a b) x* ^y body:z AND")
    assert query.groups == (
        (Term("NEAR(a"), Term("b)"), Term("x*"), Term("^y"), Term("body:z"), Term("AND")),
    )
    assert query.fts5() == '("NEAR(a" AND "b)" AND "x*" AND "^y" AND "body:z" AND "AND")'


@pytest.mark.parametrize("raw", ["", "   \n", "x" * (MAX_QUERY_CHARS + 1), "a\x00b", 42, None])
def test_unreadable_queries_are_refused(raw: object) -> None:
    with pytest.raises(InvalidSearch):
        parse_query(raw)


def test_lone_surrogates_are_repaired() -> None:
    assert parse_query("tok\ud800en").websearch() == "tok\ufffden"


def _fts5_probe() -> sqlite3.Connection:
    probe = sqlite3.connect(":memory:")
    probe.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61')")
    probe.execute("INSERT INTO t(body) VALUES ('a tokenizer broke on tabs')")
    return probe


_PROBE = _fts5_probe()
_query_text = st.lists(
    st.text(
        # UTF-8 leaves out exactly the lone surrogates (category Cs), which no client can send.
        alphabet=st.characters(codec="utf-8", exclude_characters="\x00"),
        max_size=4,
    )
    | st.sampled_from(['"', "-", " ", "or", "OR", "*", "(", ")", ":", "^", "NEAR", "AND", "NOT"]),
    max_size=15,
).map("".join)


@given(_query_text)
@settings(max_examples=400, deadline=None)
def test_any_query_is_valid_fts5(raw: str) -> None:
    try:
        query = parse_query(raw)
    except InvalidSearch:
        assert not raw.strip()
        return
    if not query.empty:
        _PROBE.execute("SELECT rowid FROM t WHERE t MATCH ?", (query.fts5(),)).fetchall()


def test_unmark_gives_plain_text_and_code_point_offsets() -> None:
    text, highlights = unmark(
        "an \ue000\ue001😀tokenizer\ue001\ue000  and\n\n \ue000\ue001tabs\ue001\ue000"
    )
    assert text == "an 😀tokenizer and tabs"
    assert [text[s:e] for s, e in highlights] == ["😀tokenizer", "tabs"]


@given(
    st.lists(
        st.sampled_from(["\ue000\ue001", "\ue001\ue000", " ", "\n", "word", "é😀", "\ue000"])
        | st.text(max_size=8),
        max_size=80,
    ).map("".join)
)
@settings(max_examples=300, deadline=None)
def test_unmark_always_gives_offsets_inside_plain_text(marked: str) -> None:
    text, highlights = unmark(marked)
    assert len(text) <= SNIPPET_CHARS and "\ue000" not in text and "\ue001" not in text
    assert text == text.strip(" ")
    ends = [0]
    for start, end in highlights:
        assert ends[-1] <= start < end <= len(text)
        ends.append(end)


# ----------------------------------------------------------------------------- fixtures

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(make_user: MakeUser) -> User:
    return make_user()


@pytest.fixture
def client(owner: User) -> APIClient:
    return token_client(owner)


@pytest.fixture
def talk(make_conversation: MakeConversation, owner: User) -> Conversation:
    """A conversation with every kind of searchable row."""
    conversation = make_conversation(owner=owner, title="Flaky parser")
    services.save_message(
        conversation=conversation,
        message={"role": "user", "content": "The tokenizers keep failing on tabs"},
    )
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "maybe the parser drops a trailing newline"},
                {"type": "text", "text": "I rewrote the tokenizer; the lexer is fine."},
                {
                    "type": "tool_call",
                    "id": "call_1",
                    "name": "grep_source",
                    "input": {"pattern": "quuxwidget", "paths": ["src", "lib"], "id": "zork"},
                },
                {"type": "image", "url": "https://example.invalid/unicornpicture.png"},
            ],
        },
    )
    services.save_message(
        conversation=conversation,
        message={
            "role": "tool",
            "tool_call_id": "call_1",
            "content": [{"type": "text", "text": "found it in src/gadget_registry.py"}],
        },
    )
    services.save_synthetic_message(
        conversation=conversation,
        message_type="system",
        content_type="error",
        content={"text": "The sandbox ran out of memory", "error_type": "oom"},
    )
    return conversation


def hits(client: APIClient, q: str, **params: str | int) -> dict[str, JSON]:
    """The body of ``GET search/?q=`` with ``params``, asserting it is a 200."""
    response = client.get(f"{API}search/", {"q": q, **params})
    assert response.status_code == 200, response.content
    body: dict[str, JSON] = response.json()
    return body


def kinds(body: dict[str, JSON]) -> list[tuple[str, str]]:
    """(role, content_type) of each hit of a search body, in order."""
    return [(hit["role"], hit["content_type"]) for hit in body["results"]]


# ----------------------------------------------------------------------------- finding


def test_words_match_with_stemming(client: APIClient, talk: Conversation) -> None:
    for q in ("tokenizers", "tokenizer", "TOKENIZER"):
        assert sorted(kinds(hits(client, q))) == [("assistant", "text"), ("user", "text")]
    assert kinds(hits(client, "memory")) == [("system", "error")]
    assert kinds(hits(client, "trailing newline")) == [("assistant", "thinking")]


def test_stop_words_find_nothing_alone_on_every_database(
    client: APIClient, talk: Conversation
) -> None:
    assert hits(client, "the")["results"] == []
    assert hits(client, "the -tabs")["results"] == []
    assert kinds(hits(client, "the lexer")) == [("assistant", "text")]
    assert kinds(hits(client, '"the lexer"')) == [("assistant", "text")]


def test_phrases_exclusions_and_alternatives(client: APIClient, talk: Conversation) -> None:
    assert kinds(hits(client, '"rewrote the tokenizer"')) == [("assistant", "text")]
    assert kinds(hits(client, '"tokenizer rewrote"')) == []
    assert kinds(hits(client, "tokenizer -tabs")) == [("assistant", "text")]
    assert kinds(hits(client, 'tokenizer -"failing on tabs"')) == [("assistant", "text")]
    assert sorted(kinds(hits(client, "lexer or newline"))) == [
        ("assistant", "text"),
        ("assistant", "thinking"),
    ]


def test_tool_names_arguments_and_results_are_searched(
    client: APIClient, talk: Conversation
) -> None:
    assert kinds(hits(client, "quuxwidget")) == [("assistant", "tool_call")]
    assert sorted(kinds(hits(client, "grep_source"))) == [
        ("assistant", "tool_call"),
        ("tool", "tool_result"),
    ]
    # Words inside paths, file names and addresses, on every database.
    for q in ("gadget_registry", "gadget", "registry.py", "src/gadget_registry.py"):
        [hit] = hits(client, q)["results"]
        assert (hit["role"], hit["content_type"]) == ("tool", "tool_result")
        assert "src/gadget_registry.py" in hit["snippet"]
    for unsearched in ("zork", "unicornpicture", "call_1"):  # ids, images
        assert hits(client, unsearched)["results"] == []


def test_a_hit_says_where_it_is(client: APIClient, talk: Conversation) -> None:
    body = hits(client, "lexer")
    row = DisplayMessage.objects.get(
        conversation=talk, content_type="text", message_type="assistant"
    )
    [hit] = body["results"]
    assert hit == {
        "conversation_id": str(talk.pk),
        "conversation_title": "Flaky parser",
        "seq": row.seq,
        "display_message_id": str(row.pk),
        "role": "assistant",
        "content_type": "text",
        "snippet": hit["snippet"],
        "highlights": hit["highlights"],
        "created_at": hit["created_at"],
    }
    assert "rewrote the tokenizer; the lexer is fine" in hit["snippet"]
    assert [hit["snippet"][s:e] for s, e in hit["highlights"]] == ["lexer"]
    assert body["next_cursor"] is None


def test_highlights_point_at_the_matched_words(client: APIClient, talk: Conversation) -> None:
    for hit in hits(client, "tokenizers")["results"]:
        marked = [hit["snippet"][s:e].lower() for s, e in hit["highlights"]]
        assert marked and all(word.startswith("tokenizer") for word in marked)


def test_long_text_is_found_and_snippets_stay_short(client: APIClient, talk: Conversation) -> None:
    text = "filler words here " * 2000 + "the needle phrase is here " + "more words " * 2000
    services.save_message(conversation=talk, message={"role": "assistant", "content": text})
    [hit] = hits(client, '"needle phrase"')["results"]
    assert len(hit["snippet"]) <= 300
    assert [hit["snippet"][s:e] for s, e in hit["highlights"]][:1] in (
        ["needle"],
        ["needle phrase"],
    )


def test_only_a_prefix_of_tool_output_is_indexed(client: APIClient, talk: Conversation) -> None:
    output = "x " * search_index.TOOL_CHARS + "beyondtheprefix"
    services.save_message(
        conversation=talk, message={"role": "tool", "tool_call_id": "nope", "content": output}
    )
    assert hits(client, "beyondtheprefix")["results"] == []
    services.save_message(
        conversation=talk,
        message={"role": "tool", "tool_call_id": "nope", "content": "withinprefix " + output},
    )
    assert kinds(hits(client, "withinprefix")) == [("tool", "tool_result")]


# ----------------------------------------------------------------------------- scope


@pytest.fixture
def foreign(make_user: MakeUser, make_conversation: MakeConversation) -> Conversation:
    conversation = make_conversation(owner=make_user(), title="zanzibar plans")
    services.save_message(
        conversation=conversation, message={"role": "user", "content": "the zanzibar secret"}
    )
    return conversation


def test_another_users_words_are_never_hits_nor_hinted(
    client: APIClient, talk: Conversation, foreign: Conversation
) -> None:
    found_foreign = client.get(f"{API}search/", {"q": "zanzibar"})
    found_nothing = client.get(f"{API}search/", {"q": "qwertyuiopasdf"})
    assert found_foreign.status_code == found_nothing.status_code == 200
    assert found_foreign.content == found_nothing.content == b'{"results":[],"next_cursor":null}'
    listed = client.get(f"{API}conversations/", {"q": "zanzibar"}).json()
    assert listed == {"results": [], "next_cursor": None, "total": 0}


def test_the_scope_setting_decides_what_is_searched(
    client: APIClient, talk: Conversation, foreign: Conversation, settings: Settings
) -> None:
    settings.MURMUR_CONVERSATIONS = {"SCOPE": "tests.test_api.everyone_scope"}
    assert [h["conversation_title"] for h in hits(client, "zanzibar")["results"]] == [
        "zanzibar plans"
    ]


def test_anonymous_and_inactive_users_find_nothing(talk: Conversation, owner: User) -> None:
    from rest_framework.test import APIClient

    assert APIClient().get(f"{API}search/", {"q": "tokenizer"}).status_code == 401
    scope = Conversation.objects.owned_by(None)
    assert search_hits(scope, parse_query("tokenizer")) == ([], False)


# ----------------------------------------------------------------------------- bad queries


@pytest.mark.parametrize("q", [None, "", "   ", "x" * (MAX_QUERY_CHARS + 1), "a\x00b"])
def test_bad_q_is_a_400_with_a_clear_code(
    client: APIClient, talk: Conversation, q: str | None
) -> None:
    params: Params = {} if q is None else {"q": q}
    response = client.get(f"{API}search/", params)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_query" and body["detail"]


@pytest.mark.parametrize("q", ['"unbalanced', "-tabs", "!!!", "the", 'a" or -"b'])
def test_odd_q_is_a_page(client: APIClient, talk: Conversation, q: str) -> None:
    assert client.get(f"{API}search/", {"q": q}).status_code == 200


def test_the_conversation_list_reads_q_the_same_way(client: APIClient, talk: Conversation) -> None:
    assert client.get(f"{API}conversations/", {"q": "a\x00b"}).json()["code"] == "invalid_query"
    everything = client.get(f"{API}conversations/").json()
    assert client.get(f"{API}conversations/", {"q": ""}).json() == everything


@given(st.text(max_size=80))
@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_no_q_answers_500(client: APIClient, talk: Conversation, q: str) -> None:
    for route in ("search/", "conversations/"):
        assert client.get(f"{API}{route}", {"q": q}).status_code in (200, 400)


# ----------------------------------------------------------------------------- pages


def walk(
    client: APIClient, q: str, limit: int, during: Callable[[], object] | None = None
) -> list[int]:
    """Every hit of ``q``, page by page; ``during()`` runs after the first page."""
    seen: list[int] = []
    cursor: str | None = None
    while True:
        body = hits(client, q, limit=limit, **({"cursor": cursor} if cursor else {}))
        seen += [int(hit["display_message_id"]) for hit in body["results"]]
        if during is not None:
            during()
            during = None
        cursor = body["next_cursor"]
        if cursor is None:
            return seen


def test_pages_walk_every_hit_once_best_first(
    client: APIClient, owner: User, make_conversation: MakeConversation
) -> None:
    conversation = make_conversation(owner=owner, title="pages")
    texts = ["apple"] * 5 + ["apple apple apple", "apple apple", "apple banana apple apple"]
    for text in texts:
        services.save_message(conversation=conversation, message={"role": "user", "content": text})
    rows = dict(
        DisplayMessage.objects.filter(conversation=conversation).values_list("content__text", "pk")
    )
    singles = sorted(
        DisplayMessage.objects.filter(conversation=conversation, content__text="apple").values_list(
            "pk", flat=True
        ),
        reverse=True,
    )
    best_first = [int(h["display_message_id"]) for h in hits(client, "apple", limit=50)["results"]]
    assert best_first[-5:] == singles  # equal ranks: newest first
    assert set(best_first[:3]) == {
        rows["apple apple apple"],
        rows["apple apple"],
        rows["apple banana apple apple"],
    }
    assert walk(client, "apple", 2) == best_first

    def append() -> None:
        services.save_message(
            conversation=conversation, message={"role": "user", "content": "apple late"}
        )

    during = walk(client, "apple", 2, during=append)
    assert len(during) == len(set(during)) and set(best_first) <= set(during)


def test_cursor_is_bound_to_caller_and_query(
    client: APIClient, owner: User, make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    conversation = make_conversation(owner=owner)
    for _ in range(3):
        services.save_message(
            conversation=conversation, message={"role": "user", "content": "pear"}
        )
    cursor = hits(client, "pear", limit=1)["next_cursor"]
    assert cursor
    for who, q in ((client, "pears"), (token_client(make_user()), "pear")):
        response = who.get(f"{API}search/", {"q": q, "cursor": cursor})
        assert response.status_code == 400 and response.json()["code"] == "invalid_cursor"
    assert client.get(f"{API}search/", {"q": "pear", "cursor": "forged"}).status_code == 400


def test_a_page_costs_the_same_queries_whatever_its_size(
    client: APIClient, owner: User, make_conversation: MakeConversation
) -> None:
    conversation = make_conversation(owner=owner)
    for index in range(30):
        services.save_message(
            conversation=conversation, message={"role": "user", "content": f"plum {index}"}
        )
    counts: list[int] = []
    for limit in (2, 30):
        with CaptureQueriesContext(connection) as queries:
            assert len(hits(client, "plum", limit=limit)["results"]) == limit
        counts.append(len(queries))
    assert counts[0] == counts[1] <= 3  # authentication, the page, its snippets


def test_conversation_list_filters_in_its_usual_order(
    client: APIClient, owner: User, make_conversation: MakeConversation, talk: Conversation
) -> None:
    other = make_conversation(owner=owner, title="Tokenizer rewrite")  # a title match
    make_conversation(owner=owner, title="unrelated")
    first: Params = {"q": "tokenizers", "limit": 1}
    body = client.get(f"{API}conversations/", first).json()
    assert [row["id"] for row in body["results"]] == [str(other.pk)]
    assert body["total"] == 2
    rest = client.get(f"{API}conversations/", {**first, "cursor": body["next_cursor"]}).json()
    assert [row["id"] for row in rest["results"]] == [str(talk.pk)]
    assert rest["next_cursor"] is None
    wrong = client.get(f"{API}conversations/", {"cursor": body["next_cursor"]})
    assert wrong.json()["code"] == "invalid_cursor"  # the cursor is bound to q


# ----------------------------------------------------------------------------- kept live


def test_every_write_is_found_by_the_next_search(
    client: APIClient, owner: User, make_conversation: MakeConversation
) -> None:
    conversation = make_conversation(owner=owner, title="live")
    services.save_message(conversation=conversation, message={"role": "user", "content": "alpha"})
    assert len(hits(client, "alpha")["results"]) == 1
    services.save_messages(
        conversation=conversation,
        messages=[{"role": "user", "content": "bravo"}, {"role": "assistant", "content": "bravo"}],
    )
    assert len(hits(client, "bravo")["results"]) == 2
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "c9", "name": "deploy", "input": {}}],
        },
    )
    services.update_tool_status(
        conversation=conversation,
        status="executing",
        tool_info={"call_id": "c9", "display_text": "shipping charlie"},
    )
    assert kinds(hits(client, "charlie")) == [("assistant", "tool_call")]
    services.set_status(conversation=conversation, status="paused", pending_ask={"question": "?"})
    services.answer_pending_ask(conversation=conversation, answer="delta please")
    assert kinds(hits(client, "delta")) == [("user", "text")]
    services.update_conversation(conversation=conversation, title="echo foxtrot")
    listed = client.get(f"{API}conversations/", {"q": "foxtrot"}).json()["results"]
    assert [row["id"] for row in listed] == [str(conversation.pk)]
    assert client.get(f"{API}conversations/", {"q": "live"}).json()["total"] == 0
    services.delete_conversation(conversation=conversation)
    assert hits(client, "alpha")["results"] == []


@pytest.mark.django_db(transaction=True)
def test_the_single_statement_append_keeps_the_index(
    client: APIClient, owner: User, make_conversation: MakeConversation
) -> None:
    conversation = make_conversation(owner=owner)
    batch = [{"role": "user", "content": "golf hotel"}, {"role": "assistant", "content": "india"}]
    from murmur_conversations.messages import normalize_message

    normalized = [normalize_message(m, max_content_bytes=10**6) for m in batch]
    assert plan.plannable(normalized, False)
    services.save_messages(conversation=conversation, messages=batch)
    assert len(hits(client, "hotel or india")["results"]) == 2
    assert_index_matches_rows()


def assert_index_matches_rows() -> None:
    """The index holds exactly each display row's searchable text (search_index docstring)."""
    rows = {
        row.pk: search_index.searchable_text(row.content_type, row.content, row.metadata)
        for row in DisplayMessage.objects.all()
    }
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(f"SELECT rowid, body FROM {search_index.DISPLAY_FTS}")
            indexed = dict(cursor.fetchall())
            assert indexed == {pk: bigrams.expand(text) for pk, text in rows.items() if text}
        else:
            cursor.execute(
                "SELECT id, "
                + search_index.pg_text_sql("content_type", "content", "metadata")
                + " FROM murmur_conversations_displaymessage"
            )
            indexed = dict(cursor.fetchall())
            # jsonb orders object keys its own way: compare the words, not their order.
            assert {pk: sorted(t.split()) for pk, t in indexed.items()} == {
                pk: sorted(t.split()) for pk, t in rows.items()
            }


def test_index_matches_rows_after_every_kind_of_write(talk: Conversation) -> None:
    services.save_message(conversation=talk, message={"role": "user", "content": "数据库索引 ok"})
    services.update_tool_status(
        conversation=talk, status="completed", tool_info={"call_id": "call_1", "result": "ok"}
    )
    services.cancel_run(conversation=talk)
    assert_index_matches_rows()


@pytest.mark.skipif("sqlite" not in search_index.backend_for("sqlite"), reason="no FTS5")
def test_ensure_puts_back_triggers_a_table_rebuild_dropped(
    client: APIClient, talk: Conversation
) -> None:
    if connection.vendor != "sqlite":
        assert search_index.ensure(connection) is False
        return
    assert search_index.ensure(connection) is False
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER murmur_display_fts_ai")
    services.save_message(conversation=talk, message={"role": "user", "content": "kilo lima"})
    assert hits(client, "kilo")["results"] == []  # written while the trigger was gone
    assert search_index.ensure(connection) is True
    assert len(hits(client, "kilo")["results"]) == 1
    assert_index_matches_rows()


def test_the_migration_drops_and_rebuilds_the_index(client: APIClient, talk: Conversation) -> None:
    """What migration 0003 does forwards and backwards (inside this test's transaction)."""
    if connection.vendor == "postgresql":  # the rows' foreign keys are checked at commit
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    search_index.uninstall(connection)
    search_index.install(connection)
    assert_index_matches_rows()
    assert sorted(kinds(hits(client, "tokenizers"))) == [("assistant", "text"), ("user", "text")]
    assert client.get(f"{API}conversations/", {"q": "flaky"}).json()["total"] == 1


# ----------------------------------------------------------------------------- other databases


def test_other_databases_fall_back_to_icontains(
    client: APIClient, talk: Conversation, foreign: Conversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_index, "backend_for", lambda vendor: "fallback")
    body = hits(client, "tokenizer")
    assert sorted(kinds(body)) == [("assistant", "text"), ("user", "text")]
    assert all(h["snippet"] for h in body["results"])
    assert hits(client, "zanzibar")["results"] == []  # still scoped
    assert kinds(hits(client, "tokenizer -tabs")) == [("assistant", "text")]
    scoped = Conversation.objects.filter(owner=talk.owner)
    assert list(matching_conversations(scoped, parse_query("flaky"))) == [talk]


def test_the_system_check_warns_about_databases_without_an_index() -> None:
    warned = checks.search_warnings(
        {
            "pg": {"ENGINE": "django.db.backends.postgresql"},
            "gis": {"ENGINE": "django.contrib.gis.db.backends.postgis"},
            "lite": {"ENGINE": "django.db.backends.sqlite3"},
            "my": {"ENGINE": "django.db.backends.mysql"},
        }
    )
    assert [(m.id, "'my'" in m.msg) for m in warned] == [("murmur_conversations.W004", True)]


# ----------------------------------------------------------------------------- the routes agree

AGREEMENT_QUERIES = (
    "tokenizer",
    "lexer",
    "--dry-run",
    "数据库",
    '"rewrote the tokenizer"',
    "tokenizer -tabs",
    "lexer or grandchildword",
    "childword",
    "grandchildword",
    "nowhere",
)


@pytest.fixture
def family(owner: User, make_conversation: MakeConversation) -> dict[str, Conversation]:
    """Top-level conversations with subagents two levels deep, neutral titles."""
    top = make_conversation(owner=owner, title="first")
    child = make_conversation(owner=owner, title="second", parent=top)
    grandchild = make_conversation(owner=owner, title="third", parent=child)
    other = make_conversation(owner=owner, title="fourth")
    lonely = make_conversation(owner=owner, title="fifth")
    texts = {
        top: ["I rewrote the tokenizer", "the tokenizer broke on tabs"],
        child: ["childword: the lexer is fine", "try --dry-run first"],
        grandchild: ["grandchildword 数据库索引"],
        other: ["the lexer again", "no dry run here"],
        lonely: ["nothing to see"],
    }
    for conversation, lines in texts.items():
        for line in lines:
            say(conversation, line)
    return {"top": top, "child": child, "grandchild": grandchild, "other": other}


def say(conversation: Conversation, text: str) -> None:
    services.save_message(conversation=conversation, message={"role": "user", "content": text})


def _listed(client: APIClient, q: str, **params: str) -> set[str]:
    query: Params = {"q": q, "limit": 100, **params}
    response = client.get(f"{API}conversations/", query)
    assert response.status_code == 200, response.content
    return {row["id"] for row in response.json()["results"]}


@pytest.mark.parametrize("q", AGREEMENT_QUERIES)
def test_the_list_and_search_agree_on_every_query(
    client: APIClient, family: dict[str, Conversation], q: str
) -> None:
    """``conversations/?q=`` lists a conversation exactly when ``search/`` finds a row in it or
    below it (titles here match no query): the same parser, the same matching."""
    parents = {
        str(pk): None if parent is None else str(parent)
        for pk, parent in Conversation.objects.values_list("pk", "parent_id")
    }

    def line(pk: str | None) -> list[str]:  # the conversation and those above it
        chain = []
        while pk is not None:
            chain.append(pk)
            pk = parents[pk]
        return chain

    found = {hit["conversation_id"] for hit in hits(client, q, limit=100)["results"]}
    lines = [line(each) for each in found]
    assert _listed(client, q) == {chain[-1] for chain in lines}
    top = str(family["top"].pk)
    below_top = {chain[-2] for chain in lines if len(chain) > 1 and chain[-1] == top}
    assert _listed(client, q, parent=top) == below_top
