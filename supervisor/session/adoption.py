"""After a daemon restart: adopt a live run, or record a dead one and apply the exit rules."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

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
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.parts import SessionParts

log = logging.getLogger("herd.session")


class Adoption(SessionParts):
    """The part of a session supervisor that reconciles the store with what still runs."""

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
                parser = make_parser(
                    self.config.agent,
                    session_id=last.agent_session_id,
                    thread_usage=agentusage.thread_usage(
                        self.ctx.store, self.config.name, last.agent_session_id
                    )
                    if last.mode == "resume"
                    else None,
                )
                live = LiveRun(last, identity, folder, parser, None, self._config_of(last))
                alive = await anyio.to_thread.run_sync(runfolder.lock_held, folder)
                if alive and (
                    identity.pid is None  # a held lock is a live run, even with no leader known
                    or await anyio.to_thread.run_sync(procs.leader_alive, identity)
                ):
                    live.paused = state in (State.PAUSED, State.WAITING_APPROVAL)
                    adopted = self._event(
                        "adopted",
                        f"re-adopted run {last.run} (pid {last.pid or 'unknown'})",
                        last.run,
                        pid=last.pid,
                    )
                    to_state = lifecycle.adopted_state(state)
                    if to_state is None:
                        self._commit(adopted)
                    else:
                        self._transition(to_state, None, adopted, by=Trigger.ADOPT)
                    self._watch(live)
                    if state == State.STOPPING:
                        reason = last.stop_reason or "user"
                        self.ctx.tg.start_soon(functools.partial(self.stop, reason=reason))
                    else:
                        self.resume_drift_restart(last)
                    return
                # It ended while no daemon watched: read what it wrote, then apply policy.
                live.exit = runfolder.read_exit_file(folder) or runid.ExitInfo(None, None)
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
                if lifecycle.ended_unwatched(state, last.stop_requested):
                    reason = last.stop_reason or "user"
                    self._end_task(
                        State.STOPPED,
                        reason,
                        f"stopped ({reason}; ended while no daemon ran)",
                        Trigger.STOPPED,
                    )
                else:
                    await self._after_exit(live)
                return
            if state == State.VERIFYING and last is not None:
                # The daemon died while completion waited for the final verdict: wait again.
                await self._judge_again(last)
                return
            stop_requested = last is not None and last.stop_requested
            run_ended = last is not None and last.ended_at is not None
            then = lifecycle.without_live_run(state, stop_requested, run_ended)
            if then is lifecycle.Recovery.END_STOPPED:
                # The daemon died after recording the run's end, before ending the task.
                reason = (last.stop_reason if last is not None else None) or "user"
                self._end_task(State.STOPPED, reason, f"stopped ({reason})", Trigger.STOPPED)
            elif then is lifecycle.Recovery.REARM_BACKOFF and self.record.reason == "rate-limit":
                # Still parked on a rate limit: wait out the rest, then resume; no reset.
                until = parse_iso(self.record.backoff_until)
                left_s = max(0.0, (until - utc_now()).total_seconds()) if until else 0.0
                config = self._config_of(last)
                self._arm_restart(left_s, False, self.record.run, None, config, "resume")
            elif then is lifecycle.Recovery.REARM_BACKOFF:
                self._arm_restart(0.0, True, self.record.run, None, self._config_of(last))
            elif then is lifecycle.Recovery.RELAUNCH:
                # The daemon died between beginning the task and recording its run.
                log.info(
                    "%s: no run was recorded before the daemon stopped; launching it",
                    self.config.name,
                )
                await self._launch(mode="command", env_extra={})
            elif then is lifecycle.Recovery.JUDGE_AGAIN and last is not None:
                # The daemon died between recording the run's end and moving the task.
                await self._judge_again(last)
            elif then is lifecycle.Recovery.FAIL_LOST:
                # The store says active but no live run is recorded: the daemon died mid-launch.
                self._end_task(
                    State.FAILED, "lost", "the daemon stopped before the run started", Trigger.LOST
                )

    async def _judge_again(self, last: RunRecord) -> None:
        """Apply the exit rules again to an ended run whose task was not moved on yet."""
        folder = run_dir(self.ctx.state_dir, self.config.name, last.run)
        parser = make_parser(self.config.agent, session_id=last.agent_session_id)
        live = LiveRun(last, self._identity_of(last), folder, parser, None, self._config_of(last))
        live.exit = runid.ExitInfo(last.exit_code, last.signal)
        began, ended = parse_iso(last.started_at), parse_iso(last.ended_at)
        if began is not None and ended is not None:  # how long it ran, for the crash rules
            live.started_monotonic -= max(0.0, (ended - began).total_seconds())
        live.last_line = last.last_line or ""
        live.exited.set()
        live.drained.set()
        live.handled = True
        live.tailer.close()
        self.run = live
        await self._after_exit(live)

    def _config_of(self, record: RunRecord | None) -> SessionConfig:
        """The config a recorded run ran with, as far as it is kept: today's, in the run's cwd."""
        if record is None or record.cwd is None or Path(record.cwd) == self.config.cwd:
            return self.config
        return self.config.model_copy(update={"cwd": Path(record.cwd)})
