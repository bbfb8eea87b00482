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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, field_validator

if TYPE_CHECKING:  # a type only: importing the adapters package runs every adapter, which prices
    from collections.abc import Mapping

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

_ANTHROPIC = "https://docs.anthropic.com/en/docs/about-claude/pricing (read 2026-11)"
_GOOGLE = "https://ai.google.dev/gemini-api/docs/pricing (read 2026-11)"
_SNAPSHOT = r"(-\d{8}|-latest)?"
"""A dated snapshot or the `-latest` alias of one model: the same model, the same price."""
_VARIANT = r"(-[\w.-]+)?"
"""Gemini's preview and dated variants of one version (`-preview-06-05`, `-001`)."""


@dataclass(frozen=True)
class Listed:
    """One model, or one family of models, at one list price, and where that price is read.

    A pattern matches a version herd has not seen only where `source` says the vendor lists
    the whole family at that price; otherwise it names the versions listed, and a new one is
    unpriced until herd.toml's `[prices.MODEL]` (or a newer herd) prices it.
    """

    pattern: re.Pattern[str]
    price: Price
    source: str


def _listed(pattern: str, price: Price, source: str) -> Listed:
    return Listed(re.compile(pattern), price, source)


PRICE_TABLE: tuple[Listed, ...] = (
    _listed(r"claude-opus-4(-1)?" + _SNAPSHOT + "$", _OPUS_4_0, f"Opus 4 and 4.1: {_ANTHROPIC}"),
    _listed(
        r"claude-opus-4-([5-9]|\d{2})" + _SNAPSHOT + "$",
        _OPUS_4_5,
        f"the Opus 4 family from 4.5 on, one price: {_ANTHROPIC}; Claude Code 2.1.197 bills "
        "claude-opus-4-8 at it (its result's total_cost_usd, tests/fixtures/agents/real)",
    ),
    _listed(
        r"claude-sonnet-4(-\d+)?" + _SNAPSHOT + "$",
        _SONNET_4,
        f"the Sonnet 4 family (4, 4.5 and later 4.x), one price: {_ANTHROPIC}",
    ),
    _listed(r"claude-3-7-sonnet" + _SNAPSHOT + "$", _SONNET_4, f"Sonnet 3.7: {_ANTHROPIC}"),
    _listed(r"claude-haiku-4-5" + _SNAPSHOT + "$", _HAIKU_4_5, f"Haiku 4.5: {_ANTHROPIC}"),
    _listed(r"claude-3-5-haiku" + _SNAPSHOT + "$", _HAIKU_3_5, f"Haiku 3.5: {_ANTHROPIC}"),
    _listed(r"gemini-2\.5-pro" + _VARIANT + "$", _GEMINI_25_PRO, f"Gemini 2.5 Pro: {_GOOGLE}"),
    _listed(
        r"gemini-2\.5-flash-lite" + _VARIANT + "$",
        _GEMINI_25_FLASH_LITE,
        f"Gemini 2.5 Flash-Lite: {_GOOGLE}",
    ),
    _listed(
        r"gemini-2\.5-flash(-(?!lite)[\w.-]+)?$", _GEMINI_25_FLASH, f"Gemini 2.5 Flash: {_GOOGLE}"
    ),
)
"""Model id pattern (whole id, lower case, without a "[1m]"-style suffix) -> list price.

Versions not listed (Gemini 3.x, Claude Opus 5, Haiku 4.6) have no price here: their cost is
withheld and marked unpriced, never guessed from a neighbour.
"""

_SUFFIX = re.compile(r"\[[^\]]*\]$")


@functools.lru_cache(maxsize=256)
def price_of(model: str) -> Price | None:
    """The list price of a model id by its pattern, or None when herd does not know it
    (remembered: a run's usage is priced by its one model on every read of its output)."""
    name = _SUFFIX.sub("", model.strip().lower())
    for listed in PRICE_TABLE:
        if listed.pattern.match(name):
            return listed.price
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


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def table_header(model: str) -> str:
    """The herd.toml table that prices a model: `[prices.m]`, `[prices."gemini-3.8-flash"]`
    (TOML reads a dot in a bare key as a nested table)."""
    key = model if _BARE_KEY.fullmatch(model) else '"' + model.replace('"', '\\"') + '"'
    return f"[prices.{key}]"


def lookup(name: str, table: dict[str, Price]) -> Price | None:
    """A price by model name: herd.toml's and the shipped entries, then the list patterns; a
    provider's prefix (Aider's `anthropic/claude-sonnet-4-5`) is tried without it too."""
    if name in table:
        return table[name]
    found = price_of(name)
    bare = name.rsplit("/", 1)[-1]
    if found is None and bare != name:
        return table.get(bare) or price_of(bare)
    return found


def price_table(overrides: dict[str, Price]) -> dict[str, Price]:
    """The shipped table with herd.toml's entries over it."""
    return {**SHIPPED_PRICES, **overrides}


def with_estimate(usage: Usage, price: Price | None) -> Usage:
    """The usage with an estimated, marked cost where the agent reported none and tokens show."""
    if usage.cost_usd is not None or price is None or usage.total_tokens == 0:
        return usage
    return replace(usage, cost_usd=price.cost_usd(usage), cost_estimated=True)


def priced(
    usage: Usage,
    models: Mapping[str, tuple[int, int, int, int]],
    table: dict[str, Price],
    chosen: Price | None,
    usual: Price | None,
    own_first: bool = True,
) -> Usage:
    """A run's usage with its cost as herd counts it.

    The agent's own figure is kept. Else the session's `price` (`chosen`) prices every token.
    Else each model the agent named is priced by `table` (herd.toml's entries, the shipped
    ones, the list patterns): one without a price withholds the estimate and is named in
    `cost_unpriced_model`, never priced as another. An agent that names no model is priced
    as its usual one (`usual`). Without `own_first` (Aider's own figure leaves out what Aider
    does not count) herd's price of the named models comes before the agent's figure, which
    stands only where herd has none.
    """
    own = usage.cost_usd is not None and not usage.cost_estimated
    if own and (own_first or not models or any(lookup(m, table) is None for m in models)):
        return usage
    if chosen is not None:
        return with_estimate(replace(usage, cost_usd=None, cost_estimated=False), chosen)
    if not models:
        return with_estimate(usage, usual)
    if usage.total_tokens == 0:
        return usage
    prices = {name: lookup(name, table) for name in models}
    missing = next((name for name, price in prices.items() if price is None), None)
    if missing is not None:
        return replace(usage, cost_usd=None, cost_estimated=False, cost_unpriced_model=missing)
    if usage.cost_usd is not None and not own:
        return usage  # the adapter's estimate, at these list prices
    if len(prices) == 1:
        (only,) = prices.values()
        if only is not None:
            return replace(usage, cost_usd=only.cost_usd(usage), cost_estimated=True)
    cost_usd = 0.0
    for name, price in prices.items():
        if price is not None:
            cost_usd += price.tokens_cost_usd(*models[name])
    return replace(usage, cost_usd=cost_usd, cost_estimated=True)
