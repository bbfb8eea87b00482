"""One session's supervisor: launches runs, watches them end, restarts, stops, remembers."""

from __future__ import annotations

import functools
import logging
import math
import os
import signal
import threading
import time
import uuid
from collections import deque
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio

from agentherd.sessions.adapters import Usage, make_parser
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.drift import StallClock
from agentherd.sessions.durations import format_duration
from agentherd.sessions.records import (
    WARNING_KINDS,
    Event,
    RunRecord,
    SessionRecord,
    TaskRecord,
)
from agentherd.sessions.states import ACTIVE_STATES, TERMINAL_STATES, State, task_state
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor import diskspace, gitops, logcap, procs, recovery, reporting
from agentherd.supervisor.context import Context
from agentherd.supervisor.liverun import LiveRun, outcome_name
from agentherd.supervisor.observe import Observer
from agentherd.supervisor.paths import run_dir
from agentherd.supervisor.store import Change

log = logging.getLogger("herd.session")

LAST_LINE_CHARS = 400
"""The dashboard shows one line per session; longer lines are cut before they are stored."""

REPORT_CHECKPOINTS = 500
"""A report lists at most this many checkpoints (the newest)."""

UNTIL_DONE_IDLE_RUNS = 3
"""until-done ends the loop (failed, reason no-progress) after this many idle runs in a row."""

TAIL_READS_PER_WAKE = 128
"""At most this many reads (of the tailer's chunk size) per wake-up of a run's output reader."""

TAIL_READ_BUDGET_S = 0.05
"""A wake-up stops reading after this long; the rest waits for the next one (the loop serves
every session and every client)."""

LOG_FLOOD_BYTES = 256 * 1024
"""A log that grew this much since its last cap check is flooding: check it every
LOG_FLOOD_CHECK_S instead of waiting for the watcher."""

LOG_FLOOD_CHECK_S = 0.002
"""How often a flooding log is checked against log_max_bytes, from a worker thread (one lstat
each time; `yes` writes ~2 MB in that time)."""

LOG_CHECK_MIN_S = 0.01
"""The event loop looks at a log at most this often (a flood gets a worker thread instead)."""

LOG_WRITE_BYTES_PER_S = 1 << 30
"""The fastest writer planned for (`yes` into tmpfs): a log with R bytes of room under its cap
is looked at again within R / this, so such a writer passes the cap by ~1% of its rate."""

LOG_CAPPED_EVENT_S = 60.0
"""A log that keeps being cut gets a `log-capped` event at most this often (and one at its end)."""


class SessionSupervisor:
    """Owns one session: the only writer of its record; every change goes through `_commit`."""

    def __init__(self, config: SessionConfig, record: SessionRecord, ctx: Context) -> None:
        self.config = config
        self.record = record
        self.ctx = ctx
        self.run: LiveRun | None = None
        self.warnings: deque[Event] = deque(maxlen=20)
        self._lock = anyio.Lock()
        self.preparing: gitops.GitDeadline | None = None
        """The rescue/reset in progress before a restart, which a stop cancels."""
        self._backoff_generation = 0
        self.git_warned = False
        self._refreshing: dict[str, bool] = {}
        self.stall = StallClock(time.monotonic())
        self.task_usage = self._ended_runs_usage()
        self.older_logs_bytes = logcap.bytes_before(self._runs_folder, self.record.run)
        """Usage of the current task's ended runs (each run is its own process: they add)."""
        self.observer = Observer(self)
        self.version = 0
        """Bumped on every visible change, so snapshot pushers know what is new."""

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
        self, *events: Event, run: RunRecord | None = None, task: TaskRecord | None = None
    ) -> None:
        written = self.ctx.store.commit(
            Change(session=self.record, run=run, task=task, events=tuple(events))
        )
        for event in written:
            if event.kind in WARNING_KINDS:
                self.warnings.append(event)
        self.version += 1
        self.ctx.announce(written)

    def _ended_runs_usage(self) -> Usage:
        handle = self.record.handle
        total = Usage()
        for run in self.ctx.store.runs(self.config.name) if handle else []:
            if run.handle == handle and run.ended_at is not None and run.usage:
                total = total + Usage.from_json(run.usage)
        return total

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

    def note_progress(self) -> None:
        """The agent showed progress (a progress entry or a commit)."""
        self.stall.activity(time.monotonic())
        self.version += 1

    def check_stall(self) -> None:
        """Warn once when a running session shows no output, progress or commit for `stall`."""
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

    def _set_state(self, state: State, reason: str | None = None) -> None:
        self.record.state = state
        self.record.reason = reason

    def _task(self) -> TaskRecord | None:
        return self.ctx.store.task(self.record.handle) if self.record.handle else None

    def _end_task(self, state: State, reason: str | None, message: str) -> None:
        """Record how the current task ended, with its event, in one transaction."""
        self._set_state(state, reason)
        task = self._task()
        if task is not None and task.ended_at is None:
            task = task.model_copy(
                update={"state": state, "reason": reason, "ended_at": iso(utc_now())}
            )
        kind = {State.COMPLETED: "completed", State.FAILED: "failed"}.get(state, "stopped")
        self._commit(
            self._event(kind, message, self.record.run, reason=reason, handle=self.record.handle),
            task=task,
        )
        self.ctx.tg.start_soon(reporting.write_report, self)

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
        held = await anyio.to_thread.run_sync(procs.held_run_folders, self._runs_folder)
        if restarting and self.run is not None:
            held = [folder for folder in held if folder != self.run.folder]
        if held:
            users = await anyio.to_thread.run_sync(procs.describe_users, held[0])
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
        self.warnings.clear()
        task = TaskRecord(
            handle=handle,
            session=self.config.name,
            first_run=first_run,
            state=State.STARTING,
            started_at=self.record.task_started_at or "",
        )
        self._set_state(State.STARTING)
        self._commit(
            self._event("task-started", f"task {handle} started", first_run, handle=handle),
            task=task,
        )
        await self._launch(mode=mode, env_extra=env_extra or {})

    async def stop(self, kill: bool = False, reason: str = "user") -> None:
        """End the task: stop signal + grace (or SIGKILL at once), leaving nothing behind."""
        recovery.cancel_preparation(self)  # never wait behind a slow rescue or reset
        async with self._lock:
            await self._stop_locked(kill=kill, reason=reason)

    async def _stop_locked(self, kill: bool, reason: str, end_task: bool = True) -> bool:
        """Stop the current run if any; returns False when it could not be killed."""
        self._backoff_generation += 1  # cancels a pending restart
        run = self.run
        if run is not None and not run.exited.is_set():
            run.record.stop_requested = True
            run.record.stop_reason = reason
            self._set_state(State.STOPPING, reason)
            self._commit(
                self._event(
                    "stopping",
                    f"stopping run {run.record.run} ({reason})",
                    run.record.run,
                    kill=kill,
                ),
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
                )
                return False
        if end_task and self.record.state not in TERMINAL_STATES | {State.IDLE}:
            self._end_task(State.STOPPED, reason, f"stopped ({reason})")
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
                prepared = await recovery.prepare_restart(
                    self, from_rev, self.record.run, run_config
                )
                if prepared is None:  # a stop came meanwhile
                    return self.record.handle or ""
                await self._begin_task(*prepared)
            return self.record.handle or ""

    async def pause(self) -> None:
        """SIGSTOP the whole run."""
        async with self._lock:
            run = self.run
            if run is None or run.exited.is_set() or self.record.state != State.RUNNING:
                raise SessionError(f"{self.config.name} is {self.record.state}, not running")
            await anyio.to_thread.run_sync(procs.signal_run, run.identity, signal.SIGSTOP)
            run.paused = True
            self.stall.pause(time.monotonic())
            self._set_state(State.PAUSED, "user")
            self._commit(self._event("paused", "paused (SIGSTOP)", run.record.run))

    async def resume_run(self) -> None:
        """SIGCONT the whole run."""
        async with self._lock:
            run = self.run
            if run is None or self.record.state != State.PAUSED:
                raise SessionError(f"{self.config.name} is {self.record.state}, not paused")
            await anyio.to_thread.run_sync(procs.signal_run, run.identity, signal.SIGCONT)
            run.paused = False
            self.stall.resume(time.monotonic())
            self._set_state(State.RUNNING)
            self._commit(self._event("resumed", "resumed (SIGCONT)", run.record.run))

    # ----- launching -------------------------------------------------------------------------

    def _fill(self, argv: list[str], values: dict[str, str]) -> list[str]:
        """Placeholders filled per argv element (never through a shell)."""
        filled = []
        for element in argv:
            for key, value in values.items():
                element = element.replace("{" + key + "}", value)
            filled.append(element)
        return filled

    async def _launch(self, mode: str, env_extra: dict[str, str]) -> None:
        """Start the next run: `resume` when asked and possible, else `command`."""
        number = self.record.run + 1
        values = {
            "session_id": self.record.agent_session_id or "",
            "checkpoint": env_extra.get("HERD_CHECKPOINT", ""),
            "run": str(number),
            "progress": self.config.progress or "",
            "plan": self.config.plan or "",
            "rescue_ref": env_extra.get("HERD_RESCUE_REF", ""),
        }
        if mode == "resume" and self.config.resume is not None and self.record.agent_session_id:
            argv = self._fill(self.config.argv(self.config.resume), values)
        else:
            mode = "command"
            argv = self._fill(self.config.argv(self.config.command), values)
        folder = run_dir(self.ctx.state_dir, self.config.name, number)
        if self.ctx.store.run(self.config.name, number) is None:
            await anyio.to_thread.run_sync(procs.set_aside_forgotten, folder)
        tag = uuid.uuid4().hex
        cgroup = await anyio.to_thread.run_sync(procs.new_cgroup, tag)
        env = {
            **os.environ,
            **self.config.env,
            "HERD_SESSION": self.config.name,
            "HERD_RUN": str(number),
            "HERD_RESTART_COUNT": str(self.record.restarts),
            "HERD_CHECKPOINT": "",
            "HERD_LAST_EXIT": "",
            "HERD_RESCUE_REF": "",
            **env_extra,
        }
        record = RunRecord(
            session=self.config.name,
            run=number,
            handle=self.record.handle or "",
            argv=argv,
            mode=mode,
            cwd=str(self.config.cwd),
            tag=tag,
            cgroup=cgroup,
            started_at=iso(utc_now()),
        )
        self.record.run = number
        plan = self.observer.plan_current
        self.record.passing_at_run_start = plan.passing if plan is not None else None
        self._set_state(State.STARTING)
        # Written before the spawn: a daemon killed right after it finds the run by its tag.
        self._commit(run=record)
        try:
            launched = await procs.launch(argv, self.config.cwd, env, folder, tag, cgroup)
        except Exception as exc:  # any failure to spawn ends the run; it must never stay pid-less
            await self._spawn_failed(record, argv, exc)
            return
        record.pid = launched.identity.pid
        record.pgid = launched.identity.pgid
        record.create_time = launched.identity.create_time
        self._set_state(State.RUNNING)
        task = self._task()
        if task is not None and task.state != State.RUNNING:
            task = task.model_copy(update={"state": State.RUNNING})
        self.stall.activity(time.monotonic())
        self._commit(
            self._event(
                "run-started",
                f"run {number} started ({mode}): pid {record.pid}",
                number,
                pid=record.pid,
                argv=argv,
                mode=mode,
            ),
            run=record,
            task=task,
        )
        known_id = self.record.agent_session_id if mode == "resume" else None
        live = LiveRun(
            record,
            launched.identity,
            folder,
            make_parser(self.config.agent, session_id=known_id),
            launched.process,
            self.config,
        )
        self._watch(live)
        self.check_log_cap()

    async def _spawn_failed(self, record: RunRecord, argv: list[str], exc: Exception) -> None:
        """Record a run that never started as ended, and fail its task with the reason."""
        if not isinstance(exc, (OSError, ValueError, procs.RunFolderBusy)):
            log.exception("starting run %d of %s failed", record.run, self.config.name)
        await anyio.to_thread.run_sync(procs.remove_cgroup, self._identity_of(record))
        record.ended_at = iso(utc_now())
        record.outcome = "spawn-failed"
        self._commit(run=record)
        if isinstance(exc, procs.RunFolderBusy):
            self._end_task(State.FAILED, "run-folder-busy", f"not started: {exc}")
        else:
            self._end_task(State.FAILED, "spawn-failed", f"cannot start {argv[0]!r}: {exc}")

    @staticmethod
    def _identity_of(record: RunRecord) -> procs.RunIdentity:
        """What the store knows of a run's processes; a PID of 1 or below is no PID at all."""
        pid = record.pid if record.pid is not None and record.pid > 1 else None
        pgid = record.pgid if pid is not None else None
        return procs.RunIdentity(pid, pgid or pid, record.create_time, record.tag, record.cgroup)

    def _watch(self, live: LiveRun) -> None:
        self.run = live
        self.ctx.runs_changed()
        self.ctx.tg.start_soon(self._follow_output, live)
        self.ctx.tg.start_soon(self._wait_exit, live)
        self.ctx.tg.start_soon(self._guard_log, live)

    # ----- watching a run --------------------------------------------------------------------

    def wake(self) -> None:
        """The watcher saw the run's log change: read it now instead of at the next poll."""
        if self.run is not None:
            self.run.wake.set()
            self.run.log_grew.set()

    async def _follow_output(self, live: LiveRun) -> None:
        """Read new output as it lands; parse it; keep the last line; stop after the final drain."""
        while True:
            self._read_output(live)
            if live.exited.is_set() and not live.tailer.has_more():
                tail = live.splitter.flush()
                if tail is not None:
                    self._take_line(live, tail)
                live.tailer.close()
                live.drained.set()
                return
            await anyio.sleep(self.ctx.timings.tail_min_gap_s)
            with anyio.move_on_after(self.ctx.timings.tail_poll_s):
                await live.wake.wait()
            live.wake = anyio.Event()

    def _read_output(self, live: LiveRun) -> None:
        known_id = live.parser.session_id
        read_any = False
        self._cap_log(live)
        # Bounded work per wake-up, in bytes and in time: `yes` makes a million lines a second.
        deadline = time.monotonic() + TAIL_READ_BUDGET_S
        for _ in range(TAIL_READS_PER_WAKE):
            skipped = live.tailer.skipped_bytes
            data = live.tailer.read_new()
            if live.tailer.skipped_bytes != skipped:  # the cap cut out the rest of that line
                cut = live.splitter.flush()
                if cut is not None:
                    self._take_line(live, cut)
            if not data:
                break
            read_any = True
            self._take_line(live, *live.splitter.feed(data))
            if time.monotonic() > deadline:
                break
        if not read_any:
            return
        self.stall.activity(time.monotonic())
        new_id = live.parser.session_id
        if new_id and new_id != known_id and new_id != self.record.agent_session_id:
            # Persist the agent's session id the moment it appears: a crash is when it is needed.
            self.record.agent_session_id = new_id
            live.record.agent_session_id = new_id
            self._commit(run=live.record)
        else:
            self.version += 1

    def _take_line(self, live: LiveRun, *lines: bytes) -> None:
        """Parse lines, each decoded once; keep the last one's summary a person can read."""
        shown = live.parser.feed_lines(lines, LAST_LINE_CHARS)
        if shown:
            live.last_line = shown

    async def _wait_exit(self, live: LiveRun) -> None:
        """Learn how the run's leader ended (our child: wait; adopted: poll), then apply policy."""
        if live.process is not None:
            status = await live.process.wait()
            info = procs.decode_status(status)
        else:
            # With its leader unknown, a run lives while its lock is held or its cgroup populated.
            alive = (
                procs.leader_alive
                if live.identity.pid is not None
                else functools.partial(procs.run_alive, folder=live.folder)
            )
            while await anyio.to_thread.run_sync(alive, live.identity):
                await anyio.sleep(self.ctx.timings.adopt_poll_s)
            info = procs.read_exit_file(live.folder) or procs.ExitInfo(None, None)
        live.exit = info
        live.exited.set()
        live.wake.set()
        with anyio.move_on_after(self.ctx.timings.drain_wait_s):
            await live.drained.wait()
        async with self._lock:
            if live.handled or self.run is not live:
                return
            live.handled = True
            await self._record_exit(live)
            await self._after_exit(live)

    async def _record_exit(self, live: LiveRun) -> None:
        """Write the run's end, once, and sweep anything of it still alive."""
        if live.record.ended_at is not None:
            return
        with anyio.move_on_after(self.ctx.timings.drain_wait_s):
            await live.drained.wait()
        info = live.exit or procs.ExitInfo(None, None)
        outcome = live.parser.outcome
        live.record.ended_at = iso(utc_now())
        live.record.exit_code = info.exit_code
        live.record.signal = info.signal
        live.record.usage = live.parser.usage.to_json()
        self.task_usage = self.task_usage + live.parser.usage
        live.record.outcome = outcome_name(outcome, self.config.agent, info)
        self._commit(
            self._event(
                "run-exited",
                f"run {live.record.run} ended: {info.describe()}"
                + ("" if live.record.outcome == info.describe() else f" ({live.record.outcome})"),
                live.record.run,
                exit_code=info.exit_code,
                signal=info.signal,
                outcome=live.record.outcome,
            ),
            run=live.record,
        )
        if not live.record.stop_requested:
            leftovers = await anyio.to_thread.run_sync(procs.run_processes, live.identity)
            if leftovers:
                await procs.stop_tree(
                    live.identity,
                    self.config.stop_signal_number,
                    self.config.stop_grace,
                    self.ctx.timings.kill_wait_s,
                    self.ctx.timings.stop_poll_s,
                )
        await anyio.to_thread.run_sync(procs.remove_cgroup, live.identity)

    # ----- restart policy --------------------------------------------------------------------

    async def _after_exit(self, live: LiveRun) -> None:
        """Decide what a run's end means for the task: completed, failed, or restart."""
        outcome = live.record.outcome
        succeeded = outcome == "success"
        policy = self.config.restart
        ran_s = time.monotonic() - live.started_monotonic
        if ran_s >= self.config.stable_after:
            self.record.backoff_step = 0
        if succeeded:
            if policy in ("never", "on-failure"):
                self._end_task(State.COMPLETED, None, f"completed (run {live.record.run})")
                return
            if policy == "until-done":
                await self.observer.refresh_plan()
                plan = self.observer.plan_current
                if plan is not None and plan.all_passing:
                    self._end_task(State.COMPLETED, None, "completed: every plan item passes")
                    return
                if not self._until_done_progressed(plan):
                    return
                if self.record.idle_runs == 0:
                    self.record.backoff_step = 0  # a run that passed a feature is no storm
            await self._schedule_restart(live, crashed=False)
            return
        if policy == "never":
            self._end_task(State.FAILED, outcome, f"failed: run {live.record.run} {outcome}")
            return
        if self.disk_full():
            # The disk killed it (its log, its tree or the store is on a full disk): no count
            # toward the crash loop, and the restart waits for space (see _restart_after).
            await self._schedule_restart(live, crashed=True, reason="disk-full")
            return
        now = time.time()
        window = self.config.crash_window
        self.record.crash_times = [t for t in self.record.crash_times if now - t < window] + [now]
        if len(self.record.crash_times) >= self.config.max_crashes:
            self._end_task(
                State.FAILED,
                "crash-loop",
                f"failed: {len(self.record.crash_times)} crashes within "
                f"{window:g}s (max_crashes {self.config.max_crashes})",
            )
            return
        await self._schedule_restart(live, crashed=True)

    def _until_done_progressed(self, plan: Any) -> bool:
        """Count clean runs that passed nothing new; end the loop after too many in a row."""
        passing_now = plan.passing if plan is not None else 0
        before = self.record.passing_at_run_start
        if before is not None and passing_now <= before:
            self.record.idle_runs += 1
            self._commit(
                self._event(
                    "early-exit",
                    f"run {self.record.run} exited cleanly but no new plan item passes "
                    f"({passing_now} of {plan.total if plan else '?'}); "
                    f"{self.record.idle_runs}/{UNTIL_DONE_IDLE_RUNS} in a row",
                    self.record.run,
                )
            )
            if self.record.idle_runs >= UNTIL_DONE_IDLE_RUNS:
                self._end_task(
                    State.FAILED,
                    "no-progress",
                    f"failed: {UNTIL_DONE_IDLE_RUNS} runs in a row passed no new plan item",
                )
                return False
        else:
            self.record.idle_runs = 0
        return True

    def backoff_delay_s(self, step: int) -> float:
        """The delay before restart number `step` (0-based): doubling, capped, jittered."""
        base = self.config.restart_delay
        if base <= 0:
            return 0.0
        raw = base * math.pow(2, min(step, 62))
        return min(raw, self.config.restart_delay_max) * self.ctx.timings.jitter()

    def disk_full(self) -> bool:
        """True while the store's disk refuses writes or the state or work folder has no room."""
        return self.ctx.store.unavailable or diskspace.low_on_space(
            self.ctx.state_dir, self.config.cwd
        )

    async def _schedule_restart(
        self, live: LiveRun, crashed: bool, reason: str | None = None
    ) -> None:
        """Enter backoff and start the timer that relaunches (a stop cancels it)."""
        delay_s = self.backoff_delay_s(self.record.backoff_step)
        self.record.backoff_step += 1
        self.record.backoff_until = iso(utc_now() + timedelta(seconds=delay_s))
        self._set_state(State.BACKOFF, reason or ("crashed" if crashed else "exited"))
        waits = "; it waits until the disk has space again" if reason == "disk-full" else ""
        self._commit(
            self._event(
                "restart-scheduled",
                f"restart in {delay_s:.2f}s after run {live.record.run} ({live.record.outcome})"
                + waits,
                live.record.run,
                delay_s=round(delay_s, 3),
                crashed=crashed,
                step=self.record.backoff_step,
            )
        )
        self._backoff_generation += 1
        generation = self._backoff_generation
        self.ctx.tg.start_soon(
            self._restart_after,
            delay_s,
            generation,
            crashed,
            live.record.run,
            live.exit,
            live.config,
        )

    async def _restart_after(
        self,
        delay_s: float,
        generation: int,
        crashed: bool,
        last_run: int,
        last_exit: procs.ExitInfo | None,
        run_config: SessionConfig | None = None,
    ) -> None:
        await anyio.sleep(delay_s)
        while generation == self._backoff_generation and self.disk_full():
            await anyio.sleep(self.ctx.timings.reconcile_s)  # an agent started now would die
        async with self._lock:
            if generation != self._backoff_generation or self.record.state != State.BACKOFF:
                return
            self.record.restarts += 1
            env_extra: dict[str, str] = {}
            mode = "command"
            if crashed:
                prepared = await recovery.prepare_restart(
                    self, None, last_run, run_config or self.config
                )
                if prepared is None:  # a stop cancelled the rescue or reset: no restart
                    return
                env_extra, mode = prepared
            env_extra["HERD_LAST_EXIT"] = (last_exit or procs.ExitInfo(None, None)).describe()
            await self._launch(mode=mode, env_extra=env_extra)

    # ----- daemon restart --------------------------------------------------------------------

    async def reconcile(self) -> None:
        """After a daemon restart: adopt a live run, or record a dead one and apply policy."""
        async with self._lock:
            state = self.record.state
            last = (
                self.ctx.store.run(self.config.name, self.record.run) if self.record.run else None
            )
            if last is not None and last.ended_at is None and (last.pid or 0) <= 1:
                # The daemon died between writing the run and recording its pid: find it by its
                # tag. Not found, it is ended (exit unknown) and only its tag and cgroup, never
                # an invented pid or group, say what of it might be left.
                last.pid = last.pgid = last.create_time = None
                found = await anyio.to_thread.run_sync(procs.find_leader, last.tag)
                if found is not None:
                    last.pid, last.pgid, last.create_time = found.pid, found.pgid, found.create_time
            if last is not None and last.ended_at is None:
                identity = self._identity_of(last)
                folder = run_dir(self.ctx.state_dir, self.config.name, last.run)
                parser = make_parser(self.config.agent, session_id=last.agent_session_id)
                live = LiveRun(last, identity, folder, parser, None, self._config_of(last))
                alive = await anyio.to_thread.run_sync(procs.lock_held, folder)
                if alive and (
                    identity.pid is None  # a held lock is a live run, even with no leader known
                    or await anyio.to_thread.run_sync(procs.leader_alive, identity)
                ):
                    live.paused = state == State.PAUSED
                    if state not in (State.RUNNING, State.PAUSED, State.STOPPING):
                        self._set_state(State.RUNNING)
                    self._commit(
                        self._event(
                            "adopted",
                            f"re-adopted run {last.run} (pid {last.pid or 'unknown'})",
                            last.run,
                            pid=last.pid,
                        )
                    )
                    self._watch(live)
                    if state == State.STOPPING:
                        reason = last.stop_reason or "user"
                        self.ctx.tg.start_soon(functools.partial(self.stop, reason=reason))
                    return
                # It ended while no daemon watched: read what it wrote, then apply policy.
                live.exit = procs.read_exit_file(folder) or procs.ExitInfo(None, None)
                self.run = live
                self._read_output(live)
                while live.tailer.has_more():  # all of it: the outcome is on its last lines
                    self._read_output(live)
                tail = live.splitter.flush()
                if tail is not None:
                    self._take_line(live, tail)
                live.tailer.close()
                live.exited.set()
                live.drained.set()
                live.handled = True
                await self._record_exit(live)
                if state == State.STOPPING or last.stop_requested:
                    reason = last.stop_reason or "user"
                    self._end_task(
                        State.STOPPED, reason, f"stopped ({reason}; ended while no daemon ran)"
                    )
                else:
                    await self._after_exit(live)
                return
            if state == State.STOPPING and last is not None and last.stop_requested:
                # The daemon died after recording the run's end, before ending the task.
                reason = last.stop_reason or "user"
                self._end_task(State.STOPPED, reason, f"stopped ({reason})")
            elif state == State.BACKOFF:
                self._set_state(State.BACKOFF, self.record.reason)
                self._backoff_generation += 1
                self.ctx.tg.start_soon(
                    self._restart_after,
                    0.0,
                    self._backoff_generation,
                    True,
                    self.record.run,
                    None,
                    self._config_of(last),
                )
            elif state in (State.STARTING, State.RUNNING, State.STOPPING, State.PAUSED):
                # The store says active but no live run is recorded: the daemon died mid-launch.
                self._end_task(State.FAILED, "lost", "the daemon stopped before the run started")

    def _config_of(self, record: RunRecord | None) -> SessionConfig:
        """The config a recorded run ran with, as far as it is kept: today's, in the run's cwd."""
        if record is None or record.cwd is None or Path(record.cwd) == self.config.cwd:
            return self.config
        return self.config.model_copy(update={"cwd": Path(record.cwd)})

    # ----- logs ------------------------------------------------------------------------------

    @property
    def _runs_folder(self) -> Path:
        return self.ctx.state_dir / "runs" / self.config.name

    def log_bytes(self) -> int:
        """Bytes of output kept on disk for this session, across runs (no disk scan)."""
        current = 0
        if self.run is not None:
            current = max(0, self.run.tailer.offset - self.run.log_cap.dropped_bytes)
        return self.older_logs_bytes + current

    async def _guard_log(self, live: LiveRun) -> None:
        """Keep the running log within log_max_bytes between tail reads; often while it floods."""
        while not live.drained.is_set():
            grew, room = self._cap_log(live)
            if grew >= LOG_FLOOD_BYTES and self.ctx.log_guards.available_tokens >= 1:
                stop = threading.Event()
                try:
                    await anyio.to_thread.run_sync(
                        live.log_cap.guard_flood,
                        self.config.log_max_bytes,
                        LOG_FLOOD_CHECK_S,
                        LOG_FLOOD_BYTES,
                        stop,
                        abandon_on_cancel=True,
                        limiter=self.ctx.log_guards,
                    )
                finally:
                    stop.set()
            elif grew >= LOG_FLOOD_BYTES:
                await anyio.sleep(LOG_CHECK_MIN_S)
            else:
                wait_s = min(self.ctx.timings.tail_poll_s, room / LOG_WRITE_BYTES_PER_S)
                with anyio.move_on_after(max(LOG_CHECK_MIN_S, wait_s)):
                    await live.log_grew.wait()
            live.log_grew = anyio.Event()
        self._cap_log(live)
        self._report_log_cap(live, final=True)

    def _cap_log(self, live: LiveRun) -> tuple[int, int]:
        """Cut the running log's middle if it passed the cap; return its growth and room left."""
        cap = live.log_cap
        before = cap.dropped_bytes
        grew, room = cap.check(self.config.log_max_bytes)
        if cap.cut_to is not None:  # cut back (no holes here): read on from the cut
            live.tailer.offset = min(live.tailer.offset, cap.cut_to)
            cap.cut_to = None
        if cap.dropped_bytes > before:
            self._report_log_cap(live, final=False)
        return grew, room

    def _report_log_cap(self, live: LiveRun, final: bool) -> None:
        """A `log-capped` event when a run's log is first cut, then at most once a minute."""
        dropped = live.log_cap.dropped_bytes
        if dropped <= live.log_capped_reported:
            return
        now = time.monotonic()
        first = live.log_capped_reported == 0
        if not (final or first or now - live.log_capped_at >= LOG_CAPPED_EVENT_S):
            return
        live.log_capped_reported = dropped
        live.log_capped_at = now
        self._commit(
            self._event(
                "log-capped",
                f"run {live.record.run}'s log passed log_max_bytes "
                f"({self.config.log_max_bytes} bytes): {dropped} bytes dropped from its middle "
                f"{'in all' if final else 'so far'}, its start and newest output kept",
                live.record.run,
                dropped_bytes=dropped,
                final=final,
            )
        )

    def check_log_cap(self) -> None:
        """Delete the oldest runs' logs until the session fits `log_max_bytes` (slow path)."""
        if self.run is not None and not self.run.drained.is_set():
            self._cap_log(self.run)
        deleted = logcap.enforce_cap(self._runs_folder, self.config.log_max_bytes, self.record.run)
        for number, size in deleted:
            self._commit(
                self._event(
                    "log-capped",
                    f"deleted the log of run {number} ({size} bytes) to stay under log_max_bytes",
                    number,
                )
            )
        self.older_logs_bytes = logcap.bytes_before(self._runs_folder, self.record.run)

    # ----- status ----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The `herd status --json` object for this session."""
        run = self.run
        record = run.record if run is not None else None
        usage = self.task_usage
        if run is not None and run.record.ended_at is None:
            usage = usage + run.parser.usage
        alive = run is not None and not run.exited.is_set()
        return {
            "session": self.config.name,
            "handle": self.record.handle,
            "run": self.record.run or None,
            "state": str(self.record.state),
            "task_state": task_state(self.record.state),
            "reason": self.record.reason,
            "pid": record.pid if record is not None and alive else None,
            "exit_code": record.exit_code if record is not None else None,
            "signal": record.signal if record is not None else None,
            "restarts": self.record.restarts,
            "started_at": record.started_at if record is not None else None,
            "ended_at": record.ended_at if record is not None else None,
            "agent_session_id": self.record.agent_session_id,
            **self.observer.status_fields(),
            "usage": usage.to_json() if self.record.run else None,
            "budget": None,
            "logs": {"bytes": self.log_bytes(), "cap_bytes": self.config.log_max_bytes},
            "warnings": [
                {"seq": w.seq, "kind": w.kind, "message": w.message, "at": w.at}
                for w in self.warnings
            ],
            "last_line": run.last_line if run is not None else "",
            "agent": self.config.agent,
            "next_restart_at": self.record.backoff_until
            if self.record.state == State.BACKOFF
            else None,
        }


class SessionError(Exception):
    """A command that does not fit the session's state; shown to the person as one line."""
