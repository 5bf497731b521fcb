"""Token usage and cost (docs/usage.md): reading a message's ``usage`` in any provider's spelling,
the counters the write path keeps and exact costs. Pure: no database.

An assistant message may carry ``usage`` (and ``model``). :func:`read_usage` turns the provider's
object into :class:`Usage`, six non-negative integer counters in our names, where
``input_tokens`` is always the **uncached** input: Anthropic counts cache reads and writes apart
from ``input_tokens``; OpenAI (``prompt_tokens``, Responses' ``input_tokens``) and Codex
(``cached_input_tokens``) count cached input inside it, and it is subtracted. ``output_tokens`` is
the provider's figure (reasoning included); ``reasoning_tokens`` is the part of it spent reasoning;
``cache_write_1h_tokens`` is the part of ``cache_write_tokens`` written to Anthropic's one-hour
cache, which costs more than the five-minute one.

Costs are ``Decimal`` USD at the prices of ``prices.PriceBook`` (the ``genai-prices`` package's
data, a host's ``MURMUR_CONVERSATIONS["PRICES"]`` over it), exact to the last digit; a
:class:`Bill` keeps the priced part apart from the tokens of models that have no price.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, Final

from murmur_conversations.exceptions import InvalidContent
from murmur_conversations.prices import PriceBook, Rates

#: The counters, in the order of every usage object this app writes.
COUNTERS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cache_write_1h_tokens",
    "reasoning_tokens",
)
#: Largest value of one counter in one message: 2^32 - 1, far above any model call, and low
#: enough that no record can sum past a 64-bit integer (2^31 messages at the cap), which SQLite
#: would turn into a float and PostgreSQL refuse.
MAX_TOKENS: Final = 2**32 - 1
_MILLION: Final = Decimal(1_000_000)
#: Units of ``MessageUsage.cost_nanocents`` per USD.
NANOCENTS: Final = Decimal(10) ** 11


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
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidContent(f"message {where} must be a non-negative integer, not {value!r}")
    if value > MAX_TOKENS:
        raise InvalidContent(
            f"message {where} is {value}, above the most one call counts ({MAX_TOKENS:,})"
        )
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
    - cache writes: ``cache_write_tokens`` or ``cache_creation_input_tokens`` (else the sum of
      ``cache_creation.ephemeral_5m_input_tokens`` and ``ephemeral_1h_input_tokens``); their
      one-hour part ``cache_write_1h_tokens`` or ``cache_creation.ephemeral_1h_input_tokens``;
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
    if cache_write is None:  # only the breakdown by lifetime: the writes are its sum
        five_minute = _get(usage, "cache_creation", "ephemeral_5m_input_tokens")
        if five_minute is not None or cache_write_1h is not None:
            cache_write = (five_minute or 0) + (cache_write_1h or 0)
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
    ``Conversation.usage_by_model``; a plan's ``by_model`` delta is this, added counter by counter by the backends)."""
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


# --------------------------------------------------------------------------- cost


def counted(usage: Usage) -> int:
    """The tokens a call was billed for: input, output, cache reads and writes (reasoning and
    one-hour writes are parts of output and writes)."""
    return (
        usage.input_tokens
        + usage.output_tokens
        + usage.cache_read_tokens
        + usage.cache_write_tokens
    )


def prompt_tokens(usage: Usage) -> int:
    """The whole prompt of a call: uncached input, cache reads and cache writes (what a
    provider's long-prompt price tiers are measured on)."""
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


def cost_of(usage: Usage, rates: Rates) -> Decimal:
    """USD for ``usage`` at ``rates`` (per million tokens), exact: uncached input at ``input``,
    cache reads at ``cache_read``, five-minute cache writes at ``cache_write``, one-hour ones at
    ``cache_write_1h``, output (reasoning included) at ``output``. Each token is billed once:
    ``input_tokens`` never includes the cached tokens (``read_usage``)."""
    five_minute = usage.cache_write_tokens - usage.cache_write_1h_tokens
    micro = (
        usage.input_tokens * rates.input
        + usage.output_tokens * rates.output
        + usage.cache_read_tokens * rates.cache_read
        + five_minute * rates.cache_write
        + usage.cache_write_1h_tokens * rates.cache_write_1h
    )
    return micro / _MILLION


def row_cost(
    model: str, usage: Usage, book: PriceBook, *, at: datetime | None = None
) -> tuple[int | None, str]:
    """``(cost_nanocents, priced_with)`` of one model call (a ``MessageUsage`` row) at the prices
    of ``book`` at ``at`` (the call's time; None: now), its long-prompt tier included: the cost
    in USD x 10^11 rounded half-even to an integer, and the ``Rates.source``; ``(None, "")``
    when ``model`` has no price."""
    rates = book.rates(model, at=at, prompt_tokens=prompt_tokens(usage))
    if rates is None:
        return None, ""
    exact = cost_of(usage, rates) * NANOCENTS
    return int(exact.to_integral_value(rounding=ROUND_HALF_EVEN)), rates.source


@dataclass(frozen=True)
class Bill:
    """What a set of counters costs: ``cost`` (USD) of the priced tokens, ``priced`` the number
    of counted tokens that had a price, ``unpriced`` the counters of the models whose counted
    tokens had none (``{model: {counter: int}}``; models with no counted tokens never appear)."""

    cost: Decimal = Decimal(0)
    priced: int = 0
    unpriced: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def __add__(self, other: Bill) -> Bill:
        unpriced: ByModel = {name: dict(counts) for name, counts in self.unpriced.items()}
        for model, counts in other.unpriced.items():
            unpriced = add_by_model(unpriced, model, Usage.from_dict(counts))
        return Bill(self.cost + other.cost, self.priced + other.priced, unpriced)

    @classmethod
    def of(cls, model: str, usage: Usage, cost: Decimal | None) -> Bill:
        """The bill of ``model``'s ``usage`` priced at ``cost`` (None: it had no price)."""
        if cost is not None:
            return cls(cost, counted(usage))
        return cls(unpriced={model: usage.as_dict()} if counted(usage) else {})

    @property
    def total(self) -> Decimal | None:
        """The priced part, or None when there are counted tokens and none had a price."""
        return None if self.unpriced and not self.priced else self.cost


def price_counters(
    by_model: Mapping[str, Any], book: PriceBook, *, at: datetime | None = None
) -> Bill:
    """The bill of ``{model: {counter: int}}`` at the prices of ``book`` at ``at`` (None: now).
    Summed counters are priced at each model's base rates: a long-prompt tier applies to one
    call, which sums no longer show."""
    bill = Bill()
    for model, counts in by_model.items():
        tokens = Usage.from_dict(counts)
        if not counted(tokens):
            continue
        rates = book.rates(model, at=at)
        bill = bill + Bill.of(model, tokens, None if rates is None else cost_of(tokens, rates))
    return bill


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
    by_model: Mapping[str, Any], bill: Bill, totals: Usage | None = None
) -> dict[str, Any]:
    """The ``usage`` object of a summary row or a usage page row (docs/usage.md): the counters
    (``totals`` when given, e.g. a conversation's counter columns, else the sum over
    ``by_model``), ``models`` (the names, sorted; ``""`` is a model nobody named), ``cost`` (a
    decimal string in USD of the priced tokens, or null when counted tokens had no price at all)
    and ``unpriced`` (``[{model, counter: int...}]``, by name: the models whose counted tokens
    had no price)."""
    return {
        **(totals if totals is not None else total(by_model)).as_dict(),
        "models": sorted(by_model),
        "cost": decimal_text(bill.total),
        "unpriced": [
            {"model": model, **Usage.from_dict(counts).as_dict()}
            for model, counts in sorted(bill.unpriced.items())
        ],
    }


def merge_by_model(parts: Iterable[Mapping[str, Any]]) -> ByModel:
    """The sum of several ``{model: {counter: int}}`` objects (e.g. a conversation and its
    children, for ``usage_with_children``)."""
    merged: ByModel = {}
    for part in parts:
        for model, counts in part.items():
            merged = add_by_model(merged, model, Usage.from_dict(counts))
    return merged
