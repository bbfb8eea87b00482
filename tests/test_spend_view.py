"""Spend as people see it: `~$` estimates, the budget bar, the fleet in the header, status text."""

from __future__ import annotations

from typing import Any

from agentherd.sessions.status import SessionStatus
from agentherd.tui.dashboard.rows import fleet_summary, row_cells
from agentherd.tui.render import detail, table
from agentherd.tui.spend import budget_cell, money, tokens_text


def status(**fields: Any) -> SessionStatus:
    return SessionStatus.model_validate({"session": "api", "state": "running", **fields})


USAGE = {"total_tokens": 1500, "cost_usd": 0.42, "cost_estimated": False, "turns": 3}


def test_money_marks_an_estimate_and_never_invents_zero() -> None:
    assert money(0.42, False) == "$0.42"
    assert money(0.42, True) == "~$0.42"
    assert money(None, False) == "-"
    assert tokens_text(950) == "950" and tokens_text(12_345) == "12k"
    assert tokens_text(4_100_000) == "4.1M"


def test_the_row_shows_the_cost_and_the_most_spent_dimension_as_a_bar() -> None:
    budget = {
        "tokens": {"spent": 100, "limit": 1000, "fraction": 0.1},
        "cost_usd": {"spent": 0.62, "limit": 1.0, "fraction": 0.62, "estimated": True},
        "warn_at": 0.8,
        "covers": "task",
        "projection": None,
    }
    cells = row_cells(status(usage={**USAGE, "cost_estimated": True}, budget=budget), 30)
    assert cells["cost"] == ("~$0.42", "")
    assert cells["budget"] == ("▇▇▇░░ 62% cost", "")
    over = {**budget, "turns": {"spent": 9, "limit": 10, "fraction": 0.9}}
    assert budget_cell(status(budget=over)) == ("▇▇▇▇░ 90% turns", "yellow")
    heading = {**budget, "projection": {"runs_out_before_plan": True}}
    assert budget_cell(status(budget=heading))[0].endswith(" !")  # runs out before the plan
    assert budget_cell(status()) == ("-", "dim")


def test_the_header_shows_the_fleet_total_against_its_budget() -> None:
    fleet = {
        "usage": USAGE,
        "usage_total": {**USAGE, "cost_usd": 3.1, "total_tokens": 1_200_000},
        "budget": {"cost_usd": {"spent": 3.1, "limit": 10.0, "fraction": 0.31}, "warn_at": 0.8},
    }
    header = fleet_summary([status(fleet=fleet), status(session="b", fleet=fleet)])
    assert header.endswith("$3.10 · 1.2M tok (fleet budget: 31% cost)"), header
    assert "$" not in fleet_summary([status()])


def test_ls_and_status_show_the_task_the_life_the_budget_and_the_heading() -> None:
    one = status(
        usage=USAGE,
        usage_total={**USAGE, "cost_usd": 0.92, "total_tokens": 4000},
        budget={
            "cost_usd": {"spent": 0.42, "limit": 1.0, "fraction": 0.42, "estimated": False},
            "warn_at": 0.8,
            "covers": "task",
            "projection": {
                "dimension": "cost_usd",
                "exhausted_at": "2026-12-01T15:00:00.000Z",
                "items_passing_by_then": 9,
                "plan_total": 12,
                "runs_out_before_plan": True,
            },
        },
    )
    listing = table([one], 200)
    assert "COST" in listing and "$0.42" in listing and "42% cost !" in listing
    text = detail(one)
    assert "usage:" in text and "1,500 tokens, $0.42, 3 turns" in text
    assert "4,000 tokens, $0.92" in text
    assert "budget:        cost_usd $0.42 of $1.00 (42%)" in text
    assert "with 9/12 passing (before the plan is done)" in text


def test_the_header_says_nothing_of_spend_before_anything_was_spent() -> None:
    """Seen in tmux at 80x24: "- · 0 tok" took the header's room before any agent spent."""
    nothing = {"usage": {}, "usage_total": {"total_tokens": 0, "cost_usd": None}, "budget": {}}
    assert "tok" not in fleet_summary([status(fleet=nothing)])
