"""The one JSON encoder (``murmur_conversations.jsonenc``): compact, non-ASCII kept, non-finite
numbers refused, sizes counted on the text that is stored and sent, canonical JSON byte-stable."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from murmur_conversations import jsonenc
from murmur_conversations.exceptions import InvalidContent
from murmur_conversations.validation import json_size
from tests.import_helpers import JSON

finite_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(finite_json)
def test_dumps_is_compact_non_ascii_json_that_reads_back(value: JSON) -> None:
    text = jsonenc.dumps(value)
    assert text == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert jsonenc.loads(text) == value
    assert jsonenc.size(value) == len(text.encode("utf-8", "surrogatepass")) == json_size(value)


@given(finite_json)
def test_canonical_is_the_documented_formula(value: JSON) -> None:
    """docs/formats.md: the ids of imported messages hash exactly this text."""
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert jsonenc.canonical(value) == expected


def test_non_ascii_is_written_as_itself_and_counted_in_utf8_bytes() -> None:
    assert jsonenc.dumps({"t": "中é"}) == '{"t":"中é"}'
    assert jsonenc.size("中") == 5  # two quotes and three bytes
    assert jsonenc.size({"a": [1, 2]}) == len('{"a":[1,2]}')


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_refused(number: float) -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        jsonenc.dumps({"x": [number]})
    with pytest.raises(InvalidContent):
        json_size({"x": number})
    # imported input that is only reported or kept verbatim is written as Python spells it
    assert jsonenc.dumps(number, allow_non_finite=True) == json.dumps(number)
    assert jsonenc.canonical([number]) == json.dumps([number])  # ids never change


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}'])
def test_loads_refuses_the_non_finite_literals(text: str) -> None:
    with pytest.raises(ValueError, match="is not JSON"):
        jsonenc.loads(text)


def test_loads_reads_bytes_and_reports_bad_text() -> None:
    assert jsonenc.loads('{"t":"中"}'.encode()) == {"t": "中"}
    with pytest.raises(json.JSONDecodeError):
        jsonenc.loads("{")
    with pytest.raises(RecursionError):
        jsonenc.loads("[" * 100_000)
