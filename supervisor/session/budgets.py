"""Budgets applied: each session's spend, the fleet's, the warnings and the stops.

The arithmetic is sessions/budget.py's and sessions/spending.py's (the status's figures are
sessions/status_builder.py's); this module gathers their inputs from the live runs and the
store, and acts: a `budget-warning` once per dimension, a graceful stop at 100 %.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio

from agentherd.sessions import spending, status_builder
from agentherd.sessions.adapters import Usage, price_for
from agentherd.sessions.budget import (
    DIMENSIONS,
    PROJECTION_WINDOW_S,
    CostGuard,
    DimensionUse,
    Sample,
    Spend,
    SpendHistory,
    crossings,
    evaluate,
    raised_since_stop,
)
from agentherd.sessions.config import Budget
from agentherd.sessions.durations import format_duration
from agentherd.sessions.prices import Price, with_estimate
from agentherd.sessions.records import Event
from agentherd.sessions.spending import (
    STOPPABLE,
    EndedRuns,
    SpendFacts,
    fleet_counted,
    fleet_member,
)
from agentherd.sessions.states import ACTIVE_STATES, State
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.files.store import Change

if TYPE_CHECKING:
    from agentherd.supervisor.daemon import Daemon
    from agentherd.supervisor.session.liverun import LiveRun
    from agentherd.supervisor.session.supervisor import SessionSupervisor

log = logging.getLogger("herd.budgets")


def _has_limits(budget: Budget) -> bool:
    """True when the budget sets any limit (most sessions set none)."""
    return any(getattr(budget, dimension) is not None for dimension in DIMENSIONS)


def _dimension_text(use: DimensionUse) -> str:
    """`cost_usd $0.61 of $0.60 (estimated)` for a message."""
    spent, limit = use.spent or 0.0, use.limit
    if use.dimension == "cost_usd":
        mark = " (estimated)" if use.estimated else ""
        return f"cost_usd ${spent:,.2f} of ${limit:,.2f}{mark}"
    if use.dimension == "wall_time":
        return f"wall_time {format_duration(spent)} of {format_duration(limit)}"
    return f"{use.dimension} {int(spent):,} of {int(limit):,}"


class SessionSpend:
    """One session's spend as its budget counts it: runs guarded, priced, summed."""

    def __init__(self, session: SessionSupervisor) -> None:
        self.session = session
        self.guards: dict[int, CostGuard] = {}
        """The current run's guard, by run number: its figures never go down."""
        self.warned_backwards: set[int] = set()
        self.backwards_unsaid: set[int] = set()
        """Runs whose figures went backwards, not yet told of in a `usage-backwards` event."""
        self.history = SpendHistory(every_s=session.ctx.timings.spend_sample_s)
        self._ended: tuple[tuple[int, bool], EndedRuns] | None = None
        """(current run, its usage recorded) -> what the recorded runs add up to."""
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

    def limited(self) -> bool:
        """True when the session's budget sets a limit (its status then moves with the clock)."""
        return _has_limits(self.session.config.budget)

    def price(self) -> Price | None:
        """The price for this session's estimates."""
        session = self.session
        return price_for(session.config.agent, session.config.price, session.ctx.prices)

    def run_usage(self, live: LiveRun) -> Usage:
        """A run's usage as budgets and status count it: never lower, a missing cost estimated."""
        if live.record.run not in self.guards:
            self.guards = {}  # only the current run's figures are still moving
            self._priced = None
        reported = live.parser.usage
        config, ctx = self.session.config, self.session.ctx
        key = (live.record.run, reported, config.agent, config.price, ctx.prices)
        if self._priced is not None and self._priced[0] == key:
            return self._priced[1]  # the guard would take the same figures to the same answer
        guard = self.guards.setdefault(live.record.run, CostGuard())
        raw = guard.take(reported)
        if guard.went_backwards and live.record.run not in self.warned_backwards:
            self.warned_backwards.add(live.record.run)
            self.backwards_unsaid.add(live.record.run)  # the next budget check says so
            self.session.ctx.spend_changed(self.session)
        if raw.cost_estimated and self.session.config.price is not None:
            raw = replace(raw, cost_usd=None)  # the session's own price over the adapter's list
        priced = with_estimate(raw, self.price())
        self._priced = (key, priced)
        return priced

    def _unrecorded(self) -> LiveRun | None:
        """The watched run while its usage is not yet written with its end (it counts live).

        Not `ended_at`: the end is set first, and the usage only after the run's transcript
        was read, off the event loop; in between, the run must count neither twice nor not at all.
        """
        live = self.session.run
        return live if live is not None and not live.record.usage else None

    def _live_usage(self) -> Usage:
        live = self._unrecorded()
        return self.run_usage(live) if live is not None else Usage()

    def facts(self, now_unix_s: float, projecting: bool = False) -> SpendFacts:
        """What the spend is counted from (the builder's input); `projecting` adds the recent
        samples and the plan for where an active task's spend is heading."""
        session = self.session
        record = session.record
        active = record.state in ACTIVE_STATES
        samples: list[Sample] = []
        clock_s = 0.0
        plan = None
        if projecting and active:
            clock_s = time.monotonic()
            self.fill(clock_s)
            samples = self.history.since(clock_s - PROJECTION_WINDOW_S)
            plan = session.observer.plan_current
        return SpendFacts(
            budget=session.config.budget,
            task_usage=session.task_usage,
            ended=self._ended_runs(),
            task_ended_at=self._task_end(record.handle) if record.handle and not active else None,
            now_unix_s=now_unix_s,
            live_usage=self._live_usage(),
            samples=samples,
            clock_s=clock_s,
            plan_passing=plan.passing if plan is not None else None,
            plan_total=plan.total if plan is not None else None,
        )

    def spends(self, now_unix_s: float) -> tuple[Spend, Spend]:
        """(task, life) spend now."""
        return spending.spends(self.session.record, self.facts(now_unix_s))

    def task_spend(self, now_unix_s: float) -> Spend:
        """The current task's spend: usage, wall time since it began, automatic restarts."""
        return spending.task_spend(self.session.record, self.facts(now_unix_s))

    def _task_end(self, handle: str) -> str | None:
        """When an ended task ended (read once per task, not per status)."""
        if self._ended_task is None or self._ended_task[0] != handle:
            task = self.session.ctx.store.task(handle)
            end = task.ended_at if task is not None else None
            if end is None:
                return None
            self._ended_task = (handle, end)
        return self._ended_task[1]

    def spend(self, covers: str, now_unix_s: float) -> Spend:
        """The spend a budget with this `covers` counts."""
        if covers == "life":
            return self.spends(now_unix_s)[1]
        return self.task_spend(now_unix_s)

    def _ended_runs(self) -> EndedRuns:
        """What every recorded run adds up to (read once per run number, not per status)."""
        session = self.session
        key = (session.record.run, self._unrecorded() is None)
        if self._ended is not None and self._ended[0] == key:
            return self._ended[1]
        live = self._unrecorded()
        ended = spending.ended_runs(
            session.ctx.store.runs(session.config.name),
            session.record.handle,
            live.record.run if live is not None else None,
        )
        self._ended = (key, ended)
        return ended

    # ----- status ---------------------------------------------------------------------------

    def status_fields(self, now_unix_s: float | None = None) -> dict[str, Any]:
        """`usage`, `usage_total` and `budget` of the status JSON, from the one builder."""
        now = time.time() if now_unix_s is None else now_unix_s
        return status_builder.spend_fields(self.session.record, self.facts(now, projecting=True))

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

    def sample(self, now_unix_s: float) -> float | None:
        """Record a point of the spend the budget counts, for the chart and the projection.

        Only when one is due (or a new task or run began): the spend is not even summed for a
        pass that would not keep it. Returns when the next one is due (monotonic s) while a
        change waits for it, else None (a quiet stretch is filled in when read).
        """
        now_s = time.monotonic()
        self.fill(now_s)
        record = self.session.record
        begun = (record.handle, record.run)
        last_at_s = self.history.last_at_s
        due = last_at_s is None or now_s - last_at_s >= self.history.every_s
        if not due and begun == self._sampled:
            return (last_at_s or now_s) + self.history.every_s if self.changed else None
        self._sampled = begun
        covers = self.session.config.budget.covers
        plan = self.session.observer.plan_current
        passing = plan.passing if plan is not None else None
        self.history.add(Sample(now_s, self.spend(covers, now_unix_s), passing))
        self.changed = False
        self._wall_moving = bool(record.handle) and record.state in ACTIVE_STATES
        return None

    def budget_raised(self) -> bool:
        """A session stopped by a budget whose limit now leaves room (`herd up` starts it)."""
        record = self.session.record
        if record.state != State.STOPPED:
            return False
        ctx = self.session.ctx
        fleet = record.budget_stop_scope == "fleet"
        budget = ctx.fleet_budget if fleet else self.session.config.budget
        return raised_since_stop(budget, record.reason, record.budget_stop_limit)


def _wall_time_left_s(budget: Budget, spend: Spend, warned: list[str]) -> float | None:
    """Seconds until an active task's wall time reaches warn_at (unless warned) or its limit."""
    limit = budget.wall_time
    if limit is None:
        return None
    marks = [float(limit)] if "wall_time" in warned else [budget.warn_at * limit, float(limit)]
    ahead = [mark - spend.wall_time_s for mark in marks if mark > spend.wall_time_s]
    return min(ahead, default=None)


WALL_SLACK_S = 0.001
"""A wall-time check wakes this long after the crossing: a hair early would find none yet."""


class BudgetKeeper:
    """Checks a session's budget when its spend changed and when a wall-time limit comes due
    (a timer, not a poll: a quiet fleet costs no pass), the fleet's each `budget_check_s`
    while it sets limits; warns and stops."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.fleet_warned: set[str] | None = None
        """Fleet dimensions past warn_at; None until the first pass (a new daemon warns anew
        only for what crosses while it watches)."""
        self.fleet: dict[str, Any] = {}
        """The status JSON's `fleet` object, rebuilt each pass (cheap for every status)."""
        self._stopping: dict[str, str] = {}
        """Session name -> handle of a budget stop asked and not yet done."""
        self._fleet_at = -float("inf")
        """When `fleet` was last summed for a status (monotonic s), without fleet limits."""
        self._due: dict[str, float] = {}
        """Session name -> when (monotonic s) it is looked at next: a change, a sample that
        a change waits for, a wall-time limit's crossing."""
        self._wake: anyio.Event | None = None
        self._sleep_until = -float("inf")
        """Until when the loop sleeps (monotonic s): an earlier visit wakes it."""

    def fleet_json(self) -> dict[str, Any] | None:
        """The status JSON's `fleet` object, at most `budget_check_s` old.

        A fleet budget with limits is summed by every pass; one without is summed only when a
        status asks, so a quiet fleet costs no pass over every session.
        """
        if not self._fleet_limited():
            now = time.monotonic()
            if now - self._fleet_at >= self.daemon.timings.budget_check_s:
                self._fleet_at = now
                self._check_fleet(list(self.daemon.sessions.values()), time.time())
        return self.fleet or None

    def _fleet_limited(self) -> bool:
        return _has_limits(self.daemon.config.fleet.budget)

    # ----- when to look ---------------------------------------------------------------------

    def mark(self, session: SessionSupervisor) -> None:
        """The session's record, runs or plan changed: look at its budget now."""
        now_s = time.monotonic()
        session.spend.note_change(now_s)
        self._visit_at(session.config.name, now_s)

    def mark_all(self) -> None:
        """Look at every session now (the start, a reload: limits may have changed)."""
        for session in list(self.daemon.sessions.values()):
            self.mark(session)
        if self._wake is not None:
            self._wake.set()  # the fleet's limits may have come or gone

    def _visit_at(self, name: str, at_s: float) -> None:
        current = self._due.get(name)
        if current is not None and current <= at_s:
            return
        self._due[name] = at_s
        if at_s < self._sleep_until and self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Look at budgets when due until cancelled; one failing pass never ends the loop."""
        self._wake = anyio.Event()
        self.mark_all()
        fleet_next_s = -float("inf")
        while True:
            now_s = time.monotonic()
            self._sleep_until = -float("inf")  # what is marked meanwhile is seen below
            try:
                self._visit_due(now_s)
                if self._fleet_limited():
                    if now_s >= fleet_next_s:
                        fleet_next_s = now_s + self.daemon.timings.budget_check_s
                        self._check_fleet(list(self.daemon.sessions.values()), time.time())
                elif self.fleet_warned is None:
                    self.fleet_warned = set()  # limits a reload adds warn for what is past
            except Exception:  # a bug here must not stop the supervision of every session
                log.exception("budget check failed")
            next_s = min(self._due.values(), default=float("inf"))
            if self._fleet_limited():
                next_s = min(next_s, fleet_next_s)
            self._wake = anyio.Event()
            self._sleep_until = next_s
            with anyio.move_on_after(max(next_s - time.monotonic(), 0.0)):
                await self._wake.wait()

    def _visit_due(self, now_s: float) -> None:
        """Look at each session whose time came."""
        due = [name for name, at_s in self._due.items() if at_s <= now_s]
        now_unix_s = time.time()
        for name in due:
            del self._due[name]
            session = self.daemon.sessions.get(name)
            if session is not None:
                self._visit(session, now_s, now_unix_s)

    def _visit(self, session: SessionSupervisor, now_s: float, now_unix_s: float) -> None:
        """Sample the session's spend, check its limits, and note when to look again."""
        name = session.config.name
        next_sample_s = session.spend.sample(now_unix_s)
        if next_sample_s is not None:
            self._visit_at(name, next_sample_s)
        left_s = self._check_session(session, now_unix_s)
        if left_s is not None:
            self._visit_at(name, now_s + left_s + WALL_SLACK_S)

    def revisit(self, session: SessionSupervisor) -> None:
        """The slow pass's look (once a reconcile period): limits checked whatever was missed."""
        try:
            self._visit(session, time.monotonic(), time.time())
        except Exception:
            log.exception("budget check of %s failed", session.config.name)

    def check_one(self, session: SessionSupervisor) -> None:
        """Check one session's budget now: its output just showed a step (tokens, cost, turns)."""
        spend = session.spend
        if not spend.changed:  # the quiet stretch ends; its next sample is taken for real
            now_s = time.monotonic()
            spend.note_change(now_s)
            last_at_s = spend.history.last_at_s
            due_s = now_s if last_at_s is None else last_at_s + spend.history.every_s
            self._visit_at(session.config.name, due_s)
        if not _has_limits(session.config.budget):
            # No limit to cross; the guard still sees each step, so a report lower than the
            # one before is noticed (and told of by the visit that notice asks for).
            spend._live_usage()
            return
        try:
            left_s = self._check_session(session, time.time())
            if left_s is not None:
                self._visit_at(session.config.name, time.monotonic() + left_s + WALL_SLACK_S)
        except Exception:  # a bug here must not stop the reading of the agent's output
            log.exception("budget check of %s failed", session.config.name)

    def _check_session(self, session: SessionSupervisor, now: float) -> float | None:
        """Warn and stop as the session's limits say; returns the seconds until its wall time
        crosses the next of them (None when none can)."""
        record = session.record
        for run in sorted(session.spend.backwards_unsaid):
            session.commit_events(
                session.make_event(
                    "usage-backwards",
                    f"run {run}: the agent reported lower totals (tokens, cost or turns) than "
                    "before; they are ignored and the higher ones kept",
                    run,
                )
            )
        session.spend.backwards_unsaid.clear()
        budget = session.config.budget
        scope = record.handle if budget.covers == "task" else "life"
        if record.budget_warned_for != scope:
            record.budget_warned = []
            record.budget_warned_for = scope
        if record.state not in STOPPABLE or not record.handle or not _has_limits(budget):
            return None  # without a limit nothing can cross: the spend is not even summed
        spend = session.spend.spend(budget.covers, now)
        found = crossings(
            budget, spend, set(record.budget_warned), restarting=session.restart_pending
        )
        events = []
        for use in found.warn:
            if found.exhausted is not None and use.dimension == found.exhausted.dimension:
                continue  # the stop says it; a warning an instant before it says nothing more
            record.budget_warned = [*record.budget_warned, use.dimension]
            events.append(
                session.make_event(
                    "budget-warning",
                    f"{_dimension_text(use)} ({use.fraction:.0%}; warn_at {budget.warn_at:g})",
                    scope="session",
                    covers=budget.covers,
                    **self._use_data(use),
                )
            )
        if events:
            session.commit_events(*events)
        if found.exhausted is not None:
            self._stop(session, found.exhausted, "session", budget.covers)
            return None
        return _wall_time_left_s(budget, spend, record.budget_warned)

    def _use_data(self, use: DimensionUse) -> dict[str, Any]:
        data = use.to_json()
        return {"dimension": use.dimension, **data}

    def _stop(self, session: SessionSupervisor, use: DimensionUse, scope: str, covers: str) -> None:
        """Record `budget-stop` and stop the session gracefully (once per task)."""
        name = session.config.name
        handle = session.record.handle or ""
        if self._stopping.get(name) == handle:
            return
        self._stopping[name] = handle
        whose = "the fleet's" if scope == "fleet" else "its"
        session.record.budget_stop_limit = use.limit  # written with the event below
        session.record.budget_stop_scope = scope
        session.commit_events(
            session.make_event(
                "budget-stop",
                f"{whose} budget is spent: {_dimension_text(use)}; stopping",
                scope=scope,
                covers=covers,
                **self._use_data(use),
            )
        )
        reason = f"budget:{use.dimension}"
        assert self.daemon.task_group is not None
        self.daemon.task_group.start_soon(self._stop_session, session, handle, reason)

    async def _stop_session(self, session: SessionSupervisor, handle: str, reason: str) -> None:
        try:
            await session.stop(reason=reason)
        except Exception:
            log.exception("budget stop of %s failed", session.config.name)
        finally:
            if self._stopping.get(session.config.name) == handle:
                del self._stopping[session.config.name]

    def _check_fleet(self, sessions: list[SessionSupervisor], now: float) -> None:
        budget = self.daemon.config.fleet.budget
        members = [fleet_member(s.record, *s.spend.spends(now)) for s in sessions]
        active = [s for s, member in zip(sessions, members, strict=True) if member.active]
        counted = fleet_counted(budget, members)
        self.fleet = status_builder.fleet_json(budget, members)
        uses = evaluate(budget, counted)
        past = {u.dimension for u in uses if u.fraction >= budget.warn_at}
        if self.fleet_warned is None:
            self.fleet_warned = past
            return
        self.fleet_warned &= past  # a dimension that fell back (tasks ended) may warn again
        found = crossings(budget, counted, self.fleet_warned)
        for use in found.warn:
            self.fleet_warned.add(use.dimension)
            if found.exhausted is None:
                self._commit_fleet(
                    Event(
                        at=iso(utc_now()) or "",
                        kind="budget-warning",
                        message=f"fleet budget: {_dimension_text(use)} ({use.fraction:.0%})",
                        data=self._fleet_data(use, budget.covers),
                    )
                )
        if found.exhausted is not None and active:
            use = found.exhausted
            names = ", ".join(s.config.name for s in active)
            self._commit_fleet(
                Event(
                    at=iso(utc_now()) or "",
                    kind="budget-stop",
                    message=f"fleet budget spent: {_dimension_text(use)}; stopping {names}",
                    data=self._fleet_data(use, budget.covers),
                )
            )
            for session in active:
                self._stop(session, use, "fleet", budget.covers)

    def _fleet_data(self, use: DimensionUse, covers: str) -> dict[str, Any]:
        return {"scope": "fleet", "covers": covers, **self._use_data(use)}

    def _commit_fleet(self, event: Event) -> None:
        """Write a fleet event (a daemon event: no session) and announce it."""
        store = self.daemon.store
        assert store is not None
        self.daemon.announce(store.commit(Change(events=(event,))))
