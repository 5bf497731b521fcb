"""Token usage and cost (docs/usage.md): reading every provider's spelling, the counters the write
path keeps on both paths, exact prices, the summary rows and ``GET usage/``."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db.models import Sum
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pytest_django import Settings
from rest_framework.test import APIClient

from murmur_conversations import checks, prices, selectors, services, usage
from murmur_conversations.conf import app_settings
from murmur_conversations.exceptions import InvalidContent
from murmur_conversations.models import Conversation, Message, MessageUsage
from murmur_conversations.services import plan
from murmur_conversations.usage import Usage, read_usage
from tests.api_helpers import API, Params, token_client
from tests.helpers import MakeConversation, MakeUser, assert_counters_match_rows
from tests.import_helpers import JSON

pytestmark = pytest.mark.django_db

# ----------------------------------------------------------------------------- spellings

SPELLINGS = [
    pytest.param(
        {"input_tokens": 7, "output_tokens": 3, "cache_read_tokens": 5, "cache_write_tokens": 2},
        Usage(7, 3, 5, 2, 0, 0),
        id="ours",
    ),
    pytest.param(
        {
            "input_tokens": 4,
            "cache_creation_input_tokens": 1334,
            "cache_read_input_tokens": 11454,
            "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 334},
            "output_tokens": 179,
            "service_tier": "standard",
            "server_tool_use": {"web_search_requests": 0},
        },
        Usage(4, 179, 11454, 1334, 334, 0),
        id="anthropic: cache counted apart from input",
    ),
    pytest.param(
        {
            "prompt_tokens": 1200,
            "completion_tokens": 300,
            "total_tokens": 1500,
            "prompt_tokens_details": {"cached_tokens": 1000, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 120},
        },
        Usage(200, 300, 1000, 0, 0, 120),
        id="openai chat completions: cached inside prompt_tokens",
    ),
    pytest.param(
        {
            "prompt_tokens": 10,
            "completion_tokens": 2,
            "prompt_tokens_details": None,
            "completion_tokens_details": None,
        },
        Usage(10, 2, 0, 0, 0, 0),
        id="openai chat completions: null details",
    ),
    pytest.param(
        {
            "input_tokens": 900,
            "input_tokens_details": {"cached_tokens": 600},
            "output_tokens": 80,
            "output_tokens_details": {"reasoning_tokens": 64},
            "total_tokens": 980,
        },
        Usage(300, 80, 600, 0, 0, 64),
        id="openai responses: cached inside input_tokens",
    ),
    pytest.param(
        {
            "input_tokens": 17102,
            "cached_input_tokens": 3456,
            "output_tokens": 281,
            "reasoning_output_tokens": 141,
            "total_tokens": 17383,
        },
        Usage(13646, 281, 3456, 0, 0, 141),
        id="codex token_count: cached inside input_tokens",
    ),
    pytest.param({"input_tokens": None, "output_tokens": 5}, Usage(0, 5), id="null is absent"),
]


@pytest.mark.parametrize(("given", "expected"), SPELLINGS)
def test_every_spelling_reads_as_uncached_input(given: dict[str, JSON], expected: Usage) -> None:
    assert read_usage(given) == expected


@pytest.mark.parametrize(
    "given", [{}, {"total_tokens": 7772, "tool_uses": 1, "duration_ms": 1593}, {"x": "y"}]
)
def test_usage_without_a_token_count_counts_nothing(given: dict[str, JSON]) -> None:
    assert read_usage(given) is None


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("12 tokens", "'usage' must be an object"),
        ([1, 2], "'usage' must be an object"),
        ({"input_tokens": -1}, "'usage.input_tokens' must be a non-negative integer"),
        ({"input_tokens": 1.5}, "'usage.input_tokens' must be a non-negative integer"),
        ({"output_tokens": True}, "'usage.output_tokens' must be a non-negative integer"),
        ({"output_tokens": "3"}, "'usage.output_tokens' must be a non-negative integer"),
        ({"output_tokens": 2**60}, r"'usage.output_tokens' is 1152921504606846976, above the most"),
        ({"input_tokens": 2**32}, r"above the most one call counts \(4,294,967,295\)"),
        ({"prompt_tokens_details": 3}, "'usage.prompt_tokens_details' must be an object"),
        ({"input_tokens": 5, "cached_input_tokens": 6}, "6 cached input tokens inside 5"),
        (
            {"cache_creation_input_tokens": 5, "cache_creation": {"ephemeral_1h_input_tokens": 6}},
            "6 one-hour cache writes among 5",
        ),
    ],
)
def test_bad_usage_is_a_clear_error(given: JSON, message: str) -> None:
    with pytest.raises(InvalidContent, match=message):
        read_usage(given)


def test_counts_at_the_cap_sum_as_integers_on_the_database(conversation: Conversation) -> None:
    """The largest count a message may carry, summed over messages, stays an exact integer in the
    conversation's counters and its usage by model (SQLite turns an integer sum past 64 bits
    into a float: the cap keeps every record below that)."""
    at_cap = {"input_tokens": usage.MAX_TOKENS, "output_tokens": usage.MAX_TOKENS}
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "assistant", "content": f"a{i}", "model": "m", "usage": at_cap}
            for i in range(3)
        ],
    )
    with pytest.raises(InvalidContent, match="above the most one call counts"):
        services.save_message(
            conversation=conversation,
            message={
                "role": "assistant",
                "content": "b",
                "usage": {"input_tokens": usage.MAX_TOKENS + 1},
            },
        )
    conversation.refresh_from_db()
    assert conversation.input_tokens == 3 * usage.MAX_TOKENS
    assert type(conversation.input_tokens) is int
    assert conversation.usage_by_model["m"]["output_tokens"] == 3 * usage.MAX_TOKENS
    assert conversation.record_length == 3


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "input_tokens",
                    "prompt_tokens",
                    "output_tokens",
                    "completion_tokens",
                    "cache_read_input_tokens",
                    "cached_input_tokens",
                    "cached_tokens",
                    "prompt_tokens_details",
                    "input_tokens_details",
                    "cache_creation",
                    "ephemeral_1h_input_tokens",
                    "cache_creation_input_tokens",
                    "reasoning_tokens",
                    "other",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=12,
)


@given(_json)
@settings(max_examples=300, deadline=None)
def test_any_usage_reads_or_is_refused_clearly(given: JSON) -> None:
    try:
        result = read_usage(given)
    except InvalidContent:
        return
    assert result is None or all(value >= 0 for value in result.as_dict().values())


# ----------------------------------------------------------------------------- prices


SONNET_RATES = prices.Rates(
    Decimal(3), Decimal(15), Decimal("0.30"), Decimal("3.75"), Decimal(6), prices.HOST_PRICES
)


def test_cost_is_exact_to_the_last_digit() -> None:
    tokens = Usage(
        input_tokens=1_234_567,
        output_tokens=98_765,
        cache_read_tokens=3_000_001,
        cache_write_tokens=40_000,
        cache_write_1h_tokens=10_000,
    )
    expected = (
        Decimal(1_234_567) * 3
        + Decimal(98_765) * 15
        + Decimal(3_000_001) * Decimal("0.30")
        + Decimal(30_000) * Decimal("3.75")
        + Decimal(10_000) * 6
    ) / 1_000_000
    assert usage.cost_of(tokens, SONNET_RATES) == expected == Decimal("6.2576763")
    assert usage.decimal_text(expected) == "6.2576763"


REAL_LOG_MODELS = ["claude-sonnet-4-6", "claude-opus-4-7", "gpt-5.3-codex", "gpt-5.5"]


@pytest.mark.parametrize("model", REAL_LOG_MODELS)
def test_models_found_in_real_logs_are_priced_by_the_package(model: str) -> None:
    rates = prices.PriceBook().rates(model)
    assert rates is not None and rates.source == prices.GENAI_PRICES
    assert rates.input > 0 and rates.output > rates.input and rates.cache_read < rates.input


def test_cache_writes_are_priced_by_their_lifetime() -> None:
    """Anthropic bills a one-hour cache write at 2x input and a five-minute one at 1.25x; each
    cached token is billed once, at its own rate, never also as input."""
    rates = prices.PriceBook().rates("claude-sonnet-4-6")
    assert rates is not None
    assert (rates.cache_write, rates.cache_write_1h) == (Decimal("3.75"), Decimal(6))
    message = read_usage(
        {
            "input_tokens": 1000,
            "cache_read_input_tokens": 2000,
            "cache_creation": {"ephemeral_5m_input_tokens": 300, "ephemeral_1h_input_tokens": 100},
            "output_tokens": 10,
        }
    )
    assert message == Usage(1000, 10, 2000, 400, 100, 0)
    # 1000 x 3 + 2000 x 0.30 + 300 x 3.75 + 100 x 6 + 10 x 15, per million
    assert usage.cost_of(message, rates) == Decimal("0.005475")
    openai = read_usage({"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 600}})
    gpt = prices.PriceBook().rates("gpt-5.3-codex")
    assert openai == Usage(400, 0, 600) and gpt is not None
    assert usage.cost_of(openai, gpt) == (400 * gpt.input + 600 * gpt.cache_read) / 1_000_000


def test_long_prompts_are_priced_at_their_tier() -> None:
    book = prices.PriceBook()
    at = datetime(2025, 12, 1, tzinfo=UTC)  # Sonnet 4.5 doubles its input price past 200k
    short = book.rates("claude-sonnet-4-5-20250929", at=at, prompt_tokens=200_000)
    long = book.rates("claude-sonnet-4-5-20250929", at=at, prompt_tokens=200_001)
    assert short is not None and long is not None
    assert (short.input, long.input) == (Decimal(3), Decimal(6))
    cost, source = usage.row_cost(
        "claude-sonnet-4-5", Usage(input_tokens=1, cache_read_tokens=200_000), book, at=at
    )
    assert source == prices.GENAI_PRICES
    assert cost == (6 + 200_000 * Decimal("0.6")) / 1_000_000 * usage.NANOCENTS


def test_dated_names_are_priced_and_placeholders_are_not() -> None:
    book = prices.PriceBook()
    assert book.rates("claude-sonnet-4-5-20250929") == book.rates("claude-sonnet-4-5")
    assert book.rates("gpt-4o-2024-08-06") == book.rates("gpt-4o")
    for placeholder in ("", "<synthetic>", "no-such-model-xyz"):
        assert book.rates(placeholder) is None


def test_the_package_data_is_used_never_a_fetched_one() -> None:
    from genai_prices import data_snapshot

    fetched = data_snapshot.DataSnapshot(providers=[], from_auto_update=True)
    data_snapshot.set_custom_snapshot(fetched)  # what a started UpdatePrices would do
    try:
        prices.bundled_snapshot.cache_clear()
        assert prices.PriceBook().rates("claude-opus-4-7") is not None
    finally:
        data_snapshot.set_custom_snapshot(None)


@settings(max_examples=100, deadline=None)
@given(model=st.text(max_size=255) | st.sampled_from(["gpt-5.5-2026-01-01", "openai/gpt-5.5"]))
def test_any_model_name_has_a_price_or_none_never_an_error(model: str) -> None:
    rates = prices.PriceBook().rates(model)
    assert rates is None or (rates.source == prices.GENAI_PRICES and rates.input >= 0)


def test_prices_setting_overrides_adds_and_removes() -> None:
    book = prices.PriceBook(
        {
            "gpt-4o": None,
            "house-model": {"input": 2, "output": "8.5", "cache_read": "0", "cache_write": "1"},
            "broken": {"input": 1.5},
        }
    )
    assert book.rates("gpt-4o") is None and book.rates("gpt-4o-2024-08-06") is None
    assert book.rates("broken") is None
    house = prices.Rates(Decimal(2), Decimal("8.5"), Decimal(0), Decimal(1), Decimal(1), "PRICES")
    assert book.rates("house-model") == book.rates("house-model-20250101") == house
    assert book.rates("claude-haiku-4-5") == prices.PriceBook().rates("claude-haiku-4-5")


def test_an_unknown_model_hides_no_other_cost() -> None:
    book = prices.PriceBook()
    gpt = book.rates("gpt-5")
    assert gpt is not None
    by_model = {
        "gpt-5": Usage(output_tokens=10).as_dict(),
        "": Usage(1).as_dict(),
        "<synthetic>": Usage().as_dict(),  # a CLI's local line: no tokens, never unknown
    }
    body = usage.usage_body(by_model, usage.price_counters(by_model, book))
    assert body["cost"] == usage.decimal_text(10 * gpt.output / 1_000_000)
    assert body["unpriced"] == [{"model": "", **Usage(1).as_dict()}]
    only_unpriced = {"": Usage(1).as_dict(), "<synthetic>": Usage().as_dict()}
    assert (
        usage.usage_body(only_unpriced, usage.price_counters(only_unpriced, book))["cost"] is None
    )
    zero = {"<synthetic>": Usage().as_dict()}
    assert usage.usage_body(zero, usage.price_counters(zero, book))["cost"] == "0"
    assert usage.usage_body({}, usage.Bill()) == {
        **Usage().as_dict(),
        "models": [],
        "cost": "0",
        "unpriced": [],
    }


_COUNTS = st.integers(min_value=0, max_value=10**9)
_TOKENS = st.builds(
    lambda i, o, r, w: Usage(i, o, r, w), _COUNTS, _COUNTS, _COUNTS, _COUNTS
) | st.just(Usage())
_MIXES = st.dictionaries(
    st.sampled_from(["gpt-5", "claude-opus-4-7", "house", "", "<synthetic>", "gone"]),
    _TOKENS,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(mix=_MIXES)
def test_any_mix_of_models_prices_what_has_a_price(mix: dict[str, Usage]) -> None:
    """cost is the priced models' sum; unpriced lists exactly the models with counted tokens
    and no price; cost is null exactly when there are such tokens and none was priced."""
    book = prices.PriceBook(
        {
            "house": {"input": "1", "output": "2", "cache_read": "0", "cache_write": "1"},
            "gone": None,
        }
    )
    by_model = {model: tokens.as_dict() for model, tokens in mix.items()}
    body = usage.usage_body(by_model, usage.price_counters(by_model, book))
    priced = {m: t for m, t in mix.items() if book.rates(m) is not None}
    unpriced = {m: t for m, t in mix.items() if book.rates(m) is None and usage.counted(t)}
    expected = sum(
        (usage.cost_of(t, rates) for m, t in priced.items() if (rates := book.rates(m))),
        Decimal(0),
    )
    assert [item["model"] for item in body["unpriced"]] == sorted(unpriced)
    for item in body["unpriced"]:
        assert Usage.from_dict(item) == unpriced[item["model"]]
    if unpriced and not any(usage.counted(t) for t in priced.values()):
        assert body["cost"] is None
    else:
        assert body["cost"] == usage.decimal_text(expected)


@pytest.mark.parametrize(
    "prices",
    [
        [],
        {"": {"input": "1", "output": "1", "cache_read": "1", "cache_write": "1"}},
        {"m": {"input": "1"}},
        {"m": {"input": 0.3, "output": "1", "cache_read": "1", "cache_write": "1"}},
        {"m": {"input": "-1", "output": "1", "cache_read": "1", "cache_write": "1"}},
        {"m": {"input": "x", "output": "1", "cache_read": "1", "cache_write": "1"}},
        {"m": {"input": "1", "output": "1", "cache_read": "1", "cache_write": "1", "tip": "1"}},
    ],
)
def test_bad_prices_fail_the_system_check(settings: Settings, prices: JSON) -> None:
    settings.MURMUR_CONVERSATIONS = {"PRICES": prices}
    assert "murmur_conversations.E011" in [m.id for m in checks.check_settings()]


def test_good_prices_pass_the_system_check(settings: Settings) -> None:
    settings.MURMUR_CONVERSATIONS = {
        "PRICES": {
            "gpt-4o": None,
            "m": {"input": 1, "output": "2.5", "cache_read": Decimal("0.1"), "cache_write": "0"},
        }
    }
    assert checks.check_settings() == []


# ----------------------------------------------------------------------------- the write path

ANTHROPIC: dict[str, JSON] = {
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Looked at it."}],
    "usage": {
        "input_tokens": 6,
        "cache_creation_input_tokens": 1317,
        "cache_read_input_tokens": 21572,
        "cache_creation": {"ephemeral_5m_input_tokens": 1317, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 26,
    },
}
OPENAI: dict[str, JSON] = {
    "role": "assistant",
    "model": "gpt-4o-mini",
    "content": "Done.",
    "usage": {
        "prompt_tokens": 500,
        "completion_tokens": 40,
        "prompt_tokens_details": {"cached_tokens": 128},
    },
}


def assert_usage_matches_rows(conversation: Conversation) -> None:
    """The conversation's usage counters equal the sums of its usage rows, in total and by
    model (docs/usage.md: kept by the write path, never summed on read)."""
    conversation.refresh_from_db()
    rows = MessageUsage.objects.filter(conversation=conversation)
    sums = rows.aggregate(**{name: Sum(name) for name in usage.COUNTERS})
    for name in usage.COUNTERS:
        assert getattr(conversation, name) == (sums[name] or 0), name
    by_model: usage.ByModel = {}
    for row in rows:
        by_model = usage.add_by_model(
            by_model, row.model, Usage(*(getattr(row, name) for name in usage.COUNTERS))
        )
    assert conversation.usage_by_model == by_model


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["as it comes", "general path"])
def test_usage_given_through_save_message_sums_per_conversation(
    conversation: Conversation, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    if path == "general path":
        monkeypatch.setattr(plan, "plannable", lambda *args: False)
    services.save_message(conversation=conversation, message=ANTHROPIC)
    services.save_messages(
        conversation=conversation,
        messages=[
            {"role": "user", "content": "and now?"},
            OPENAI,
            {**OPENAI, "usage": {"prompt_tokens": 10, "completion_tokens": 1}},
            {"role": "user", "content": "fine", "usage": {"input_tokens": 999}},  # not counted
            {"role": "assistant", "content": "no usage here"},
        ],
    )
    assert conversation.input_tokens == 6 + 372 + 10  # the caller's instance is refreshed
    conversation.refresh_from_db()
    assert (conversation.output_tokens, conversation.cache_read_tokens) == (26 + 41, 21572 + 128)
    assert conversation.cache_write_tokens == 1317
    assert conversation.usage_by_model == {
        "claude-sonnet-4-5-20250929": Usage(6, 26, 21572, 1317).as_dict(),
        "gpt-4o-mini": Usage(382, 41, 128).as_dict(),
    }
    assert MessageUsage.objects.filter(conversation=conversation).count() == 3
    assert_usage_matches_rows(conversation)
    assert_counters_match_rows(conversation)
    # The record keeps each message as given: usage stays in extra as the provider wrote it.
    first = Message.objects.get(conversation=conversation, position=1)
    assert first.extra == {"model": ANTHROPIC["model"], "usage": ANTHROPIC["usage"]}


@pytest.mark.django_db(transaction=True)
def test_fast_and_general_paths_count_the_same(
    make_conversation: MakeConversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, general = make_conversation(), make_conversation()
    batch = [ANTHROPIC, OPENAI, {**OPENAI, "model": ""}, {"role": "user", "content": "x"}]

    def write(conversation: Conversation) -> None:
        services.save_messages(conversation=conversation, messages=batch)
        services.save_message(conversation=conversation, message=OPENAI)

    write(fast)
    monkeypatch.setattr(plan, "plannable", lambda *args: False)
    write(general)
    fast.refresh_from_db()
    general.refresh_from_db()
    for name in (*usage.COUNTERS, "usage_by_model"):
        assert getattr(fast, name) == getattr(general, name), name
    assert fast.usage_by_model[""] == Usage(372, 40, 128).as_dict()
    for conversation in (fast, general):
        assert_usage_matches_rows(conversation)


@pytest.mark.django_db
def test_a_known_message_id_is_not_counted_twice(conversation: Conversation) -> None:
    message = {**OPENAI, "id": "resp_1"}
    services.save_message(conversation=conversation, message=message)
    services.save_message(conversation=conversation, message=message)
    services.save_messages(conversation=conversation, messages=[message, message])
    conversation.refresh_from_db()
    assert conversation.input_tokens == 372
    assert_usage_matches_rows(conversation)


@pytest.mark.django_db
def test_bad_usage_writes_nothing(conversation: Conversation) -> None:
    with pytest.raises(InvalidContent, match=r"message 1: message 'usage\.output_tokens'"):
        services.save_messages(
            conversation=conversation,
            messages=[OPENAI, {**OPENAI, "usage": {"output_tokens": -3}}],
        )
    with pytest.raises(InvalidContent, match="'model' must be a string"):
        services.save_message(conversation=conversation, message={**OPENAI, "model": 4})
    conversation.refresh_from_db()
    assert conversation.record_length == 0 and conversation.input_tokens == 0


@pytest.mark.django_db
def test_usage_rows_go_with_their_conversation(conversation: Conversation) -> None:
    services.save_message(conversation=conversation, message=OPENAI)
    services.delete_conversation(conversation=conversation)
    assert not MessageUsage.objects.exists()


# ----------------------------------------------------------------------------- real logs


def _claude_lines(path: Path) -> list[JSON]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def test_claude_code_totals_count_each_message_id_once(
    corpus: Path, make_conversation: MakeConversation, db: None
) -> None:
    """What an importer does with a Claude Code session: one assistant message per
    ``message.id`` (its last line, whose usage is final), ``usage`` and ``model`` as given. The
    conversation's totals equal the sum over distinct ids of the main thread."""
    path = corpus / "claude_code_session" / "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    last: dict[str, dict[str, JSON]] = {}
    for line in _claude_lines(path):
        message = line.get("message")
        if line.get("type") == "assistant" and not line.get("isSidechain") and message:
            last[message["id"]] = message
    assert len(last) >= 3
    conversation = make_conversation()
    services.save_messages(
        conversation=conversation,
        messages=[
            {
                "id": mid,
                "role": "assistant",
                "content": "…",
                "model": m["model"],
                "usage": m["usage"],
            }
            for mid, m in last.items()
        ],
    )
    conversation.refresh_from_db()
    expected = Usage()
    for message in last.values():
        raw = message["usage"]
        expected = expected + Usage(
            raw["input_tokens"],
            raw["output_tokens"],
            raw.get("cache_read_input_tokens", 0),
            raw.get("cache_creation_input_tokens", 0),
            raw.get("cache_creation", {}).get("ephemeral_1h_input_tokens", 0),
        )
    assert Usage(*(getattr(conversation, n) for n in usage.COUNTERS)) == expected
    assert_usage_matches_rows(conversation)


def test_codex_totals_are_the_last_token_count_minus_cached_input(
    corpus: Path, make_conversation: MakeConversation, db: None
) -> None:
    """What an importer does with a Codex rollout: the last cumulative ``token_count`` as the
    usage of the run (summing the events would count every turn again)."""
    path = next((corpus / "codex_rollout").glob("rollout-2026-02-23T12-41-04-*.jsonl"))
    counts = [
        line["payload"]["info"]["total_token_usage"]
        for line in map(json.loads, path.read_text("utf-8").splitlines())
        if line.get("type") == "event_msg"
        and line["payload"].get("type") == "token_count"
        and line["payload"].get("info")
    ]
    assert len(counts) >= 2
    final = counts[-1]
    conversation = make_conversation()
    services.save_message(
        conversation=conversation,
        message={"role": "assistant", "content": "…", "model": "gpt-5-codex", "usage": final},
    )
    conversation.refresh_from_db()
    assert conversation.input_tokens == final["input_tokens"] - final["cached_input_tokens"]
    assert conversation.cache_read_tokens == final["cached_input_tokens"]
    assert conversation.output_tokens == final["output_tokens"]
    assert conversation.reasoning_tokens == final["reasoning_output_tokens"]


# ----------------------------------------------------------------------------- the API


@pytest.fixture
def owner(make_user: MakeUser) -> User:
    return make_user()


@pytest.fixture
def client(owner: User) -> APIClient:
    return token_client(owner)


def test_summary_rows_carry_usage_and_cost(
    client: APIClient, owner: User, make_conversation: MakeConversation, settings: Settings
) -> None:
    settings.MURMUR_CONVERSATIONS = {
        "PRICES": {"house": {"input": "2", "output": "10", "cache_read": "0.5", "cache_write": "0"}}
    }
    conversation = make_conversation(owner=owner, title="priced")
    services.save_message(
        conversation=conversation,
        message={
            "role": "assistant",
            "model": "house",
            "content": "x",
            "usage": {"input_tokens": 1_000_000, "output_tokens": 3333, "cache_read_tokens": 7},
        },
    )
    row = client.get(f"{API}conversations/").json()["results"][0]
    assert row["usage"] == {
        "input_tokens": 1_000_000,
        "output_tokens": 3333,
        "cache_read_tokens": 7,
        "cache_write_tokens": 0,
        "cache_write_1h_tokens": 0,
        "reasoning_tokens": 0,
        "models": ["house"],
        "cost": "2.0333335",  # 2 + 3333 * 10 / 1e6 + 7 * 0.5 / 1e6, to the last digit
        "unpriced": [],
    }
    assert client.get(f"{API}conversations/{conversation.pk}/").json()["usage"] == row["usage"]
    services.save_message(conversation=conversation, message={**OPENAI, "model": "unpriced"})
    row = client.get(f"{API}conversations/").json()["results"][0]
    assert row["usage"]["models"] == ["house", "unpriced"]
    assert row["usage"]["cost"] == "2.0333335"  # the priced part: one unknown model hides none
    assert row["usage"]["unpriced"] == [{"model": "unpriced", **Usage(372, 40, 128).as_dict()}]


def _spend(conversation: Conversation, model: str, tokens: dict[str, int], when: datetime) -> None:
    """An assistant message with usage, its usage row dated ``when``."""
    services.save_message(
        conversation=conversation,
        message={"role": "assistant", "model": model, "content": "x", "usage": tokens},
    )
    row = MessageUsage.objects.filter(conversation=conversation).latest("id")
    MessageUsage.objects.filter(pk=row.pk).update(created_at=when)


def test_usage_by_day_model_and_conversation(
    client: APIClient, owner: User, make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    first = make_conversation(owner=owner, title="first")
    second = make_conversation(owner=owner, title="second")
    foreign = make_conversation(owner=make_user(), title="foreign")
    day1 = datetime(2025, 5, 1, 23, 59, tzinfo=UTC)
    day2 = day1 + timedelta(minutes=2)  # 2025-05-02, in UTC
    _spend(first, "gpt-4o", {"input_tokens": 1_000_000, "output_tokens": 0}, day1)
    _spend(first, "gpt-4o", {"input_tokens": 0, "output_tokens": 100_000}, day2)
    _spend(second, "claude-haiku-4-5", {"input_tokens": 10, "output_tokens": 20}, day2)
    _spend(foreign, "gpt-4o", {"input_tokens": 5_000_000, "output_tokens": 5}, day2)

    days = client.get(f"{API}usage/").json()
    assert [(r["day"], r["usage"]["cost"]) for r in days["results"]] == [
        ("2025-05-01", "2.5"),
        ("2025-05-02", "1.00011"),  # 100k gpt-4o output ($1) + haiku 10 in, 20 out
    ]
    assert days["usage"]["input_tokens"] == 1_000_010  # never the foreign conversation's
    assert days["usage"]["models"] == ["claude-haiku-4-5", "gpt-4o"]
    assert days["total"] == 2 and days["next_cursor"] is None

    models = client.get(f"{API}usage/", {"group_by": "model", "from": "2025-05-02"}).json()
    assert [(r["model"], r["usage"]["output_tokens"]) for r in models["results"]] == [
        ("claude-haiku-4-5", 20),
        ("gpt-4o", 100_000),
    ]
    assert models["from"] == "2025-05-02" and models["to"] is None

    by_conversation: Params = {"group_by": "conversation", "limit": 1}
    page = client.get(f"{API}usage/", by_conversation).json()
    assert [r["title"] for r in page["results"]] == ["second"]
    assert page["total"] == 2
    rest = client.get(f"{API}usage/", {**by_conversation, "cursor": page["next_cursor"]}).json()
    assert [(r["title"], r["usage"]["cost"]) for r in rest["results"]] == [("first", "3.5")]
    assert rest["next_cursor"] is None
    only_day1 = client.get(f"{API}usage/", {"group_by": "conversation", "to": "2025-05-01"}).json()
    assert [(r["title"], r["usage"]["input_tokens"]) for r in only_day1["results"]] == [
        ("first", 1_000_000)
    ]


@pytest.mark.parametrize(
    "params",
    [
        {"group_by": "week"},
        {"from": "2025-13-01"},
        {"from": "yesterday"},
        {"to": "2025-5-1"},
        {"from": "2025-05-02", "to": "2025-05-01"},
        {"from": "2025-05-01\x00"},
    ],
)
def test_bad_usage_parameters_are_400(client: APIClient, params: Params) -> None:
    response = client.get(f"{API}usage/", params)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_filter"


def test_usage_cursor_is_bound_to_caller_and_period(
    client: APIClient, owner: User, make_user: MakeUser, make_conversation: MakeConversation
) -> None:
    for title in ("a", "b"):
        _spend(
            make_conversation(owner=owner, title=title),
            "m",
            {"input_tokens": 1},
            datetime(2025, 1, 1, tzinfo=UTC),
        )
    first: Params = {"group_by": "conversation", "limit": 1}
    cursor = client.get(f"{API}usage/", first).json()["next_cursor"]
    other = token_client(make_user())
    for who, params in (
        (other, {}),
        (client, {"from": "2024-01-01"}),
    ):
        response = who.get(f"{API}usage/", {"group_by": "conversation", "cursor": cursor, **params})
        assert response.status_code == 400 and response.json()["code"] == "invalid_cursor"


def test_usage_needs_a_signed_in_user(make_conversation: MakeConversation) -> None:
    from rest_framework.test import APIClient

    assert APIClient().get(f"{API}usage/").status_code == 401


@given(st.text(max_size=40), st.text(max_size=12))
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_usage_parameters_never_answer_500(client: APIClient, value: str, name: str) -> None:
    response = client.get(
        f"{API}usage/",
        {"group_by": value, "from": value, "to": value, "cursor": value, name: value},
    )
    assert response.status_code in (200, 400)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    start=st.one_of(st.none(), st.dates()),
    end=st.one_of(st.none(), st.dates()),
    group_by=st.sampled_from(["day", "model", "conversation"]),
)
@example(start=date.min, end=date.max, group_by="conversation")
@example(start=None, end=date.max, group_by="day")
def test_any_calendar_date_is_a_period_never_a_500(
    client: APIClient,
    start: date | None,
    end: date | None,
    group_by: str,
) -> None:
    """Every date of the calendar, 0001-01-01 to 9999-12-31, works as either bound: a 200 whose
    rows fall in the period, or 400 ``invalid_filter`` when ``from`` is after ``to``."""
    params: Params = {"group_by": group_by}
    if start is not None:
        params["from"] = start.isoformat()
    if end is not None:
        params["to"] = end.isoformat()
    response = client.get(f"{API}usage/", params)
    if start is not None and end is not None and start > end:
        assert response.status_code == 400 and response.json()["code"] == "invalid_filter"
    else:
        assert response.status_code == 200, response.content


# ----------------------------------------------------------------------------- priced rows

LOCAL_LINE: dict[str, JSON] = {  # a CLI's locally generated line: a placeholder, zero usage
    "role": "assistant",
    "model": "<synthetic>",
    "content": "No response requested.",
    "usage": {"input_tokens": 0, "output_tokens": 0},
}
OPUS: dict[str, JSON] = {
    "role": "assistant",
    "model": "claude-opus-4-7",
    "content": "ok",
    "usage": {
        "input_tokens": 100,
        "cache_read_input_tokens": 1000,
        "cache_creation": {"ephemeral_5m_input_tokens": 40, "ephemeral_1h_input_tokens": 10},
        "output_tokens": 20,
    },
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["as it comes", "general path"])
def test_usage_rows_record_their_cost_and_prices(
    client: APIClient,
    owner: User,
    make_conversation: MakeConversation,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
) -> None:
    if path == "general path":
        monkeypatch.setattr(plan, "plannable", lambda *args: False)
    conversation = make_conversation(owner=owner)
    unknown = {**OPENAI, "model": "house-unknown"}
    services.save_messages(conversation=conversation, messages=[OPUS, LOCAL_LINE, unknown])
    rows = {row.model: row for row in MessageUsage.objects.filter(conversation=conversation)}
    # 100 x 5 + 1000 x 0.5 + 40 x 6.25 + 10 x 10 + 20 x 25 = 1850 per million: 0.00185 USD
    assert (rows["claude-opus-4-7"].cost_nanocents, rows["claude-opus-4-7"].priced_with) == (
        185_000_000,
        prices.GENAI_PRICES,
    )
    assert (rows["<synthetic>"].cost_nanocents, rows["<synthetic>"].priced_with) == (None, "")
    assert rows["house-unknown"].cost_nanocents is None
    period = client.get(f"{API}usage/").json()["usage"]
    summary = client.get(f"{API}conversations/{conversation.pk}/").json()["usage"]
    for body in (period, summary):
        assert body["cost"] == "0.00185"  # the unknown model hides nothing priced
        assert body["unpriced"] == [{"model": "house-unknown", **Usage(372, 40, 128).as_dict()}]
        assert body["models"] == ["<synthetic>", "claude-opus-4-7", "house-unknown"]


@pytest.mark.django_db(transaction=True)
def test_a_period_of_only_placeholders_costs_zero_and_of_only_unknowns_null(
    client: APIClient, owner: User, make_conversation: MakeConversation
) -> None:
    conversation = make_conversation(owner=owner)
    services.save_message(conversation=conversation, message=LOCAL_LINE)
    assert client.get(f"{API}usage/").json()["usage"]["cost"] == "0"
    services.save_message(conversation=conversation, message={**OPENAI, "model": "nobody"})
    body = client.get(f"{API}usage/", {"group_by": "day"}).json()
    assert body["usage"]["cost"] is None and body["results"][0]["usage"]["cost"] is None
    assert [item["model"] for item in body["usage"]["unpriced"]] == ["nobody"]


_ROW_MODELS = ["gpt-5.5", "claude-sonnet-4-6", "house", "gone", "", "<synthetic>"]
_ROW_TOKENS = st.tuples(*[st.integers(min_value=0, max_value=40_000)] * 4)


@pytest.mark.django_db(transaction=True)
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(calls=st.lists(st.tuples(st.sampled_from(_ROW_MODELS), _ROW_TOKENS), max_size=6))
def test_any_mix_of_calls_bills_the_period_as_its_rows(
    calls: list[tuple[str, tuple[int, int, int, int]]],
    client: APIClient,
    owner: User,
    make_conversation: MakeConversation,
    settings: Settings,
) -> None:
    """Random mixes of priced, unpriced and zero-token models: the period's cost is the sum of
    the priced calls (each under every tier), unpriced lists the unknown models with tokens, and
    a conversation's summary agrees with the period."""
    settings.MURMUR_CONVERSATIONS = {
        "PRICES": {
            "house": {"input": "1", "output": "2", "cache_read": "0.1", "cache_write": "1"},
            "gone": None,
        }
    }
    MessageUsage.objects.all().delete()
    conversation = make_conversation(owner=owner)
    messages: list[dict[str, JSON]] = [
        {
            "role": "assistant",
            "model": model,
            "content": "x",
            "usage": {
                "input_tokens": i,
                "output_tokens": o,
                "cache_read_input_tokens": r,
                "cache_creation_input_tokens": w,
            },
        }
        for model, (i, o, r, w) in calls
    ]
    if messages:
        services.save_messages(conversation=conversation, messages=messages)
    book = app_settings.prices
    expected = usage.Bill()
    for model, (i, o, r, w) in calls:
        tokens = Usage(i, o, r, w)
        rates = book.rates(model)
        expected = expected + usage.Bill.of(
            model, tokens, None if rates is None else usage.cost_of(tokens, rates)
        )
    period = client.get(f"{API}usage/").json()["usage"]
    summary = client.get(f"{API}conversations/{conversation.pk}/").json()["usage"]
    for body in (period, summary):
        assert body["cost"] == usage.decimal_text(expected.total)
        assert [item["model"] for item in body["unpriced"]] == sorted(expected.unpriced)


@pytest.mark.django_db(transaction=True)
def test_a_period_is_repriced_when_prices_change(
    client: APIClient, owner: User, make_conversation: MakeConversation, settings: Settings
) -> None:
    conversation = make_conversation(owner=owner)
    day1 = datetime(2026, 5, 1, 12, tzinfo=UTC)
    _spend(conversation, "house", {"input_tokens": 1_000_000, "output_tokens": 0}, day1)
    _spend(conversation, "gpt-5", {"input_tokens": 1_000_000}, day1 + timedelta(days=1))
    assert client.get(f"{API}usage/").json()["usage"]["unpriced"][0]["model"] == "house"
    settings.MURMUR_CONVERSATIONS = {
        "PRICES": {"house": {"input": "2", "output": "8", "cache_read": "0", "cache_write": "0"}}
    }
    out = StringIO()
    call_command("reprice_usage", "--from", "2026-05-01", "--to", "2026-05-01", stdout=out)
    assert out.getvalue().startswith("1 usage row(s) re-priced")
    rows = MessageUsage.objects.filter(conversation=conversation).order_by("created_at")
    assert [(row.model, row.priced_with) for row in rows] == [
        ("house", "PRICES"),
        ("gpt-5", prices.GENAI_PRICES),  # outside the period: as it was
    ]
    body = client.get(f"{API}usage/", {"to": "2026-05-01"}).json()["usage"]
    assert (body["cost"], body["unpriced"]) == ("2", [])
    assert services.reprice_usage() == 0  # nothing changed since


@pytest.mark.parametrize(
    "args",
    [
        ["--from", "2026-13-01"],
        ["--to", "yesterday"],
        ["--from", "2026-05-02", "--to", "2026-05-01"],
    ],
)
def test_reprice_refuses_a_bad_period(args: list[str]) -> None:
    with pytest.raises(CommandError) as raised:
        call_command("reprice_usage", *args)
    assert "(--from, --to)" in str(raised.value)


# ----------------------------------------------------------------------------- subagents


def _assistant(model: str, i: int, o: int) -> dict[str, JSON]:
    return {
        "role": "assistant",
        "model": model,
        "content": "x",
        "usage": {"input_tokens": i, "output_tokens": o},
    }


@pytest.mark.django_db(transaction=True)
def test_subagents_tokens_count_in_their_parents_total_once(
    client: APIClient,
    owner: User,
    make_conversation: MakeConversation,
    django_assert_max_num_queries: Any,
) -> None:
    parent = make_conversation(owner=owner)
    child = services.start_conversation(owner=None, parent=parent, parent_call_id="task-1")
    grandchild = services.start_conversation(owner=None, parent=child, parent_call_id="task-2")
    other = services.start_conversation(owner=None, parent=parent)
    services.save_message(conversation=parent, message=_assistant("gpt-5", 1000, 10))
    services.save_message(conversation=child, message=_assistant("gpt-5", 200, 20))
    services.save_message(conversation=grandchild, message=_assistant("claude-opus-4-7", 30, 3))
    services.save_message(conversation=other, message=_assistant("nobody", 4, 0))
    detail = client.get(f"{API}conversations/{parent.pk}/").json()
    assert (detail["usage"]["input_tokens"], detail["usage"]["models"]) == (1000, ["gpt-5"])
    family = detail["usage_with_children"]
    assert (family["input_tokens"], family["output_tokens"]) == (1234, 33)
    assert family["models"] == ["claude-opus-4-7", "gpt-5", "nobody"]
    assert family["unpriced"] == [{"model": "nobody", **Usage(4).as_dict()}]
    book = app_settings.prices
    gpt, opus = book.rates("gpt-5"), book.rates("claude-opus-4-7")
    assert gpt is not None and opus is not None
    expected = usage.cost_of(Usage(1200, 30), gpt) + usage.cost_of(Usage(30, 3), opus)
    assert family["cost"] == usage.decimal_text(expected)
    leaf = client.get(f"{API}conversations/{grandchild.pk}/").json()
    assert leaf["usage_with_children"] == leaf["usage"]
    # A total over several conversations counts each token once: the period has all four once.
    period = client.get(f"{API}usage/").json()["usage"]
    assert (period["input_tokens"], period["output_tokens"]) == (1234, 33)
    assert period["cost"] == family["cost"]
    parent.refresh_from_db()
    with django_assert_max_num_queries(3):  # one query a generation, and the one that ends it
        totals, _by_model = selectors.family_usage(parent)
    assert totals.input_tokens == 1234
