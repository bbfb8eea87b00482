"""One session's spend ledger: its runs guarded, priced and summed, sampled for the projection.

The arithmetic is sessions/budget.py's. The ledger is told what it counts from (`SpendFacts`:
the session's config, record, watched run and plan, the price table) at each question, and
answers with values; it never reaches back into the session or the daemon.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from agentherd.sessions.adapters import Usage
from agentherd.sessions.budget import (
    DIMENSIONS,
    PROJECTION_WINDOW_S,
    CostGuard,
    Sample,
    Spend,
    SpendHistory,
    budget_json,
    project,
)
from agentherd.sessions.config import Budget, SessionConfig
from agentherd.sessions.plan import Plan
from agentherd.sessions.prices import Price, price_for, with_estimate
from agentherd.sessions.records import RunRecord, SessionRecord
from agentherd.sessions.states import ACTIVE_STATES
from agentherd.sessions.status import UsageStatus
from agentherd.sessions.times import iso, parse_iso
from agentherd.supervisor.files.store import Store
from agentherd.supervisor.session.liverun import LiveRun


@dataclass(frozen=True, slots=True)
class SpendFacts:
    """What a session's spend is counted from, as the session holds it when it asks."""

    config: SessionConfig
    record: SessionRecord
    live: LiveRun | None
    """The run being watched, if any."""
    task_usage: Usage
    """Usage of the current task's ended runs, as recorded."""
    plan: Plan | None
    prices: dict[str, Price]
    """The price table for estimated costs (herd's own, herd.toml's entries over it)."""
    restarting: bool = False
    """A restart waits in backoff and has not begun (it counts once it has)."""


@functools.lru_cache(maxsize=1024)
def _unix_s(moment: str | None) -> float | None:
    """An ISO time as unix seconds (remembered: every check reads the same task starts)."""
    parsed = parse_iso(moment)
    return parsed.timestamp() if parsed is not None else None


def seconds_between(start: str | None, end: str | None, now_unix_s: float) -> float:
    """Seconds from an ISO start to an ISO end (or to now when the end is unknown)."""
    began = _unix_s(start)
    if began is None:
        return 0.0
    ended = _unix_s(end)
    end_s = ended if ended is not None else now_unix_s
    return max(end_s - began, 0.0)


def has_limits(budget: Budget) -> bool:
    """True when the budget sets any limit (most sessions set none)."""
    return any(getattr(budget, dimension) is not None for dimension in DIMENSIONS)


class SessionSpend:
    """One session's spend as its budget counts it: runs guarded, priced, summed, sampled."""

    def __init__(self, store: Store, sample_every_s: float) -> None:
        self.store = store
        """Read for the session's ended runs and tasks."""
        self.guards: dict[int, CostGuard] = {}
        """The current run's guard, by run number: its figures never go down."""
        self.warned_backwards: set[int] = set()
        self.backwards_unsaid: set[int] = set()
        """Runs whose figures went backwards, not yet told of in a `usage-backwards` event."""
        self.history = SpendHistory(every_s=sample_every_s)
        self._ended: tuple[tuple[int, bool], Usage, float, int, int] | None = None
        """(current run, its usage recorded) -> usage, wall s, runs, tasks of recorded runs."""
        self._ended_task: tuple[str, str] | None = None
        self._priced: tuple[tuple[Any, ...], Usage] | None = None
        """(run, the parser's usage, the price's inputs) -> run_usage's answer: a status, a
        budget check and a sample ask it many times between two changes of the output."""
        self._sampled: tuple[str | None, int] = (None, 0)
        """The task and run of the last sample: a new one is sampled at once (it starts afresh)."""
        self.changed = True
        """Something the samples show may have changed since the last one: the next is taken
        for real at its time. Otherwise the points in between repeat the last (`fill`)."""
        self._wall_moving = False
        """Whether the wall time was moving at the last sample (an active task's)."""

    # ----- figures --------------------------------------------------------------------------

    def run_usage(self, facts: SpendFacts, live: LiveRun) -> Usage:
        """A run's usage as budgets and status count it: never lower, a missing cost estimated.

        A report lower than the one before is kept in `backwards_unsaid` until told of.
        """
        if live.record.run not in self.guards:
            self.guards = {}  # only the current run's figures are still moving
            self._priced = None
        reported = live.parser.usage
        config = facts.config
        key = (live.record.run, reported, config.agent, config.price, facts.prices)
        if self._priced is not None and self._priced[0] == key:
            return self._priced[1]  # the guard would take the same figures to the same answer
        guard = self.guards.setdefault(live.record.run, CostGuard())
        raw = guard.take(reported)
        if guard.went_backwards and live.record.run not in self.warned_backwards:
            self.warned_backwards.add(live.record.run)
            self.backwards_unsaid.add(live.record.run)  # the next budget check says so
        if raw.cost_estimated and config.price is not None:
            raw = replace(raw, cost_usd=None)  # the session's own price over the adapter's list
        priced = with_estimate(raw, price_for(config.agent, config.price, facts.prices))
        self._priced = (key, priced)
        return priced

    @staticmethod
    def unrecorded(facts: SpendFacts) -> LiveRun | None:
        """The watched run while its usage is not yet written with its end (it counts live).

        Not `ended_at`: the end is set first, and the usage only after the run's transcript
        was read, off the event loop; in between, the run must count neither twice nor not at all.
        """
        live = facts.live
        return live if live is not None and not live.record.usage else None

    def live_usage(self, facts: SpendFacts) -> Usage:
        """The unrecorded run's usage so far (nothing without one)."""
        live = self.unrecorded(facts)
        return self.run_usage(facts, live) if live is not None else Usage()

    def task_usage(self, facts: SpendFacts) -> Usage:
        """The current task's usage: its ended runs (stored) and the running one."""
        return facts.task_usage + self.live_usage(facts)

    def task_spend(self, facts: SpendFacts, now_unix_s: float) -> Spend:
        """The current task's spend: usage, wall time since it began, automatic restarts."""
        record = facts.record
        if not record.handle:
            return Spend()
        end = self._task_end(record.handle) if record.state not in ACTIVE_STATES else None
        wall_s = seconds_between(record.task_started_at, end, now_unix_s)
        if end is None and record.state not in ACTIVE_STATES:
            wall_s = 0.0  # an ended task whose end is unknown counts no time
        return Spend(self.task_usage(facts), wall_s, record.restarts)

    def _task_end(self, handle: str) -> str | None:
        """When an ended task ended (read once per task, not per status)."""
        if self._ended_task is None or self._ended_task[0] != handle:
            task = self.store.task(handle)
            end = task.ended_at if task is not None else None
            if end is None:
                return None
            self._ended_task = (handle, end)
        return self._ended_task[1]

    def life_spend(self, facts: SpendFacts, now_unix_s: float, task: Spend | None = None) -> Spend:
        """Every run the session ever had: usage, the sum of its tasks' wall time, restarts."""
        usage, wall_s, runs, tasks = self._ended_runs(facts)
        usage = usage + self.live_usage(facts)
        task_wall = (task or self.task_spend(facts, now_unix_s)).wall_time_s
        return Spend(usage, wall_s + task_wall, max(runs - tasks, 0))

    def spend(self, facts: SpendFacts, covers: str, now_unix_s: float) -> Spend:
        """The spend a budget with this `covers` counts."""
        if covers == "life":
            return self.life_spend(facts, now_unix_s)
        return self.task_spend(facts, now_unix_s)

    def _ended_runs(self, facts: SpendFacts) -> tuple[Usage, float, int, int]:
        """Usage of every ended run, wall time of every task but the current one, counts."""
        record = facts.record
        live = self.unrecorded(facts)
        key = (record.run, live is None)
        if self._ended is not None and self._ended[0] == key:
            return self._ended[1:]
        runs = self.store.runs(facts.config.name)
        usage = Usage()
        counted_live = live.record.run if live is not None else None
        for run in runs:
            if run.ended_at is not None and run.usage and run.run != counted_live:
                usage = usage + Usage.from_json(run.usage)
        wall_s = _older_tasks_wall_s(runs, record.handle)
        handles = {r.handle for r in runs}
        self._ended = (key, usage, wall_s, len(runs), len(handles))
        return usage, wall_s, len(runs), len(handles)

    # ----- status ---------------------------------------------------------------------------

    def status_fields(self, facts: SpendFacts, now_unix_s: float | None = None) -> dict[str, Any]:
        """`usage`, `usage_total` and `budget` of the status JSON."""
        now = time.time() if now_unix_s is None else now_unix_s
        budget = facts.config.budget
        task = self.task_spend(facts, now)
        life = self.life_spend(facts, now, task)
        chosen = life if budget.covers == "life" else task
        projection = self.projection(facts, chosen, now)
        started = bool(facts.record.run)
        return {
            "usage": UsageStatus(**task.usage.to_json()) if started else None,
            "usage_total": UsageStatus(**life.usage.to_json()) if started else None,
            "budget": budget_json(budget, chosen, projection, budget.covers),
        }

    def projection(
        self, facts: SpendFacts, spend: Spend, now_unix_s: float
    ) -> dict[str, Any] | None:
        """Where the spend is heading at the recent rate, as the status JSON's object."""
        if facts.record.state not in ACTIVE_STATES:
            return None
        plan = facts.plan
        now_s = time.monotonic()
        self.fill(now_s)
        found = project(
            facts.config.budget,
            self.history.since(now_s - PROJECTION_WINDOW_S),
            now_s,
            spend,
            plan.passing if plan is not None else None,
            plan.total if plan is not None else None,
        )
        if found is None:
            return None
        return found.to_json(now_unix_s, lambda s: iso(datetime.fromtimestamp(s, UTC)))

    def fill(self, now_s: float) -> None:
        """Write the samples a quiet stretch would have had, up to `now_s` (monotonic).

        Not while a change waits for its sample: those points are taken for real.
        """
        if not self.changed:
            self.history.repeat_last(now_s, self._wall_moving)

    def note_change(self, now_s: float) -> None:
        """The spend (or what a sample shows) may have changed: the quiet stretch before ends."""
        self.fill(now_s)
        self.changed = True

    def samples_json(self) -> list[list[Any]]:
        """The spend samples for a chart: `[unix time, tokens, cost, turns, passing]` each."""
        self.fill(time.monotonic())
        offset_s = time.time() - time.monotonic()
        return [sample.to_json(offset_s) for sample in self.history.samples]

    def sample(self, facts: SpendFacts, now_unix_s: float) -> float | None:
        """Record a point of the spend the budget counts, for the chart and the projection.

        Only when one is due (or a new task or run began): the spend is not even summed for a
        pass that would not keep it. Returns when the next one is due (monotonic s) while a
        change waits for it, else None (a quiet stretch is filled in when read).
        """
        now_s = time.monotonic()
        self.fill(now_s)
        record = facts.record
        begun = (record.handle, record.run)
        last_at_s = self.history.last_at_s
        due = last_at_s is None or now_s - last_at_s >= self.history.every_s
        if not due and begun == self._sampled:
            return (last_at_s or now_s) + self.history.every_s if self.changed else None
        self._sampled = begun
        covers = facts.config.budget.covers
        passing = facts.plan.passing if facts.plan is not None else None
        self.history.add(Sample(now_s, self.spend(facts, covers, now_unix_s), passing))
        self.changed = False
        self._wall_moving = bool(record.handle) and record.state in ACTIVE_STATES
        return None


def _older_tasks_wall_s(runs: list[RunRecord], current_handle: str | None) -> float:
    """Wall seconds of every task but the current one: first run's start to last run's end."""
    spans: dict[str, tuple[str | None, str | None]] = {}
    for run in runs:
        if run.handle == current_handle:
            continue
        start, end = spans.get(run.handle, (run.started_at, run.ended_at))
        spans[run.handle] = (start or run.started_at, run.ended_at or end)
    total = 0.0
    for start, end in spans.values():
        if start and end:
            total += seconds_between(start, end, 0.0)
    return total
