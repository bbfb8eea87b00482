"""Budget arithmetic, crossings, projections, the cost guard and the price table: pure, fast."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentherd.sessions.adapters import Usage, price_for
from agentherd.sessions.budget import (
    CostGuard,
    Sample,
    Spend,
    SpendHistory,
    budget_json,
    crossings,
    evaluate,
    most_spent,
    project,
    raised_since_stop,
)
from agentherd.sessions.config import Budget, ConfigError, environment_problems, parse_config
from agentherd.sessions.prices import SHIPPED_PRICES, Price, price_table, with_estimate


def spend(tokens: int = 0, cost: float | None = None, turns: int = 0, **more: float) -> Spend:
    usage = Usage(input_tokens=tokens, cost_usd=cost, turns=turns)
    return Spend(usage, float(more.get("wall_s", 0.0)), int(more.get("restarts", 0)))


def test_each_dimension_is_spent_over_its_limit() -> None:
    budget = Budget(wall_time=100.0, tokens=1000, cost_usd=2.0, turns=10, restarts=4)
    uses = {u.dimension: u for u in evaluate(budget, spend(250, 1.0, 9, wall_s=10, restarts=1))}
    assert list(uses) == ["wall_time", "tokens", "cost_usd", "turns", "restarts"]
    assert uses["tokens"].fraction == 0.25
    assert uses["cost_usd"].fraction == 0.5
    assert uses["turns"].fraction == 0.9
    assert uses["wall_time"].fraction == 0.1
    assert most_spent(list(uses.values())).dimension == "turns"  # type: ignore[union-attr]


def test_an_unknown_cost_is_never_counted_as_zero_spent() -> None:
    use = evaluate(Budget(cost_usd=1.0), spend(10))[0]
    assert use.spent is None and use.fraction == 0.0
    assert use.to_json() == {"spent": None, "limit": 1.0, "fraction": 0.0, "estimated": False}


def test_the_warning_comes_once_per_dimension_and_the_stop_at_100_percent() -> None:
    budget = Budget(tokens=1000, turns=10, warn_at=0.8)
    assert crossings(budget, spend(799, turns=1), set()).warn == ()
    first = crossings(budget, spend(800, turns=1), set())
    assert [u.dimension for u in first.warn] == ["tokens"] and first.exhausted is None
    again = crossings(budget, spend(900, turns=8), {"tokens"})
    assert [u.dimension for u in again.warn] == ["turns"]
    done = crossings(budget, spend(1000, turns=8), {"tokens", "turns"})
    assert done.warn == () and done.exhausted is not None
    assert done.exhausted.dimension == "tokens"


def test_restarts_run_out_only_when_another_restart_is_due() -> None:
    budget = Budget(restarts=2)
    assert crossings(budget, spend(restarts=2), set()).exhausted is None  # the 2nd one ran
    due = crossings(budget, spend(restarts=2), set(), restarting=True).exhausted
    assert due is not None and due.dimension == "restarts"
    assert crossings(budget, spend(restarts=3), set()).exhausted is not None  # missed: over


def test_a_raised_limit_leaves_room_after_a_budget_stop() -> None:
    assert not raised_since_stop(Budget(tokens=1000), "budget:tokens", 1000.0)
    assert not raised_since_stop(Budget(tokens=500), "budget:tokens", 1000.0)
    assert raised_since_stop(Budget(tokens=2000), "budget:tokens", 1000.0)
    assert raised_since_stop(Budget(), "budget:tokens", 1000.0)  # the limit was removed
    assert not raised_since_stop(Budget(tokens=2000), "user", 1000.0)


def test_a_cost_that_goes_backwards_is_ignored_and_said_so() -> None:
    guard = CostGuard()
    assert guard.take(Usage(input_tokens=10, cost_usd=0.5, turns=2)).cost_usd == 0.5
    kept = guard.take(Usage(input_tokens=12, cost_usd=0.2, turns=1))
    assert kept.cost_usd == 0.5 and kept.turns == 2 and kept.input_tokens == 12
    assert guard.went_backwards
    assert guard.take(Usage(input_tokens=12, cost_usd=None)).cost_usd == 0.5
    assert guard.take(Usage(input_tokens=20, cost_usd=0.7)).cost_usd == 0.7


def test_cost_guard_lets_a_true_figure_replace_a_higher_estimate() -> None:
    guard = CostGuard()
    guard.take(Usage(output_tokens=200, output_estimate_tokens=199, cost_usd=0.5))
    true = guard.take(Usage(output_tokens=150, cost_usd=0.4))
    assert (true.output_tokens, true.cost_usd, guard.went_backwards) == (150, 0.4, False)
    lower = guard.take(Usage(output_tokens=100, cost_usd=0.3))  # a reported figure is a floor
    assert (lower.output_tokens, lower.cost_usd, guard.went_backwards) == (150, 0.4, True)


def test_an_estimate_is_priced_from_the_table_and_marked() -> None:
    price = Price(input_usd_per_mtok=3.0, output_usd_per_mtok=15.0, cache_read_usd_per_mtok=0.3)
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=2_000_000)
    estimated = with_estimate(usage, price)
    assert estimated.cost_usd == pytest.approx(3.0 + 1.5 + 0.6)
    assert estimated.cost_estimated
    reported = Usage(input_tokens=5, cost_usd=0.01)
    assert with_estimate(reported, price) == reported  # a reported cost is never replaced
    assert with_estimate(Usage(), price).cost_usd is None  # nothing spent: no invented $0
    summed = Usage(cost_usd=1.0) + estimated
    assert summed.cost_estimated  # a sum holding an estimate is an estimate
    use = evaluate(Budget(cost_usd=10.0), Spend(summed))[0]
    assert use.to_json()["estimated"] is True


def test_the_price_table_ships_defaults_that_herd_toml_overrides() -> None:
    mine = Price(input_usd_per_mtok=1.0, output_usd_per_mtok=2.0)
    table = price_table({"gpt-5-codex": mine, "local": mine})
    assert price_for("codex", None, table) == mine
    gemini = price_for("gemini", None, table)  # from the adapters' list, by model name
    assert gemini is not None and gemini.input_usd_per_mtok == 1.25
    assert price_for("claude", "claude-sonnet-4-5-20250929", table) is not None
    assert "gpt-5" in SHIPPED_PRICES
    assert price_for("plain", None, table) is None
    assert price_for("plain", "local", table) == mine


def test_projection_arithmetic_at_the_recent_rate() -> None:
    budget = Budget(cost_usd=10.0, tokens=1_000_000)
    # 100 s ago: $1 spent, 2 of 12 passing; now $3 and 4 passing: $0.02/s and 0.02 items/s.
    samples = [Sample(0.0, spend(100, 1.0), 2)]
    found = project(budget, samples, 100.0, spend(1000, 3.0), 4, 12)
    assert found is not None
    assert found.dimension == "cost_usd"
    assert found.seconds_left == pytest.approx(350.0)  # $7 left at $0.02/s
    assert found.items_passing_by_then == 4 + 7  # 0.02/s * 350 s
    assert found.runs_out_first  # 11 < 12
    slow = project(Budget(cost_usd=100.0), samples, 100.0, spend(1000, 3.0), 4, 12)
    assert slow is not None and slow.items_passing_by_then == 12 and not slow.runs_out_first
    json = found.to_json(1_000_000.0, lambda s: f"t={s:.0f}")
    assert json["exhausted_at"] == "t=1000350" and json["runs_out_before_plan"] is True


def test_no_projection_without_a_rate() -> None:
    budget = Budget(cost_usd=10.0)
    assert project(budget, [], 100.0, spend(cost=3.0), None, None) is None
    assert (
        project(budget, [Sample(98.0, spend(cost=1.0))], 100.0, spend(cost=3.0), None, None) is None
    )
    flat = [Sample(0.0, spend(cost=3.0))]
    assert project(budget, flat, 100.0, spend(cost=3.0), None, None) is None
    wall = project(Budget(wall_time=600.0), flat, 100.0, spend(wall_s=100), None, None)
    assert wall is not None and wall.seconds_left == 500.0 and wall.items_passing_by_then is None


def test_spend_samples_are_spaced_bounded_and_start_afresh_with_a_new_task() -> None:
    history = SpendHistory(every_s=10.0, max_samples=3)
    assert history.add(Sample(0.0, spend(10, wall_s=1)))
    assert not history.add(Sample(5.0, spend(20, wall_s=6)))
    for at in (10.0, 20.0, 30.0):
        assert history.add(Sample(at, spend(int(at) * 10, wall_s=at)))
    assert [s.at_s for s in history.samples] == [10.0, 20.0, 30.0]
    history.add(Sample(31.0, spend(0, wall_s=0)))  # a new task: lower spend
    assert [s.at_s for s in history.samples] == [31.0]


def test_a_quiet_stretch_repeats_the_last_sample_with_the_wall_time_moving() -> None:
    history = SpendHistory(every_s=10.0, max_samples=4)
    assert history.repeat_last(100.0, wall_moving=True) == 0  # nothing to repeat yet
    history.add(Sample(0.0, spend(10, wall_s=1)))
    assert history.repeat_last(9.9, wall_moving=True) == 0
    assert history.repeat_last(30.0, wall_moving=True) == 3
    got = history.samples
    assert [s.at_s for s in got] == [0.0, 10.0, 20.0, 30.0]
    assert [s.spend.wall_time_s for s in got] == [1.0, 11.0, 21.0, 31.0]
    assert {s.spend.usage.total_tokens for s in got} == {10}
    assert history.repeat_last(1000.0, wall_moving=False) == 4  # only what is kept is written
    assert [s.at_s for s in history.samples] == [970.0, 980.0, 990.0, 1000.0]
    assert {s.spend.wall_time_s for s in history.samples} == {31.0}  # a stopped task's stays
    assert not history.add(Sample(1005.0, spend(20, wall_s=31)))  # still spaced as before
    assert history.add(Sample(1010.0, spend(20, wall_s=31)))


def test_spend_samples_read_back_with_every_figure_a_chart_or_projection_reads() -> None:
    history = SpendHistory(every_s=10.0)
    usage = Usage(input_tokens=7, output_tokens=5, cache_read_tokens=3, cost_usd=0.125, turns=4)
    history.add(Sample(1.5, Spend(usage, 12.25, 2), 3))
    history.add(Sample(11.5, spend(20, None, 5, wall_s=22.0)))
    first, second = history.samples
    assert (first.at_s, first.passing, first.spend.wall_time_s, first.spend.restarts) == (
        1.5,
        3,
        12.25,
        2,
    )
    assert first.spend.usage.total_tokens == 15 and first.spend.usage.cost_usd == 0.125
    assert first.spend.usage.turns == 4 and first.to_json(100.0) == [101.5, 15, 0.125, 4, 3]
    assert second.spend.usage.cost_usd is None and second.passing is None
    assert [s.at_s for s in history.since(10.0)] == [11.5] and history.last_at_s == 11.5
    for dimension in ("wall_time", "tokens", "cost_usd", "turns", "restarts"):
        assert first.spend.amount(dimension) == Spend(usage, 12.25, 2).amount(dimension)


def test_spend_samples_since_a_moment_are_those_taken_at_it_or_later() -> None:
    history = SpendHistory(every_s=10.0, max_samples=5)
    for at_s in range(0, 90, 10):  # the oldest four dropped: 40 ... 80 kept
        history.add(Sample(float(at_s), spend(at_s)))
    kept = [s.at_s for s in history.samples]
    assert kept == [40.0, 50.0, 60.0, 70.0, 80.0]
    for at_s in (-1.0, 0.0, 40.0, 45.0, 50.0, 79.9, 80.0, 80.1, 1e9):
        assert [s.at_s for s in history.since(at_s)] == [t for t in kept if t >= at_s], at_s
    assert SpendHistory().since(0.0) == []


def test_spend_samples_take_a_few_dozen_bytes_each() -> None:
    """200 sessions x 360 samples: ~350 bytes a sample as objects grew a soak by 25 MB."""
    import tracemalloc

    samples = [
        Sample(float(i * 10), spend(i * 1000, i / 7, i, wall_s=i * 10.5), i) for i in range(360)
    ]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        history = SpendHistory(every_s=10.0)
        for sample in samples:
            history.add(sample)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(history) == 360
    assert grown / 360 < 100, f"{grown / 360:.0f} bytes a sample"


def test_budget_json_names_each_set_dimension_and_what_it_covers() -> None:
    data = budget_json(Budget(cost_usd=25.0, turns=100), spend(10, 0.42, 31), None, "task")
    assert data == {
        "cost_usd": {"spent": 0.42, "limit": 25.0, "fraction": 0.0168, "estimated": False},
        "turns": {"spent": 31, "limit": 100, "fraction": 0.31},
        "warn_at": 0.8,
        "covers": "task",
        "projection": None,
    }
    assert budget_json(Budget(stall=60.0), spend(), None, "task") is None


BAD_BUDGETS = [
    ("cost_usd = -1", "budget.cost_usd", "positive"),
    ("tokens = 0", "budget.tokens", "positive"),
    ("warn_at = 1.5", "budget.warn_at", "between 0 and 1"),
    ("warn_at = 0", "budget.warn_at", "between 0 and 1"),
    ('wall_time = "5 lightyears"', "budget.wall_time", ""),
    ("money = 3", "budget.money", "unknown key"),
    ('covers = "forever"', "budget.covers", "task"),
]


@pytest.mark.parametrize(("entry", "field", "words"), BAD_BUDGETS)
def test_a_bad_budget_is_one_line_naming_file_session_and_field(
    tmp_path: Path, entry: str, field: str, words: str
) -> None:
    text = f'[[session]]\nname = "api"\ncommand = ["true"]\nbudget = {{ {entry} }}\n'
    with pytest.raises(ConfigError) as caught:
        parse_config(text, tmp_path / "herd.toml")
    lines = str(caught.value).splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f'herd.toml: session "api": {field}: '), lines[0]
    assert words in lines[0]


def test_a_bad_fleet_budget_or_price_is_named_too(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config("[fleet]\nbudget = { tokens = -5 }\n", tmp_path / "herd.toml")
    assert str(caught.value).startswith("herd.toml: fleet.budget.tokens: ")
    text = '[[session]]\nname = "x"\ncommand = ["true"]\nprice = "gpt-9"\n'
    with pytest.raises(ConfigError) as caught:
        parse_config(text, tmp_path / "herd.toml")
    assert str(caught.value).startswith('herd.toml: session "x": price: ')
    with pytest.raises(ConfigError) as caught:
        parse_config(
            "[prices.m]\ninput_usd_per_mtok = -1\noutput_usd_per_mtok = 1\n", tmp_path / "herd.toml"
        )
    assert "prices.m.input_usd_per_mtok" in str(caught.value)


def test_check_warns_of_a_cost_budget_it_cannot_enforce(tmp_path: Path) -> None:
    text = (
        "[fleet]\nbudget = { cost_usd = 100 }\n"
        '[[session]]\nname = "a"\ncommand = ["true"]\nagent = "aider"\n'
        "budget = { cost_usd = 5 }\n"
        '[[session]]\nname = "b"\ncommand = ["true"]\nagent = "codex"\n'  # gpt-5-codex price
        "budget = { cost_usd = 5 }\n"
    )
    (tmp_path / "herd.toml").write_text(text)
    found = environment_problems(parse_config(text, tmp_path / "herd.toml"))
    lines = [str(p) for p in found if "cost" in str(p)]
    assert len(lines) == 2, lines
    assert lines[0].startswith('warning: herd.toml: session "a": budget.cost_usd: ')
    assert "fleet.budget.cost_usd" in lines[1] and " b " not in lines[1]


def test_a_cost_that_appears_late_is_projected_from_its_first_known_sample() -> None:
    samples = [Sample(0.0, spend(0)), Sample(10.0, spend(100, 1.0)), Sample(20.0, spend(200, 2.0))]
    found = project(Budget(cost_usd=12.0), samples, 30.0, spend(300, 3.0), None, None)
    assert found is not None and found.seconds_left == pytest.approx(90.0)  # $9 at $0.1/s
