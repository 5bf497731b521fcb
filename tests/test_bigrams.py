"""CJK text as the search index reads it (``bigrams``): the expansion, its map back to the text,
and its twins in the database (PostgreSQL's SQL, SQLite's registered function)."""

from __future__ import annotations

import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from murmur_conversations import bigrams


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("東京都庁", " 東京 京都 都庁 "),
        ("東", " 東 "),
        ("東京", " 東京 "),
        ("Pythonを使う", "Python を使 使う "),
        ("東京、大阪。", " 東京 、 大阪 。"),  # punctuation is not CJK: it ends a run
        ("서울에서 만나요", " 서울 울에 에서   만나 나요 "),
        ("ラーメン", " ラー ーメ メン "),
        ("𠀋𠀌x", " 𠀋𠀌 x"),  # ideographs beyond the BMP
        ("plain text, no change", "plain text, no change"),
        ("", ""),
    ],
)
def test_cjk_runs_become_overlapping_bigrams(text: str, expanded: str) -> None:
    assert bigrams.expand(text) == expanded
    assert bigrams.Expansion.of(text).text == expanded


_CJK = st.sampled_from("東京都庁に行きましたラーメン서울에서만나요数据库索引々𠀋")
_texts = st.lists(
    _CJK | st.sampled_from(" ,.-、。x9") | st.characters(codec="utf-8", exclude_characters="\x00"),
    max_size=30,
).map("".join)


@given(_texts)
@settings(max_examples=200, deadline=None)
def test_the_map_gives_back_the_characters_of_the_text(text: str) -> None:
    expansion = bigrams.Expansion.of(text)
    assert expansion.text == bigrams.expand(text)
    for index, character in enumerate(expansion.text):
        start, end = expansion.span(index, index + 1)
        assert text[start:end] == ("" if start == end else character)
        assert start == end or end == start + 1
    if expansion.text:
        assert expansion.span(0, len(expansion.text)) == (0, len(text))


@pytest.mark.django_db
@given(_texts)
@settings(max_examples=60, deadline=None)
def test_the_database_expands_as_python_does(text: str) -> None:
    """PostgreSQL's SQL twin and SQLite's registered function give :func:`bigrams.expand`."""
    sql = (
        bigrams.pg_expand_sql("%s")
        if connection.vendor == "postgresql"
        else f"{bigrams.SQLITE_FUNCTION}(%s)"
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql}", [text])
        assert cursor.fetchone() == (bigrams.expand(text),)


def test_sqlite_function_passes_other_values_through() -> None:
    assert bigrams.sqlite_expand(None) is None
    assert bigrams.sqlite_expand(b"\xe6\x9d\xb1") == b"\xe6\x9d\xb1"
    assert bigrams.sqlite_expand("東京") == " 東京 "
