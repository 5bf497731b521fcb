"""Chinese, Japanese and Korean text as the search index reads it: overlapping bigrams.

These scripts are written without spaces between words, so a word tokenizer reads a whole run
("東京都庁に行きました") as one word and finds nothing inside it. As CJK analysers do (Lucene's
``CJKBigramFilter``), every run of :data:`CJK_RANGES` characters is indexed as its overlapping
pairs of characters, set apart from the text around it by spaces: "東京都庁" becomes
" 東京 京都 都庁 ", a run of one character stays itself. A word of two or more characters is then
the phrase of its own bigrams ("京都" is the word 京都; "東京都" the phrase "東京 京都"), found
wherever it stands in a run. The same :func:`expand` is applied to the indexed text and to every
query term (``search.SearchQuery``): one definition, in Python, with its PostgreSQL twin
:func:`pg_expand_sql` (the generated column cannot call Python; ``tests/test_bigrams.py``
checks that the two agree). Text without CJK characters is unchanged.

:class:`Expansion` maps a stretch of the expanded text back to the characters of the text it was
made from, so snippets made by the database on the expanded text are shown on the original.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

#: The code points read as CJK (inclusive ranges): Hangul Jamo, the iteration and closing marks
#: 々〆〇, Hiragana, Katakana (without the middle dot ・), Hangul compatibility Jamo, Katakana
#: extensions, CJK Unified Ideographs with extension A, Hangul Jamo extensions and syllables,
#: CJK compatibility ideographs, halfwidth Katakana and Hangul, and the supplementary
#: ideographic planes (extensions B to H). Punctuation (、。「」) is not CJK: it separates runs.
CJK_RANGES: Final = (
    (0x1100, 0x11FF),
    (0x3005, 0x3007),
    (0x3041, 0x309F),
    (0x30A1, 0x30FA),
    (0x30FC, 0x30FF),
    (0x3131, 0x318E),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xA960, 0xA97F),
    (0xAC00, 0xD7A3),
    (0xD7B0, 0xD7FF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFF9F),
    (0xFFA0, 0xFFDC),
    (0x20000, 0x323AF),
)
#: The name of the SQL function that runs :func:`expand` on SQLite (registered on every
#: connection: ``search_index.register_sqlite``).
SQLITE_FUNCTION: Final = "murmur_cjk_bigrams"


def _class(escape: Callable[[int], str]) -> str:
    """A regular-expression character class of :data:`CJK_RANGES`; ``escape`` formats a code
    point (Python's and PostgreSQL's escapes differ)."""
    return "[" + "".join(f"{escape(lo)}-{escape(hi)}" for lo, hi in CJK_RANGES) + "]"


def _python_escape(point: int) -> str:
    return f"\\U{point:08x}"


_RUN: Final = re.compile(_class(_python_escape) + "+")


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK character (then :func:`expand` changes it)."""
    return not text.isascii() and _RUN.search(text) is not None


def _bigrams(run: str) -> str:
    if len(run) == 1:
        return run
    return " ".join(run[i : i + 2] for i in range(len(run) - 1))


def expand(text: str) -> str:
    """``text`` with each CJK run replaced by its overlapping bigrams between spaces (module
    docstring); ``text`` itself when it holds no CJK character."""
    if not has_cjk(text):
        return text
    return _RUN.sub(lambda match: f" {_bigrams(match.group())} ", text)


def sqlite_expand(value: str | bytes | int | float | None) -> str | bytes | int | float | None:
    """:func:`expand` as an SQLite function: any value that is not text is returned as it is."""
    return expand(value) if isinstance(value, str) else value


def _pg_escape(point: int) -> str:
    return f"\\U{point:08X}" if point > 0xFFFF else f"\\u{point:04X}"


def pg_expand_sql(text: str) -> str:
    """:func:`expand` in PostgreSQL SQL over the text expression ``text``: the runs set apart by
    spaces, then every character with CJK on both sides doubled around a space ("東京都庁" ->
    " 東京 京都 都庁 "). Immutable (usable in a generated column); needs a UTF-8 database."""
    cjk = _class(_pg_escape)
    padded = f"regexp_replace({text}, '({cjk}+)', ' \\1 ', 'g')"
    return f"regexp_replace({padded}, '(?<={cjk})({cjk})(?={cjk})', '\\1 \\1', 'g')"


@dataclass(frozen=True)
class Expansion:
    """:func:`expand` of ``original`` (``text``), with where each of its characters came from:
    character ``i`` of ``text`` stands for ``original[starts[i]:ends[i]]`` (empty for an added
    space). Without CJK, ``text`` is ``original`` and the maps are left out (identity)."""

    original: str
    text: str
    starts: tuple[int, ...] | None = None
    ends: tuple[int, ...] | None = None

    @classmethod
    def of(cls, original: str) -> Expansion:
        """The expansion of ``original``."""
        if not has_cjk(original):
            return cls(original, original)
        pieces: list[str] = []
        starts: list[int] = []
        ends: list[int] = []

        def add(piece: str, start: int, end: int) -> None:
            pieces.append(piece)
            starts.extend([start] * len(piece))
            ends.extend([end] * len(piece))

        position = 0
        for match in _RUN.finditer(original):
            for offset, character in enumerate(original[position : match.start()]):
                add(character, position + offset, position + offset + 1)
            run, at = match.group(), match.start()
            add(" ", at, at)
            if len(run) == 1:
                add(run, at, at + 1)
            for i in range(len(run) - 1):
                if i:
                    add(" ", at + i + 1, at + i + 1)
                add(run[i], at + i, at + i + 1)
                add(run[i + 1], at + i + 1, at + i + 2)
            add(" ", match.end(), match.end())
            position = match.end()
        for offset, character in enumerate(original[position:]):
            add(character, position + offset, position + offset + 1)
        return cls(original, "".join(pieces), tuple(starts), tuple(ends))

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The ``[start, end)`` of ``original`` that ``text[start:end]`` stands for (``end >
        start``); an empty span for added spaces only."""
        if self.starts is None or self.ends is None:
            return start, end
        return min(self.starts[start:end]), max(self.ends[start:end])
