"""Search finds what people type (docs/search.md): words inside Chinese, Japanese and Korean
text, flags, paths and snake_case names typed as they appear, with exclusion only where the
language says so; on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from murmur_conversations import services
from murmur_conversations.models import Conversation
from murmur_conversations.search import STOP_WORDS, Term, parse_query, search_hits
from tests.api_helpers import API, token_client
from tests.helpers import MakeConversation, MakeUser
from tests.import_helpers import JSON, run

pytestmark = pytest.mark.django_db
_PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture
def owner(make_user: MakeUser) -> User:
    return make_user()


@pytest.fixture
def client(owner: User) -> APIClient:
    return token_client(owner)


def hits(client: APIClient, q: str) -> list[JSON]:
    """The hits of ``GET search/?q=`` (asserting a 200)."""
    response = client.get(f"{API}search/", {"q": q})
    assert response.status_code == 200, response.content
    results: list[JSON] = response.json()["results"]
    return results


def marked(hit: JSON) -> list[str]:
    """The highlighted words of a hit's snippet."""
    return [hit["snippet"][start:end] for start, end in hit["highlights"]]


def say(conversation: Conversation, text: str) -> None:
    services.save_message(conversation=conversation, message={"role": "user", "content": text})


def found(conversation: Conversation, q: str) -> bool:
    """Whether ``q`` finds a row of ``conversation`` (searched in it alone)."""
    scope = Conversation.objects.filter(pk=conversation.pk)
    return bool(search_hits(scope, parse_query(q), limit=1)[0])


# ----------------------------------------------------------------------------- CJK

CHINESE = "我们今天讨论了数据库索引的设计和查询优化"
JAPANESE = "CLAUDE.mdファイルを最新の状態にアップデートしました。主な更新内容"
KOREAN = "어제 서울에서 회의가 있었습니다"


@pytest.fixture
def cjk(owner: User, make_conversation: MakeConversation) -> Conversation:
    conversation = make_conversation(owner=owner, title="数据库设计")
    for text in (CHINESE, JAPANESE, KOREAN):
        say(conversation, text)
    return conversation


@pytest.mark.parametrize(
    ("q", "text"),
    [
        ("数据库", CHINESE),  # three characters in the middle of a run
        ("索引", CHINESE),  # two
        ("查询优化", CHINESE),  # at the end
        ("最新", JAPANESE),
        ("アップデート", JAPANESE),
        ("ファイル", JAPANESE),  # a katakana word stuck to a file name
        ("CLAUDE.md", JAPANESE),
        ("서울", KOREAN),  # a Korean word with its particle attached (서울에서)
        ("회의", KOREAN),
        ("서울에서 회의", KOREAN),
    ],
)
def test_a_word_inside_cjk_text_is_found_and_highlighted(
    client: APIClient, cjk: Conversation, q: str, text: str
) -> None:
    [hit] = hits(client, q)
    assert hit["snippet"].strip("…") in text
    words = marked(hit)
    assert words and all(word in q for word in words)
    if q.isalpha():  # CJK only: the whole word is one highlight
        assert words == [q]


def test_cjk_words_that_are_not_there_find_nothing(client: APIClient, cjk: Conversation) -> None:
    for q in ("索库", "东京", "서회", "数据库 -索引"):
        assert hits(client, q) == []
    assert [hit["snippet"] for hit in hits(client, "数据库 -东京")] == [CHINESE]


def test_cjk_titles_are_found_by_the_conversation_list(
    client: APIClient, cjk: Conversation, make_conversation: MakeConversation, owner: User
) -> None:
    make_conversation(owner=owner, title="unrelated")
    listed = client.get(f"{API}conversations/", {"q": "设计"}).json()["results"]
    assert [row["id"] for row in listed] == [str(cjk.pk)]


def test_a_real_japanese_session_is_found_mid_sentence(
    corpus: Path, client: APIClient, owner: User
) -> None:
    name = "claude_code_session/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    assert run(corpus / name, "--owner", owner.username)[0] == 0
    found_hits = hits(client, "状態")
    assert found_hits and all("状態" in marked(hit) for hit in found_hits)


_RUN = st.text(
    alphabet="东京都厅数据库索引设计ありがとうカタログ서울에서회의", min_size=2, max_size=12
)


@given(
    before=st.sampled_from(["", "note: ", "ok "]),
    run_text=_RUN,
    after=st.sampled_from(["", " done", "。"]),
    data=st.data(),
)
@_PROPERTY
def test_any_cjk_word_of_two_characters_or_more_is_found(
    make_conversation: MakeConversation, before: str, run_text: str, after: str, data: st.DataObject
) -> None:
    conversation = make_conversation()
    say(conversation, before + run_text + after)
    start = data.draw(st.integers(0, len(run_text) - 2))
    end = data.draw(st.integers(start + 2, len(run_text)))
    word = run_text[start:end]
    scope = Conversation.objects.filter(pk=conversation.pk)
    [hit] = search_hits(scope, parse_query(word))[0]
    assert any(word in hit.snippet[s:e] for s, e in hit.highlights), (run_text, word)


# ----------------------------------------------------------------------------- as typed


@pytest.mark.parametrize(
    ("raw", "groups"),
    [
        ("--dry-run", ((Term("--dry-run"),),)),
        ("wsl --shutdown", ((Term("wsl"), Term("--shutdown")),)),
        ("tokenizer -tabs", ((Term("tokenizer"), Term("tabs", negated=True)),)),
        ('lexer -"the parser"', ((Term("lexer"), Term("the parser", phrase=True, negated=True)),)),
        ("a-b -", ((Term("a-b"),),)),  # a dash inside a word, or alone, is text
        ("x -_y", ((Term("x"), Term("-_y")),)),
        ('say"x"-y', ((Term("say"), Term("x", phrase=True), Term("-y")),)),  # not after a space
        ("-tabs", ()),  # only an exclusion: nothing to find
    ],
)
def test_a_dash_excludes_only_a_term_it_begins(raw: str, groups: tuple[object, ...]) -> None:
    assert parse_query(raw).groups == groups


COMMANDS = (
    "First try it with --dry-run, then run wsl --shutdown and git push --force-with-lease. "
    "Built for x86_64 in src/gadget_registry.py by make_search_index; rm -rf build/ "
    "and see ~/.claude/projects or https://example.com/a?b=c"
)


@pytest.fixture
def commands(owner: User, make_conversation: MakeConversation) -> Conversation:
    conversation = make_conversation(owner=owner, title="shell")
    say(conversation, COMMANDS)
    say(conversation, "the tokenizer broke on tabs")
    say(conversation, "the tokenizer is fine")
    return conversation


@pytest.mark.parametrize(
    "q",
    [
        "--dry-run",
        "wsl --shutdown",
        "--force-with-lease",
        "force-with-lease",
        "with-lease",
        "x86_64",
        "src/gadget_registry.py",
        "gadget_registry",
        "make_search_index",
        "~/.claude/projects",
        ".claude",
        "https://example.com/a?b=c",
        '"-rf"',  # a single-dash flag, quoted (unquoted it is an exclusion: the next test)
    ],
)
def test_flags_paths_and_names_typed_as_they_appear_find_their_message(
    client: APIClient, commands: Conversation, q: str
) -> None:
    [hit] = hits(client, q)
    assert hit["snippet"].strip("…") in COMMANDS
    assert marked(hit)


def test_exclusion_still_works_where_the_docs_say(
    client: APIClient, commands: Conversation
) -> None:
    assert [hit["snippet"] for hit in hits(client, "tokenizer -tabs")] == ["the tokenizer is fine"]
    assert hits(client, "-tabs") == []
    assert hits(client, "build -rf") == []  # "-rf" is an exclusion: quote it to find it
    assert len(hits(client, 'build "-rf"')) == 1


# The property: a message made of words, flags, paths, names, numbers and quotes; a stretch of
# it cut at word boundaries (whole words with any punctuation around them) holding three word
# characters or more, searched as typed, finds the message. Excluded: stretches the language
# reads as holding an exclusion ("-word" after a space), and those whose only words are stop
# words (both documented).
_word = st.text(alphabet="bcdfghjklmnpqrstvwxz", min_size=3, max_size=8)
_token = st.one_of(
    _word,
    st.lists(_word, min_size=1, max_size=3).map(lambda w: "--" + "-".join(w)),
    st.lists(_word, min_size=2, max_size=3).map("_".join),
    st.tuples(_word, _word).map(lambda w: f"src/{w[0]}/{w[1]}.py"),
    st.tuples(_word, _word).map(lambda w: f"~/.{w[0]}/{w[1]}"),
    st.tuples(_word, st.integers(0, 999)).map(lambda w: f"{w[0]}{w[1]}_64"),
    st.tuples(st.integers(0, 99), st.integers(0, 99)).map(lambda n: f"v{n[0]}.{n[1]}.0"),
    _word.map(lambda w: f'"{w}"'),
    _word.map(lambda w: f"{w}@example.com"),
    _word.map(lambda w: f"({w}),"),
    st.sampled_from(["the", "and", "of", "-", "--", "=", "a-b"]),
)


def _cuts(message: str) -> list[tuple[int, int]]:
    """Where a stretch of ``message`` may start and end: at the edges of its whitespace-separated
    parts and at the edges of the words in them (alphanumeric runs)."""
    starts, ends = {0}, {len(message)}
    for index, character in enumerate(message):
        before = message[index - 1] if index else " "
        if character.isalnum() and not before.isalnum():
            starts.add(index)
        if not character.isalnum() and before.isalnum():
            ends.add(index)
        if before.isspace() and not character.isspace():
            starts.add(index)
        if character.isspace() and not before.isspace():
            ends.add(index)
    return [(s, e) for s in sorted(starts) for e in sorted(ends) if e > s]


@given(st.lists(_token, min_size=1, max_size=8).map(" ".join), st.data())
@_PROPERTY
def test_any_stretch_of_a_message_typed_as_it_appears_finds_it(
    make_conversation: MakeConversation, message: str, data: st.DataObject
) -> None:
    conversation = make_conversation()
    say(conversation, message)
    start, end = data.draw(st.sampled_from(_cuts(message)))
    q = message[start:end].strip()
    words = "".join(c if c.isalnum() else " " for c in q).split()
    assume(sum(len(w) for w in words) >= 3)
    assume(any(w.lower() not in STOP_WORDS for w in words))
    query = parse_query(q)
    assume(not any(term.negated for group in query.groups for term in group))
    assert found(conversation, q), (message, q)
