"""One session's supervisor: its commands and its checked transitions; the only writer.

Following a run, launching and restarting, and adoption after a daemon restart are parts
of it (following.py, launching.py, adoption.py); the rules live in sessions/lifecycle.py.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from typing import Any

import anyio

from agentherd.sessions import lifecycle, open_warnings, status_builder
from agentherd.sessions.adapters import Usage
from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.durations import format_duration
from agentherd.sessions.lifecycle import Trigger
from agentherd.sessions.open_warnings import WarningBook
from agentherd.sessions.records import (
    Event,
    RunRecord,
    SessionRecord,
    TaskRecord,
)
from agentherd.sessions.spending import task_runs_usage
from agentherd.sessions.states import ACTIVE_STATES, TERMINAL_STATES, State
from agentherd.sessions.status import (
    LeftRunning,
    LogsStatus,
    SessionStatus,
)
from agentherd.sessions.status_builder import StatusFacts
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.checks.observe import Observer
from agentherd.supervisor.files import logcap
from agentherd.supervisor.files.store import Change, StoreUnavailable, Verification
from agentherd.supervisor.git import gitops
from agentherd.supervisor.process import procs, runfolder
from agentherd.supervisor.session import recovery
from agentherd.supervisor.session.adoption import Adoption
from agentherd.supervisor.session.budgets import BudgetCheck, budget_raised
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.drifting import DriftHandling
from agentherd.supervisor.session.errors import SessionError
from agentherd.supervisor.session.following import RunFollowing
from agentherd.supervisor.session.launching import Launching
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.spend import SessionSpend, SpendInputs

log = logging.getLogger("herd.session")

STRICT_TRANSITIONS_VAR = "HERD_STRICT_TRANSITIONS"
"""Set to 1 by the test suite: an illegal lifecycle move raises instead of being logged."""


class SessionSupervisor(Adoption, Launching, RunFollowing, DriftHandling):
    """Owns one session: the only writer of its record; every change goes through `_commit`."""

    def __init__(self, config: SessionConfig, record: SessionRecord, ctx: Context) -> None:
        self.config = config
        self.record = record
        self.ctx = ctx
        self.run: LiveRun | None = None
        self.warnings = WarningBook(ctx.store.open_warnings(config.name))
        """The open warnings, as the store keeps them (a new daemon shows the same)."""
        self._ended_run: RunRecord | None = None
        """The last run's record as stored, for the status while no run is watched."""
        self._lock = anyio.Lock()
        self.preparing: gitops.GitDeadline | None = None
        """The rescue/reset in progress before a restart, which a stop cancels."""
        self._pending_restart: anyio.CancelScope | None = None
        """The backoff wait of a scheduled restart; a stop, restart or start cancels it."""
        self.git_warned = False
        self._refreshing: dict[str, bool] = {}
        self.stall = self.restored_stall_clock()
        self.task_usage = self._ended_runs_usage()
        self.spend = SessionSpend(ctx.store, ctx.timings.spend_sample_s)
        """Spend as budgets count it (runs guarded and priced), samples and projection."""
        self.older_logs_bytes = logcap.bytes_before(self._runs_folder, self.record.run)
        """Usage of the current task's ended runs (each run is its own process: they add)."""
        self.observer = Observer(self)
        self.drift = self.restored_drift()
        self.version = 0
        """Bumped on every visible change, so snapshot pushers know what is new."""
        self.output_version = 0
        """Bumped (with `version`) when output was read: the status feed then takes only the
        output fields again (supervisor/api/statusfeed.py)."""

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
        self.keep_stall_clock()  # a new daemon's stall clock goes on from here
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
        self._after_written(written)
        return written

    def _ended_runs_usage(self) -> Usage:
        handle = self.record.handle
        return task_runs_usage(self.ctx.store.runs(self.config.name), handle) if handle else Usage()

    def spend_json(self) -> dict[str, Any]:
        """`usage_total` and `budget` as the status JSON has them (for the report)."""
        fields = self.spend.status_fields(self.spend_inputs())
        total = fields["usage_total"]
        return {"usage_total": total.to_json() if total else None, "budget": fields["budget"]}

    def running_usage(self) -> tuple[int, Usage] | None:
        """The watched run's number and usage so far while its end is not yet recorded."""
        inputs = self.spend_inputs()
        live = self.spend.unrecorded(inputs)
        return (live.record.run, self.spend.run_usage(inputs, live)) if live is not None else None

    def spend_inputs(self) -> SpendInputs:
        """What the spend ledger counts from: this session as it is now (one way, no callback)."""
        plan = self.observer.plan_current
        return SpendInputs(
            self.config,
            self.record,
            self.run,
            self.task_usage,
            plan,
            self.ctx.prices,
            self.restart_pending,
        )

    def take_budget_check(self, check: BudgetCheck) -> None:
        """Write what a look at the budget found, in order: notices, warnings, a stop."""
        for notice in check.notices:
            self._commit(notice)
        if check.warned is not None:
            self.record.budget_warned = list(check.warned)
            self.record.budget_warned_for = check.warned_for
        if check.warnings:
            self._commit(*check.warnings)
        if check.stop is not None:
            self.record.budget_stop_limit = check.stop.limit  # written with its event
            self.record.budget_stop_scope = check.stop.scope
            self._commit(check.stop.event)

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
        self.version += 1

    # ----- facts posted by the observer and recovery (they never write themselves) -----------

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

    def check_stall(self) -> None:
        """Warn once when a running session shows no output, progress or commit for `stall`.

        Also the other drift checks of the slow pass (plan progress, burn rate).
        """
        self.check_drift()
        if self.record.state != State.RUNNING:
            return
        if self.stall.newly_stalled(time.monotonic(), self.config.budget.stall):
            idle_s = self.stall.idle_s(time.monotonic())
            self._commit(
                self._event(
                    "stalled",
                    f"no output, progress entry or commit for {format_duration(idle_s)} "
                    f"(stall = {format_duration(self.config.budget.stall or 0)})",
                    self.record.run,
                    idle_s=round(idle_s, 1),
                )
            )

    def on_file_change(self, kind: str) -> None:
        """The fleet watcher saw one of this session's files change."""
        if kind == "log":
            self.wake()
            return
        if self._refreshing.get(kind) is not None:
            self._refreshing[kind] = True  # read again when the running read finishes
            return
        self._refreshing[kind] = False
        self.ctx.tg.start_soon(self._refresh, kind)

    def refresh_everything(self) -> None:
        """Look at the plan, progress file and git again (start-up, slow reconcile pass)."""
        for kind in ("plan", "progress", "git"):
            self.on_file_change(kind)

    async def refresh_now(self, kind: str) -> None:
        """Read `kind` now and return once read (or mark it to be read again by a read under
        way); the daemon's first git reads go a few at a time this way."""
        if self._refreshing.get(kind) is not None:
            self._refreshing[kind] = True
            return
        self._refreshing[kind] = False
        await self._refresh(kind)

    async def _refresh(self, kind: str) -> None:
        refresh = {
            "plan": self.observer.refresh_plan,
            "progress": self.observer.refresh_progress,
            "git": self.observer.refresh_git,
        }[kind]
        try:
            while True:
                try:
                    await refresh()
                except Exception:  # one file must never take the daemon down
                    log.exception("refreshing %s of %s failed", kind, self.config.name)
                if not self._refreshing.get(kind):
                    return
                self._refreshing[kind] = False
        finally:
            self._refreshing.pop(kind, None)

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

    def _cancel_pending_restart(self) -> None:
        """Drop a scheduled restart that has not taken the session's lock yet."""
        if self._pending_restart is not None:
            self._pending_restart.cancel()
            self._pending_restart = None

    def _task(self) -> TaskRecord | None:
        return self.ctx.store.task(self.record.handle) if self.record.handle else None

    def _end_task(
        self, state: State, reason: str | None, message: str, by: Trigger, *before: Event
    ) -> None:
        """Record how the current task ended, with its event, in one transaction."""
        task = self._task()
        if task is not None and task.ended_at is None:
            task = task.model_copy(
                update={"state": state, "reason": reason, "ended_at": iso(utc_now())}
            )
        kind = lifecycle.task_end_kind(state)
        handle = self.record.handle
        ended = self._event(kind, message, self.record.run, reason=reason, handle=handle)
        self._transition(state, reason, *before, ended, by=by, task=task)
        self.ctx.tg.start_soon(self.ctx.reports.write, self)

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
        return self.record.state == State.BACKOFF and self._pending_restart is not None

    def holds_worktree(self) -> bool:
        """True while an agent of this session may be at work (or is about to be) in its tree."""
        run = self.run
        return self.record.state in ACTIVE_STATES or (run is not None and not run.exited.is_set())

    async def _refuse_if_taken(self, restarting: bool = False) -> None:
        """Refuse a start beside another session's agent, or beside processes of an old run.

        A run folder whose `alive.lock` is held has live processes in this worktree: leftovers
        of an earlier run, or a run no state remembers (state.db deleted while agents ran).
        A restart stops the current run itself, so its own folder does not count.
        """
        name = self.config.name
        other = self.ctx.worktree_user(name, self.config.cwd)
        if other is not None:
            raise SessionError(
                f"cannot start {name}: session {other} is running in the same worktree "
                f"({self.config.cwd}); stop it first (`herd stop {other}`)"
            )
        held = await anyio.to_thread.run_sync(runfolder.held_run_folders, self._runs_folder)
        if restarting and self.run is not None:
            held = [folder for folder in held if folder != self.run.folder]
        if held:
            users = await anyio.to_thread.run_sync(runfolder.describe_users, held[0])
            raise SessionError(
                f"cannot start {name}: processes of an earlier run still hold {held[0]} "
                f"({users}); stop them, then start again"
            )

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
        self._cancel_pending_restart()
        self._transition(
            State.STARTING,
            None,
            self._event("task-started", f"task {handle} started", first_run, handle=handle),
            by=Trigger.START,
            task=task,
        )
        await self._launch(mode=mode, env_extra=env_extra or {})

    async def stop(self, kill: bool = False, reason: str = "user") -> None:
        """End the task: stop signal + grace (or SIGKILL at once), leaving nothing behind."""
        if self.preparing is not None:  # never wait behind a slow rescue or reset: kill its git
            self.preparing.cancel()
        async with self._lock:
            await self._stop_locked(kill=kill, reason=reason)

    async def _stop_locked(self, kill: bool, reason: str, end_task: bool = True) -> bool:
        """Stop the current run if any; returns False when it could not be killed."""
        self._cancel_pending_restart()
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
            signum = signal.SIGKILL if kill else self.config.stop_signal_number
            gone = await procs.stop_tree(
                run.identity,
                signum,
                self.config.stop_grace,
                self.ctx.timings.kill_wait_s,
                self.ctx.timings.stop_poll_s,
                continue_first=run.paused,
                leader_exited=run.exited if run.process is not None else None,
            )
            with anyio.move_on_after(self.ctx.timings.kill_wait_s):
                await run.exited.wait()
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
            await self.continue_after_approval("approved")

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
            await self.continue_after_approval("rejected")

    async def acknowledge(self, kind: str | None) -> list[str]:
        """`herd ack`: acknowledged warnings stay open (and in the report) but leave the badge."""
        try:
            return self.ack(kind)
        except ValueError as exc:
            raise SessionError(str(exc)) from None

    def wanted_by_up(self) -> bool:
        """`herd up` with no names starts this session (autostart, and idle or downed)."""
        record = self.record
        budget, fleet_budget = self.config.budget, self.ctx.fleet_budget
        if self.config.autostart and budget_raised(record, budget, fleet_budget):
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

    # ----- status ----------------------------------------------------------------------------

    def status(self, with_fleet: bool = True) -> SessionStatus:
        """The `herd status --json` object for this session (`fleet` left out without
        `with_fleet`: the status feed sends it once per message)."""
        run = self.run
        record = run.record if run is not None else self._last_run_record()
        observed = self.observer.status_fields()
        plan_diff = self.observer.plan_diff
        return status_builder.build(
            StatusFacts(
                name=self.config.name,
                agent=self.config.agent,
                record=self.record,
                run=record,
                alive=run is not None and not run.exited.is_set(),
                spend=self.spend.facts(self.spend_inputs(), time.time(), projecting=True),
                warnings=self.warnings.open(),
                plan=observed["plan"],
                plan_error=self.observer.plan_error is not None,
                plan_tampered=bool(plan_diff.changed_items) if plan_diff is not None else None,
                progress=observed["progress"],
                checkpoint=observed["checkpoint"],
                git_note=observed["git_note"],
                last_line=run.last_line if run is not None else record.last_line if record else "",
                logs=LogsStatus(bytes=self.log_bytes(), cap_bytes=self.config.log_max_bytes),
                fleet=self.ctx.fleet_spend() if with_fleet else None,
            )
        )

    def _last_run_record(self) -> RunRecord | None:
        """The current run number's stored record (read once per run number, not per status)."""
        number = self.record.run
        cached = self._ended_run
        if number and (cached is None or cached.run != number or cached.ended_at is None):
            self._ended_run = self.ctx.store.run(self.config.name, number)
        return self._ended_run if number else None
