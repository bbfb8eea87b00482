"""The Spend tab: each budget dimension's spend over time as a small chart against its limit.

Pure: from the `spend` op's samples and the session's status to Rich text, sized to the
width it is drawn in. Solid blocks are what was spent, dim dots where the recent rate leads,
the top line is the limit, and `✕` marks where the projection meets it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, ConsoleOptions
from rich.text import Text

from agentherd.sessions.budget import PROJECTION_WINDOW_S
from agentherd.sessions.durations import format_duration
from agentherd.sessions.money import usd_text
from agentherd.sessions.states import ACTIVE_STATES
from agentherd.sessions.status import SessionStatus

CHART_ROWS = 5
"""Rows of one dimension's chart: enough for eighth-cell steps to read as a slope."""

LABEL_CELLS = 10
"""The left margin holding the dimension's name and its scale."""

PROJECTED_SHARE = 0.4
"""How far ahead the projection reaches, as a share of the past shown, unless the limit is
nearer: it is a guess, the past is the fact, so it never takes more than half the width."""

BLOCKS = " ▁▂▃▄▅▆▇█"
"""Eighths of a cell, from empty to full."""

SAMPLE_FIELD = {"tokens": 1, "cost_usd": 2, "turns": 3}
"""Where each charted dimension sits in a `spend` sample `[at, tokens, cost, turns, passing]`."""


@dataclass(frozen=True, slots=True)
class Series:
    """One dimension's points (unix seconds, amount), its limit and the recent rate per second."""

    name: str
    points: list[tuple[float, float]]
    limit: float
    rate_per_s: float
    estimated: bool = False
    spent_now: float | None = None
    """The status's figure (newer than the last sample)."""
    capped: bool = True
    """False: no budget limits this dimension, `limit` is only the chart's scale (its peak)."""


def amount_text(name: str, value: float) -> str:
    """An amount as the dimension counts it: `$1.20`, `1.2M`, `1h02m`, `31`."""
    if name == "cost_usd":
        return f"${usd_text(value)}"
    if name == "wall_time":
        return format_duration(value)
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    return f"{int(value):,}"


def _rate(points: list[tuple[float, float]]) -> float:
    """Spend per second over the projection window (as the daemon projects), 0 when unknown."""
    if len(points) < 2:
        return 0.0
    end_at, end = points[-1]
    recent = [p for p in points if end_at - p[0] <= PROJECTION_WINDOW_S] or points
    start_at, start = recent[0]
    if end_at <= start_at:
        return 0.0
    return max(0.0, (end - start) / (end_at - start_at))


def series(samples: list[list[Any]], status: SessionStatus | None) -> list[Series]:
    """A series for each budget dimension with a limit; wall time from the sample times."""
    budget = (status.budget if status else None) or {}
    found = []
    for name, use in budget.items():
        if not isinstance(use, dict) or "limit" not in use or not use.get("limit"):
            continue
        limit = float(use["limit"])
        if name in SAMPLE_FIELD:
            index = SAMPLE_FIELD[name]
            points = [(float(s[0]), float(s[index])) for s in samples if s[index] is not None]
        elif name == "wall_time" and samples and use.get("spent") is not None:
            # wall time spends one second a second: the last sample holds the spent figure
            end_at, spent = float(samples[-1][0]), float(use["spent"])
            points = [(float(s[0]), max(0.0, spent - (end_at - float(s[0])))) for s in samples]
        else:
            continue
        estimated = bool(use.get("estimated"))
        spent_now = None if use.get("spent") is None else float(use["spent"])
        found.append(Series(name, points, limit, _rate(points), estimated, spent_now))
    if not found:  # no budget: what was spent, scaled to its peak, with nothing to run out of
        for name in ("cost_usd", "tokens"):
            index = SAMPLE_FIELD[name]
            points = [(float(s[0]), float(s[index])) for s in samples if s[index] is not None]
            peak = max((value for _, value in points), default=0.0)
            if peak > 0:
                found.append(Series(name, points, peak, 0.0, capped=False))
    return found


def _clock(unix_s: float) -> str:
    return datetime.fromtimestamp(unix_s, UTC).strftime("%H:%M")


def chart(item: Series, width: int, running: bool) -> list[Text]:
    """One dimension: a headline, CHART_ROWS rows of blocks under its limit, a time axis."""
    plot = max(10, width - LABEL_CELLS)
    spent = item.points[-1][1] if item.points else 0.0
    mark = " (estimated)" if item.estimated else ""
    now = item.spent_now if item.spent_now is not None else spent
    of = f" of {amount_text(item.name, item.limit)}  ({now / item.limit:.0%})"
    head = Text(
        f"{item.name}  {amount_text(item.name, now)}{of if item.capped else ''}{mark}",
        style="bold",
    )
    running = running and item.capped
    if len(item.points) < 2:
        return [
            head,
            Text("  not enough samples yet: the daemon takes one every few seconds of a run"),
        ]
    first_at, last_at = item.points[0][0], item.points[-1][0]
    past_s = max(1.0, last_at - first_at)
    left_s = (item.limit - spent) / item.rate_per_s if item.rate_per_s > 0 else float("inf")
    ahead_s = 0.0
    if running:  # as far as the limit when that is near, else a share of the width
        near = left_s * 1.05 <= past_s
        ahead_s = left_s * 1.05 if near else past_s * PROJECTED_SHARE
    past = max(2, round(plot * past_s / (past_s + ahead_s)))
    step_s = (past_s + ahead_s) / max(1, plot - 1)
    values: list[tuple[float, bool]] = []
    cursor = 0
    for column in range(plot):
        at = first_at + column * step_s
        if column < past:
            while cursor + 1 < len(item.points) and item.points[cursor + 1][0] <= at + 1e-6:
                cursor += 1
            values.append((item.points[cursor][1], False))
        else:
            values.append((spent + item.rate_per_s * (at - last_at), True))
    exhausted = next((i for i, (v, p) in enumerate(values) if p and v >= item.limit), None)
    rows = _rows(values, item.limit, plot, spent >= item.limit)
    label = "limit" if item.capped else amount_text(item.name, item.limit)
    limit_line = Text(f"{label:>{LABEL_CELLS - 1}} ", style="dim")
    top = ["─"] * plot
    if exhausted is not None:
        top[exhausted] = "✕"
    limit_line.append("".join(top), style="red" if exhausted is not None else "dim")
    lines = [head, limit_line, *rows]
    axis = Text(" " * LABEL_CELLS)
    left, right = _clock(first_at), _clock(last_at)
    middle = max(1, past - len(left) - len(right))
    axis.append(f"{left}{' ' * middle}{right}", style="dim")
    if running:
        if exhausted is not None:
            runs_out = last_at + (exhausted - past + 1) * step_s
            axis.append(f"  ✕ runs out ~{_clock(runs_out)} at this rate", style="red")
        elif item.rate_per_s > 0:
            axis.append(f"  ··· lasts {format_duration(left_s)} more", style="dim")
        else:
            axis.append("  ··· not spending now", style="dim")
    return [*lines, axis]


def _rows(values: list[tuple[float, bool]], limit: float, plot: int, over: bool) -> list[Text]:
    """The blocks, top row first; past columns solid (red once over the limit), future dotted."""
    lines = []
    for row in range(CHART_ROWS - 1, -1, -1):
        label = "0" if row == 0 else ""
        line = Text(f"{label:>{LABEL_CELLS - 1}} ", style="dim")
        for value, projected in values:
            eighths = round(min(1.0, max(0.0, value / limit)) * CHART_ROWS * 8) - row * 8
            cell = BLOCKS[min(8, max(0, eighths))]
            if projected:  # a dotted line at the projected height, not a filled area
                line.append("·" if 0 < eighths <= 8 else " ", style="dim")
            else:
                line.append(cell, style="red" if over else "green")
        lines.append(line)
    return lines


class SpendCharts:
    """Every dimension's chart, drawn at whatever width the tab has."""

    def __init__(self, samples: list[list[Any]], status: SessionStatus | None) -> None:
        self.samples = samples
        self.status = status

    def lines(self, width: int) -> Iterable[Text]:
        """The whole tab as lines, for the width given."""
        status = self.status
        found = series(self.samples, status)
        if not any(item.capped for item in found):
            yield Text("no budget set: add budget = { cost_usd = 25, ... } to the session", "dim")
        if not found:
            yield Text("no samples of its spend yet: the daemon takes them while a run goes")
        running = status is not None and status.state in ACTIVE_STATES
        for item in found:
            yield from chart(item, width, running)
            yield Text("")
        budget = (status.budget if status else None) or {}
        restarts = budget.get("restarts")
        if isinstance(restarts, dict):
            yield Text(f"restarts {restarts.get('spent')} of {restarts.get('limit')}", "bold")
        projection = budget.get("projection")
        if projection:
            text = f"projection: {projection['dimension']} runs out at {projection['exhausted_at']}"
            if projection.get("items_passing_by_then") is not None:
                text += (
                    f" with {projection['items_passing_by_then']}/{projection['plan_total']}"
                    " plan items passing"
                )
            if projection.get("runs_out_before_plan"):
                text += " (before the plan is done)"
            yield Text(text, style="yellow" if projection.get("runs_out_before_plan") else "")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterable[Text]:
        """Rich draws it at the tab's width."""
        for line in self.lines(options.max_width):
            line.no_wrap = True
            line.overflow = "crop"
            yield line
