"""Budgets, pure: what a session (or the fleet) spent, how much of each limit that is, and when
it crosses `warn_at` or 100 %.

No clock and no processes here: the supervisor passes the spend and the time in, so every rule
is tested in milliseconds. What a budget counts (docs/reference.md, "Budgets"):

- `covers = "task"` (the default): the current task, everything since `herd start` (its first
  run and every automatic restart). `covers = "life"`: every run the session ever had.
- `wall_time`: seconds since the task began (backoff included); for a life, the sum of its tasks.
- `tokens`: input + output + cache read + cache write. `cost_usd`: reported, else estimated
  from the price table. `turns`: the agent's own count. `restarts`: automatic restarts.
- The fleet budget sums the session budgets' counts over every session with an active task.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, replace
from typing import Any

from agentherd.sessions.adapters.usage import Usage
from agentherd.sessions.config import Budget

DIMENSIONS = ("wall_time", "tokens", "cost_usd", "turns", "restarts")
"""The budget dimensions, in the order they are shown."""

PROJECTION_WINDOW_S = 600.0
"""The recent rate of spend and of progress is read over this much of the latest samples."""

PROJECTION_MIN_SPAN_S = 5.0
"""Fewer seconds of samples than this give no rate: the first seconds of a run say little."""

SAMPLE_EVERY_S = 10.0
"""Spend samples are at least this far apart: a chart of hours needs no finer points."""

MAX_SAMPLES = 360
"""Samples kept per session (an hour at SAMPLE_EVERY_S); the oldest go first."""


@dataclass(frozen=True, slots=True)
class Spend:
    """What counts against a budget: usage plus wall time and automatic restarts."""

    usage: Usage = Usage()
    wall_time_s: float = 0.0
    restarts: int = 0

    def __add__(self, other: Spend) -> Spend:
        """Spend of separate sessions or tasks adds up, dimension by dimension."""
        return Spend(
            self.usage + other.usage,
            self.wall_time_s + other.wall_time_s,
            self.restarts + other.restarts,
        )

    def amount(self, dimension: str) -> float | None:
        """The spent amount of one dimension; None for a cost nobody reported or estimated."""
        if dimension == "wall_time":
            return self.wall_time_s
        if dimension == "tokens":
            return float(self.usage.total_tokens)
        if dimension == "cost_usd":
            return self.usage.cost_usd
        if dimension == "turns":
            return float(self.usage.turns)
        if dimension == "restarts":
            return float(self.restarts)
        raise ValueError(f"unknown budget dimension {dimension!r}")


def limits(budget: Budget) -> dict[str, float]:
    """The dimensions this budget sets, with their limits (`stall` is not a spend)."""
    found = {d: getattr(budget, d) for d in DIMENSIONS}
    return {d: float(v) for d, v in found.items() if v is not None}


@dataclass(frozen=True, slots=True)
class DimensionUse:
    """How much of one limit is spent."""

    dimension: str
    spent: float | None
    limit: float
    estimated: bool = False

    @property
    def fraction(self) -> float:
        """Spent / limit (0 when the spend is unknown: an unknown cost never stops a session)."""
        return 0.0 if self.spent is None else self.spent / self.limit

    def to_json(self) -> dict[str, Any]:
        """The status JSON's `{"spent", "limit", "fraction"}` (plus `estimated` for a cost)."""
        spent = None if self.spent is None else round(self.spent, 6)
        data: dict[str, Any] = {
            "spent": int(spent) if spent is not None and self.dimension in _COUNTS else spent,
            "limit": int(self.limit) if self.dimension in _COUNTS else self.limit,
            "fraction": round(self.fraction, 4),
        }
        if self.dimension == "cost_usd":
            data["estimated"] = self.estimated
        return data


_COUNTS = frozenset({"tokens", "turns", "restarts"})


def evaluate(budget: Budget, spend: Spend) -> list[DimensionUse]:
    """How much of each limit the spend uses, in DIMENSIONS order."""
    return [
        DimensionUse(d, spend.amount(d), limit, d == "cost_usd" and spend.usage.cost_estimated)
        for d, limit in limits(budget).items()
    ]


def most_spent(uses: list[DimensionUse]) -> DimensionUse | None:
    """The dimension closest to its limit (the one a dashboard row shows), or None."""
    return max(uses, key=lambda use: use.fraction, default=None)


@dataclass(frozen=True, slots=True)
class Crossings:
    """What a budget check found new: dimensions that passed warn_at, and the one that ran out."""

    warn: tuple[DimensionUse, ...] = ()
    exhausted: DimensionUse | None = None


def crossings(
    budget: Budget, spend: Spend, warned: frozenset[str] | set[str], restarting: bool = False
) -> Crossings:
    """The new warnings (each dimension once: `warned` holds those already given) and the stop.

    `restarts` runs out only when another restart is due (`restarting`): reaching the limit
    itself is allowed, the restart after it is not (one already past it stops at once).
    """
    uses = evaluate(budget, spend)
    warn = tuple(u for u in uses if u.fraction >= budget.warn_at and u.dimension not in warned)
    out = [u for u in uses if _exhausted(u, restarting)]
    return Crossings(warn, max(out, key=lambda u: u.fraction, default=None))


def _exhausted(use: DimensionUse, restarting: bool) -> bool:
    if use.dimension == "restarts":  # over the limit: a restart came before a check saw it
        return use.fraction > 1.0 or (restarting and use.fraction >= 1.0)
    return use.fraction >= 1.0


def raised_since_stop(budget: Budget, reason: str | None, limit_at_stop: float | None) -> bool:
    """True when the limit that stopped a session (reason budget:<dimension>) was raised since.

    `budget` is the one that stopped it as it is now (the session's or the fleet's); a limit
    removed counts as raised, and so does a stop whose limit was not recorded.
    """
    if not reason or not reason.startswith("budget:"):
        return False
    limit = limits(budget).get(reason.removeprefix("budget:"))
    return limit is None or limit_at_stop is None or limit > limit_at_stop


class CostGuard:
    """Keeps a run's reported totals from going down: a cost that goes backwards is ignored.

    Output tokens the adapter estimated (`Usage.output_estimate_tokens`) are not a floor: the
    true figure replaces them, lower or not, and so does the cost priced from them.
    """

    def __init__(self) -> None:
        self.highest = Usage()
        self.went_backwards = False
        """Set the first time a reported figure was lower than one before it."""

    def take(self, usage: Usage) -> Usage:
        """The run's usage with every figure at least what it was before (estimates aside)."""
        high = self.highest
        guessed = high.output_estimate_tokens
        lower = (
            usage.total_tokens < high.total_tokens - guessed
            or usage.turns < high.turns
            or (
                not guessed
                and high.cost_usd is not None
                and (usage.cost_usd or 0.0) < high.cost_usd
            )
        )
        if lower:
            self.went_backwards = True
        cost = usage.cost_usd
        if high.cost_usd is not None and (cost is None or (cost < high.cost_usd and not guessed)):
            cost = high.cost_usd
        output_floor = high.output_tokens - guessed
        self.highest = Usage(
            input_tokens=max(usage.input_tokens, high.input_tokens),
            output_tokens=max(usage.output_tokens, output_floor),
            output_estimate_tokens=(
                usage.output_estimate_tokens if usage.output_tokens >= output_floor else 0
            ),
            cache_read_tokens=max(usage.cache_read_tokens, high.cache_read_tokens),
            cache_write_tokens=max(usage.cache_write_tokens, high.cache_write_tokens),
            cost_usd=cost,
            cost_estimated=usage.cost_estimated if cost == usage.cost_usd else high.cost_estimated,
            turns=max(usage.turns, high.turns),
        )
        return self.highest


# ----- where it is heading -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    """One point of a session's spend over time (seconds on the supervisor's clock)."""

    at_s: float
    spend: Spend
    passing: int | None = None

    def to_json(self, wall_clock_offset_s: float) -> list[Any]:
        """`[unix time, tokens, cost or null, turns, plan items passing or null]` for charts."""
        usage = self.spend.usage
        cost = None if usage.cost_usd is None else round(usage.cost_usd, 6)
        return [
            round(self.at_s + wall_clock_offset_s, 1),
            usage.total_tokens,
            cost,
            usage.turns,
            self.passing,
        ]


_FIELDS = 7
"""Numbers kept per sample: at_s, wall_time_s, restarts, total tokens, cost (NaN for none),
turns, plan items passing (NaN for none)."""


class SpendHistory:
    """A session's spend samples, at least SAMPLE_EVERY_S apart and at most MAX_SAMPLES.

    Kept as 7 doubles a sample in one array (56 bytes; a Sample with its Spend and Usage took
    ~350): 200 sessions x 360 samples grew the daemon by 25 MB over an hour. A sample read
    back keeps what its readers use (tokens as one total, cost, turns, wall time, restarts).
    """

    def __init__(self, every_s: float = SAMPLE_EVERY_S, max_samples: int = MAX_SAMPLES) -> None:
        self.every_s = every_s
        self.max_samples = max_samples
        self._rows = array("d")

    def __len__(self) -> int:
        return len(self._rows) // _FIELDS

    @property
    def last_at_s(self) -> float | None:
        """When the newest sample was taken, or None when there is none."""
        return self._rows[-_FIELDS] if self._rows else None

    @property
    def samples(self) -> list[Sample]:
        """The samples, oldest first."""
        return self.since(-math.inf)

    def since(self, at_s: float) -> list[Sample]:
        """The samples taken at `at_s` or later, oldest first (found by bisection: a status
        asks for the last minutes of up to MAX_SAMPLES, for every session of an `ls`)."""
        rows = self._rows
        low, high = 0, len(self)
        while low < high:  # the first sample at `at_s` or later; samples are in time order
            middle = (low + high) // 2
            if rows[middle * _FIELDS] < at_s:
                low = middle + 1
            else:
                high = middle
        starts = range(low * _FIELDS, len(rows), _FIELDS)
        return [_unpack(rows[i : i + _FIELDS]) for i in starts]

    def add(self, sample: Sample) -> bool:
        """Keep the sample if it is far enough from the last one; a new task starts afresh."""
        last = _unpack(self._rows[-_FIELDS:]) if self._rows else None
        if last is not None and _restarted(last.spend, sample.spend):
            del self._rows[:]
            last = None
        if last is not None and sample.at_s - last.at_s < self.every_s:
            return False
        if len(self) >= self.max_samples:
            del self._rows[: (len(self) - self.max_samples + 1) * _FIELDS]
        self._rows.extend(_pack(sample))
        return True

    def repeat_last(self, until_s: float, wall_moving: bool) -> int:
        """Add the samples a spend that did not change would have given, every `every_s` up to
        `until_s`: the last one's figures, its wall time one second a second if `wall_moving`.

        A quiet session is then sampled by no timer: its points are written when read or when
        its spend next changes. Returns how many were added.
        """
        if not self._rows:
            return 0
        last = self._rows[-_FIELDS:]
        steps = math.floor((until_s - last[0]) / self.every_s + 1e-9)
        if steps <= 0:
            return 0
        first = max(1, steps - self.max_samples + 1)  # older ones would be dropped at once
        for step in range(first, steps + 1):
            if len(self) >= self.max_samples:
                del self._rows[:_FIELDS]
            shift_s = step * self.every_s
            row = array("d", last)
            row[0] += shift_s
            if wall_moving:
                row[1] += shift_s
            self._rows.extend(row)
        return steps - first + 1


def _pack(sample: Sample) -> tuple[float, ...]:
    """A sample as SpendHistory's 7 numbers (NaN for a missing cost or plan)."""
    spend, usage = sample.spend, sample.spend.usage
    return (
        sample.at_s,
        spend.wall_time_s,
        float(spend.restarts),
        float(usage.total_tokens),
        math.nan if usage.cost_usd is None else usage.cost_usd,
        float(usage.turns),
        math.nan if sample.passing is None else float(sample.passing),
    )


def _unpack(row: Any) -> Sample:
    """SpendHistory's 7 numbers as a Sample (all tokens counted as input: only totals are read)."""
    at_s, wall_s, restarts, tokens, cost, turns, passing = row
    usage = Usage(
        input_tokens=int(tokens), cost_usd=None if math.isnan(cost) else cost, turns=int(turns)
    )
    return Sample(
        at_s, Spend(usage, wall_s, int(restarts)), None if math.isnan(passing) else int(passing)
    )


def _restarted(before: Spend, after: Spend) -> bool:
    """A new task began: its spend is lower than the last sample's."""
    return after.wall_time_s < before.wall_time_s or (
        after.usage.total_tokens < before.usage.total_tokens
    )


@dataclass(frozen=True, slots=True)
class Projection:
    """At the recent rate: when the budget runs out, and how far the plan gets by then."""

    dimension: str
    seconds_left: float
    items_passing_by_then: int | None
    plan_total: int | None

    @property
    def runs_out_first(self) -> bool:
        """True when the budget runs out before the plan is done."""
        if self.items_passing_by_then is None or self.plan_total is None:
            return False
        return self.items_passing_by_then < self.plan_total

    def to_json(self, now_unix_s: float, iso: Any) -> dict[str, Any]:
        """The status JSON's `projection` object (`iso` formats a unix time)."""
        return {
            "dimension": self.dimension,
            "exhausted_at": iso(now_unix_s + self.seconds_left),
            "seconds_left": round(self.seconds_left, 1),
            "items_passing_by_then": self.items_passing_by_then,
            "plan_total": self.plan_total,
            "runs_out_before_plan": self.runs_out_first,
        }


def project(
    budget: Budget,
    samples: list[Sample],
    now_s: float,
    spend: Spend,
    passing: int | None,
    plan_total: int | None,
    window_s: float = PROJECTION_WINDOW_S,
) -> Projection | None:
    """The dimension that runs out first at the recent rate of spend, and the plan by then.

    The rate is read from the first sample inside the window to now; wall time spends one
    second a second. None when no limit is set, nothing is being spent, or too little is known.
    """
    recent = [s for s in samples if now_s - s.at_s <= window_s]
    best: tuple[float, str] | None = None
    for dimension, limit in limits(budget).items():
        if dimension == "restarts":
            continue  # restarts come from crashes, not from a steady rate
        spent = spend.amount(dimension)
        # The oldest sample that knows this figure (a cost may appear only after a while).
        first = next((s for s in recent if s.spend.amount(dimension) is not None), None)
        if spent is None or first is None or now_s - first.at_s < PROJECTION_MIN_SPAN_S:
            continue
        before = first.spend.amount(dimension) or 0.0
        rate = 1.0 if dimension == "wall_time" else (spent - before) / (now_s - first.at_s)
        if rate <= 0:
            continue
        left_s = max(limit - spent, 0.0) / rate
        if best is None or left_s < best[0]:
            best = (left_s, dimension)
    if best is None:
        return None
    left_s, dimension = best
    by_then: int | None = None
    known = next((s for s in recent if s.passing is not None), None)
    if passing is not None and plan_total is not None and known is not None:
        span_s = max(now_s - known.at_s, PROJECTION_MIN_SPAN_S)
        per_s = max(passing - (known.passing or 0), 0) / span_s
        by_then = min(plan_total, passing + math.floor(per_s * left_s + 1e-9))
    return Projection(dimension, left_s, by_then, plan_total)


def budget_json(
    budget: Budget, spend: Spend, projection: dict[str, Any] | None, covers: str
) -> dict[str, Any] | None:
    """The status JSON's `budget` object: each dimension set, and the projection; None if none."""
    uses = evaluate(budget, spend)
    if not uses:
        return None
    data: dict[str, Any] = {use.dimension: use.to_json() for use in uses}
    data["warn_at"] = budget.warn_at
    data["covers"] = covers
    data["projection"] = projection
    return data


def with_wall_time(spend: Spend, wall_time_s: float) -> Spend:
    """The same spend with another wall time."""
    return replace(spend, wall_time_s=wall_time_s)
