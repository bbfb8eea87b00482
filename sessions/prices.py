"""Prices for an estimated cost where an agent reports none: the one table and cost formula.

Models are priced by name: herd.toml's `[prices.NAME]` entries first, then the named entries
shipped here, then the list prices of the model id patterns below (Anthropic, Google). A session
picks one with `price = "NAME"` (which then prices every estimate of that session), else its
agent's usual model (its adapter's `AGENT.price`). An estimate is always marked
(`cost_estimated: true`, `~$` on screen, "(estimated)" in the report); a model herd does not
know gives no estimate (None), never an invented 0. Prices are USD per million tokens, as the
vendors list them (read 2026-11); a long-context surcharge is not modelled.
"""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, field_validator

if TYPE_CHECKING:  # a type only: importing the adapters package runs every adapter, which prices
    from agentherd.sessions.adapters.usage import Usage

PER_TOKENS = 1_000_000
"""Prices are quoted in US dollars per million tokens, as the vendors list them."""


class Price(BaseModel):
    """US dollars per million tokens of each kind (one `[prices.NAME]` table of herd.toml)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    input_usd_per_mtok: float
    output_usd_per_mtok: float
    cache_read_usd_per_mtok: float = 0.0
    cache_write_usd_per_mtok: float = 0.0

    @field_validator("*")
    @classmethod
    def _not_negative(cls, value: float) -> float:
        if not value >= 0 or value == float("inf"):  # also refuses nan
            raise ValueError("must be a price of 0 or more (dollars per million tokens)")
        return value

    def tokens_cost_usd(
        self, input_tokens: int, output_tokens: int, cache_read_tokens: int, cache_write_tokens: int
    ) -> float:
        """What these tokens cost at these prices: herd's one cost formula."""
        return (
            input_tokens * self.input_usd_per_mtok
            + output_tokens * self.output_usd_per_mtok
            + cache_read_tokens * self.cache_read_usd_per_mtok
            + cache_write_tokens * self.cache_write_usd_per_mtok
        ) / PER_TOKENS

    def cost_usd(self, usage: Usage) -> float:
        """What the usage's tokens cost at these prices."""
        return self.tokens_cost_usd(
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        )


def _price(inp: float, out: float, read: float = 0.0, write: float = 0.0) -> Price:
    return Price(
        input_usd_per_mtok=inp,
        output_usd_per_mtok=out,
        cache_read_usd_per_mtok=read,
        cache_write_usd_per_mtok=write,
    )


SHIPPED_PRICES: dict[str, Price] = {
    "gpt-5": _price(1.25, 10.0, 0.125),
    "gpt-5-codex": _price(1.25, 10.0, 0.125),
    "gpt-5-mini": _price(0.25, 2.0, 0.025),
}
"""List prices by exact name, for models the patterns below do not cover (OpenAI's)."""

_OPUS_4_0 = _price(15.0, 75.0, 1.5, 18.75)
_OPUS_4_5 = _price(5.0, 25.0, 0.5, 6.25)
_SONNET_4 = _price(3.0, 15.0, 0.3, 3.75)
_HAIKU_4_5 = _price(1.0, 5.0, 0.1, 1.25)
_HAIKU_3_5 = _price(0.8, 4.0, 0.08, 1.0)
_GEMINI_25_PRO = _price(1.25, 10.0, 0.31, 0.0)
_GEMINI_25_FLASH = _price(0.3, 2.5, 0.075, 0.0)
_GEMINI_25_FLASH_LITE = _price(0.1, 0.4, 0.025, 0.0)

PRICE_TABLE: tuple[tuple[re.Pattern[str], Price], ...] = (
    # Opus 4 and 4.1 (dated ids such as claude-opus-4-20250514) kept the old price.
    (re.compile(r"claude-opus-4(-1)?(-\d{8})?$"), _OPUS_4_0),
    (re.compile(r"claude-opus-4-\d+(-\d{8})?$"), _OPUS_4_5),
    (re.compile(r"claude-sonnet-4(-\d+)?(-\d{8})?$"), _SONNET_4),
    (re.compile(r"claude-3-7-sonnet(-\d{8}|-latest)?$"), _SONNET_4),
    (re.compile(r"claude-haiku-4-\d+(-\d{8})?$"), _HAIKU_4_5),
    (re.compile(r"claude-3-5-haiku(-\d{8}|-latest)?$"), _HAIKU_3_5),
    (re.compile(r"gemini-2\.5-pro(-[\w.-]+)?$"), _GEMINI_25_PRO),
    (re.compile(r"gemini-2\.5-flash-lite(-[\w.-]+)?$"), _GEMINI_25_FLASH_LITE),
    (re.compile(r"gemini-2\.5-flash(-(?!lite)[\w.-]+)?$"), _GEMINI_25_FLASH),
)
"""Model id pattern (whole id, lower case, without a "[1m]"-style suffix) -> list price."""

_SUFFIX = re.compile(r"\[[^\]]*\]$")


@functools.lru_cache(maxsize=256)
def price_of(model: str) -> Price | None:
    """The list price of a model id by its pattern, or None when herd does not know it
    (remembered: a run's usage is priced by its one model on every read of its output)."""
    name = _SUFFIX.sub("", model.strip().lower())
    for pattern, price in PRICE_TABLE:
        if pattern.match(name):
            return price
    return None


def estimate_cost_usd(
    model: str | None,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int,
    cache_write_tokens: int,
) -> float | None:
    """Cost at list price of the given tokens, or None when the model is unknown."""
    price = price_of(model) if model else None
    if price is None:
        return None
    return price.tokens_cost_usd(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)


def lookup(name: str, table: dict[str, Price]) -> Price | None:
    """A price by model name: herd.toml's and the shipped entries, then the list patterns."""
    if name in table:
        return table[name]
    return price_of(name)


def price_table(overrides: dict[str, Price]) -> dict[str, Price]:
    """The shipped table with herd.toml's entries over it."""
    return {**SHIPPED_PRICES, **overrides}


def with_estimate(usage: Usage, price: Price | None) -> Usage:
    """The usage with an estimated, marked cost where the agent reported none and tokens show."""
    if usage.cost_usd is not None or price is None or usage.total_tokens == 0:
        return usage
    return replace(usage, cost_usd=price.cost_usd(usage), cost_estimated=True)
