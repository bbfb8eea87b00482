"""One session's supervisor: its commands, its lock and its checked transitions; the only writer.

What it owns does one job each and writes only through its pen (pen.py): the follower
(a run's output, exit and log), the launcher, restarts, the queue, the completer (the exit
rules), the adopter (after a daemon restart), drift (driftbook.py, driftactions.py), the holder
and the mailbox; the refresher and the status view only read. The rules live in
sessions/lifecycle.py.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

import anyio

from agentherd.sessions import lifecycle, open_warnings
from agentherd.sessions.adapters import Usage
from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.drift import StallClock
from agentherd.sessions.lifecycle import Trigger
from agentherd.sessions.open_warnings import WarningBook
from agentherd.sessions.records import Event, RunRecord, SessionRecord, TaskRecord
from agentherd.sessions.states import ACTIVE_STATES, RUN_STATES, TERMINAL_STATES, State
from agentherd.sessions.status import LeftRunning, SessionStatus
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.checks.observe import Observer
from agentherd.supervisor.files.store import Change, Verification
from agentherd.supervisor.session import recovery
from agentherd.supervisor.session.adopter import Adopter
from agentherd.supervisor.session.completer import Completer
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.desk import Desk
from agentherd.supervisor.session.driftactions import DriftActions
from agentherd.supervisor.session.driftbook import DriftBook, task_spent
from agentherd.supervisor.session.errors import SessionError
from agentherd.supervisor.session.follower import Follower
from agentherd.supervisor.session.hold import Holder
from agentherd.supervisor.session.inputwait import InputWait
from agentherd.supervisor.session.launcher import Launcher
from agentherd.supervisor.session.liverun import LiveRun, output_written_at
from agentherd.supervisor.session.mailbox import Mailbox
from agentherd.supervisor.session.pen import Pen
from agentherd.supervisor.session.queue import Queue
from agentherd.supervisor.session.refresher import Refresher
from agentherd.supervisor.session.restarts import Restarts
from agentherd.supervisor.session.spend import SessionSpend
from agentherd.supervisor.session.stallkeep import StallWatch
from agentherd.supervisor.session.statusview import StatusView

log = logging.getLogger("herd.session")

STRICT_TRANSITIONS_VAR = "HERD_STRICT_TRANSITIONS"
"""Set to 1 by the test suite: an illegal lifecycle move raises instead of being logged."""


class SessionSupervisor:
    """Owns one session: the only writer of its record; every change goes through `_commit`."""

    def __init__(self, config: SessionConfig, record: SessionRecord, ctx: Context) -> None:
        self.config = config
        self.record = record
        self.ctx = ctx
        self.warnings = WarningBook(ctx.store.open_warnings(config.name))
        """The open warnings, as the store keeps them (a new daemon shows the same)."""
        self._lock = anyio.Lock()
        self.version = 0
        """Bumped on every visible change, so snapshot pushers know what is new."""
        self.output_version = 0
        """Bumped (with `version`) when output was read: the status feed then takes only the
        output fields again (api/statusfeed.py)."""
        self.restarting = False
        """A restart is under way: the task it ended is followed by a new one (chains wait)."""
        writes = (self._event, self._commit, self._transition, self._end_task, self._touch)
        pen = Pen(record, self._lock, *writes, lambda: self.config)
        arm_log = lambda path: self.ctx.arm_log(path)  # noqa: E731  (the daemon sets it later)
        reads = (self._output_read, self._exited, self.run_usage)
        self.follower = Follower(ctx, pen, arm_log, *reads)
        self.task_usage = self.follower.ended_runs_usage()
        """Usage of the current task's ended runs (each run is its own process: they add)."""
        self.spend = SessionSpend(ctx.store, ctx.timings.spend_sample_s)
        """Spend as budgets count it (runs guarded and priced), samples and projection."""
        run = lambda: self.follower.run  # noqa: E731
        spent = lambda: task_spent(self.task_usage, self.run, self.record)  # noqa: E731
        self.drift = DriftBook(pen, self.warnings, spent, self._plan_passing)
        wrote = lambda: output_written_at(run())  # noqa: E731
        self.stall_watch = StallWatch(pen, self.warnings, self.drift.close_warning, wrote)
        ledger = (self.spend, self.stall_watch, self.drift, lambda: self.task_usage)
        desk = self.desk = Desk(ctx, pen, run, *ledger, lambda: self.restarts.waiting())
        """What the observer, recovery and reports see of the session, and post to it."""
        self.observer = desk.observer = Observer(desk)
        self.spend_inputs, self.running_usage = desk.spend_inputs, desk.running_usage
        self.take_budget_check = desk.take_budget_check  # the budget keeper's, on the session
        facts = (self.follower, self.spend, desk.spend_inputs, self.observer, self.warnings)
        self.view = StatusView(ctx, pen, *facts)
        self.refresher = Refresher(config.name, ctx.tg, self.observer, self.follower.wake)
        """Where the watcher's changes of this session's files (and the slow pass's looks) go."""
        self.input_wait = InputWait(pen, run, self.stall_watch)
        self.refresher.reads["signals"] = self.input_wait.read
        stop_task = lambda: self._stop_locked(kill=False, reason="user")  # noqa: E731
        held = (self.observer, run, self.stall_watch, self.warnings, stop_task)
        self.holder = Holder(ctx, pen, *held)
        # A run this host no longer owns (`fenced`) is killed: it may run elsewhere already.
        stop_for = lambda reason: self.stop(kill=reason == "fenced", reason=reason)  # noqa: E731
        acts = (self.holder.hold_for_approval, stop_for)
        self.actions = DriftActions(ctx, pen, self.drift, run, *acts)
        watch_new = functools.partial(self._watch, launched=True)
        self.launcher = Launcher(ctx, pen, self._plan_passing, self.stall_watch.restart, watch_new)
        rescue = functools.partial(recovery.prepare_restart, desk)
        self.restarts = Restarts(ctx, pen, self.launcher, rescue)
        self.queue = Queue(ctx, pen, self.launcher)
        drift_facts = (self.actions.drift_restart_of, self.drift.crash_events)
        self.completer = Completer(ctx, pen, self.observer, self.restarts, *drift_facts)
        parts = (self.follower, self.launcher, self.restarts, self.completer)
        ends = (self._watch, self._record_exit, stop_for, self.actions.resume_drift_restart)
        self.adopter = Adopter(ctx, pen, parts, *ends)
        self.mailbox = Mailbox(ctx, pen, self._begin_resume)

    @property
    def run(self) -> LiveRun | None:
        """The run being watched (or the last one, ended), if any."""
        return self.follower.run

    @property
    def stall(self) -> StallClock:
        """The stall clock: seconds since the last output, progress entry or commit."""
        return self.stall_watch.clock

    def _plan_passing(self) -> int | None:
        plan = self.observer.plan_current
        return plan.passing if plan is not None else None

    # ----- state changes -------------------------------------------------------------------

    def _event(self, kind: str, message: str, run: int | None = None, **data: Any) -> Event:
        at = iso(utc_now()) or ""
        return Event(
            at=at, session=self.config.name, run=run, kind=kind, message=message, data=data
        )

    def _commit(
        self,
        *events: Event,
        run: RunRecord | None = None,
        task: TaskRecord | None = None,
        checkpoint: Checkpoint | None = None,
        verification: Verification | None = None,
    ) -> list[Event]:
        name = self.config.name
        # Every warning an event settles gets its `warning-closed` in the same transaction.
        events = tuple(open_warnings.with_closings(events, self.warnings.kinds()))
        self.stall_watch.keep()  # a new daemon's stall clock goes on from here
        written = self.ctx.store.commit(
            Change(
                session=self.record,
                run=run,
                task=task,
                events=events,
                checkpoint=(name, checkpoint) if checkpoint is not None else None,
                verification=(name, verification) if verification is not None else None,
            )
        )
        for event in written:
            self.warnings.take(event)
        self.version += 1
        self.ctx.spend_changed(self)  # the budget keeper looks on change, not on a timer
        self.ctx.announce(written)
        self.actions.after_written(written)
        return written

    def _transition(
        self,
        to_state: State,
        reason: str | None,
        *events: Event,
        by: Trigger,
        run: RunRecord | None = None,
        task: TaskRecord | None = None,
    ) -> None:
        """Move to `to_state` if the lifecycle table allows it; commit it with its events."""
        source = self.record.state
        if not lifecycle.allowed(source, to_state, by):
            problem = f"{self.config.name}: illegal transition {source} -> {to_state} ({by})"
            if os.environ.get(STRICT_TRANSITIONS_VAR) == "1":
                raise lifecycle.IllegalTransition(problem)
            log.error("BUG: %s; taken anyway", problem, stack_info=True)
        self.record.state = to_state
        self.record.reason = reason
        self._commit(*events, run=run, task=task)

    def _end_task(
        self, state: State, reason: str | None, message: str, by: Trigger, *before: Event
    ) -> None:
        """Record how the current task ended, with its event, in one transaction."""
        handle = self.record.handle
        task = self.ctx.store.task(handle) if handle else None
        if task is not None and task.ended_at is None:
            task = task.model_copy(
                update={"state": state, "reason": reason, "ended_at": iso(utc_now())}
            )
        if self.record.state == State.QUEUED:  # it never ran: its run number is used up, so
            self.record.run += 1  # the next task's handle is a new one
        kind = lifecycle.task_end_kind(state)
        ended = self._event(kind, message, self.record.run, reason=reason, handle=handle)
        self._transition(state, reason, *before, ended, by=by, task=task)
        self.ctx.tg.start_soon(self.ctx.reports.write, self.desk)
        self.mailbox.task_ended(state)

    def _touch(self, output: bool = False) -> None:
        self.version += 1
        if output:
            self.output_version += 1

    # ----- what the follower tells -----------------------------------------------------------

    def _watch(self, live: LiveRun, launched: bool = False) -> None:
        """Follow a run (a launched one's log cap is looked at too: its older logs count)."""
        self.follower.run = live
        self.ctx.runs_changed()
        if self.observer.cached_git_paths is None:  # not a repository when last looked at
            self.refresher.changed("git")
        self.follower.watch(live)
        if launched:
            self.follower.check_log_cap()

    def _output_read(self, written_s: float, stepped: bool) -> None:
        """Output written at `written_s` was read; `stepped`: it showed a step of the agent."""
        self.stall_watch.written(written_s, "output", "output")
        if stepped:  # a budget stop comes between two of the agent's steps, not a second late
            self.ctx.check_budget(self)

    async def _exited(self, live: LiveRun) -> None:
        """The run's leader ended and its output is read: record it and apply the exit rules."""
        async with self._lock:
            if live.handled or self.run is not live:
                return
            live.handled = True
            await self._record_exit(live)
            await self.completer.after_exit(live)

    async def _record_exit(self, live: LiveRun) -> None:
        """Write the run's end, once, and sweep anything of it still alive."""
        ended = await self.follower.end_of(live)
        if ended is None:
            return
        event, usage = ended
        self.task_usage = self.task_usage + usage
        self._commit(event, run=live.record)
        if await self.follower.sweep(live):  # nothing of the run writes its log any more
            self.ctx.tg.start_soon(self.follower.compact_log, live)

    # ----- what the follower, budgets and tests ask -----------------------------------------

    def run_usage(self, live: LiveRun) -> Usage:
        """A run's usage as status and budgets count it (never lower, a missing cost estimated)."""
        return self.desk.run_usage(live)

    def make_event(self, kind: str, message: str, run: int | None = None, **data: Any) -> Event:
        """An event of this session (of its current run unless `run` says another)."""
        return self.desk.make_event(kind, message, run, **data)

    def touch(self) -> None:
        """Something visible changed that needs no event: push a new snapshot."""
        self._touch()

    # ----- the slow pass ---------------------------------------------------------------------

    def check_stall(self) -> None:
        """The slow pass's drift checks: plan progress, burn rate, and silence past `stall`."""
        self.drift.check_drift()
        self.stall_watch.check()

    def wake(self) -> None:
        """The run's log may have changed unseen: read it now instead of at the next poll."""
        self.follower.wake()

    async def reconcile(self) -> None:
        """After a daemon restart: adopt a live run, or record a dead one and apply policy."""
        await self.adopter.reconcile()
        self.mailbox.reconciled()

    def status(self, with_fleet: bool = True) -> SessionStatus:
        """`herd status --json` of this session (no `fleet` without `with_fleet`: sent once)."""
        return self.view.status(with_fleet)

    # ----- commands ------------------------------------------------------------------------

    async def start(self, now: bool = False) -> str:
        """Begin a task (or return the active one's handle); with `after`, it queues until those
        sessions completed, unless `now`."""
        queued = self.record.state == State.QUEUED
        if self.record.state in ACTIVE_STATES and self.record.handle and not (now and queued):
            return self.record.handle  # at once, also while a restart's rescue holds the lock
        async with self._lock:
            if not await self.queue.takes_start(now, self._new_task):
                await self.launcher.refuse_start()
                if self.config.scope and self.observer.checkpoint is None:  # git unread yet: a
                    await self.observer.refresh_git()  # scope would take agent commits for history
                await self._begin_task()
            return self.record.handle or ""

    async def advance_chain(self) -> None:
        """A task ended somewhere: a queued task looks at its `after` sessions again."""
        async with self._lock:
            await self.queue.advance()

    def holds_worktree(self) -> bool:
        """True while an agent of this session may be at work (or is about to be) in its tree."""
        run = self.run
        return self.record.state in RUN_STATES or (run is not None and not run.exited.is_set())

    def _new_task(self) -> TaskRecord:
        """A new task on the record: its usage and pending restart start afresh."""
        task = self.launcher.new_task()
        self.task_usage = Usage()
        self.restarts.cancel()
        return task

    async def _begin_task(
        self, env_extra: dict[str, str] | None = None, mode: str = "command"
    ) -> None:
        task = self._new_task()
        begun = f"task {task.handle} started"
        self._transition(
            State.STARTING,
            None,
            self._event("task-started", begun, task.first_run, handle=task.handle),
            by=Trigger.START,
            task=task,
        )
        await self.launcher.launch(mode=mode, env_extra=env_extra or {})

    async def _begin_resume(self) -> None:
        """A new task whose first run resumes the conversation with the waiting message."""
        await self.launcher.refuse_start()
        await self._begin_task(mode="resume")

    async def stop(self, kill: bool = False, reason: str = "user") -> None:
        """End the task: stop signal + grace (or SIGKILL at once), leaving nothing behind."""
        if self.restarts.preparing is not None:  # never wait behind a slow rescue or reset
            self.restarts.preparing.cancel()
        if self.run is not None:  # nor behind a read of the ended run's agent files
            self.run.agent_files.cancel()
        async with self._lock:
            await self._stop_locked(kill=kill, reason=reason)

    async def _stop_locked(self, kill: bool, reason: str, end_task: bool = True) -> bool:
        """Stop the current run if any; returns False when it could not be killed."""
        self.restarts.cancel()
        by = Trigger.BUDGET if reason.startswith("budget:") else Trigger.STOP
        run = self.run
        if run is not None and not run.exited.is_set():
            run.record.stop_requested = True
            run.record.stop_reason = reason
            self._transition(
                State.STOPPING,
                reason,
                self._event(
                    "stopping",
                    f"stopping run {run.record.run} ({reason})",
                    run.record.run,
                    kill=kill,
                ),
                by=by,
                run=run.record,
            )
            gone = await self.follower.stop_run(run, kill)
            run.handled = True
            await self._record_exit(run)
            if not gone:
                self._end_task(
                    State.FAILED,
                    "unkillable",
                    f"run {run.record.run} could not be killed; processes remain",
                    Trigger.UNKILLABLE,
                )
                return False
        elif run is not None and not run.handled:
            # It exited on its own just before the stop: its end is recorded here, so the exit
            # handler waiting for the lock does not apply the restart policy to a stopped task.
            run.handled = True
            await self._record_exit(run)
        if end_task and self.record.state not in TERMINAL_STATES | {State.IDLE}:
            ended = Trigger.BUDGET if by is Trigger.BUDGET else Trigger.STOPPED
            self._end_task(State.STOPPED, reason, f"stopped ({reason})", ended)
        return True

    async def restart(self, from_rev: str | None = None) -> str:
        """Stop (gracefully), then begin a new task; with `from_rev`, rescue and reset first."""
        self.restarting = True
        try:
            return await self._restart(from_rev)
        finally:
            self.restarting = False
            self.ctx.chains.advance_all()  # a restart that began no task lets its links go

    async def _restart(self, from_rev: str | None) -> str:
        async with self._lock:
            # While its task is active, the worktree to rescue and reset is the last run's.
            active = self.run is not None and self.record.state in ACTIVE_STATES
            run_config = self.run.config if self.run is not None and active else self.config
            from_rev = await self.restarts.target_of(from_rev, run_config)  # before any stop
            await self.launcher.refuse_start(self.run.folder if self.run is not None else None)
            if not await self._stop_locked(kill=False, reason="user", end_task=True):
                return self.record.handle or ""
            if from_rev is None:
                await self._begin_task()
            else:
                prepared = await self.restarts.prepare(from_rev, self.record.run, run_config)
                if prepared is None:  # a stop came meanwhile
                    return self.record.handle or ""
                await self._begin_task(*prepared)
            return self.record.handle or ""

    async def approve(self, answered: dict[str, str] | None = None) -> None:
        """Adopt the current plan as the baseline; a run held at the approval gate continues."""
        await self.holder.approve(answered)

    async def reject(self, answered: dict[str, str] | None = None) -> None:
        """Write the baseline plan back after a forbidden change (at the gate: the run goes on;
        with no plan change to undo there, the task stops)."""
        await self.holder.reject(answered)

    async def acknowledge(self, kind: str | None) -> list[str]:
        """`herd ack`: acknowledged warnings stay open (and in the report) but leave the badge."""
        return self.drift.ack(kind)

    async def left_running(self) -> LeftRunning | None:
        """The session and the pids of its run still alive after a stop, or None."""
        return await self.follower.left_running()

    async def park_for_account(self, account: str) -> None:
        """Another session of `account` hit its limit: park this one with it."""
        await self.restarts.park_for_account(lambda: self.run, account)

    async def pause(self) -> None:
        """SIGSTOP the whole run."""
        await self.holder.pause()

    async def resume_run(self) -> None:
        """SIGCONT the whole run."""
        await self.holder.resume()


__all__ = ["SessionError", "SessionSupervisor"]
