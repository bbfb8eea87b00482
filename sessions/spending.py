"""What a session spent, from its records: the current task's, the whole life's, the fleet's.

Pure: the daemon (its stored runs plus the run it watches) and the offline reader (the store
alone) pass the same records in and get the same figures, so a status, a budget check and a
read of `.herd/` after `herd down` all count alike. What a budget counts is sessions/budget.py's
docstring.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agentherd.sessions.adapters.usage import Usage
from agentherd.sessions.budget import Sample, Spend
from agentherd.sessions.config import Budget
from agentherd.sessions.records import RunRecord, SessionRecord
from agentherd.sessions.states import ACTIVE_STATES, State
from agentherd.sessions.times import parse_iso

STOPPABLE = ACTIVE_STATES - {State.STOPPING}
"""States a budget stop applies to, and whose task a fleet budget covering tasks counts."""


@functools.lru_cache(maxsize=1024)
def unix_s(moment: str | None) -> float | None:
    """An ISO time as unix seconds (remembered: every check reads the same task starts)."""
    parsed = parse_iso(moment)
    return parsed.timestamp() if parsed is not None else None


def seconds_between(start: str | None, end: str | None, now_unix_s: float) -> float:
    """Seconds from an ISO start to an ISO end (or to now when the end is unknown)."""
    began = unix_s(start)
    if began is None:
        return 0.0
    ended = unix_s(end)
    end_s = ended if ended is not None else now_unix_s
    return max(end_s - began, 0.0)


def task_runs_usage(runs: Iterable[RunRecord], handle: str | None) -> Usage:
    """The usage of a task's ended runs as stored (each run is its own process: they add)."""
    total = Usage()
    if not handle:
        return total
    for run in runs:
        if run.handle == handle and run.ended_at is not None and run.usage:
            total = total + Usage.from_json(run.usage)
    return total


@dataclass(frozen=True, slots=True)
class EndedRuns:
    """What a session's stored runs add up to, the current task's wall time aside."""

    usage: Usage = Usage()
    """Every ended run's usage (the watched run's not yet, while it counts live)."""
    older_tasks_wall_s: float = 0.0
    runs: int = 0
    tasks: int = 0


def ended_runs(
    runs: Sequence[RunRecord], current_handle: str | None, live_run: int | None = None
) -> EndedRuns:
    """The stored runs summed; `live_run` is the watched run whose usage counts live instead."""
    usage = Usage()
    for run in runs:
        if run.ended_at is not None and run.usage and run.run != live_run:
            usage = usage + Usage.from_json(run.usage)
    handles = {run.handle for run in runs}
    return EndedRuns(usage, older_tasks_wall_s(runs, current_handle), len(runs), len(handles))


def older_tasks_wall_s(runs: Iterable[RunRecord], current_handle: str | None) -> float:
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


@dataclass(frozen=True, slots=True)
class SpendFacts:
    """What a session's spend is counted from, gathered by whoever holds its records."""

    budget: Budget
    task_usage: Usage
    """The current task's ended runs, as stored."""
    ended: EndedRuns
    task_ended_at: str | None
    """When the current task ended (None while it runs, or when unknown)."""
    now_unix_s: float
    live_usage: Usage = Usage()
    """The watched run's usage while it is not yet stored with its end (guarded, priced)."""
    samples: Sequence[Sample] = ()
    """Recent spend samples for the projection (the daemon's; none on disk)."""
    clock_s: float = 0.0
    """Now on the samples' clock (monotonic s)."""
    plan_passing: int | None = None
    plan_total: int | None = None
    task_wall_s: float | None = None
    """The active task's wall time as the daemon measures it (monotonic: a jump of the wall
    clock moves no budget); None: from its ISO start to `now_unix_s` (no daemon watches)."""

    @classmethod
    def from_runs(
        cls,
        budget: Budget,
        record: SessionRecord,
        runs: Sequence[RunRecord],
        task_ended_at: str | None,
        now_unix_s: float,
    ) -> SpendFacts:
        """The facts of a session no daemon watches: everything it spent is in its runs."""
        return cls(
            budget=budget,
            task_usage=task_runs_usage(runs, record.handle),
            ended=ended_runs(runs, record.handle),
            task_ended_at=task_ended_at,
            now_unix_s=now_unix_s,
        )


def task_spend(record: SessionRecord, facts: SpendFacts) -> Spend:
    """The current task's spend: usage, wall time since it began, automatic restarts."""
    if not record.handle:
        return Spend()
    active = record.state in ACTIVE_STATES
    end = None if active else facts.task_ended_at
    if active and facts.task_wall_s is not None:
        wall_s = facts.task_wall_s
    else:
        wall_s = seconds_between(record.task_started_at, end, facts.now_unix_s)
    if end is None and not active:
        wall_s = 0.0  # an ended task whose end is unknown counts no time
    return Spend(facts.task_usage + facts.live_usage, wall_s, record.restarts)


def life_spend(facts: SpendFacts, task: Spend) -> Spend:
    """Every run the session ever had: usage, the sum of its tasks' wall time, restarts."""
    ended = facts.ended
    return Spend(
        ended.usage + facts.live_usage,
        ended.older_tasks_wall_s + task.wall_time_s,
        max(ended.runs - ended.tasks, 0),
    )


def spends(record: SessionRecord, facts: SpendFacts) -> tuple[Spend, Spend]:
    """(task, life) spend of a session."""
    task = task_spend(record, facts)
    return task, life_spend(facts, task)


def counted(budget: Budget, task: Spend, life: Spend) -> Spend:
    """The spend a budget counts: the life's or the current task's."""
    return life if budget.covers == "life" else task


@dataclass(frozen=True, slots=True)
class FleetMember:
    """One session's part in the fleet's spend."""

    task: Spend
    life: Spend
    active: bool
    """Its task is at work (a fleet budget covering tasks counts it)."""


def fleet_member(record: SessionRecord, task: Spend, life: Spend) -> FleetMember:
    """A session's part in the fleet's spend, its task counted while at work."""
    return FleetMember(task, life, record.state in STOPPABLE and bool(record.handle))


def fleet_counted(budget: Budget, members: Sequence[FleetMember]) -> Spend:
    """What the fleet budget counts: every life, or the tasks at work."""
    total = Spend()
    for member in members:
        if budget.covers == "life":
            total = total + member.life
        elif member.active:
            total = total + member.task
    if budget.covers == "task" and not any(member.active for member in members):
        total = Spend(Usage(cost_usd=0.0))  # nothing at work: nothing spent, not unknown
    return total
