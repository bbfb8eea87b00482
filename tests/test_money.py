"""Dollar amounts keep the digits a small budget needs: $0.004 is not $0.00."""

from __future__ import annotations

import pytest

from agentherd.sessions.money import usd_text


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (0.0, "0.00"),
        (0.42, "0.42"),
        (0.6, "0.60"),
        (1234.5, "1,234.50"),
        (1.004, "1.00"),
        (0.004, "0.004"),
        (0.0734, "0.073"),
        (0.615, "0.61"),
        (0.00012, "0.00012"),
        (1e-9, "0.00"),
    ],
)
def test_an_amount_shows_cents_or_the_digits_it_needs(amount: float, text: str) -> None:
    assert usd_text(amount) == text
