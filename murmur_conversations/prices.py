"""Prices of model tokens (docs/usage.md "Prices"): a host's own ``MURMUR_CONVERSATIONS["PRICES"]``
over the data that the ``genai-prices`` package ships. Pure: no database, no network.

The package's data is read from the snapshot bundled in the installed wheel
(:func:`bundled_snapshot`), never from its ``UpdatePrices`` fetcher: a price changes when the
package is upgraded, and :data:`GENAI_PRICES` names the version that priced a row.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from importlib.metadata import version
from typing import Any, Final

#: The ``priced_with`` of a price from the package data: ``"genai-prices <version>"``.
GENAI_PRICES: Final = f"genai-prices {version('genai-prices')}"
#: The ``priced_with`` of a price from the host's ``PRICES`` setting.
HOST_PRICES: Final = "PRICES"
#: The price keys of one model in ``PRICES``, USD per million tokens; ``cache_write_1h`` defaults
#: to ``cache_write``.
PRICE_KEYS: Final = ("input", "output", "cache_read", "cache_write", "cache_write_1h")
REQUIRED_PRICE_KEYS: Final = ("input", "output", "cache_read", "cache_write")
# A dated snapshot suffix of a model name: claude-sonnet-4-5-20250929, gpt-4o-2024-08-06.
_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class Rates:
    """One model's prices in USD per million tokens, as they apply to one model call: uncached
    ``input``, ``output`` (reasoning included), ``cache_read``, five-minute ``cache_write`` and
    ``cache_write_1h``; ``source`` is :data:`GENAI_PRICES` or :data:`HOST_PRICES`."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal
    cache_write_1h: Decimal
    source: str


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


def parse_price(entry: Any) -> Rates | None:
    """One model's prices from a ``PRICES`` entry (``input``, ``output``, ``cache_read``,
    ``cache_write``, optionally ``cache_write_1h``), or None when the entry is malformed."""
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
    return Rates(**parsed, source=HOST_PRICES)


@functools.cache
def bundled_snapshot() -> Any:
    """The ``genai_prices`` data snapshot of the installed package's own data (never one that
    ``UpdatePrices`` fetched, even when another library in the process started it)."""
    from genai_prices import data, data_snapshot

    return data_snapshot.DataSnapshot(providers=data.providers, from_auto_update=False)


def _rate(price: Any, prompt_tokens: int) -> Decimal | None:
    """A package price at a prompt of ``prompt_tokens`` (its tiers apply to the whole call once
    the prompt is above their start, as the package prices them)."""
    if price is None or isinstance(price, Decimal):
        return price
    applicable: Decimal = price.base
    for tier in price.tiers:
        if prompt_tokens > tier.start:
            applicable = tier.price
    return applicable


def _package_model(model: str) -> Any:
    """The package's ``ModelInfo`` for ``model``, or None when it knows no such model (the
    snapshot caches its look-ups)."""
    try:
        return bundled_snapshot().find_provider_model(model, None, None, None)[1]
    except LookupError:
        return None


def package_rates(model: str, *, at: datetime, prompt_tokens: int = 0) -> Rates | None:
    """The package's prices of ``model`` for a call at ``at`` whose prompt (uncached input, cache
    reads and writes) was ``prompt_tokens``; None when the package has no token price for it.

    A price the package leaves out falls back as the package's own sums do: cache reads and
    writes to ``input``, one-hour writes to five-minute writes, output to 0."""
    info = _package_model(model) if model else None
    if info is None:
        return None
    found = info.get_prices(at)
    base = _rate(found.input_mtok, prompt_tokens)
    output = _rate(found.output_mtok, prompt_tokens)
    if base is None and output is None:
        return None  # priced by image, request or second, not by token
    base = base if base is not None else Decimal(0)
    read = _rate(found.cache_read_mtok, prompt_tokens)
    write = _rate(found.cache_write_mtok, prompt_tokens)
    if write is None:
        write = _rate(found.cache_write_5m_mtok, prompt_tokens)
    write = write if write is not None else base
    write_1h = _rate(found.cache_write_1h_mtok, prompt_tokens)
    return Rates(
        input=base,
        output=output if output is not None else Decimal(0),
        cache_read=read if read is not None else base,
        cache_write=write,
        cache_write_1h=write_1h if write_1h is not None else write,
        source=GENAI_PRICES,
    )


class PriceBook:
    """Where a model's prices come from: the host's ``PRICES`` (``{model: entry or None}``;
    None: the model has no price) first, then the package data. A ``PRICES`` entry applies to
    its exact model name and to the dated snapshots of it (``claude-x-20250929``,
    ``gpt-x-2024-08-06``); entries the system check refuses (``murmur_conversations.E011``) are
    skipped."""

    def __init__(self, overrides: Any = None) -> None:
        self._host: dict[str, Rates | None] = {}
        if isinstance(overrides, Mapping):
            for model, entry in overrides.items():
                if not isinstance(model, str):
                    continue
                if entry is None:
                    self._host[model] = None
                elif (parsed := parse_price(entry)) is not None:
                    self._host[model] = parsed

    def rates(
        self, model: str, *, at: datetime | None = None, prompt_tokens: int = 0
    ) -> Rates | None:
        """The prices of ``model`` for a call at ``at`` (None: now) with a prompt of
        ``prompt_tokens``, or None when ``model`` has no price."""
        for name in (model, _SNAPSHOT.sub("", model)):
            if name in self._host:
                return self._host[name]
        return package_rates(model, at=at or datetime.now(UTC), prompt_tokens=prompt_tokens)
