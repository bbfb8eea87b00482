"""herd's price table: a model it has no price for is unpriced, never priced as another.

The list patterns price a version herd has not seen only where the table documents the whole
family's price, with its source; herd.toml's `[prices.MODEL]` prices any model by name.
"""

from __future__ import annotations

import pytest

from agentherd.sessions.adapters.usage import Usage
from agentherd.sessions.prices import PRICE_TABLE, Price, price_of, price_table, priced

USAGE = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=0)
GEMINI_25_PRO = price_of("gemini-2.5-pro")


@pytest.mark.parametrize(
    "model",
    [
        "gemini-3.8-flash",  # Gemini CLI 0.61's default answers
        "gemini-3.5-flash-lite",  # and its routing
        "claude-opus-5-5",  # Claude Code 2.1.332's default
        "claude-haiku-4-6",  # no family price documented for Haiku 4
        "gemini-3-pro",
    ],
)
def test_a_model_herd_has_no_price_for_is_not_priced(model: str) -> None:
    assert price_of(model) is None


@pytest.mark.parametrize(
    ("model", "input_usd"),
    [
        ("claude-sonnet-4-5-20250929", 3.0),  # a dated snapshot of a listed model
        ("claude-opus-4-8[1m]", 5.0),  # the Opus 4 family from 4.5 on, documented
        ("claude-opus-4-1", 15.0),
        ("claude-opus-4-20250514", 15.0),
        ("claude-haiku-4-5-20251001", 1.0),
        ("gemini-2.5-pro-preview-06-05", 1.25),
        ("gemini-2.5-flash-lite", 0.1),
        ("gemini-2.5-flash", 0.3),
    ],
)
def test_listed_models_and_their_snapshots_are_priced(model: str, input_usd: float) -> None:
    price = price_of(model)
    assert price is not None and price.input_usd_per_mtok == input_usd


def test_every_listed_price_says_where_it_was_read() -> None:
    for listed in PRICE_TABLE:
        assert "https://" in listed.source, listed.pattern.pattern
    families = [listed for listed in PRICE_TABLE if "family" in listed.source]
    # Only these patterns reach versions herd has not seen, and their sources say so.
    assert {listed.pattern.pattern.split("(")[0] for listed in families} == {
        "claude-opus-4-",
        "claude-sonnet-4",
    }


def test_an_unknown_model_withholds_the_estimate_and_is_named() -> None:
    table = price_table({})
    models = {"gemini-3.8-flash": (1_000_000, 1_000_000, 0, 0)}
    found = priced(USAGE, models, table, None, GEMINI_25_PRO)
    assert found.cost_usd is None and not found.cost_estimated
    assert found.cost_unpriced_model == "gemini-3.8-flash"
    assert found.to_json()["cost_unpriced_model"] == "gemini-3.8-flash"
    assert Usage.from_json(found.to_json()) == found


def test_one_unknown_model_of_several_withholds_the_estimate() -> None:
    table = price_table({})
    models = {"gemini-2.5-flash": (10, 10, 0, 0), "gemini-3.5-flash-lite": (10, 10, 0, 0)}
    usage = Usage(input_tokens=20, output_tokens=20)
    found = priced(usage, models, table, None, GEMINI_25_PRO)
    assert found.cost_usd is None and found.cost_unpriced_model == "gemini-3.5-flash-lite"


def test_herd_toml_prices_a_model_by_name() -> None:
    table = price_table(
        {"gemini-3.8-flash": Price(input_usd_per_mtok=2.0, output_usd_per_mtok=8.0)}
    )
    models = {"gemini-3.8-flash": (1_000_000, 1_000_000, 0, 0)}
    found = priced(USAGE, models, table, None, GEMINI_25_PRO)
    assert found.cost_usd == pytest.approx(10.0) and found.cost_estimated
    assert found.cost_unpriced_model is None
    # Several models: each priced by its own entry, on its own tokens.
    both = {**models, "gemini-2.5-flash": (1_000_000, 0, 0, 0)}
    usage = Usage(input_tokens=2_000_000, output_tokens=1_000_000)
    assert priced(usage, both, table, None, None).cost_usd == pytest.approx(10.3)


def test_the_agents_own_cost_is_kept_and_the_sessions_price_wins() -> None:
    table = price_table({})
    models = {"claude-opus-5-5": (1_000_000, 1_000_000, 0, 0)}
    own = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cost_usd=7.5)
    assert priced(own, models, table, None, None) == own  # Claude's result: its own figure
    chosen = price_of("claude-sonnet-4-5")
    found = priced(USAGE, models, table, chosen, None)
    assert found.cost_usd == pytest.approx(18.0) and found.cost_unpriced_model is None


def test_an_agent_that_names_no_model_is_priced_as_its_usual_one() -> None:
    found = priced(USAGE, {}, price_table({}), None, GEMINI_25_PRO)
    assert found.cost_usd == pytest.approx(11.25) and found.cost_estimated


def test_a_sum_of_runs_keeps_the_mark() -> None:
    priced_run = Usage(input_tokens=10, cost_usd=0.5, cost_estimated=True)
    unpriced_run = Usage(input_tokens=10, cost_unpriced_model="claude-opus-5-5")
    total = priced_run + unpriced_run
    assert total.cost_usd == pytest.approx(0.5)
    assert total.cost_unpriced_model == "claude-opus-5-5"
