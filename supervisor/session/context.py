"""What every session supervisor shares: the daemon's store, task group, timings, fleet parts."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup

from agentherd.sessions.config import DEFAULT_NOTIFY_ON, Budget, HerdConfig, SessionConfig
from agentherd.sessions.prices import Price, price_table
from agentherd.sessions.records import Event
from agentherd.supervisor.checks.reporting import PendingReports
from agentherd.supervisor.files.fleetreader import FleetReader
from agentherd.supervisor.files.logguard import FleetLogGuard
from agentherd.supervisor.files.store import Change, Store
from agentherd.supervisor.files.watcher import FleetWatcher
from agentherd.supervisor.git import worktree
from agentherd.supervisor.process.notifier import MAX_CONCURRENT_NOTIFICATIONS
from agentherd.supervisor.session.accountlimits import AccountLimits
from agentherd.supervisor.session.alertkeeper import AlertKeeper
from agentherd.supervisor.session.budgets import Budgeted, BudgetKeeper
from agentherd.supervisor.session.chains import ChainKeeper, Queued
from agentherd.supervisor.session.news import News
from agentherd.supervisor.session.watchlist import Watched, WatchList


@dataclass(frozen=True)
class Timings:
    """Every timing constant of the supervisor, injectable so tests do not wait real seconds."""

    tail_poll_s: float = 60.0
    """A quiet run's log is re-read at least this often even when no watcher event arrives (the
    watcher wakes the reader on a change, the slow pass when a log grew unseen); the quiet logs'
    polls share boundaries of this period, one wake-up for the fleet. A chatty log (its last
    read found output) is read again after `tail_gap_s`, without its watch."""
    tail_min_gap_s: float = 0.1
    """A run's log is read at most this often while a budget limit counts its spend (a stop
    comes between two of the agent's steps): it bounds a chatty agent to ten reads a second."""
    tail_gap_s: float = 0.5
    """A run's log is read at most this often when no budget limit needs its spend at once:
    enough for a person, and a chatty agent's lines are read five at a time (a quiet one's
    first line is still read as soon as the watcher sees it)."""
    terminal_gap_s: float = 2.0
    """An interactive run's log (its terminal's bytes, which move no usage: its spend comes
    from the agent's files) is read at most this often while it draws: for its last line and
    its stall clock, not per redraw (its waits come from the signals file, as written)."""
    watch_debounce_ms: int = 30
    """The fleet watcher's batch window: tens of ms, not watchfiles' 1.6 s default."""
    watch_step_ms: int = 10
    """How often the watcher checks for a quiet moment inside a batch."""
    adopt_poll_s: float = 0.5
    """An adopted run (not our child) is checked for exit this often."""
    stop_poll_s: float = 0.05
    """How often a stopping run is re-checked for leftover processes."""
    pause_wait_s: float = 5.0
    """`pause` re-sends SIGSTOP this long until every process of the run shows as stopped."""
    kill_wait_s: float = 5.0
    """After SIGKILL, how long to wait before calling a run unkillable."""
    report_drain_s: float = 60.0
    """At exit the daemon waits up to this long for the reports of the tasks it just ended."""
    down_margin_s: float = 30.0
    """`herd down` waits the longest stop_grace, the kill waits and this: a stop may first wait
    for a rescue or a launch that holds its session."""
    reconcile_s: float = 60.0
    """The slow pass re-stats every session's files this often, for events inotify dropped; the
    sessions are visited a few at a time spread over it, so a fleet costs no burst."""
    drain_wait_s: float = 2.0
    """After the leader exits, how long to wait for its last output before moving on."""
    agent_files_read_s: float = 10.0
    """A run that ended is completed from its agent's own files (a killed run's spend) for at
    most this long; what was read by then counts. A real transcript reads in about a second;
    millions of lines an agent wrote into its own files do not hold the restart longer."""
    agent_files_poll_s: float = 1.0
    """While a Codex or Gemini run lives and a budget limit counts its spend, its own files
    (rollout, chats) are looked at this often for the answers it wrote (only the new bytes)."""
    agent_files_idle_s: float = 5.0
    """The same look while no budget limit counts the spend: for status and the dashboard."""
    git_write_timeout_s: float = 120.0
    """A rescue, and then a reset, of a crashed run's worktree each get this long, filter drivers
    (git-lfs) included; then git is killed and the failure recorded. `add` re-hashes only what
    changed since the index, so even LFS trees take seconds: two minutes means a stuck filter."""
    budget_check_s: float = 1.0
    """The fleet's budget is checked this often while it sets limits (a session's budget is
    checked when its spend changes, a wall-time limit at its time)."""
    spend_sample_s: float = 10.0
    """A session's spend is sampled (for the projection and a chart) at most this often."""
    rate_limit_wait_s: float = 60.0
    """A rate-limited run whose agent gave no reset time waits this long, doubling each time
    in a row, up to rate_limit_wait_max_s."""
    rate_limit_wait_max_s: float = 3600.0
    rate_limit_stagger_s: float = 5.0
    """Sessions of one account parked on its limit resume this far apart after the reset."""
    notify_timeout_s: float = 10.0
    """A `notify` command is killed (and `notify-failed` recorded) after this long."""
    approval_link_s: float = 3600.0
    """A notification's approval link works this long: enough to reach the phone, short for a
    leak."""
    jitter: Callable[[], float] = field(default=lambda: random.uniform(0.8, 1.0))
    """Multiplies each backoff delay, so a fleet that crashed together does not restart together."""

    @property
    def tick_s(self) -> float:
        """How often the daemon-wide checks run (watched folders, a full disk): cheap, and a
        freed disk must not wait a whole reconcile period."""
        return min(FLEET_TICK_S, self.reconcile_s)


FLEET_TICK_S = 5.0
"""The daemon-wide checks' period when the reconcile period is longer."""


MAX_LOG_GUARDS = 8
"""Flooding run logs watched from their own worker thread at once; more are checked from the
event loop, less often."""

MAX_GIT_READS = 4
"""Concurrent git reads across the fleet: a burst of commits must not take every worker
thread (watching and file reads share them) nor start dozens of git processes at once."""


class Member(Budgeted, Watched, Queued, Protocol):
    """A session as the fleet's shared parts see it: budgets, the watch list, worktrees,
    chains."""

    @property
    def config(self) -> SessionConfig:
        """The session's config as it is now."""
        ...

    def holds_worktree(self) -> bool:
        """True while an agent of this session may be at work (or is about to be) in its tree."""
        ...

    async def park_for_account(self, account: str) -> None:
        """Another session of `account` hit its limit: stop a running run and park with it."""
        ...


class Context:
    """What a session needs from the daemon: the store, the task group, the fleet's shared
    parts (news, budgets, the watch list, worktrees) and herd.toml's fleet-wide settings.

    Built whole: each shared part is constructed here or passed in, none plugged in later.
    """

    def __init__(
        self,
        store: Store,
        state_dir: Path,
        task_group: TaskGroup,
        timings: Timings,
        config_path: Path,
        *,
        news: News | None = None,
        sessions: Mapping[str, Member] | None = None,
        watcher: FleetWatcher | None = None,
        owns: Callable[[str], bool] | None = None,
    ) -> None:
        self.config_path = config_path
        self.owns: Callable[[str], bool] = owns or (lambda name: True)
        """Whether this daemon may restart or re-adopt a session: across hosts, only while
        the cluster's owner table gives it to this host (on one machine, always)."""
        self.store = store
        self.state_dir = state_dir
        self.tg = task_group
        self.timings = timings
        self.news = news or News()
        """Told of every event written."""
        self.sessions: Mapping[str, Member] = sessions if sessions is not None else {}
        """The fleet's sessions by name (the daemon's own mapping, which a reload changes)."""
        self.budgets = BudgetKeeper(
            self.sessions, store, self.news, task_group, timings.budget_check_s
        )
        """Every session's budget checks and the fleet's."""
        self.chains = ChainKeeper(self.sessions, task_group)
        """The queued links of chains (`after`), told when a task ends."""
        self.watch = WatchList(watcher, self.sessions, task_group) if watcher else None
        """What the fleet watcher watches (None: nothing is watched, as in a bare test)."""
        self.trees = worktree.Trees()
        """Each session's worktree as found at its last start."""
        self.log_guards = anyio.CapacityLimiter(MAX_LOG_GUARDS)
        """Worker threads that keep flooding logs within their cap."""
        self.log_guard = FleetLogGuard(task_group)
        """Every growing run log's cap checks, in fleet passes instead of a timer per log."""
        self.reader = FleetReader(task_group)
        """Every running log's reads, in one task (a rested read waits for a shared tick)."""
        self.limits = AccountLimits(timings.rate_limit_stagger_s)
        """The accounts parked on a rate limit: who resumes when (one account, one limit)."""
        self.reports = PendingReports()
        """Reports being written (each ended task's); the daemon drains them before it exits."""
        self.prices: dict[str, Price] = price_table({})
        """The price table for estimated costs: herd's own, with herd.toml's entries over it."""
        self.git_reads = anyio.CapacityLimiter(MAX_GIT_READS)
        """Git reads of the whole fleet run in at most this many worker threads at once."""
        self.notify_argv: list[str] | None = None
        """herd.toml's top-level `notify` argv (placeholders unfilled), or None."""
        self.notify_on: tuple[str, ...] = DEFAULT_NOTIFY_ON
        self.notifications = anyio.CapacityLimiter(MAX_CONCURRENT_NOTIFICATIONS)
        """Notify commands of the whole fleet running at once."""
        self.alerts = AlertKeeper(
            self.sessions, task_group, link_ttl_s=timings.approval_link_s, record=self._record
        )
        """`[notifications]`: messages with the evidence, and the approval links' key."""

    def use_config(self, config: HerdConfig) -> None:
        """Take herd.toml's fleet-wide settings: notify, prices, the fleet budget (at start
        and on every reload)."""
        self.notify_argv = list(config.notify) if config.notify else None
        self.notify_on = tuple(config.notify_on)
        self.alerts.use(config.notifications)
        self.prices = price_table(config.prices)
        self.budgets.fleet_budget = config.fleet.budget

    def _record(self, event: Event) -> None:
        """Write a daemon event (no session) and announce it."""
        self.news.announce(self.store.commit(Change(events=(event,))))

    @property
    def fleet_budget(self) -> Budget:
        """[fleet] budget as herd.toml says now."""
        return self.budgets.fleet_budget

    # ----- what a session asks of the fleet ---------------------------------------------------

    def announce(self, events: list[Event]) -> None:
        """Tell the log and every waiting client that these events were written."""
        self.news.announce(events)
        self.chains.saw(events)
        self.alerts.saw(events)

    def check_budget(self, session: Any) -> None:
        """Check a session's budget (a `Member`) now: its output just showed a step."""
        self.budgets.check_one(session)

    def spend_changed(self, session: Any) -> None:
        """A session's (a `Member`'s) record, runs or plan changed: its budget is looked at."""
        self.budgets.mark(session)

    def fleet_spend(self) -> dict[str, Any] | None:
        """The status JSON's `fleet` object."""
        fleet = self.budgets.fleet_json()
        limits = self.limits.to_json()
        if limits:  # per account: what is parked on its limit, and until when
            fleet = {**(fleet or {}), "limits": limits}
        return fleet

    def park_account(self, account: str, name: str) -> None:
        """Session `name` hit `account`'s limit: park every other running session of it, their
        turns to resume taken now in herd.toml's order (their runs end in any order)."""
        park = self.limits.current(account)
        if park is None:
            return
        for other in list(self.sessions.values()):
            peer = other.config.name != name and self.limits.account(other.config) == account
            if peer and other.holds_worktree():
                self.limits.park(account, other.config.name, park.until, park.delay_source)
                self.tg.start_soon(other.park_for_account, account)

    def arm_log(self, path: Path) -> None:
        """Have the fleet watcher report the next change of a run's log."""
        if self.watch is not None:
            self.watch.watcher.arm(path)

    def runs_changed(self) -> None:
        """A run started (or a folder became a repository): the watch is updated soon."""
        if self.watch is not None:
            self.watch.runs_changed()

    def worktree_user(self, name: str, cwd: Path) -> str | None:
        """The session other than `name` whose agent may be at work in the worktree of `cwd`."""
        tree = self.trees.fresh(name, cwd)
        for other in self.sessions.values():
            busy = other.config.name != name and other.holds_worktree()
            if busy and self.trees.known(other.config.name, other.config.cwd) == tree:
                return other.config.name
        return None
