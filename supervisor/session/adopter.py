"""After a daemon restart: adopt a live run, or record a dead one and apply the exit rules."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio

from agentherd.sessions import lifecycle
from agentherd.sessions.adapters import make_parser
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.lifecycle import Trigger
from agentherd.sessions.records import RunRecord
from agentherd.sessions.states import State
from agentherd.sessions.times import parse_iso, utc_now
from agentherd.supervisor.files.paths import run_dir
from agentherd.supervisor.process import procs, runfolder, runid
from agentherd.supervisor.session import agentusage
from agentherd.supervisor.session.completer import Completer
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.follower import Follower
from agentherd.supervisor.session.launcher import Launcher, identity_of
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.pen import Pen
from agentherd.supervisor.session.restarts import Restarts

log = logging.getLogger("herd.session")

_RUNS_AGAIN = (
    lifecycle.Recovery.REARM_BACKOFF,
    lifecycle.Recovery.RELAUNCH,
    lifecycle.Recovery.JUDGE_AGAIN,
)
"""Recoveries that would run the session again: only on the host that owns it."""


class Adopter:
    """Reconciles what the store says of a session with what still runs (once, at start)."""

    def __init__(
        self,
        ctx: Context,
        pen: Pen,
        parts: tuple[Follower, Launcher, Restarts, Completer],
        watch: Callable[[LiveRun], None],
        record_exit: Callable[[LiveRun], Awaitable[None]],
        stop: Callable[[str], Coroutine[Any, Any, None]],
        resume_drift_restart: Callable[[RunRecord], None],
    ) -> None:
        self.ctx = ctx
        self.record = pen.record
        self.pen = pen
        self.lock = pen.lock
        self.follower, self.launcher, self.restarts, self.completer = parts
        self.watch = watch
        """Follow an adopted run as the session follows its own."""
        self.record_exit = record_exit
        """Write a run's end (once) and sweep what is left of it."""
        self.stop = stop
        """Stop the task for a reason (a stop the dead daemon had begun)."""
        self.resume_drift_restart = resume_drift_restart
        """An adopted run that `on_drift = restart` was stopping: stop it again."""

    async def reconcile(self) -> None:
        """After a daemon restart: adopt a live run, or record a dead one and apply policy."""
        async with self.lock:
            config = self.pen.config()
            state = self.record.state
            last = self.ctx.store.run(config.name, self.record.run) if self.record.run else None
            if last is not None and last.ended_at is None and (last.pid or 0) <= 1:
                # The daemon died between writing the run and recording its pid: find it by its
                # tag. Not found, it is ended (exit unknown) and only its tag and cgroup, never
                # an invented pid or group, say what of it might be left.
                last.pid = last.pgid = last.create_time = None
                found = await anyio.to_thread.run_sync(procs.find_leader, last.tag)
                if found is not None:
                    last.pid, last.pgid, last.create_time = found.pid, found.pgid, found.create_time
            if last is not None and last.ended_at is None:
                identity = identity_of(last)
                folder = run_dir(self.ctx.state_dir, config.name, last.run)
                parser = make_parser(
                    config.agent,
                    session_id=last.agent_session_id,
                    thread_usage=agentusage.thread_usage(
                        self.ctx.store, config.name, last.agent_session_id
                    )
                    if last.mode == "resume"
                    else None,
                )
                live = LiveRun(last, identity, folder, parser, None, self.config_of(last))
                alive = await anyio.to_thread.run_sync(runfolder.lock_held, folder)
                if alive and (
                    identity.pid is None  # a held lock is a live run, even with no leader known
                    or await anyio.to_thread.run_sync(procs.leader_alive, identity)
                ):
                    live.paused = state in (State.PAUSED, State.WAITING_APPROVAL)
                    adopted = self.pen.event(
                        "adopted",
                        f"re-adopted run {last.run} (pid {last.pid or 'unknown'})",
                        last.run,
                        pid=last.pid,
                    )
                    to_state = lifecycle.adopted_state(state)
                    if to_state is None:
                        self.pen.commit(adopted)
                    else:
                        self.pen.transition(to_state, None, adopted, by=Trigger.ADOPT)
                    self.watch(live)
                    if not self.ctx.owns(config.name):  # moved to another host meanwhile
                        self.ctx.tg.start_soon(self.stop, "fenced")
                    elif state == State.STOPPING:
                        reason = last.stop_reason or "user"
                        self.ctx.tg.start_soon(self.stop, reason)
                    else:
                        self.resume_drift_restart(last)
                    return
                # It ended while no daemon watched: read what it wrote, then apply policy.
                live.exit = runfolder.read_exit_file(folder) or runid.ExitInfo(None, None)
                self.follower.run = live
                self.follower.read_output(live)
                while live.tailer.has_more():  # all of it: the outcome is on its last lines
                    self.follower.read_output(live)
                tail = live.splitter.flush()
                if tail is not None:
                    self.follower.take_line(live, tail)
                live.tailer.close()
                live.exited.set()
                live.drained.set()
                live.handled = True
                await self.record_exit(live)
                if lifecycle.ended_unwatched(state, last.stop_requested):
                    reason = last.stop_reason or "user"
                    self.pen.end_task(
                        State.STOPPED,
                        reason,
                        f"stopped ({reason}; ended while no daemon ran)",
                        Trigger.STOPPED,
                    )
                elif not self.ctx.owns(config.name):
                    self._end_lost()
                else:
                    await self.completer.after_exit(live)
                return
            if state == State.VERIFYING and last is not None:
                # The daemon died while completion waited for the final verdict: wait again.
                await self._judge_again(last)
                return
            stop_requested = last is not None and last.stop_requested
            run_ended = last is not None and last.ended_at is not None
            then = lifecycle.without_live_run(state, stop_requested, run_ended)
            if then in _RUNS_AGAIN and not self.ctx.owns(config.name):
                self._end_lost()
                return
            if then is lifecycle.Recovery.END_STOPPED:
                # The daemon died after recording the run's end, before ending the task.
                reason = (last.stop_reason if last is not None else None) or "user"
                self.pen.end_task(State.STOPPED, reason, f"stopped ({reason})", Trigger.STOPPED)
            elif then is lifecycle.Recovery.REARM_BACKOFF and self.record.reason == "rate-limit":
                # Still parked on a rate limit: wait out the rest, then resume; no reset.
                until = parse_iso(self.record.backoff_until)
                left_s = max(0.0, (until - utc_now()).total_seconds()) if until else 0.0
                run_config = self.config_of(last)
                self.restarts.arm(left_s, False, self.record.run, None, run_config, "resume")
            elif then is lifecycle.Recovery.REARM_BACKOFF:
                self.restarts.arm(0.0, True, self.record.run, None, self.config_of(last))
            elif then is lifecycle.Recovery.RELAUNCH:
                # The daemon died between beginning the task and recording its run.
                log.info(
                    "%s: no run was recorded before the daemon stopped; launching it",
                    config.name,
                )
                await self.launcher.launch(mode="command", env_extra={})
            elif then is lifecycle.Recovery.JUDGE_AGAIN and last is not None:
                # The daemon died between recording the run's end and moving the task.
                await self._judge_again(last)
            elif then is lifecycle.Recovery.FAIL_LOST:
                # The store says active but no live run is recorded: the daemon died mid-launch.
                self.pen.end_task(
                    State.FAILED, "lost", "the daemon stopped before the run started", Trigger.LOST
                )

    def _end_lost(self) -> None:
        """The task's run died with this host, and the cluster gave the session to another
        host (or took it from this one): end it here, never run it again."""
        self.pen.end_task(
            State.STOPPED,
            "host-lost",
            "stopped (host-lost): this host lost its lease; the session is no longer its own",
            Trigger.STOPPED,
        )

    async def _judge_again(self, last: RunRecord) -> None:
        """Apply the exit rules again to an ended run whose task was not moved on yet."""
        config = self.pen.config()
        folder = run_dir(self.ctx.state_dir, config.name, last.run)
        parser = make_parser(config.agent, session_id=last.agent_session_id)
        live = LiveRun(last, identity_of(last), folder, parser, None, self.config_of(last))
        live.exit = runid.ExitInfo(last.exit_code, last.signal)
        began, ended = parse_iso(last.started_at), parse_iso(last.ended_at)
        if began is not None and ended is not None:  # how long it ran, for the crash rules
            live.started_monotonic -= max(0.0, (ended - began).total_seconds())
        live.last_line = last.last_line or ""
        live.exited.set()
        live.drained.set()
        live.handled = True
        live.tailer.close()
        self.follower.run = live
        await self.completer.after_exit(live)

    def config_of(self, record: RunRecord | None) -> SessionConfig:
        """The config a recorded run ran with, as far as it is kept: today's, in the run's cwd."""
        config = self.pen.config()
        if record is None or record.cwd is None or Path(record.cwd) == config.cwd:
            return config
        return config.model_copy(update={"cwd": Path(record.cwd)})
