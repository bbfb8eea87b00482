"""Restarting a session's runs: backoff (or a rate limit's wait), then rescue, reset, relaunch."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

import anyio

from agentherd.sessions import lifecycle
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.lifecycle import Trigger
from agentherd.sessions.records import Event
from agentherd.sessions.states import LIVE_STATES, State
from agentherd.sessions.times import iso, parse_iso, utc_now
from agentherd.supervisor.files import diskspace
from agentherd.supervisor.git import gitops
from agentherd.supervisor.process import procs, runid
from agentherd.supervisor.session.accountlimits import PARKED_WITH_ACCOUNT
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.errors import SessionError
from agentherd.supervisor.session.launcher import Launcher
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.pen import Pen

Prepared = tuple[dict[str, str], str] | None
"""What a rescue and reset leave for the next run: (environment additions, mode), or None
when a stop cancelled them."""

Rescue = Callable[[str | None, int, SessionConfig, gitops.GitDeadline], Awaitable[Prepared]]
"""Rescue and reset a worktree (target, last run, its config, deadline): recovery.py's."""


class Restarts:
    """Schedules a session's restarts: the backoff wait a stop cancels, then the relaunch."""

    def __init__(
        self,
        ctx: Context,
        pen: Pen,
        launcher: Launcher,
        rescue: Rescue,
    ) -> None:
        self.ctx = ctx
        self.record = pen.record
        self.pen = pen
        self.lock = pen.lock
        """The session's lock: a restart takes it before it relaunches."""
        self.launcher = launcher
        self.rescue = rescue
        self.preparing: gitops.GitDeadline | None = None
        """The rescue/reset in progress before a restart, which a stop cancels."""
        self.pending: anyio.CancelScope | None = None
        """The backoff wait of a scheduled restart; a stop, restart or start cancels it."""

    def waiting(self) -> bool:
        """A restart waits in backoff and has not begun (it counts in `restarts` once it has)."""
        return self.record.state == State.BACKOFF and self.pending is not None

    def cancel(self) -> None:
        """Drop a scheduled restart that has not taken the session's lock yet."""
        if self.pending is not None:
            self.pending.cancel()
            self.pending = None

    async def prepare(
        self, target: str | None, last_run: int, run_config: SessionConfig
    ) -> Prepared:
        """Rescue and reset the worktree before a restart, under a deadline a stop cancels."""
        # Set before the first await, so a stop from now on finds what to cancel.
        deadline = self.preparing = gitops.GitDeadline(self.ctx.timings.git_write_timeout_s)
        try:
            return await self.rescue(target, last_run, run_config, deadline)
        finally:
            self.preparing = None

    @staticmethod
    async def target_of(from_rev: str | None, run_config: SessionConfig) -> str | None:
        """The commit `herd restart --from` names, checked before anything stops."""
        if from_rev in (None, "last", "verified"):
            return from_rev
        if not await anyio.to_thread.run_sync(gitops.is_git_repo, run_config.cwd):
            raise SessionError(f"{run_config.cwd} is not a git repository; --from needs one")
        return str(await anyio.to_thread.run_sync(gitops.resolve_commit, run_config.cwd, from_rev))

    def disk_full(self) -> bool:
        """True while the store's disk refuses writes or the state or work folder has no room."""
        return self.ctx.store.unavailable or diskspace.low_on_space(
            self.ctx.state_dir, self.pen.config().cwd
        )

    def schedule(
        self, live: LiveRun, decision: lifecycle.Decision, *before: Event, by: Trigger | None = None
    ) -> None:
        """Enter backoff and start the timer that relaunches (a stop cancels it)."""
        if decision.reason == "rate-limit":
            self._park_rate_limited(live, *before)
            return
        config = self.pen.config()
        delay_s = lifecycle.backoff_delay_s(
            self.record.backoff_step,
            config.restart_delay,
            config.restart_delay_max,
            self.ctx.timings.jitter,
        )
        self.record.backoff_step += 1
        self.record.backoff_until = iso(utc_now() + timedelta(seconds=delay_s))
        disk_full = decision.reason == "disk-full"
        waits = "; it waits until the disk has space again" if disk_full else ""
        if by is None:
            by = Trigger.EXIT
        self.pen.transition(
            State.BACKOFF,
            decision.reason,
            *before,
            self.pen.event(
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
        self.arm(delay_s, decision.crashed, live.record.run, live.exit, live.config)

    def _park_rate_limited(self, live: LiveRun, *before: Event) -> None:
        """Wait in backoff until the limit lifts (the agent's reset time, else a growing wait),
        with every session of its account: they resume after it, staggered (accountlimits.py).

        Not a crash: the worktree is kept as it is and the next run resumes the conversation.
        """
        name, limits, now = self.pen.config().name, self.ctx.limits, utc_now()
        account = limits.account(live.config)
        park = limits.current(account, now)
        if live.record.stop_reason == PARKED_WITH_ACCOUNT and park is not None:
            source, resets_at = park.delay_source, iso(park.until)
            why = f"another session of account {account} hit its limit"
            resumes = limits.park(account, name, park.until, source)
        else:
            outcome = live.parser.outcome
            resets_at = outcome.resets_at if outcome is not None else None
            reset_time = parse_iso(resets_at) if resets_at else None
            resets_in_s = (reset_time - now).total_seconds() if reset_time else None
            timings, config = self.ctx.timings, self.pen.config()
            wait_s = config.rate_limit_wait or timings.rate_limit_wait_s
            cap_s = config.rate_limit_wait_max or max(wait_s, timings.rate_limit_wait_max_s)
            step = self.record.backoff_step
            delay_s = lifecycle.rate_limit_delay_s(resets_in_s, step, wait_s, cap_s)
            source = "agent" if reset_time else "guess"
            why = "hit a rate limit"
            resumes = limits.park(account, name, now + timedelta(seconds=delay_s), source)
        delay_s = max(0.0, (resumes - now).total_seconds())
        self.record.backoff_step += 1
        until = iso(resumes)
        self.record.backoff_until = until
        self.record.limit = {"account": account, "delay_source": source, "resets_at": resets_at}
        told = (
            f"until {resets_at} (the agent's reset time)"
            if source == "agent"
            else f"{delay_s:.0f}s (herd's guess: the agent gave no reset time)"
        )
        self.pen.transition(
            State.BACKOFF,
            "rate-limit",
            *before,
            self.pen.event(
                "rate-limited",
                f"run {live.record.run} {why}; waiting {told}, resumes at {until}",
                live.record.run,
                delay_s=round(delay_s, 3),
                resets_at=resets_at,
                resumes_at=until,
                delay_source=source,
                account=account,
                step=self.record.backoff_step,
            ),
            by=Trigger.RATE_LIMIT,
        )
        self.arm(delay_s, False, live.record.run, live.exit, live.config, "resume")
        if live.record.stop_reason != PARKED_WITH_ACCOUNT:
            self.ctx.park_account(account, name)

    async def park_for_account(self, run: Callable[[], LiveRun | None], account: str) -> None:
        """Another session of `account` hit its limit: stop this session's running run; its end
        parks it with them (completer.py), the worktree kept and the conversation resumed."""
        async with self.lock:
            live = run()
            if self.record.state not in LIVE_STATES or live is None or live.exited.is_set():
                return
            if self.ctx.limits.account(live.config) != account:
                return
            live.record.stop_reason = PARKED_WITH_ACCOUNT
            self.pen.commit(run=live.record)
            identity, paused = live.identity, live.paused
        config = self.pen.config()
        await procs.stop_tree(
            identity,
            config.stop_signal_number,
            config.stop_grace,
            self.ctx.timings.kill_wait_s,
            self.ctx.timings.stop_poll_s,
            continue_first=paused,
        )

    def _account_turn_s(self, run_config: SessionConfig) -> float:
        """Seconds until this session's turn while its account is parked on a limit (0: go).

        A restart (after a crash, say) during the park waits in line after the sessions parked
        before it, instead of meeting the limit again; its resume time is recorded."""
        limits, name = self.ctx.limits, self.pen.config().name
        account = limits.account(run_config)
        park = limits.current(account)
        if park is None:
            return 0.0
        queued = name in park.order
        resumes = limits.park(account, name, park.until, park.delay_source)
        wait_s = (resumes - utc_now()).total_seconds()
        if wait_s > 0 and not queued:
            self.record.backoff_until = iso(resumes)
            self.pen.commit(
                self.pen.event(
                    "rate-limited",
                    f"account {account} is parked on its limit: the restart waits its turn, "
                    f"at {iso(resumes)}",
                    self.record.run or None,
                    delay_s=round(wait_s, 3),
                    resets_at=iso(park.until),
                    resumes_at=iso(resumes),
                    delay_source=park.delay_source,
                    account=account,
                    step=self.record.backoff_step,
                )
            )
        return max(0.0, wait_s)

    def arm(
        self,
        delay_s: float,
        crashed: bool,
        last_run: int,
        last_exit: runid.ExitInfo | None,
        run_config: SessionConfig,
        mode: str = "command",
    ) -> None:
        """Start the backoff wait in a cancel scope that a stop, restart or start cancels."""
        self.cancel()
        scope = self.pending = anyio.CancelScope()
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
            while (turn_s := self._account_turn_s(run_config)) > 0:
                await anyio.sleep(turn_s)
            while self.disk_full():
                await anyio.sleep(self.ctx.timings.tick_s)  # an agent started now would die
            await self.lock.acquire()
            locked = True
        if not locked:
            return
        try:
            # Whoever cancels holds the lock: once it is ours, the restart is still wanted
            # unless a cancel landed as the lock was handed over.
            if scope.cancel_called or self.record.state != State.BACKOFF:
                return
            self.pending = None
            if not self.ctx.owns(self.record.name):  # across hosts: it moved, or we are fenced
                self.pen.end_task(
                    State.STOPPED,
                    "host-lost",
                    "stopped (host-lost): not restarted; the session is no longer this host's",
                    Trigger.STOPPED,
                )
                return
            self.record.restarts += 1
            env_extra: dict[str, str] = {}
            if crashed:
                # on_drift = restart goes back to the last verified checkpoint.
                target = "verified" if (self.record.reason or "").startswith("drift:") else None
                prepared = await self.prepare(target, last_run, run_config)
                if prepared is None:  # a stop cancelled the rescue or reset: no restart
                    return
                env_extra, mode = prepared
            env_extra["HERD_LAST_EXIT"] = (last_exit or runid.ExitInfo(None, None)).describe()
            await self.launcher.launch(mode=mode, env_extra=env_extra, by=Trigger.RESTART)
        finally:
            self.lock.release()
