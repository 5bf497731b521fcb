"""Token usage and cost (docs/usage.md): reading a message's ``usage`` in any provider's spelling,
the counters the write path keeps, the price table and exact costs. Pure: no database.

An assistant message may carry ``usage`` (and ``model``). :func:`read_usage` turns the provider's
object into :class:`Usage`, six non-negative integer counters in our names, where
``input_tokens`` is always the **uncached** input: Anthropic counts cache reads and writes apart
from ``input_tokens``; OpenAI (``prompt_tokens``, Responses' ``input_tokens``) and Codex
(``cached_input_tokens``) count cached input inside it, and it is subtracted. ``output_tokens`` is
the provider's figure (reasoning included); ``reasoning_tokens`` is the part of it spent reasoning;
``cache_write_1h_tokens`` is the part of ``cache_write_tokens`` written to Anthropic's one-hour
cache, which costs more than the five-minute one.

Costs are ``Decimal`` USD from a price table in USD per million tokens (:data:`DEFAULT_PRICES`,
dated, overridable per model in ``MURMUR_CONVERSATIONS["PRICES"]``), exact to the last digit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Any, Final

from murmur_conversations.exceptions import InvalidContent

#: The counters, in the order of every usage object this app writes.
COUNTERS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cache_write_1h_tokens",
    "reasoning_tokens",
)
#: Largest value of one counter in one message (a PostgreSQL ``bigint`` holds sums far beyond it).
MAX_TOKENS: Final = 2**48
#: The price keys of one model, USD per million tokens; ``cache_write_1h`` defaults to
#: ``cache_write``.
PRICE_KEYS: Final = ("input", "output", "cache_read", "cache_write", "cache_write_1h")
REQUIRED_PRICE_KEYS: Final = ("input", "output", "cache_read", "cache_write")
_MILLION: Final = Decimal(1_000_000)
# A dated snapshot suffix of a model name: claude-sonnet-4-5-20250929, gpt-4o-2024-08-06.
_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class Usage:
    """The tokens of one model call (or a sum of calls), in our names; see the module docstring."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, name) + getattr(other, name) for name in COUNTERS))

    def as_dict(self) -> dict[str, int]:
        """``{counter: int}`` in :data:`COUNTERS` order."""
        return {name: getattr(self, name) for name in COUNTERS}

    @classmethod
    def from_dict(cls, value: Any) -> Usage:
        """The counters of a stored ``{counter: int}`` object (missing or bad values count 0)."""
        if not isinstance(value, Mapping):
            return cls()
        counts = {}
        for name in COUNTERS:
            item = value.get(name)
            counts[name] = item if isinstance(item, int) and not isinstance(item, bool) else 0
        return cls(**counts)


assert tuple(f.name for f in fields(Usage)) == COUNTERS


def _count(value: Any, where: str) -> int | None:
    """A token count: a non-negative integer, or None for an absent or null one."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
        raise InvalidContent(f"message {where} must be a non-negative integer, not {value!r}")
    return value


def _get(usage: Mapping[str, Any], *path: str) -> int | None:
    """The count at ``path`` (a key, or an object key then a key); None when absent or null."""
    value: Any = usage
    for index, key in enumerate(path):
        if not isinstance(value, Mapping):
            if value is None:
                return None
            where = "'usage." + ".".join(path[:index]) + "'"
            raise InvalidContent(f"message {where} must be an object, not {value!r}")
        value = value.get(key)
    return _count(value, "'usage." + ".".join(path) + "'")


def _first(usage: Mapping[str, Any], *paths: tuple[str, ...]) -> int | None:
    for path in paths:
        found = _get(usage, *path)
        if found is not None:
            return found
    return None


def read_usage(usage: Any) -> Usage | None:
    """Our counters of a provider's usage object (docs/usage.md "Spellings"), or None when it
    names no token count at all (e.g. ``{"total_tokens": 12}`` alone).

    Read, first spelling found wins:

    - input: ``input_tokens`` (ours, Anthropic, OpenAI Responses, Codex) or ``prompt_tokens``
      (OpenAI Chat Completions);
    - output: ``output_tokens`` or ``completion_tokens``;
    - cache reads: ``cache_read_tokens`` (ours) or ``cache_read_input_tokens`` (Anthropic), both
      counted apart from input; else ``cached_input_tokens`` (Codex),
      ``input_tokens_details.cached_tokens`` (Responses) or ``prompt_tokens_details.cached_tokens``
      (Chat Completions), counted inside input and subtracted from it;
    - cache writes: ``cache_write_tokens`` or ``cache_creation_input_tokens``; their one-hour part
      ``cache_write_1h_tokens`` or ``cache_creation.ephemeral_1h_input_tokens``;
    - reasoning: ``reasoning_tokens``, ``reasoning_output_tokens`` (Codex),
      ``output_tokens_details.reasoning_tokens`` or ``completion_tokens_details.reasoning_tokens``.

    Other keys are ignored (the record keeps them). Raises ``InvalidContent`` when ``usage`` is not
    an object, a count is not a non-negative integer (null is absent), an object the rules read
    through is not an object, cached input exceeds the input it is counted in, or the one-hour
    cache writes exceed the cache writes.
    """
    if not isinstance(usage, Mapping):
        raise InvalidContent(f"message 'usage' must be an object, not {type(usage).__name__}")
    raw_input = _first(usage, ("input_tokens",), ("prompt_tokens",))
    output = _first(usage, ("output_tokens",), ("completion_tokens",))
    apart = _first(usage, ("cache_read_tokens",), ("cache_read_input_tokens",))
    inside = (
        None
        if apart is not None
        else _first(
            usage,
            ("cached_input_tokens",),
            ("input_tokens_details", "cached_tokens"),
            ("prompt_tokens_details", "cached_tokens"),
        )
    )
    cache_write = _first(usage, ("cache_write_tokens",), ("cache_creation_input_tokens",))
    cache_write_1h = _first(
        usage, ("cache_write_1h_tokens",), ("cache_creation", "ephemeral_1h_input_tokens")
    )
    reasoning = _first(
        usage,
        ("reasoning_tokens",),
        ("reasoning_output_tokens",),
        ("output_tokens_details", "reasoning_tokens"),
        ("completion_tokens_details", "reasoning_tokens"),
    )
    found = (raw_input, output, apart, inside, cache_write, cache_write_1h, reasoning)
    if all(value is None for value in found):
        return None
    input_tokens = raw_input or 0
    if inside is not None:
        if inside > input_tokens:
            raise InvalidContent(
                f"message 'usage' counts {inside} cached input tokens inside {input_tokens} "
                "input tokens"
            )
        input_tokens -= inside
    if (cache_write_1h or 0) > (cache_write or 0):
        raise InvalidContent(
            f"message 'usage' counts {cache_write_1h} one-hour cache writes among "
            f"{cache_write or 0} cache writes"
        )
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output or 0,
        cache_read_tokens=apart if apart is not None else inside or 0,
        cache_write_tokens=cache_write or 0,
        cache_write_1h_tokens=cache_write_1h or 0,
        reasoning_tokens=reasoning or 0,
    )


# --------------------------------------------------------------------------- counters by model

ByModel = dict[str, dict[str, int]]


def add_by_model(by_model: Any, model: str, usage: Usage) -> ByModel:
    """A new ``{model: {counter: int}}`` with ``usage`` added to ``model``'s entry (the shape of
    ``Conversation.usage_by_model``; the PostgreSQL fast path merges with the same rule in SQL)."""
    merged: ByModel = {
        name: Usage.from_dict(counts).as_dict()
        for name, counts in (by_model.items() if isinstance(by_model, Mapping) else ())
    }
    merged[model] = (Usage.from_dict(merged.get(model)) + usage).as_dict()
    return merged


def total(by_model: Mapping[str, Any]) -> Usage:
    """The sum of every model's counters."""
    result = Usage()
    for counts in by_model.values():
        result = result + Usage.from_dict(counts)
    return result


# --------------------------------------------------------------------------- prices

#: When :data:`DEFAULT_PRICES` was taken from the providers' published price pages.
PRICES_DATE: Final = "2025-12-01"
#: Where it was taken from.
PRICES_SOURCE: Final = (
    "Anthropic: https://docs.anthropic.com/en/docs/about-claude/pricing (base input, 5-minute and "
    "1-hour cache writes, cache hits, output); OpenAI: https://platform.openai.com/docs/pricing "
    "(Standard tier: input, cached input, output; OpenAI charges nothing for cache writes)"
)


def _price(
    input: str, output: str, cache_read: str, cache_write: str, cache_write_1h: str
) -> dict[str, Decimal]:
    values = (input, output, cache_read, cache_write, cache_write_1h)
    return {key: Decimal(value) for key, value in zip(PRICE_KEYS, values, strict=True)}


_SONNET = _price("3", "15", "0.30", "3.75", "6")
_OPUS_4 = _price("15", "75", "1.50", "18.75", "30")

#: USD per million tokens, by model name, as of :data:`PRICES_DATE` (:data:`PRICES_SOURCE`).
#: Anthropic's Sonnet 4 and 4.5 are listed at their rate for prompts up to 200k tokens; Batch API,
#: priority and regional rates are not modelled. A dated snapshot name (``...-20250929``,
#: ``...-2024-08-06``) is priced as its base name unless the table names the snapshot itself.
DEFAULT_PRICES: Final[dict[str, dict[str, Decimal]]] = {
    "claude-opus-4-5": _price("5", "25", "0.50", "6.25", "10"),
    "claude-opus-4-1": _OPUS_4,
    "claude-opus-4-0": _OPUS_4,
    "claude-opus-4": _OPUS_4,
    "claude-sonnet-4-5": _SONNET,
    "claude-sonnet-4-0": _SONNET,
    "claude-sonnet-4": _SONNET,
    "claude-3-7-sonnet": _SONNET,
    "claude-3-5-sonnet": _SONNET,
    "claude-haiku-4-5": _price("1", "5", "0.10", "1.25", "2"),
    "claude-3-5-haiku": _price("0.80", "4", "0.08", "1", "1.6"),
    "claude-3-opus": _OPUS_4,
    "claude-3-haiku": _price("0.25", "1.25", "0.03", "0.30", "0.50"),
    "gpt-5": _price("1.25", "10", "0.125", "0", "0"),
    "gpt-5-codex": _price("1.25", "10", "0.125", "0", "0"),
    "gpt-5-mini": _price("0.25", "2", "0.025", "0", "0"),
    "gpt-5-nano": _price("0.05", "0.40", "0.005", "0", "0"),
    "gpt-4.1": _price("2", "8", "0.50", "0", "0"),
    "gpt-4.1-mini": _price("0.40", "1.60", "0.10", "0", "0"),
    "gpt-4.1-nano": _price("0.10", "0.40", "0.025", "0", "0"),
    "gpt-4o": _price("2.50", "10", "1.25", "0", "0"),
    "gpt-4o-mini": _price("0.15", "0.60", "0.075", "0", "0"),
    "o3": _price("2", "8", "0.50", "0", "0"),
    "o4-mini": _price("1.10", "4.40", "0.275", "0", "0"),
    "o3-mini": _price("1.10", "4.40", "0.55", "0", "0"),
    "o1": _price("15", "60", "7.50", "0", "0"),
}


def price_value(value: Any) -> Decimal | None:
    """A price as an exact ``Decimal``: an int, a ``Decimal`` or a decimal string, not negative;
    None for anything else (floats included: they are not exact)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        result = Decimal(value)
    elif isinstance(value, Decimal):
        result = value
    elif isinstance(value, str):
        try:
            result = Decimal(value.strip())
        except ArithmeticError:
            return None
    else:
        return None
    return result if result.is_finite() and result >= 0 else None


def price_table(overrides: Any = None) -> dict[str, dict[str, Decimal]]:
    """:data:`DEFAULT_PRICES` with ``overrides`` (``MURMUR_CONVERSATIONS["PRICES"]``) applied: a
    model mapped to ``None`` has no price; a model mapped to an object with ``input``, ``output``,
    ``cache_read`` and ``cache_write`` (and optionally ``cache_write_1h``) gets those prices.
    Entries the system check refuses (``murmur_conversations.E011``) are skipped here."""
    table = dict(DEFAULT_PRICES)
    if not isinstance(overrides, Mapping):
        return table
    for model, entry in overrides.items():
        if not isinstance(model, str):
            continue
        if entry is None:
            table.pop(model, None)
            continue
        parsed = parse_price(entry)
        if parsed is not None:
            table[model] = parsed
    return table


def parse_price(entry: Any) -> dict[str, Decimal] | None:
    """One model's prices from a settings entry, or None when the entry is malformed."""
    if not isinstance(entry, Mapping) or set(entry) - set(PRICE_KEYS):
        return None
    parsed: dict[str, Decimal] = {}
    for key in PRICE_KEYS:
        if key not in entry:
            if key == "cache_write_1h" and "cache_write" in parsed:
                parsed[key] = parsed["cache_write"]
                continue
            return None
        value = price_value(entry[key])
        if value is None:
            return None
        parsed[key] = value
    return parsed


def price_for(model: str, table: Mapping[str, dict[str, Decimal]]) -> dict[str, Decimal] | None:
    """The prices of ``model``: its own entry, else its base name's without a date suffix; None
    when neither is in ``table``."""
    found = table.get(model)
    if found is None and _SNAPSHOT.search(model):
        found = table.get(_SNAPSHOT.sub("", model))
    return found


def cost_of(usage: Usage, prices: Mapping[str, Decimal]) -> Decimal:
    """USD for ``usage`` at ``prices`` (per million tokens), exact: uncached input at ``input``,
    cache reads at ``cache_read``, five-minute cache writes at ``cache_write``, one-hour ones at
    ``cache_write_1h``, output (reasoning included) at ``output``."""
    five_minute = usage.cache_write_tokens - usage.cache_write_1h_tokens
    micro = (
        usage.input_tokens * prices["input"]
        + usage.output_tokens * prices["output"]
        + usage.cache_read_tokens * prices["cache_read"]
        + five_minute * prices["cache_write"]
        + usage.cache_write_1h_tokens * prices["cache_write_1h"]
    )
    return micro / _MILLION


def cost(by_model: Mapping[str, Any], table: Mapping[str, dict[str, Decimal]]) -> Decimal | None:
    """The cost of every model's counters, or None when a model with counters has no price."""
    result = Decimal(0)
    for model, counts in by_model.items():
        prices = price_for(model, table)
        if prices is None:
            return None
        result += cost_of(Usage.from_dict(counts), prices)
    return result


def decimal_text(value: Decimal | None) -> str | None:
    """A cost as the API writes it: fixed-point text without exponent or trailing zeros
    (``"0.0465"``, ``"12"``), or None."""
    if value is None:
        return None
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"


def usage_body(
    by_model: Mapping[str, Any],
    table: Mapping[str, dict[str, Decimal]],
    totals: Usage | None = None,
) -> dict[str, Any]:
    """The ``usage`` object of a summary row or a usage page row (docs/usage.md): the counters
    (``totals`` when given, e.g. a conversation's counter columns, else the sum over
    ``by_model``), ``models`` (the names, sorted; ``""`` is a model nobody named) and ``cost`` (a
    decimal string in USD, or null when a model has no price)."""
    return {
        **(totals if totals is not None else total(by_model)).as_dict(),
        "models": sorted(by_model),
        "cost": decimal_text(cost(by_model, table)),
    }


def merge_by_model(parts: Iterable[Mapping[str, Any]]) -> ByModel:
    """The sum of several ``{model: {counter: int}}`` objects (e.g. a conversation and its
    children, for ``usage_with_children``)."""
    merged: ByModel = {}
    for part in parts:
        for model, counts in part.items():
            merged = add_by_model(merged, model, Usage.from_dict(counts))
    return merged
