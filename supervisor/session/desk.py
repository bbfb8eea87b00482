"""Where the observer, recovery and reports read a session and post facts to it.

It is the session as checks/port.py's `SessionPort` describes it: read-only state, and
facts handed to the session's pen (one commit each). The session itself never goes to them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from agentherd.sessions.adapters import Usage
from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.records import Event
from agentherd.supervisor.checks.observe import Observer
from agentherd.supervisor.files.store import StoreUnavailable, Verification
from agentherd.supervisor.session.budgets import BudgetCheck
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.driftbook import DriftBook
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.pen import Pen
from agentherd.supervisor.session.spend import SessionSpend, SpendInputs
from agentherd.supervisor.session.stallkeep import StallWatch


class Desk:
    """A session's facts as its helpers read them, and their posts to its commit."""

    observer: Observer
    """What the session's files say (set once the observer is made with this desk)."""

    def __init__(
        self,
        ctx: Context,
        pen: Pen,
        run: Callable[[], LiveRun | None],
        spend: SessionSpend,
        stall: StallWatch,
        drift: DriftBook,
        task_usage: Callable[[], Usage],
        restarting: Callable[[], bool],
    ) -> None:
        self.ctx = ctx
        self.record = pen.record
        self.pen = pen
        self._run = run
        self.spend = spend
        """The session's spend as budgets count it."""
        self.stall = stall
        self.drift = drift
        self.task_usage = task_usage
        """Usage of the current task's ended runs, as recorded."""
        self.restarting = restarting
        """A restart waits in backoff and has not begun."""
        self.git_warned = False
        """True once the session said its cwd is not a git repository."""

    @property
    def config(self) -> SessionConfig:
        """The session's config as it is now."""
        return self.pen.config()

    @property
    def run(self) -> LiveRun | None:
        """The run being watched, if any (its usage so far counts in reports)."""
        return self._run()

    def spend_inputs(self) -> SpendInputs:
        """What the spend ledger counts from: the session as it is now (one way, no callback)."""
        plan = self.observer.plan_current
        return SpendInputs(
            *(self.config, self.record, self.run, self.task_usage(), plan),
            *(self.ctx.prices, self.restarting()),
        )

    def running_usage(self) -> tuple[int, Usage] | None:
        """The watched run's number and usage so far while its end is not yet recorded."""
        facts = self.spend_inputs()
        live = self.spend.unrecorded(facts)
        return (live.record.run, self.spend.run_usage(facts, live)) if live is not None else None

    def take_budget_check(self, check: BudgetCheck) -> None:
        """Write what a look at the budget found, in order: notices, warnings, a stop."""
        for notice in check.notices:
            self.pen.commit(notice)
        if check.warned is not None:
            self.record.budget_warned = list(check.warned)
            self.record.budget_warned_for = check.warned_for
        if check.warnings:
            self.pen.commit(*check.warnings)
        if check.settled:
            self.drift.close_warning(
                "budget-warning", "the spend is under warn_at again: a limit was raised", "budget"
            )
        if check.stop is not None:
            self.record.budget_stop_limit = check.stop.limit  # written with its event
            self.record.budget_stop_scope = check.stop.scope
            self.pen.commit(check.stop.event)

    def spend_json(self) -> dict[str, Any]:
        """`usage_total` and `budget` as the status JSON has them (for the report)."""
        fields = self.spend.status_fields(self.spend_inputs())
        total = fields["usage_total"]
        return {"usage_total": total.to_json() if total else None, "budget": fields["budget"]}

    def run_usage(self, live: LiveRun) -> Usage:
        """A run's usage as status and budgets count it (never lower, a missing cost estimated)."""
        return self.spend.run_usage(self.spend_inputs(), live)

    def make_event(self, kind: str, message: str, run: int | None = None, **data: Any) -> Event:
        """An event of this session (of its current run unless `run` says another)."""
        return self.pen.event(
            kind, message, run if run is not None else self.record.run or None, **data
        )

    def commit_events(self, *events: Event) -> None:
        """Write events (and the session record) in one transaction, then announce them."""
        self.pen.commit(*events)

    def touch(self) -> None:
        """Something visible changed that needs no event: push a new snapshot."""
        self.pen.touch(False)

    def record_checkpoint(self, commit: Checkpoint, *events: Event) -> bool:
        """Write a new commit and its events in one transaction; False when it was known.

        Raises StoreUnavailable while the disk is full: git keeps the commit, and the observer
        reads it again once space returns.
        """
        store = self.ctx.store
        if not store.retry():
            raise StoreUnavailable(f"{store.path}: the disk is full; checkpoint not recorded yet")
        written = self.pen.commit(*events, checkpoint=commit)
        if store.unavailable:
            raise StoreUnavailable(f"{store.path}: the disk is full; checkpoint held in memory")
        return bool(written)

    def record_verification(self, verdict: Verification, *events: Event) -> None:
        """Write a checkpoint's verdict and its events in one transaction."""
        self.pen.commit(*events, verification=verdict)

    def adopt_plan_baseline(self, plan_json: str, raw: str, *events: Event) -> None:
        """Make a plan the baseline every later change is judged against, with its events."""
        self.record.plan_baseline = plan_json
        self.record.plan_baseline_raw = raw
        self.pen.commit(*events)

    def mark_git_warned(self, *events: Event) -> None:
        """Say once that the session's cwd is not a git repository."""
        self.git_warned = True
        self.pen.commit(*events)

    def forget_agent_session_id(self, *events: Event) -> None:
        """Drop an agent session id that is unsafe for argv (resume refused), with its events."""
        self.record.agent_session_id = None
        self.pen.commit(*events)

    def note_progress(self) -> None:
        """The agent showed progress (a progress entry or a commit)."""
        self.stall.activity()
        self.pen.touch(False)

    def progress_written(self, at_wall_s: float) -> None:
        """The progress file was written at `at_wall_s` (its mtime): activity as of then.

        Read at once, that is now; read first by a new daemon, it is as old as the file, so
        the silence that went before goes on counting.
        """
        written_s = time.monotonic() - max(0.0, time.time() - at_wall_s)
        self.stall.written(written_s, "a progress entry", "progress")
        self.pen.touch(False)  # the progress shown changed

    def note_plan_progress(self) -> None:
        """A plan item flipped to passing: a new burn baseline; burn and early-exit close."""
        self.drift.note_plan_progress()

    def close_warning(self, kind: str, why: str, by: str) -> None:
        """Close an open warning whose cause is gone (a condition, not another event)."""
        self.drift.close_warning(kind, why, by)

    def verdict_events(self, sha: str, passed: bool, output_tail: str) -> list[Event]:
        """A `repeated-failure` when a checkpoint fails the same way N times in a row."""
        return self.drift.verdict_events(sha, passed, output_tail)
