"""Budgets applied: each session's warnings and stops, and the fleet's.

The arithmetic is sessions/budget.py's and sessions/spending.py's; a session's ledger
(spend.py) gathers its inputs. The keeper decides from the spend, the budgets and the clock
which warnings to open and which stops to make, and hands them back as values: a session
commits its `BudgetCheck`; the fleet's events go to the store as daemon events.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup

from agentherd.sessions import status_builder
from agentherd.sessions.budget import DimensionUse, Spend, crossings, evaluate
from agentherd.sessions.config import Budget
from agentherd.sessions.durations import format_duration
from agentherd.sessions.money import usd_text
from agentherd.sessions.prices import table_header
from agentherd.sessions.records import Event
from agentherd.sessions.spending import STOPPABLE, FleetMember, fleet_counted, fleet_member
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.files.store import Change, Store
from agentherd.supervisor.session.news import News
from agentherd.supervisor.session.spend import SessionSpend, SpendInputs, has_limits

log = logging.getLogger("herd.budgets")

WALL_SLACK_S = 0.001
"""A wall-time check wakes this long after the crossing: a hair early would find none yet."""


@dataclass(frozen=True)
class BudgetStop:
    """A budget that ran out: the session records its limit with the event, then stops."""

    event: Event
    limit: float
    scope: str
    """`session` or `fleet`: whose budget ran out."""
    reason: str
    """The stop's reason, `budget:<dimension>`."""


@dataclass(frozen=True)
class BudgetCheck:
    """What a look at a session's budget found, for the session to write and do, in order."""

    notices: tuple[Event, ...] = ()
    """`usage-backwards` and `cost-unpriced` events, each written on its own."""
    warned: tuple[str, ...] | None = None
    """The dimensions warned of so far for `warned_for` (None: leave the record's as it is)."""
    warned_for: str | None = None
    warnings: tuple[Event, ...] = ()
    """`budget-warning` events, written together."""
    stop: BudgetStop | None = None
    settled: bool = False
    """Every dimension warned of is under `warn_at` again (a limit raised): the warning closes."""


class Budgeted(Protocol):
    """A session as the keeper sees it: its ledger, its inputs, and how it takes a check."""

    @property
    def spend(self) -> SessionSpend:
        """The session's spend ledger."""
        ...

    def spend_inputs(self) -> SpendInputs:
        """What the session's spend is counted from, now."""
        ...

    def take_budget_check(self, check: BudgetCheck) -> None:
        """Write what a look at its budget found (events, warned dimensions, a stop's limit)."""
        ...

    async def stop(self, kill: bool = False, reason: str = "user") -> None:
        """End the task gracefully."""
        ...


def _dimension_text(use: DimensionUse) -> str:
    """`cost_usd $0.61 of $0.60 (estimated)` for a message."""
    spent, limit = use.spent or 0.0, use.limit
    if use.dimension == "cost_usd":
        mark = " (estimated)" if use.estimated else ""
        return f"cost_usd ${usd_text(spent)} of ${usd_text(limit)}{mark}"
    if use.dimension == "wall_time":
        return f"wall_time {format_duration(spent)} of {format_duration(limit)}"
    return f"{use.dimension} {int(spent):,} of {int(limit):,}"


def _use_data(use: DimensionUse) -> dict[str, Any]:
    return {"dimension": use.dimension, **use.to_json()}


def _fleet_data(use: DimensionUse, covers: str) -> dict[str, Any]:
    return {"scope": "fleet", "covers": covers, **_use_data(use)}


def _event(
    kind: str, message: str, inputs: SpendInputs, run: int | None = None, **data: Any
) -> Event:
    """An event of the session (of its current run unless `run` says another)."""
    number = run if run is not None else inputs.record.run or None
    at = iso(utc_now()) or ""
    return Event(
        at=at, session=inputs.config.name, run=number, kind=kind, message=message, data=data
    )


def _wall_time_left_s(budget: Budget, spend: Spend, warned: tuple[str, ...]) -> float | None:
    """Seconds until an active task's wall time reaches warn_at (unless warned) or its limit."""
    limit = budget.wall_time
    if limit is None:
        return None
    marks = [float(limit)] if "wall_time" in warned else [budget.warn_at * limit, float(limit)]
    ahead = [mark - spend.wall_time_s for mark in marks if mark > spend.wall_time_s]
    return min(ahead, default=None)


class FleetShare(Protocol):
    """Across hosts: the rest of the fleet's spend (cluster/fleetspend.py), never blocking."""

    def publish(self, members: Mapping[str, FleetMember]) -> None:
        """This host's sessions' spend, as the last fleet pass summed it."""
        ...

    def others(self) -> list[FleetMember]:
        """The other hosts' sessions' spend, as last read."""
        ...


class BudgetKeeper:
    """Checks a session's budget when its spend changed and when a wall-time limit comes due
    (a timer, not a poll: a quiet fleet costs no pass), the fleet's each `check_every_s`
    while it sets limits; warns and stops."""

    def __init__(
        self,
        sessions: Mapping[str, Budgeted],
        store: Store,
        news: News,
        task_group: TaskGroup,
        check_every_s: float,
    ) -> None:
        self.sessions = sessions
        """The fleet's sessions by name (the daemon's own mapping, which a reload changes)."""
        self.store = store
        self.news = news
        """Told of the fleet events written."""
        self.task_group = task_group
        """Where budget stops run."""
        self.check_every_s = check_every_s
        self.fleet_budget = Budget()
        """[fleet] budget as herd.toml says now (set at start and on every reload)."""
        self.fleet_warned: set[str] | None = None
        """Fleet dimensions past warn_at; None until the first pass (a new daemon warns anew
        only for what crosses while it watches)."""
        self.fleet: dict[str, Any] = {}
        """The status JSON's `fleet` object, rebuilt each pass (cheap for every status)."""
        self.share: FleetShare | None = None
        """Across hosts: the other hosts' spend, added to the fleet's sum (None: one machine)."""
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
        """The status JSON's `fleet` object, at most `check_every_s` old.

        A fleet budget with limits is summed by every pass; one without is summed only when a
        status asks, so a quiet fleet costs no pass over every session.
        """
        if not has_limits(self.fleet_budget):
            now = time.monotonic()
            if now - self._fleet_at >= self.check_every_s:
                self._fleet_at = now
                self._check_fleet(time.time())
        return self.fleet or None

    # ----- when to look ---------------------------------------------------------------------

    def mark(self, session: Budgeted) -> None:
        """The session's record, runs or plan changed: look at its budget now."""
        now_s = time.monotonic()
        session.spend.note_change(now_s)
        self._visit_at(session.spend_inputs().config.name, now_s)

    def mark_all(self) -> None:
        """Look at every session now (the start, a reload: limits may have changed)."""
        for session in list(self.sessions.values()):
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
                if has_limits(self.fleet_budget):
                    if now_s >= fleet_next_s:
                        fleet_next_s = now_s + self.check_every_s
                        self._check_fleet(time.time())
                elif self.fleet_warned is None:
                    self.fleet_warned = set()  # limits a reload adds warn for what is past
            except Exception:  # a bug here must not stop the supervision of every session
                log.exception("budget check failed")
            next_s = min(self._due.values(), default=float("inf"))
            if has_limits(self.fleet_budget):
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
            session = self.sessions.get(name)
            if session is not None:
                self._visit(session, now_s, now_unix_s)

    def _visit(self, session: Budgeted, now_s: float, now_unix_s: float) -> None:
        """Sample the session's spend, check its limits, and note when to look again."""
        inputs = session.spend_inputs()
        name = inputs.config.name
        next_sample_s = session.spend.sample(inputs, now_unix_s)
        if next_sample_s is not None:
            self._visit_at(name, next_sample_s)
        left_s = self._check_session(session, inputs, now_unix_s)
        if left_s is not None:
            self._visit_at(name, now_s + left_s + WALL_SLACK_S)

    def revisit(self, session: Budgeted) -> None:
        """The slow pass's look (once a reconcile period): limits checked whatever was missed."""
        try:
            self._visit(session, time.monotonic(), time.time())
        except Exception:
            log.exception("budget check of %s failed", session.spend_inputs().config.name)

    def check_one(self, session: Budgeted) -> None:
        """Check one session's budget now: its output just showed a step (tokens, cost, turns)."""
        spend = session.spend
        inputs = session.spend_inputs()
        name = inputs.config.name
        if not spend.changed:  # the quiet stretch ends; its next sample is taken for real
            now_s = time.monotonic()
            spend.note_change(now_s)
            last_at_s = spend.history.last_at_s
            due_s = now_s if last_at_s is None else last_at_s + spend.history.every_s
            self._visit_at(name, due_s)
        if not has_limits(inputs.config.budget):
            # No limit to cross; the guard still sees each step, so a report lower than the
            # one before is noticed (and told of by the visit that notice asks for).
            spend.live_usage(inputs)
            if spend.backwards_unsaid or spend.unpriced_unsaid:
                self.mark(session)
            return
        try:
            left_s = self._check_session(session, inputs, time.time())
            if left_s is not None:
                self._visit_at(name, time.monotonic() + left_s + WALL_SLACK_S)
        except Exception:  # a bug here must not stop the reading of the agent's output
            log.exception("budget check of %s failed", name)

    # ----- a session's limits ---------------------------------------------------------------

    def _check_session(self, session: Budgeted, inputs: SpendInputs, now: float) -> float | None:
        """Warn and stop as the session's limits say; returns the seconds until its wall time
        crosses the next of them (None when none can)."""
        check, left_s = self._session_check(session.spend, inputs, now)
        session.take_budget_check(check)
        if check.stop is not None:
            self._start_stop(session, inputs, check.stop)
        if session.spend.backwards_unsaid or session.spend.unpriced_unsaid:  # say so soon
            self.mark(session)
        return left_s

    def _session_check(
        self, spend: SessionSpend, inputs: SpendInputs, now: float
    ) -> tuple[BudgetCheck, float | None]:
        """The session's check, and the seconds until its wall time crosses the next limit."""
        record = inputs.record
        notices = tuple(
            _event(
                "usage-backwards",
                f"run {run}: the agent reported lower totals (tokens, cost or turns) than "
                "before; they are ignored and the higher ones kept",
                inputs,
                run,
            )
            for run in sorted(spend.backwards_unsaid)
        )
        spend.backwards_unsaid.clear()
        notices += tuple(
            _event(
                "cost-unpriced",
                f"run {run}: herd has no price for model {model}: its tokens are left out of "
                f"the cost (shown unpriced) and a cost budget cannot count them; add "
                f"{table_header(model)} to herd.toml",
                inputs,
                run,
                model=model,
            )
            for run, model in sorted(spend.unpriced_unsaid.items())
        )
        spend.unpriced_unsaid.clear()
        budget = inputs.config.budget
        scope = record.handle if budget.covers == "task" else "life"
        warned = tuple(record.budget_warned) if record.budget_warned_for == scope else ()
        unchanged = BudgetCheck(notices, warned, scope)
        if record.state not in STOPPABLE or not record.handle:
            return unchanged, None
        if not has_limits(budget):  # nothing can cross: the spend is not summed
            return BudgetCheck(notices, (), scope, settled=bool(warned)), None
        spent = spend.spend(inputs, budget.covers, now)
        # A dimension back under warn_at (its limit raised or removed) is no longer warned of:
        # it may warn again, and with none left the warning's cause is gone.
        past = {u.dimension for u in evaluate(budget, spent) if u.fraction >= budget.warn_at}
        settled = bool(warned) and not past & set(warned)
        warned = tuple(d for d in warned if d in past)
        found = crossings(budget, spent, set(warned), restarting=inputs.restarting)
        warnings = []
        for use in found.warn:
            if found.exhausted is not None and use.dimension == found.exhausted.dimension:
                continue  # the stop says it; a warning an instant before it says nothing more
            warned = (*warned, use.dimension)
            warnings.append(
                _event(
                    "budget-warning",
                    f"{_dimension_text(use)} ({use.fraction:.0%}; warn_at {budget.warn_at:g})",
                    inputs,
                    scope="session",
                    covers=budget.covers,
                    **_use_data(use),
                )
            )
        stop = None
        if found.exhausted is not None:
            stop = self._stop_for(inputs, found.exhausted, "session", budget.covers)
        check = BudgetCheck(notices, warned, scope, tuple(warnings), stop, settled and not warnings)
        if found.exhausted is not None:
            return check, None
        return check, _wall_time_left_s(budget, spent, warned)

    # ----- stops ----------------------------------------------------------------------------

    def _stop_for(
        self, inputs: SpendInputs, use: DimensionUse, scope: str, covers: str
    ) -> BudgetStop | None:
        """The `budget-stop` to record, or None when one is under way for this task already."""
        name, handle = inputs.config.name, inputs.record.handle or ""
        if self._stopping.get(name) == handle:
            return None
        self._stopping[name] = handle
        whose = "the fleet's" if scope == "fleet" else "its"
        event = _event(
            "budget-stop",
            f"{whose} budget is spent: {_dimension_text(use)}; stopping",
            inputs,
            scope=scope,
            covers=covers,
            **_use_data(use),
        )
        return BudgetStop(event, use.limit, scope, f"budget:{use.dimension}")

    def _start_stop(self, session: Budgeted, inputs: SpendInputs, stop: BudgetStop) -> None:
        """Stop the session gracefully, in the background (once per task)."""
        handle = inputs.record.handle or ""
        self.task_group.start_soon(self._stop_session, session, inputs.config.name, handle, stop)

    async def _stop_session(
        self, session: Budgeted, name: str, handle: str, stop: BudgetStop
    ) -> None:
        try:
            await session.stop(reason=stop.reason)
        except Exception:
            log.exception("budget stop of %s failed", name)
        finally:
            if self._stopping.get(name) == handle:
                del self._stopping[name]

    # ----- the fleet's limits ---------------------------------------------------------------

    def _check_fleet(self, now: float) -> None:
        """Sum the fleet's spend for its status; warn and stop as its limits say."""
        budget = self.fleet_budget
        sessions = list(self.sessions.values())
        looked = [(session, session.spend_inputs()) for session in sessions]
        members = [fleet_member(i.record, *s.spend.spends(i, now)) for s, i in looked]
        active = [pair for pair, member in zip(looked, members, strict=True) if member.active]
        if self.share is not None:
            self.share.publish(
                {i.config.name: m for (_, i), m in zip(looked, members, strict=True)}
            )
            members += self.share.others()
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
                        data=_fleet_data(use, budget.covers),
                    )
                )
        if found.exhausted is not None and active:
            use = found.exhausted
            names = ", ".join(inputs.config.name for _, inputs in active)
            self._commit_fleet(
                Event(
                    at=iso(utc_now()) or "",
                    kind="budget-stop",
                    message=f"fleet budget spent: {_dimension_text(use)}; stopping {names}",
                    data=_fleet_data(use, budget.covers),
                )
            )
            for session, inputs in active:
                stop = self._stop_for(inputs, use, "fleet", budget.covers)
                if stop is not None:
                    session.take_budget_check(BudgetCheck(stop=stop))
                    self._start_stop(session, inputs, stop)

    def _commit_fleet(self, event: Event) -> None:
        """Write a fleet event (a daemon event: no session) and announce it."""
        self.news.announce(self.store.commit(Change(events=(event,))))
