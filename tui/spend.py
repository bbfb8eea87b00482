"""Spend and budgets as people read them: `~$` marks an estimate, a bar the most-spent limit."""

from __future__ import annotations

from agentherd.sessions.durations import format_duration
from agentherd.sessions.money import uncounted_text, usd_text

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing and the models cost the fast CLI path: statuses may be plain JSON
    from typing import Any

    from agentherd.sessions.status import SessionStatus, UsageStatus

BAR_CELLS = 5
"""Width of a row's budget bar: five cells read at a glance, in 20 % steps."""

SHORT_NAMES = {
    "wall_time": "time",
    "tokens": "tok",
    "cost_usd": "cost",
    "turns": "turns",
    "restarts": "rst",
}
"""Budget dimensions as a narrow column names them."""


def money(
    cost_usd: float | None, estimated: bool, unpriced: str | None = None, cut_off: int = 0
) -> str:
    """`$0.42`, `~$0.42` for an estimate, `-` when nothing reported one (never an invented $0);
    `unpriced` when a model herd has no price for left the cost out, and `~$0.42+` when part of
    it is left out (such a model, or requests a kill cut off)."""
    if cost_usd is None:
        return "unpriced" if unpriced else "-"
    more = "+" if unpriced or cut_off else ""
    return f"{'~' if estimated else ''}${cost_usd:,.2f}{more}"


def usage_money(usage: UsageStatus | dict[str, Any] | None) -> str:
    """The cost of a `usage` object (model or JSON), marked when estimated or incomplete."""
    if usage is None:
        return "-"
    if isinstance(usage, dict):  # JSON, read without building the model (its defaults)
        return money(
            usage.get("cost_usd"),
            bool(usage.get("cost_estimated")),
            usage.get("cost_unpriced_model"),
            int(usage.get("uncounted_requests") or 0),
        )
    return money(
        usage.cost_usd, usage.cost_estimated, usage.cost_unpriced_model, usage.uncounted_requests
    )


def unpriced_text(model: str | None) -> str:
    """` (no price for gemini-3.8-flash: add [prices.gemini-3.8-flash] to herd.toml)`, or ``."""
    if not model:
        return ""
    from agentherd.sessions.prices import table_header  # pydantic: only when a price is missing

    return f" (no price for {model}: add {table_header(model)} to herd.toml)"


def tokens_text(count: int) -> str:
    """`950`, `12.3k`, `4.1M`: token counts at a glance."""
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}M"
    if count >= 10_000:
        return f"{count / 1000:.0f}k"
    if count >= 1000:
        return f"{count / 1000:.1f}k"
    return str(count)


def _dimensions(budget: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    if not budget:
        return []
    return [(k, v) for k, v in budget.items() if isinstance(v, dict) and "fraction" in v]


def budget_cell(status: SessionStatus) -> tuple[str, str]:
    """`▇▇▇░░ 62% cost`: the dimension closest to its limit, styled by how close."""
    found = _dimensions(status.budget)
    if not found:
        return ("-", "dim")
    name, use = max(found, key=lambda item: float(item[1]["fraction"]))
    fraction = float(use["fraction"])
    filled = min(BAR_CELLS, int(fraction * BAR_CELLS + 1e-9))
    bar = "▇" * filled + "░" * (BAR_CELLS - filled)
    warn_at = float((status.budget or {}).get("warn_at", 0.8))
    style = "bold red" if fraction >= 1 else "yellow" if fraction >= warn_at else ""
    projection = (status.budget or {}).get("projection") or {}
    flag = " !" if projection.get("runs_out_before_plan") else ""
    return (f"{bar} {fraction:.0%} {SHORT_NAMES.get(name, name)}{flag}", style)


def fleet_text(statuses: list[SessionStatus]) -> str:
    """`  ·  $3.10 · 1.2M tok (fleet budget: 31% cost)` for the dashboard header."""
    fleet = next((s.fleet for s in statuses if s.fleet), None)
    if not fleet:
        return ""
    total = fleet.get("usage_total") or {}
    tokens = int(total.get("total_tokens") or 0)
    found = _dimensions(fleet.get("budget"))
    if not tokens and total.get("cost_usd") is None and not found:
        return ""  # nothing spent yet: "- · 0 tok" says nothing
    text = f"  ·  {usage_money(total)} · {tokens_text(tokens)} tok"
    if found:
        name, use = max(found, key=lambda item: float(item[1]["fraction"]))
        text += f" (fleet budget: {float(use['fraction']):.0%} {SHORT_NAMES.get(name, name)})"
    return text


def _amount(name: str, value: Any) -> str:
    if value is None:
        return "unknown"
    if name == "cost_usd":
        return f"${usd_text(float(value))}"
    if name == "wall_time":
        return format_duration(float(value))
    return f"{int(value):,}"


def spend_fields(status: SessionStatus) -> list[tuple[str, str]]:
    """`herd status NAME` lines: the task's usage, the session's life, each budget, projection."""
    fields = []
    for label, usage in (("usage", status.usage), ("usage (life)", status.usage_total)):
        if usage is not None:
            cost = usage_money(usage)
            cost = "cost unknown" if cost in ("-", "unpriced") else cost
            cost += unpriced_text(usage.cost_unpriced_model)
            text = f"{usage.total_tokens:,} tokens, {cost}, {usage.turns} turns"
            if usage.uncounted_requests:
                text += f"; {uncounted_text(usage.uncounted_requests)}"
            fields.append((label, text))
    budget = status.budget or {}
    for name, use in _dimensions(budget):
        mark = " (estimated)" if use.get("estimated") else ""
        spent, limit = _amount(name, use.get("spent")), _amount(name, use.get("limit"))
        fraction = float(use["fraction"])
        fields.append(("budget", f"{name} {spent} of {limit} ({fraction:.0%}){mark}"))
    projection = budget.get("projection")
    if projection:
        text = f"{projection['dimension']} runs out at {projection['exhausted_at']}"
        if projection.get("items_passing_by_then") is not None:
            text += (
                f" with {projection['items_passing_by_then']}/{projection['plan_total']} passing"
            )
        if projection.get("runs_out_before_plan"):
            text += " (before the plan is done)"
        fields.append(("heading", text))
    return fields
