"""One session's supervisor: its commands, its lock and its checked transitions; the only writer.

What it owns does one job each and writes only through its pen (pen.py): the follower
(a run's output, exit and log), the launcher, restarts, the completer (the exit rules), the
adopter (after a daemon restart) and drift (driftbook.py, driftactions.py). The rules live in
sessions/lifecycle.py.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from typing import Any

import anyio

from agentherd.sessions import lifecycle, open_warnings
from agentherd.sessions.adapters import Usage
from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.drift import StallClock
from agentherd.sessions.durations import format_duration
from agentherd.sessions.lifecycle import Trigger
from agentherd.sessions.open_warnings import WarningBook
from agentherd.sessions.records import Event, RunRecord, SessionRecord, TaskRecord
from agentherd.sessions.states import ACTIVE_STATES, TERMINAL_STATES, State
from agentherd.sessions.status import LeftRunning, SessionStatus
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.checks.observe import Observer
from agentherd.supervisor.files.store import Change, StoreUnavailable, Verification
from agentherd.supervisor.git import gitops
from agentherd.supervisor.process import procs
from agentherd.supervisor.session import recovery, stallkeep
from agentherd.supervisor.session.adopter import Adopter
from agentherd.supervisor.session.budgets import SessionSpend
from agentherd.supervisor.session.completer import Completer
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.driftactions import DriftActions
from agentherd.supervisor.session.driftbook import DriftBook, task_spent
from agentherd.supervisor.session.follower import Follower
from agentherd.supervisor.session.launcher import Launcher
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.pen import Pen
from agentherd.supervisor.session.refresher import Refresher
from agentherd.supervisor.session.restarts import Restarts
from agentherd.supervisor.session.statusview import live_status

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
        self.preparing: gitops.GitDeadline | None = None
        """The rescue/reset in progress before a restart, which a stop cancels."""
        self.git_warned = False
        self.version = 0
        """Bumped on every visible change, so snapshot pushers know what is new."""
        self.output_version = 0
        """Bumped (with `version`) when output was read: the status feed then takes only the
        output fields again (api/statusfeed.py)."""
        self.stall = stallkeep.restored_stall_clock(record, self.warnings.get("stalled"))
        self.task_usage = self._ended_runs_usage()
        """Usage of the current task's ended runs (each run is its own process: they add)."""
        pen = Pen(
            self._event, self._commit, self._transition, self._end_task, self._touch, self._config
        )
        self.follower = Follower(
            ctx, record, pen, self._arm_log, self._output_read, self._exited, self.run_usage
        )
        self.spend = SessionSpend(self)
        """Spend as budgets count it (runs guarded and priced), samples and projection."""
        self.observer = Observer(self)
        self.refresher = Refresher(config.name, ctx.tg, self._reads())
        self.drift = DriftBook(record, pen, self.warnings, self._spent, self._plan_passing)
        self.actions = DriftActions(
            ctx, record, pen, self._lock, self.drift, self._run, self._stall, self._stop_for
        )
        self.launcher = Launcher(ctx, record, pen, self._plan_passing, self._new_clock, self._watch)
        self.restarts = Restarts(ctx, record, pen, self._lock, self.launcher, self._prepare_restart)
        self.completer = Completer(
            *(ctx, record, pen, self._lock, self.observer, self.restarts),
            *(self.actions.drift_restart_of, self.drift.crash_events),
        )
        parts = (self.follower, self.launcher, self.restarts, self.completer)
        self.adopter = Adopter(
            *(ctx, record, pen, self._lock, parts, self._watch, self._record_exit),
            *(self._stop_for, self.actions.resume_drift_restart),
        )

    # ----- what the parts read through small callables -------------------------------------

    @property
    def run(self) -> LiveRun | None:
        """The run being watched (or the last one, ended), if any."""
        return self.follower.run

    def _run(self) -> LiveRun | None:
        return self.follower.run

    def _config(self) -> SessionConfig:
        return self.config

    def _stall(self) -> StallClock:
        return self.stall

    def _new_clock(self) -> None:
        self.stall = StallClock(time.monotonic())

    def _plan_passing(self) -> int | None:
        plan = self.observer.plan_current
        return plan.passing if plan is not None else None

    def _spent(self) -> dict[str, float]:
        return task_spent(self.task_usage, self.run, self.record)

    def _arm_log(self, path: Any) -> None:
        self.ctx.arm_log(path)  # set by the daemon after construction: looked up at each call

    def _reads(self) -> dict[str, Any]:
        observer = self.observer
        return {
            "plan": observer.refresh_plan,
            "progress": observer.refresh_progress,
            "git": observer.refresh_git,
        }

    async def _stop_for(self, reason: str) -> None:
        await self.stop(reason=reason)

    # ----- state changes -------------------------------------------------------------------

    def _event(self, kind: str, message: str, run: int | None = None, **data: Any) -> Event:
        return Event(
            at=iso(utc_now()) or "",
            session=self.config.name,
            run=run,
            kind=kind,
            message=message,
            data=data,
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
        stallkeep.keep_stall_clock(self.stall, self.record)  # a new daemon's goes on from here
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
        kind = lifecycle.task_end_kind(state)
        ended = self._event(kind, message, self.record.run, reason=reason, handle=handle)
        self._transition(state, reason, *before, ended, by=by, task=task)
        self.ctx.tg.start_soon(self.ctx.reports.write, self)

    def _touch(self, output: bool = False) -> None:
        self.version += 1
        if output:
            self.output_version += 1

    def _ended_runs_usage(self) -> Usage:
        handle = self.record.handle
        total = Usage()
        for run in self.ctx.store.runs(self.config.name) if handle else []:
            if run.handle == handle and run.ended_at is not None and run.usage:
                total = total + Usage.from_json(run.usage)
        return total

    # ----- what the follower tells -----------------------------------------------------------

    def _watch(self, live: LiveRun) -> None:
        """Follow a run (launched or adopted) and look at its log's cap."""
        self.follower.watch(live)
        self.ctx.runs_changed()
        if self.observer.cached_git_paths is None:  # not a repository when last looked at
            self.on_file_change("git")

    def _output_read(self, written_s: float, stepped: bool, why: str = "output") -> None:
        """Output (or a progress entry) written at `written_s` was read: the agent is active."""
        self.stall.output_written(written_s, time.monotonic(), self.config.budget.stall)
        if self.warnings.is_open("stalled") and not self.stall.warned:
            text = "a progress entry" if why == "progress" else "output"
            self.close_warning("stalled", f"the agent wrote {text}", why)
        if stepped:  # a step of the agent: a budget stop comes between two, not a second late
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
        await self.follower.sweep(live)

    # ----- facts posted by the observer, recovery and budgets (they never write themselves) ---

    def spend_json(self) -> dict[str, Any]:
        """`usage_total` and `budget` as the status JSON has them (for the report)."""
        fields = self.spend.status_fields()
        total = fields["usage_total"]
        return {"usage_total": total.to_json() if total else None, "budget": fields["budget"]}

    def run_usage(self, live: LiveRun) -> Usage:
        """A run's usage as status and budgets count it (never lower, a missing cost estimated)."""
        return self.spend.run_usage(live)

    def make_event(self, kind: str, message: str, run: int | None = None, **data: Any) -> Event:
        """An event of this session (of its current run unless `run` says another)."""
        return self._event(
            kind, message, run if run is not None else self.record.run or None, **data
        )

    def commit_events(self, *events: Event) -> None:
        """Write events (and the session record) in one transaction, then announce them."""
        self._commit(*events)

    def touch(self) -> None:
        """Something visible changed that needs no event: push a new snapshot."""
        self._touch()

    def record_checkpoint(self, commit: Checkpoint, *events: Event) -> bool:
        """Write a new commit and its events in one transaction; False when it was known.

        Raises StoreUnavailable while the disk is full: git keeps the commit, and the observer
        reads it again once space returns.
        """
        store = self.ctx.store
        if not store.retry():
            raise StoreUnavailable(f"{store.path}: the disk is full; checkpoint not recorded yet")
        written = self._commit(*events, checkpoint=commit)
        if store.unavailable:
            raise StoreUnavailable(f"{store.path}: the disk is full; checkpoint held in memory")
        return bool(written)

    def record_verification(self, verdict: Verification, *events: Event) -> None:
        """Write a checkpoint's verdict and its events in one transaction."""
        self._commit(*events, verification=verdict)

    def adopt_plan_baseline(self, plan_json: str, raw: str, *events: Event) -> None:
        """Make a plan the baseline every later change is judged against, with its events."""
        self.record.plan_baseline = plan_json
        self.record.plan_baseline_raw = raw
        self._commit(*events)

    def mark_git_warned(self, *events: Event) -> None:
        """Say once that the session's cwd is not a git repository."""
        self.git_warned = True
        self._commit(*events)

    def forget_agent_session_id(self, *events: Event) -> None:
        """Drop an agent session id that is unsafe for argv (resume refused), with its events."""
        self.record.agent_session_id = None
        self._commit(*events)

    def note_progress(self) -> None:
        """The agent showed progress (a progress entry or a commit)."""
        self.stall.activity(time.monotonic())
        self.close_warning("stalled", "the agent wrote a progress entry or a commit", "progress")
        self.version += 1

    def progress_written(self, at_wall_s: float) -> None:
        """The progress file was written at `at_wall_s` (its mtime): activity as of then.

        Read at once, that is now; read first by a new daemon, it is as old as the file, so
        the silence that went before goes on counting.
        """
        self._output_read(time.monotonic() - max(0.0, time.time() - at_wall_s), False, "progress")
        self.version += 1  # the progress shown changed

    def note_plan_progress(self) -> None:
        """A plan item flipped to passing: a new burn baseline; burn and early-exit close."""
        self.drift.note_plan_progress()

    def close_warning(self, kind: str, why: str, by: str) -> None:
        """Close an open warning whose cause is gone (a condition, not another event)."""
        self.drift.close_warning(kind, why, by)

    def verdict_events(self, sha: str, passed: bool, output_tail: str) -> list[Event]:
        """A `repeated-failure` when a checkpoint fails the same way N times in a row."""
        return self.drift.verdict_events(sha, passed, output_tail)

    # ----- the slow pass and the watcher ------------------------------------------------------

    def check_stall(self) -> None:
        """Warn once when a running session shows no output, progress or commit for `stall`.

        Also the other drift checks of the slow pass (plan progress, burn rate).
        """
        self.drift.check_drift()
        if self.record.state != State.RUNNING:
            return
        stall_s = self.config.budget.stall
        if self.stall.newly_stalled(time.monotonic(), stall_s):
            idle_s = self.stall.idle_s(time.monotonic())
            self._commit(
                self._event(
                    "stalled",
                    f"no output, progress entry or commit for {format_duration(idle_s)} "
                    f"(stall = {format_duration(stall_s or 0)})",
                    self.record.run,
                    idle_s=round(idle_s, 1),
                )
            )

    def on_file_change(self, kind: str) -> None:
        """The fleet watcher saw one of this session's files change."""
        if kind == "log":
            self.wake()
        else:
            self.refresher.changed(kind)

    def refresh_everything(self) -> None:
        """Look at the plan, progress file and git again (start-up, slow reconcile pass)."""
        for kind in ("plan", "progress", "git"):
            self.on_file_change(kind)

    async def refresh_now(self, kind: str) -> None:
        """Read `kind` now and return once read (the daemon's first git reads, a few at once)."""
        await self.refresher.now(kind)

    def wake(self) -> None:
        """The watcher saw the run's log change: read it now instead of at the next poll."""
        self.follower.wake()

    def check_log_cap(self) -> None:
        """Delete the oldest runs' logs until the session fits `log_max_bytes` (slow path)."""
        self.follower.check_log_cap()

    def log_bytes(self) -> int:
        """Bytes of output kept on disk for this session, across runs (no disk scan)."""
        return self.follower.log_bytes()

    async def reconcile(self) -> None:
        """After a daemon restart: adopt a live run, or record a dead one and apply policy."""
        await self.adopter.reconcile()

    def status(self, with_fleet: bool = True) -> SessionStatus:
        """The `herd status --json` object for this session (`fleet` left out without
        `with_fleet`: the status feed sends it once per message)."""
        run = self.run
        return live_status(
            *(
                self.config,
                self.record,
                run,
                self.follower.last_run_record() if run is None else None,
            ),
            *(self.observer, self.warnings, self.spend.status_fields()),
            self.ctx.fleet_spend() if with_fleet else None,
            self.log_bytes(),
        )

    # ----- commands ------------------------------------------------------------------------

    async def start(self) -> str:
        """Begin a task (or return the running one's handle)."""
        if self.record.state in ACTIVE_STATES and self.record.handle:
            return self.record.handle  # at once, also while a restart's rescue holds the lock
        async with self._lock:
            if self.record.state in ACTIVE_STATES and self.record.handle:
                return self.record.handle
            await self._refuse_if_taken()
            await self._begin_task()
            return self.record.handle or ""

    @property
    def restart_pending(self) -> bool:
        """A restart waits in backoff and has not begun (it counts in `restarts` once it has)."""
        return self.record.state == State.BACKOFF and self.restarts.pending is not None

    def holds_worktree(self) -> bool:
        """True while an agent of this session may be at work (or is about to be) in its tree."""
        run = self.run
        return self.record.state in ACTIVE_STATES or (run is not None and not run.exited.is_set())

    async def _refuse_if_taken(self, restarting: bool = False) -> None:
        """Refuse a start beside another session's agent, or beside processes of an old run
        (a restart stops the current run itself, so its own folder does not count)."""
        other = self.ctx.worktree_user(self.config.name, self.config.cwd)
        own = self.run.folder if restarting and self.run is not None else None
        refused = await self.launcher.refusal(other, own)
        if refused is not None:
            raise SessionError(refused)

    async def _begin_task(
        self, env_extra: dict[str, str] | None = None, mode: str = "command"
    ) -> None:
        first_run = self.record.run + 1
        handle = f"{self.config.name}/{first_run}"
        self.record.handle = handle
        self.record.restarts = 0
        self.record.backoff_step = 0
        self.record.crash_times = []
        self.record.idle_runs = 0
        self.task_usage = Usage()
        self.record.task_started_at = iso(utc_now())
        task = TaskRecord(
            handle=handle,
            session=self.config.name,
            first_run=first_run,
            state=State.STARTING,
            started_at=self.record.task_started_at or "",
        )
        self.restarts.cancel()
        self._transition(
            State.STARTING,
            None,
            self._event("task-started", f"task {handle} started", first_run, handle=handle),
            by=Trigger.START,
            task=task,
        )
        await self.launcher.launch(mode=mode, env_extra=env_extra or {})

    async def stop(self, kill: bool = False, reason: str = "user") -> None:
        """End the task: stop signal + grace (or SIGKILL at once), leaving nothing behind."""
        if self.preparing is not None:  # never wait behind a slow rescue or reset: kill its git
            self.preparing.cancel()
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
        async with self._lock:
            # While its task is active, the worktree to rescue and reset is the last run's.
            active = self.run is not None and self.record.state in ACTIVE_STATES
            run_config = self.run.config if self.run is not None and active else self.config
            if from_rev not in (None, "last", "verified"):
                # Check the target before anything stops: a bad --from changes nothing.
                if not await anyio.to_thread.run_sync(gitops.is_git_repo, run_config.cwd):
                    raise SessionError(
                        f"{run_config.cwd} is not a git repository; --from needs one"
                    )
                from_rev = await anyio.to_thread.run_sync(
                    gitops.resolve_commit, run_config.cwd, from_rev
                )
            await self._refuse_if_taken(restarting=True)
            if not await self._stop_locked(kill=False, reason="user", end_task=True):
                return self.record.handle or ""
            if from_rev is None:
                await self._begin_task()
            else:
                prepared = await self._prepare_restart(from_rev, self.record.run, run_config)
                if prepared is None:  # a stop came meanwhile
                    return self.record.handle or ""
                await self._begin_task(*prepared)
            return self.record.handle or ""

    async def _prepare_restart(
        self, target: str | None, last_run: int, run_config: SessionConfig
    ) -> tuple[dict[str, str], str] | None:
        """Rescue and reset the worktree before a restart, under a deadline a stop cancels."""
        # Set before the first await, so a stop from now on finds what to cancel.
        deadline = self.preparing = gitops.GitDeadline(self.ctx.timings.git_write_timeout_s)
        try:
            return await recovery.prepare_restart(self, target, last_run, run_config, deadline)
        finally:
            self.preparing = None

    async def approve(self) -> None:
        """Adopt the current plan as the baseline; a run held at the approval gate continues."""
        async with self._lock:
            observer = self.observer
            plan = observer.plan_current
            waiting = self.record.state == State.WAITING_APPROVAL
            if plan is None and not waiting:
                raise SessionError(f"{self.config.name} has no plan to approve")
            if plan is not None:
                changes = len(observer.plan_diff.changed_items) if observer.plan_diff else 0
                accepted = observer.accept_plan()
                assert accepted is not None  # there is a current plan
                self.adopt_plan_baseline(
                    *accepted,
                    self.make_event(
                        "plan-approved",
                        f"plan approved as the new baseline ({changes} change(s) accepted)",
                        passing=plan.passing,
                        total=plan.total,
                    ),
                )
            await self.actions.continue_after_approval("approved")

    async def reject(self) -> None:
        """Write the baseline plan back (keeping items that pass now) after a forbidden change.

        At the approval gate the run then continues; with no plan change to undo there, a
        reject stops the task instead.
        """
        name = self.config.name
        async with self._lock:
            diff = self.observer.plan_diff
            waiting = self.record.state == State.WAITING_APPROVAL
            if diff is None or not diff.changed_items:
                if waiting:
                    await self._stop_locked(kill=False, reason="user")
                    return
                raise SessionError(f"{name}: the plan matches its baseline")
            try:
                await self.observer.restore_baseline()
            except (ValueError, OSError) as exc:
                raise SessionError(f"{name}: {exc}") from None
            self._commit(
                self.make_event(
                    "plan-rejected",
                    f"plan restored to its baseline ({len(diff.changed_items)} change(s) undone)",
                )
            )
            await self.observer.refresh_plan()
            await self.actions.continue_after_approval("rejected")

    async def acknowledge(self, kind: str | None) -> list[str]:
        """`herd ack`: acknowledged warnings stay open (and in the report) but leave the badge."""
        try:
            return self.drift.ack(kind)
        except ValueError as exc:
            raise SessionError(str(exc)) from None

    def wanted_by_up(self) -> bool:
        """`herd up` with no names starts this session (autostart, and idle or downed)."""
        record = self.record
        if self.config.autostart and self.spend.budget_raised():
            return True  # stopped by a budget that a person has since raised
        return lifecycle.up_starts(self.config.autostart, record.state, record.reason)

    async def finish_interrupted_down(self) -> None:
        """A `herd down` whose daemon was killed mid-stop: finish that stop (before `up`)."""
        if lifecycle.up_finishes_stop(self.record.state, self.record.reason):
            await self.stop(reason="down")

    async def left_running(self) -> LeftRunning | None:
        """The session and the pids of its run still alive after a stop, or None."""
        run = self.run
        if run is None:
            return None
        record = self.record
        if run.exited.is_set() and record.state != State.STOPPING and record.reason != "unkillable":
            return None  # stopped cleanly: its stop already found nothing left
        found = await anyio.to_thread.run_sync(procs.run_processes, run.identity)
        pids = sorted(p.pid for p in found)
        if not pids:
            return None
        return LeftRunning(session=self.config.name, state=record.state, pids=pids)

    async def pause(self) -> None:
        """SIGSTOP the whole run."""
        async with self._lock:
            run = self.run
            if run is None or run.exited.is_set() or self.record.state != State.RUNNING:
                raise SessionError(f"{self.config.name} is {self.record.state}, not running")
            timings = self.ctx.timings
            if not await anyio.to_thread.run_sync(
                procs.pause_run, run.identity, timings.pause_wait_s, timings.stop_poll_s
            ):
                log.warning("%s: a process of the run did not stop", self.config.name)
            run.paused = True
            self.stall.pause(time.monotonic())
            self._transition(
                State.PAUSED,
                "user",
                self._event("paused", "paused (SIGSTOP)", run.record.run),
                by=Trigger.PAUSE,
            )

    async def resume_run(self) -> None:
        """SIGCONT the whole run."""
        async with self._lock:
            run = self.run
            if run is None or self.record.state != State.PAUSED:
                raise SessionError(f"{self.config.name} is {self.record.state}, not paused")
            await anyio.to_thread.run_sync(procs.signal_run, run.identity, signal.SIGCONT)
            run.paused = False
            self.stall.resume(time.monotonic())
            self._transition(
                State.RUNNING,
                None,
                self._event("resumed", "resumed (SIGCONT)", run.record.run),
                by=Trigger.RESUME,
            )


class SessionError(Exception):
    """A command that does not fit the session's state; shown to the person as one line."""
