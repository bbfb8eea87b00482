"""Launching runs and restarting them: the exit rules applied, backoff, rescue and reset."""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import anyio

from agentherd.sessions import completion, launchspec, lifecycle
from agentherd.sessions.adapters import make_parser
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.drift import StallClock
from agentherd.sessions.lifecycle import Action, Trigger
from agentherd.sessions.records import Event, RunRecord
from agentherd.sessions.states import State
from agentherd.sessions.times import iso, parse_iso, utc_now
from agentherd.supervisor.files import diskspace
from agentherd.supervisor.files.paths import run_dir
from agentherd.supervisor.process import runfolder, runid, spawn
from agentherd.supervisor.session import agentusage
from agentherd.supervisor.session.completing import Completing
from agentherd.supervisor.session.liverun import LiveRun

log = logging.getLogger("herd.session")


class Launching(Completing):
    """The part of a session supervisor that starts runs and decides what their end means."""

    async def _launch(
        self, mode: str, env_extra: dict[str, str], by: Trigger | None = None
    ) -> None:
        """Start the next run: `resume` when asked and possible, else `command`.

        `by` is the move into `starting` (an automatic restart); a new task is in it already.
        """
        number = self.record.run + 1
        argv, mode = launchspec.run_argv(
            self.config, mode, number, self.record.agent_session_id, env_extra
        )
        folder = run_dir(self.ctx.state_dir, self.config.name, number)
        forgotten = self.ctx.store.run(self.config.name, number) is None
        tag = uuid.uuid4().hex
        # On the loop: a stat (and rarely a rename) and a mkdir, each microseconds, where a hop
        # to a worker and back waited milliseconds on a busy loop before every relaunch.
        cgroup = _prepare_run(folder if forgotten else None, tag)
        env = launchspec.run_environment(
            os.environ, self.config, number, self.record.restarts, env_extra
        )
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
            # A resumed run belongs to the agent's thread from its start (Codex counts per thread).
            agent_session_id=self.record.agent_session_id if mode == "resume" else None,
        )
        self.record.run = number
        plan = self.observer.plan_current
        self.record.passing_at_run_start = plan.passing if plan is not None else None
        # Written before the spawn: a daemon killed right after it finds the run by its tag.
        if by is None:
            self._commit(run=record)
        else:
            self._transition(State.STARTING, None, by=by, run=record)
        try:
            launched = await spawn.launch(argv, self.config.cwd, env, folder, tag, cgroup)
        except Exception as exc:  # any failure to spawn ends the run; it must never stay pid-less
            await self._spawn_failed(record, argv, exc)
            return
        record.pid = launched.identity.pid
        record.pgid = launched.identity.pgid
        record.create_time = launched.identity.create_time
        task = self._task()
        if task is not None and task.state != State.RUNNING:
            task = task.model_copy(update={"state": State.RUNNING})
        # A new run starts a new stall clock (the last one may have stopped at a pause or a gate).
        self.stall = StallClock(time.monotonic())
        self._transition(
            State.RUNNING,
            None,
            self._event(
                "run-started",
                f"run {number} started ({mode}): pid {record.pid}",
                number,
                pid=record.pid,
                argv=argv,
                mode=mode,
            ),
            by=Trigger.SPAWNED,
            run=record,
            task=task,
        )
        known_id = self.record.agent_session_id if mode == "resume" else None
        live = LiveRun(
            record,
            launched.identity,
            folder,
            make_parser(
                self.config.agent,
                session_id=known_id,
                thread_usage=agentusage.thread_usage(self.ctx.store, self.config.name, known_id),
            ),
            launched.process,
            self.config,
        )
        self._watch(live)
        self.check_log_cap()

    async def _spawn_failed(self, record: RunRecord, argv: list[str], exc: Exception) -> None:
        """Record a run that never started as ended, and fail its task with the reason."""
        if not isinstance(exc, (OSError, ValueError, spawn.RunFolderBusy)):
            log.exception("starting run %d of %s failed", record.run, self.config.name)
        await anyio.to_thread.run_sync(spawn.remove_cgroup, self._identity_of(record))
        record.ended_at = iso(utc_now())
        record.outcome = "spawn-failed"
        self._commit(run=record)
        by = Trigger.SPAWN_FAILED
        if isinstance(exc, spawn.RunFolderBusy):
            self._end_task(State.FAILED, "run-folder-busy", f"not started: {exc}", by)
        else:
            self._end_task(State.FAILED, "spawn-failed", f"cannot start {argv[0]!r}: {exc}", by)

    @staticmethod
    def _identity_of(record: RunRecord) -> runid.RunIdentity:
        """What the store knows of a run's processes; a PID of 1 or below is no PID at all."""
        pid = record.pid if record.pid is not None and record.pid > 1 else None
        pgid = record.pgid if pid is not None else None
        return runid.RunIdentity(pid, pgid or pid, record.create_time, record.tag, record.cgroup)

    # ----- restart policy --------------------------------------------------------------------

    async def _after_exit(self, live: LiveRun) -> None:
        """Apply the lifecycle's exit rules: completed, failed, or restart after a delay."""
        record = self.record
        drift_kind = self.drift_restart_of(live.record.run)
        if drift_kind is not None:  # on_drift = restart ended it: from a verified checkpoint
            restart = lifecycle.Decision(
                Action.RESTART,
                f"drift:{drift_kind}",
                "",
                crashed=True,
                crash_times=tuple(record.crash_times),
                idle_runs=record.idle_runs,
            )
            self._schedule_restart(live, restart)
            return
        outcome = live.record.outcome or "exit unknown"
        plan = None
        if outcome == "success" and self.config.plan:
            await self.observer.refresh_plan()
            plan = self.observer.plan_current
        plan_facts = self.plan_completion_facts()
        refused = completion.refusal(plan_facts)
        facts = lifecycle.ExitFacts(
            run=live.record.run,
            outcome=outcome,
            policy=self.config.restart,
            ran_s=time.monotonic() - live.started_monotonic,
            stable_after_s=self.config.stable_after,
            backoff_step=record.backoff_step,
            now_s=time.time(),
            crash_times=tuple(record.crash_times),
            crash_window_s=self.config.crash_window,
            max_crashes=self.config.max_crashes,
            disk_full=outcome != "success" and self.disk_full(),
            plan_all_passing=plan.all_passing if plan is not None else None,
            passing_now=plan.passing if plan is not None else None,
            passing_at_run_start=record.passing_at_run_start,
            plan_total=plan.total if plan is not None else None,
            idle_runs=record.idle_runs,
            refusal=refused,
            refusal_message=completion.describe(refused, plan_facts) if refused else "",
        )
        decision = lifecycle.after_exit(facts)
        early: list[Event] = self.crash_events(live.record.run, outcome, live.last_line)
        if decision.early_exit is not None:
            early.append(self._event("early-exit", decision.early_exit, live.record.run))
        if decision.action is Action.COMPLETE and self.config.verify is not None:
            await self._verify_before_completing(live, facts, *early)
            return
        record.backoff_step = decision.backoff_step
        record.crash_times = list(decision.crash_times)
        record.idle_runs = decision.idle_runs
        outcome_facts = live.parser.outcome
        if decision.reason == "permission-denied" and outcome_facts is not None:
            denied = ", ".join(outcome_facts.permission_denials) or "its tools"
            decision = replace(
                decision,
                message=f"failed: run {live.record.run} was denied {denied}; widen the "
                "permission flags of `command` and `resume` (README: agents)",
            )
        if decision.reason == "resume-refused":
            early.extend(self._resume_refused(live))
        # Judged again after a daemon restart in `verifying`: the move is the verdict's.
        by = Trigger.VERDICT if record.state == State.VERIFYING else Trigger.EXIT
        if decision.action is Action.RESTART:
            self._schedule_restart(live, decision, *early, by=by if by is Trigger.VERDICT else None)
        else:
            self._end_task(decision.state, decision.reason, decision.message, by, *early)

    def _resume_refused(self, live: LiveRun) -> tuple[Event, ...]:
        """The agent could not resume its session: forget the id so `command` runs next."""
        sid = self.record.agent_session_id or ""
        self.record.agent_session_id = None
        return (
            self._event(
                "resume-refused",
                f"the agent could not resume session {sid[:40]!r} "
                f"({(live.parser.outcome.message or '')[:120] if live.parser.outcome else ''}); "
                "the next run starts afresh with `command`",
                live.record.run,
                session_id=sid[:80],
            ),
        )

    def disk_full(self) -> bool:
        """True while the store's disk refuses writes or the state or work folder has no room."""
        return self.ctx.store.unavailable or diskspace.low_on_space(
            self.ctx.state_dir, self.config.cwd
        )

    def _schedule_restart(
        self, live: LiveRun, decision: lifecycle.Decision, *before: Event, by: Trigger | None = None
    ) -> None:
        """Enter backoff and start the timer that relaunches (a stop cancels it)."""
        if decision.reason == "rate-limit":
            self._park_rate_limited(live, *before)
            return
        delay_s = lifecycle.backoff_delay_s(
            self.record.backoff_step,
            self.config.restart_delay,
            self.config.restart_delay_max,
            self.ctx.timings.jitter,
        )
        self.record.backoff_step += 1
        self.record.backoff_until = iso(utc_now() + timedelta(seconds=delay_s))
        disk_full = decision.reason == "disk-full"
        waits = "; it waits until the disk has space again" if disk_full else ""
        if by is None:
            by = Trigger.EXIT
        self._transition(
            State.BACKOFF,
            decision.reason,
            *before,
            self._event(
                "restart-scheduled",
                f"restart in {delay_s:.2f}s after run {live.record.run} ({live.record.outcome})"
                + waits,
                live.record.run,
                delay_s=round(delay_s, 3),
                crashed=decision.crashed,
                step=self.record.backoff_step,
            ),
            by=Trigger.EXIT,
        )
        self._arm_restart(delay_s, decision.crashed, live.record.run, live.exit, live.config)

    def _park_rate_limited(self, live: LiveRun, *before: Event) -> None:
        """Wait in backoff until the limit lifts (the agent's reset time, else a growing wait).

        Not a crash: the worktree is kept as it is and the next run resumes the conversation.
        """
        outcome = live.parser.outcome
        resets_at = outcome.resets_at if outcome is not None else None
        reset_time = parse_iso(resets_at) if resets_at else None
        resets_in_s = (reset_time - utc_now()).total_seconds() if reset_time else None
        timings = self.ctx.timings
        wait_s = self.config.rate_limit_wait or timings.rate_limit_wait_s
        cap_s = self.config.rate_limit_wait_max or max(wait_s, timings.rate_limit_wait_max_s)
        delay_s = lifecycle.rate_limit_delay_s(resets_in_s, self.record.backoff_step, wait_s, cap_s)
        self.record.backoff_step += 1
        until = iso(utc_now() + timedelta(seconds=delay_s))
        self.record.backoff_until = until
        told = f"until {resets_at}" if reset_time else f"{delay_s:.0f}s (no reset time given)"
        self._transition(
            State.BACKOFF,
            "rate-limit",
            *before,
            self._event(
                "rate-limited",
                f"run {live.record.run} hit a rate limit; waiting {told}, resumes at {until}",
                live.record.run,
                delay_s=round(delay_s, 3),
                resets_at=resets_at,
                resumes_at=until,
                step=self.record.backoff_step,
            ),
            by=Trigger.RATE_LIMIT,
        )
        self._arm_restart(delay_s, False, live.record.run, live.exit, live.config, "resume")

    def _arm_restart(
        self,
        delay_s: float,
        crashed: bool,
        last_run: int,
        last_exit: runid.ExitInfo | None,
        run_config: SessionConfig,
        mode: str = "command",
    ) -> None:
        """Start the backoff wait in a cancel scope that a stop, restart or start cancels."""
        self._cancel_pending_restart()
        scope = self._pending_restart = anyio.CancelScope()
        self.ctx.tg.start_soon(
            self._restart_after, scope, delay_s, crashed, last_run, last_exit, run_config, mode
        )

    async def _restart_after(
        self,
        scope: anyio.CancelScope,
        delay_s: float,
        crashed: bool,
        last_run: int,
        last_exit: runid.ExitInfo | None,
        run_config: SessionConfig,
        mode: str = "command",
    ) -> None:
        locked = False
        with scope:
            await anyio.sleep(delay_s)
            while self.disk_full():
                await anyio.sleep(self.ctx.timings.tick_s)  # an agent started now would die
            await self._lock.acquire()
            locked = True
        if not locked:
            return
        try:
            # Whoever cancels holds the lock: once it is ours, the restart is still wanted
            # unless a cancel landed as the lock was handed over.
            if scope.cancel_called or self.record.state != State.BACKOFF:
                return
            self._pending_restart = None
            self.record.restarts += 1
            env_extra: dict[str, str] = {}
            if crashed:
                # on_drift = restart goes back to the last verified checkpoint.
                target = "verified" if (self.record.reason or "").startswith("drift:") else None
                prepared = await self._prepare_restart(target, last_run, run_config)
                if prepared is None:  # a stop cancelled the rescue or reset: no restart
                    return
                env_extra, mode = prepared
            env_extra["HERD_LAST_EXIT"] = (last_exit or runid.ExitInfo(None, None)).describe()
            await self._launch(mode=mode, env_extra=env_extra, by=Trigger.RESTART)
        finally:
            self._lock.release()


def _prepare_run(forgotten: Path | None, tag: str) -> str | None:
    """Set aside the `forgotten` run folder (when given), then make the run's cgroup."""
    if forgotten is not None:
        runfolder.set_aside_forgotten(forgotten)
    return spawn.new_cgroup(tag)
