"""Dollar amounts as people read them: cents, and the digits a smaller amount needs.

A budget of $0.004 shown as `$0.00` reads as no budget at all; an amount under a dollar that
two decimals would round shows two significant digits instead (`$0.004`, `$0.073`).
"""

from __future__ import annotations

import math

MAX_DECIMALS = 6
"""Below a millionth of a dollar the figure is noise: shown as `$0.000001` or `$0.00`."""


def usd_text(amount_usd: float) -> str:
    """`1,234.50`, `0.42`, `0.004`, `0.073` (no `$`): cents, or two significant digits below
    a dollar where cents would round the amount."""
    value = float(amount_usd)
    if not math.isfinite(value) or value == 0 or abs(value) >= 1 or round(value, 2) == value:
        return f"{value:,.2f}"
    decimals = min(MAX_DECIMALS, max(2, 1 - math.floor(math.log10(abs(value)))))
    text = f"{value:.{decimals}f}"
    whole, _, fraction = text.partition(".")
    fraction = fraction.rstrip("0")
    return f"{whole}.{fraction.ljust(2, '0')}"


def uncounted_text(requests: int) -> str:
    """`1 request cut off by a kill is not counted`: requests a kill cut off mid-answer were
    billed in part or whole, and no figure (the agent's output, its files) holds them."""
    if requests == 1:
        return "1 request cut off by a kill is not counted"
    return f"{requests} requests cut off by kills are not counted"
