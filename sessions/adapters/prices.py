"""List prices shipped with herd, to estimate a run's cost when its agent printed none.

An estimate is always marked ``cost_estimated``; a model not in the table gives no estimate
(None), never an invented 0. Prices are USD per million tokens, as the vendors list them
(Anthropic and Google pricing pages, read 2026-11); a long-context surcharge is not modelled.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens of each kind."""

    input_usd_per_mtok: float
    output_usd_per_mtok: float
    cache_read_usd_per_mtok: float
    cache_write_usd_per_mtok: float


_OPUS_4_0 = Price(15.0, 75.0, 1.5, 18.75)
_OPUS_4_5 = Price(5.0, 25.0, 0.5, 6.25)
_SONNET_4 = Price(3.0, 15.0, 0.3, 3.75)
_HAIKU_4_5 = Price(1.0, 5.0, 0.1, 1.25)
_HAIKU_3_5 = Price(0.8, 4.0, 0.08, 1.0)
_GEMINI_25_PRO = Price(1.25, 10.0, 0.31, 0.0)
_GEMINI_25_FLASH = Price(0.3, 2.5, 0.075, 0.0)
_GEMINI_25_FLASH_LITE = Price(0.1, 0.4, 0.025, 0.0)

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
    """The list price of a model id, or None when herd does not know it (remembered: a run's
    usage is priced by its one model on every read of its output)."""
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
    micro_usd = (
        input_tokens * price.input_usd_per_mtok
        + output_tokens * price.output_usd_per_mtok
        + cache_read_tokens * price.cache_read_usd_per_mtok
        + cache_write_tokens * price.cache_write_usd_per_mtok
    )
    return micro_usd / 1_000_000
