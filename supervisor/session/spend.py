"""One session's spend ledger: its runs guarded and priced, sampled for the projection.

The arithmetic is sessions/budget.py's and sessions/spending.py's (the status's figures are
sessions/status_builder.py's). The ledger is told what it counts from (`SpendInputs`: the
session's config, record, watched run and plan, the price table) at each question, and answers
with values; it never reaches back into the session or the daemon.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentherd.sessions import spending, status_builder
from agentherd.sessions.adapters import Usage, price_for
from agentherd.sessions.budget import (
    DIMENSIONS,
    PROJECTION_WINDOW_S,
    CostGuard,
    Sample,
    Spend,
    SpendHistory,
)
from agentherd.sessions.config import Budget, SessionConfig
from agentherd.sessions.plan import Plan
from agentherd.sessions.prices import Price, lookup, priced
from agentherd.sessions.records import RunRecord, SessionRecord
from agentherd.sessions.spending import EndedRuns, SpendFacts
from agentherd.sessions.states import ACTIVE_STATES
from agentherd.supervisor.files.store import Store
from agentherd.supervisor.session.liverun import LiveRun


@dataclass(frozen=True, slots=True)
class SpendInputs:
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
        self.unpriced_warned: set[tuple[str | None, str]] = set()
        """(task, model) told of in a `cost-unpriced` event: once per model per task."""
        self.unpriced_unsaid: dict[int, str] = {}
        """Run -> a model it used that herd has no price for, not yet told of."""
        self.history = SpendHistory(every_s=sample_every_s)
        self._ended: tuple[tuple[int, bool, int | None], EndedRuns] | None = None
        """(current run, its usage recorded, the watched run) -> what the recorded runs add up
        to."""
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
        self._task_clock: tuple[str, float] | None = None
        """(the task's ISO start, the monotonic time it corresponds to): its wall time is
        measured on the monotonic clock from there."""

    # ----- figures --------------------------------------------------------------------------

    def run_usage(self, inputs: SpendInputs, live: LiveRun) -> Usage:
        """A run's usage as budgets and status count it: never lower, a missing cost estimated.

        A report lower than the one before is kept in `backwards_unsaid` until told of.
        """
        if live.record.run not in self.guards:
            self.guards = {}  # only the current run's figures are still moving
            self._priced = None
        reported = live.parser.usage
        models = live.parser.models
        config = inputs.config
        key = (live.record.run, reported, tuple(models), config.agent, config.price, inputs.prices)
        if self._priced is not None and self._priced[0] == key:
            return self._priced[1]  # the guard would take the same figures to the same answer
        guard = self.guards.setdefault(live.record.run, CostGuard())
        raw = guard.take(reported)
        if guard.went_backwards and live.record.run not in self.warned_backwards:
            self.warned_backwards.add(live.record.run)
            self.backwards_unsaid.add(live.record.run)  # the next budget check says so
        chosen = lookup(config.price, inputs.prices) if config.price is not None else None
        usual = price_for(config.agent, None, inputs.prices)
        usage = priced(raw, models, inputs.prices, chosen, usual, not live.parser.priced_by_table)
        self._priced = (key, usage)
        model = usage.cost_unpriced_model
        if model is not None and (inputs.record.handle, model) not in self.unpriced_warned:
            self.unpriced_warned.add((inputs.record.handle, model))
            self.unpriced_unsaid[live.record.run] = model  # the next budget check says so
        return usage

    @staticmethod
    def unrecorded(inputs: SpendInputs) -> LiveRun | None:
        """The watched run while its usage is not yet written with its end (it counts live).

        Not `ended_at`: the end is set first, and the usage only after the run's transcript
        was read, off the event loop; in between, the run must count neither twice nor not at all.
        """
        live = inputs.live
        return live if live is not None and not live.record.usage else None

    def live_usage(self, inputs: SpendInputs) -> Usage:
        """The unrecorded run's usage so far (nothing without one)."""
        live = self.unrecorded(inputs)
        return self.run_usage(inputs, live) if live is not None else Usage()

    def facts(self, inputs: SpendInputs, now_unix_s: float, projecting: bool = False) -> SpendFacts:
        """What the spend is counted from (the builder's input); `projecting` adds the recent
        samples and the plan for where an active task's spend is heading."""
        record = inputs.record
        active = record.state in ACTIVE_STATES
        samples: list[Sample] = []
        clock_s = 0.0
        plan = None
        if projecting and active:
            clock_s = time.monotonic()
            self.fill(clock_s)
            samples = self.history.since(clock_s - PROJECTION_WINDOW_S)
            plan = inputs.plan
        return SpendFacts(
            budget=inputs.config.budget,
            task_usage=inputs.task_usage,
            ended=self._ended_runs(inputs),
            task_ended_at=self._task_end(record.handle) if record.handle and not active else None,
            now_unix_s=now_unix_s,
            live_usage=self.live_usage(inputs),
            samples=samples,
            clock_s=clock_s,
            plan_passing=plan.passing if plan is not None else None,
            plan_total=plan.total if plan is not None else None,
            task_wall_s=self._task_wall_s(record.task_started_at) if active else None,
        )

    def _task_wall_s(self, started_at: str | None) -> float | None:
        """Seconds since the task began, on the monotonic clock from the first look at it (at
        its start, or a new daemon's first: the only moment the wall clock is read for it)."""
        if not started_at:
            return None
        now_s = time.monotonic()
        if self._task_clock is None or self._task_clock[0] != started_at:
            began = spending.unix_s(started_at)
            if began is None:
                return None
            self._task_clock = (started_at, now_s - max(0.0, time.time() - began))
        return now_s - self._task_clock[1]

    def spends(self, inputs: SpendInputs, now_unix_s: float) -> tuple[Spend, Spend]:
        """(task, life) spend now."""
        return spending.spends(inputs.record, self.facts(inputs, now_unix_s))

    def task_spend(self, inputs: SpendInputs, now_unix_s: float) -> Spend:
        """The current task's spend: usage, wall time since it began, automatic restarts."""
        return spending.task_spend(inputs.record, self.facts(inputs, now_unix_s))

    def _task_end(self, handle: str) -> str | None:
        """When an ended task ended (read once per task, not per status)."""
        if self._ended_task is None or self._ended_task[0] != handle:
            task = self.store.task(handle)
            end = task.ended_at if task is not None else None
            if end is None:
                return None
            self._ended_task = (handle, end)
        return self._ended_task[1]

    def spend(self, inputs: SpendInputs, covers: str, now_unix_s: float) -> Spend:
        """The spend a budget with this `covers` counts."""
        if covers == "life":
            return self.spends(inputs, now_unix_s)[1]
        return self.task_spend(inputs, now_unix_s)

    def _ended_runs(self, inputs: SpendInputs) -> EndedRuns:
        """What every recorded run adds up to (read once per run number, not per status)."""
        record = inputs.record
        live = self.unrecorded(inputs)
        watched = inputs.live
        # The watched run is in the key: a look between a run's number being taken and its
        # launch (nothing watched yet) must not stand for after the run (a short run can
        # start and end between two looks).
        key = (record.run, live is None, watched.record.run if watched is not None else None)
        if self._ended is not None and self._ended[0] == key:
            return self._ended[1]
        runs = self.store.runs(inputs.config.name)
        ended = spending.ended_runs(
            runs, record.handle, live.record.run if live is not None else None
        )
        if live is not None or watched is None or _stored(runs, watched.record.run):
            self._ended = (key, ended)  # else the store lags the watched run's end: read again
        return ended

    # ----- status ---------------------------------------------------------------------------

    def status_fields(self, inputs: SpendInputs, now_unix_s: float | None = None) -> dict[str, Any]:
        """`usage`, `usage_total` and `budget` of the status JSON, from the one builder."""
        now = time.time() if now_unix_s is None else now_unix_s
        return status_builder.spend_fields(inputs.record, self.facts(inputs, now, projecting=True))

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

    def sample(self, inputs: SpendInputs, now_unix_s: float) -> float | None:
        """Record a point of the spend the budget counts, for the chart and the projection.

        Only when one is due (or a new task or run began): the spend is not even summed for a
        pass that would not keep it. Returns when the next one is due (monotonic s) while a
        change waits for it, else None (a quiet stretch is filled in when read).
        """
        now_s = time.monotonic()
        self.fill(now_s)
        record = inputs.record
        begun = (record.handle, record.run)
        last_at_s = self.history.last_at_s
        due = last_at_s is None or now_s - last_at_s >= self.history.every_s
        if not due and begun == self._sampled:
            return (last_at_s or now_s) + self.history.every_s if self.changed else None
        self._sampled = begun
        covers = inputs.config.budget.covers
        passing = inputs.plan.passing if inputs.plan is not None else None
        self.history.add(Sample(now_s, self.spend(inputs, covers, now_unix_s), passing))
        self.changed = False
        self._wall_moving = bool(record.handle) and record.state in ACTIVE_STATES
        return None


def _stored(runs: Sequence[RunRecord], number: int) -> bool:
    """Whether run `number` is stored ended with its usage (its end is written a moment
    after the watched run's usage is known)."""
    return any(r.run == number and r.ended_at is not None and r.usage for r in runs)
