"""Prices for an estimated cost where an agent reports none, overridable in herd.toml.

The adapters estimate Claude and Gemini runs by the model they name (adapters/prices.py);
this table adds what they lack (OpenAI's models), herd.toml adds or overrides entries under
`[prices.NAME]`, and a session picks one with `price = "NAME"` (which then prices every
estimate of that session), else its agent's usual model. An estimate is always marked
(`cost_estimated: true`, `~$` on screen, "(estimated)" in the report).
"""

from __future__ import annotations

import functools
from dataclasses import asdict, replace

from pydantic import BaseModel, ConfigDict, field_validator

from agentherd.sessions.adapters.prices import price_of
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

    def cost_usd(self, usage: Usage) -> float:
        """What the usage's tokens cost at these prices."""
        return (
            usage.input_tokens * self.input_usd_per_mtok
            + usage.output_tokens * self.output_usd_per_mtok
            + usage.cache_read_tokens * self.cache_read_usd_per_mtok
            + usage.cache_write_tokens * self.cache_write_usd_per_mtok
        ) / PER_TOKENS


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
"""List prices the adapters' table lacks (USD per million tokens, late 2025)."""

AGENT_DEFAULT_PRICE: dict[str, str] = {
    "claude": "claude-sonnet-4-5",
    "amp": "claude-sonnet-4-5",
    "codex": "gpt-5-codex",
    "gemini": "gemini-2.5-pro",
}
"""The entry used for an agent's estimate when its session names no `price`."""


AGENTS_REPORTING_COST = frozenset({"claude", "amp", "gemini", "opencode", "plain"})
"""Agents whose adapter gives a cost (reported, or estimated by the model it names; plain:
when the harness prints `cost_usd`). Aider prints none for a model it has no price for."""


def lookup(name: str, table: dict[str, Price]) -> Price | None:
    """A price by model name: herd.toml's and this table's entries, then the adapters' list."""
    if name in table:
        return table[name]
    return _listed(name)


@functools.lru_cache(maxsize=256)
def _listed(name: str) -> Price | None:
    """The adapters' list price as a `Price` (made once: every budget check asks for it)."""
    listed = price_of(name)
    return Price(**asdict(listed)) if listed is not None else None


def price_for(agent: str, name: str | None, table: dict[str, Price]) -> Price | None:
    """The price a session's estimate uses: its `price`, else its agent's usual model."""
    chosen = name or AGENT_DEFAULT_PRICE.get(agent)
    return lookup(chosen, table) if chosen else None


def price_table(overrides: dict[str, Price]) -> dict[str, Price]:
    """The shipped table with herd.toml's entries over it."""
    return {**SHIPPED_PRICES, **overrides}


def with_estimate(usage: Usage, price: Price | None) -> Usage:
    """The usage with an estimated, marked cost where the agent reported none and tokens show."""
    if usage.cost_usd is not None or price is None or usage.total_tokens == 0:
        return usage
    return replace(usage, cost_usd=price.cost_usd(usage), cost_estimated=True)
