"""The session lifecycle as data: the transition table and the pure rules that pick a move.

No processes, no event loop: the supervisor gathers the facts, asks these functions what
they mean, and takes the move through one checked `_transition`. Tests cover every row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from agentherd.sessions.budget import raised_since_stop
from agentherd.sessions.config import Budget, SessionConfig
from agentherd.sessions.records import SessionRecord
from agentherd.sessions.states import TERMINAL_STATES, State

UNTIL_DONE_IDLE_RUNS = 3
"""until-done ends the loop (failed, reason no-progress) after this many idle runs in a row."""


class Trigger(StrEnum):
    """What causes a move; each row of the table names the triggers that may take it."""

    START = "start"
    """A person (or autostart, or restart) begins a task."""
    RESTART = "restart"
    """A pending automatic restart relaunches after its backoff."""
    SPAWNED = "spawned"
    """The run's process exists."""
    SPAWN_FAILED = "spawn-failed"
    """The run's process could not be started (or its folder is held)."""
    ADOPT = "adopt"
    """A new daemon found the run alive."""
    LOST = "lost"
    """A new daemon found an active state but no run: the old one died mid-launch."""
    PAUSE = "pause"
    RESUME = "resume"
    STOP = "stop"
    """A stop was asked (user, down, budget:<dimension>): the run gets its stop signal."""
    STOPPED = "stopped"
    """The task ended by a stop (its run is gone, or there was none)."""
    UNKILLABLE = "unkillable"
    """The stop could not kill the run's processes."""
    EXIT = "exit"
    """The run ended; the exit rules below chose completed, failed or backoff."""
    VERIFY = "verify"
    """The run ended; its final checkpoint waits for its verdict (drift issue)."""
    VERDICT = "verdict"
    """The final checkpoint's verdict came in; the exit rules chose the next state."""
    RATE_LIMIT = "rate-limit"
    """The agent hit its provider's rate limit: park until the limit resets."""
    BUDGET = "budget"
    """A budget dimension ran out: a graceful stop with reason budget:<dimension>."""
    DRIFT_PAUSE = "drift-pause"
    """A drift rule with action `pause` fired: wait for a person."""
    APPROVE = "approve"
    REJECT = "reject"
    AGENT_WAITS = "agent-waits"
    """The agent's own signal (a hook) says it waits for a person."""
    AGENT_WORKS = "agent-works"
    """The agent's own signal says it works again (a prompt was given, a tool runs)."""
    AFTER_DONE = "after-done"
    """A session of a queued task's `after` completed: start it, or wait for the next one."""
    AFTER_FAILED = "after-failed"
    """A session of a queued task's `after` ended without completing: the task never runs."""


@dataclass(frozen=True)
class Row:
    """One allowed move: from a state to another, by one of these triggers."""

    source: State
    target: State
    triggers: frozenset[Trigger]
    why: str


def _rows(
    sources: Iterable[State], target: State, triggers: Iterable[Trigger], why: str
) -> list[Row]:
    return [Row(s, target, frozenset(triggers), why) for s in sources]


_ENDED = (State.IDLE, *sorted(TERMINAL_STATES))
_LIVE = (State.RUNNING, State.PAUSED, State.WAITING_INPUT)
_STOPPABLE = (State.STARTING, *_LIVE, State.WAITING_APPROVAL, State.VERIFYING, State.BACKOFF)
_EXITABLE = (State.STARTING, *_LIVE, State.WAITING_APPROVAL)
"""A run can end (and be judged) while starting (adopted by a new daemon), running, paused,
waiting for a person's input, or held at the approval gate (a SIGKILL reaches a stopped
process too)."""

T = Trigger
TABLE: tuple[Row, ...] = (
    *_rows(_ENDED, State.STARTING, [T.START], "a new task"),
    *_rows(_ENDED, State.QUEUED, [T.START], "a new task waits for its `after` sessions"),
    Row(
        State.QUEUED,
        State.STARTING,
        frozenset([T.AFTER_DONE, T.START]),
        "its `after` sessions completed (or `herd start --now`)",
    ),
    Row(
        State.QUEUED,
        State.QUEUED,
        frozenset([T.AFTER_DONE]),
        "one `after` session completed (or the worktree is busy): it waits for the next",
    ),
    Row(
        State.QUEUED,
        State.STOPPED,
        frozenset([T.AFTER_FAILED, T.STOPPED, T.BUDGET]),
        "an `after` session failed or was stopped, or a person (or a budget) stopped it",
    ),
    Row(State.BACKOFF, State.STARTING, frozenset([T.RESTART]), "backoff over: relaunch"),
    Row(State.STARTING, State.RUNNING, frozenset([T.SPAWNED, T.ADOPT]), "the run lives"),
    *_rows(
        [State.BACKOFF, State.WAITING_APPROVAL, State.VERIFYING],
        State.RUNNING,
        [T.ADOPT],
        "a new daemon found the run alive",
    ),
    Row(State.STARTING, State.FAILED, frozenset([T.SPAWN_FAILED, T.LOST]), "never ran"),
    *_rows([*_LIVE, State.STOPPING], State.FAILED, [T.LOST], "daemon died"),
    *_rows([State.RUNNING, State.WAITING_INPUT], State.PAUSED, [T.PAUSE], "SIGSTOP"),
    Row(
        State.RUNNING,
        State.WAITING_INPUT,
        frozenset([T.AGENT_WAITS]),
        "the agent waits for a person",
    ),
    Row(State.WAITING_INPUT, State.RUNNING, frozenset([T.AGENT_WORKS]), "the agent works again"),
    Row(State.PAUSED, State.RUNNING, frozenset([T.RESUME]), "SIGCONT"),
    *_rows((*_LIVE, State.STARTING), State.STOPPING, [T.STOP, T.BUDGET], "stop signal sent"),
    Row(State.STOPPING, State.STOPPING, frozenset([T.STOP]), "a second stop (kill)"),
    Row(State.STOPPING, State.STOPPED, frozenset([T.STOPPED, T.BUDGET]), "the run is gone"),
    Row(State.STOPPING, State.FAILED, frozenset([T.UNKILLABLE]), "processes remain"),
    *_rows(_STOPPABLE, State.STOPPED, [T.STOPPED, T.BUDGET], "stopped with no run left"),
    *_rows(_EXITABLE, State.COMPLETED, [T.EXIT], "the run finished the task"),
    *_rows(_EXITABLE, State.FAILED, [T.EXIT], "policy gives up"),
    *_rows(_EXITABLE, State.BACKOFF, [T.EXIT, T.RATE_LIMIT], "restart after a delay"),
    *_rows(_EXITABLE, State.VERIFYING, [T.VERIFY], "judge the final checkpoint first"),
    Row(State.VERIFYING, State.COMPLETED, frozenset([T.VERDICT]), "verified: done"),
    Row(State.VERIFYING, State.FAILED, frozenset([T.VERDICT]), "policy gives up"),
    Row(State.VERIFYING, State.BACKOFF, frozenset([T.VERDICT]), "restart after a delay"),
    *_rows(
        [State.RUNNING, State.PAUSED, State.VERIFYING],
        State.WAITING_APPROVAL,
        [T.DRIFT_PAUSE],
        "a drift rule asks a person",
    ),
    Row(
        State.WAITING_APPROVAL,
        State.RUNNING,
        frozenset([T.APPROVE, T.REJECT]),
        "a person answered: continue (reject restores the baseline plan first)",
    ),
    Row(
        State.WAITING_APPROVAL,
        State.STOPPING,
        frozenset([T.REJECT, T.STOP]),
        "a person rejected: stop",
    ),
)
"""Every allowed move. A move missing here is a bug in the supervisor."""

_ALLOWED: dict[tuple[State, State], frozenset[Trigger]] = {}
for _row in TABLE:
    _key = (_row.source, _row.target)
    _ALLOWED[_key] = _ALLOWED.get(_key, frozenset()) | _row.triggers


class IllegalTransition(Exception):
    """The supervisor tried a move the table does not allow: a bug, never a person's error."""


def allowed(source: State, target: State, trigger: Trigger) -> bool:
    """True when the table lets `trigger` move a session from `source` to `target`."""
    return trigger in _ALLOWED.get((source, target), frozenset())


def check(source: State, target: State, trigger: Trigger) -> None:
    """Raise IllegalTransition unless the table allows the move."""
    if not allowed(source, target, trigger):
        raise IllegalTransition(f"illegal transition {source} -> {target} ({trigger})")


# ----- restart policy: what a run's end means ---------------------------------------------


class Action(StrEnum):
    """What to do after a run ended."""

    COMPLETE = "complete"
    FAIL = "fail"
    RESTART = "restart"


@dataclass(frozen=True)
class ExitFacts:
    """Everything the exit rules look at, gathered by the supervisor when a run ends."""

    run: int
    outcome: str
    """success | agent-error | rate-limit | permission-denied | resume-refused | no-result |
    exit N | signal SIGX | exit unknown."""
    policy: str
    ran_s: float
    stable_after_s: float
    backoff_step: int
    now_s: float
    """Wall-clock seconds (crash times are stored as such)."""
    crash_times: tuple[float, ...] = ()
    crash_window_s: float = 600.0
    max_crashes: int = 5
    disk_full: bool = False
    plan_all_passing: bool | None = None
    """until-done only: None when there is no plan to read."""
    passing_now: int | None = None
    passing_at_run_start: int | None = None
    plan_total: int | None = None
    idle_runs: int = 0
    refusal: str | None = None
    """Why a clean end may not complete the task (sessions/completion.py), or None."""
    refusal_message: str = ""


@dataclass(frozen=True)
class Decision:
    """The exit rules' answer: the action, its reason and message, and the counters after it."""

    action: Action
    reason: str | None
    message: str
    crashed: bool = False
    backoff_step: int = 0
    """The backoff step the restart's delay uses (bumped by one once it is scheduled)."""
    crash_times: tuple[float, ...] = ()
    idle_runs: int = 0
    early_exit: str | None = None
    """The message of an `early-exit` warning to record first (until-done, nothing passed)."""

    @property
    def state(self) -> State:
        """The state this decision moves the session to."""
        return {
            Action.COMPLETE: State.COMPLETED,
            Action.FAIL: State.FAILED,
            Action.RESTART: State.BACKOFF,
        }[self.action]


def after_exit(facts: ExitFacts) -> Decision:
    """A run ended like this, with this policy, crash history and plan: what next?"""
    step = 0 if facts.ran_s >= facts.stable_after_s else facts.backoff_step
    base = Decision(
        Action.RESTART,
        "crashed",
        "",
        crashed=True,
        backoff_step=step,
        crash_times=facts.crash_times,
        idle_runs=facts.idle_runs,
    )
    if facts.outcome == "success":
        return _after_success(facts, replace(base, reason="exited", crashed=False))
    if facts.outcome == "permission-denied":
        # Running it again is refused again: a person must widen the permissions.
        message = f"failed: run {facts.run} was denied permission to use its tools"
        return replace(base, action=Action.FAIL, reason="permission-denied", message=message)
    if facts.outcome == "rate-limit" and facts.policy != "never":
        # The provider said wait, not the agent failed: no crash, no reset, the step grows.
        return replace(base, reason="rate-limit", crashed=False, backoff_step=facts.backoff_step)
    if facts.outcome == "resume-refused" and facts.policy != "never":
        # The agent lost its conversation; the next run starts afresh with `command`.
        return replace(base, reason="resume-refused", crashed=False)
    if facts.policy == "never":
        message = f"failed: run {facts.run} {facts.outcome}"
        return replace(base, action=Action.FAIL, reason=facts.outcome, message=message)
    if facts.disk_full:
        # The disk killed it: no count toward the crash loop; the restart waits for space.
        return replace(base, reason="disk-full")
    window = facts.crash_window_s
    crashes = tuple(t for t in facts.crash_times if facts.now_s - t < window) + (facts.now_s,)
    if len(crashes) >= facts.max_crashes:
        message = (
            f"failed: {len(crashes)} crashes within {window:g}s (max_crashes {facts.max_crashes})"
        )
        return replace(
            base, action=Action.FAIL, reason="crash-loop", message=message, crash_times=crashes
        )
    return replace(base, crash_times=crashes)


def _after_success(facts: ExitFacts, restart: Decision) -> Decision:
    """A clean end: complete, or (always / until-done) run again."""
    if (
        facts.policy != "until-done"
        and facts.plan_total
        and (facts.passing_now or 0) < facts.plan_total
    ):
        # The agent says it is done while plan items still fail.
        early = (
            f"run {facts.run} exited cleanly while plan items still fail "
            f"({facts.passing_now or 0} of {facts.plan_total} pass)"
        )
        restart = replace(restart, early_exit=early)
    if facts.policy in ("never", "on-failure"):
        if facts.refusal is not None:
            return replace(
                restart, action=Action.FAIL, reason=facts.refusal, message=facts.refusal_message
            )
        return replace(
            restart, action=Action.COMPLETE, reason=None, message=f"completed (run {facts.run})"
        )
    if facts.policy != "until-done":
        return restart
    if facts.plan_all_passing and facts.refusal is None:
        message = "completed: every plan item passes"
        return replace(restart, action=Action.COMPLETE, reason=None, message=message)
    passing_now = facts.passing_now or 0
    before = facts.passing_at_run_start
    if before is None or passing_now > before:
        # A run that passed a feature is no restart storm: the backoff starts over.
        return replace(restart, idle_runs=0, backoff_step=0)
    idle_runs = facts.idle_runs + 1
    total = facts.plan_total if facts.plan_total is not None else "?"
    early = (
        f"run {facts.run} exited cleanly but no new plan item passes "
        f"({passing_now} of {total}); {idle_runs}/{UNTIL_DONE_IDLE_RUNS} in a row"
    )
    restart = replace(restart, idle_runs=idle_runs, early_exit=early)
    if idle_runs >= UNTIL_DONE_IDLE_RUNS:
        message = f"failed: {UNTIL_DONE_IDLE_RUNS} runs in a row passed no new plan item"
        return replace(restart, action=Action.FAIL, reason="no-progress", message=message)
    return restart


RATE_LIMIT_MAX_PARK_S = 8 * 24 * 3600.0
"""A reset time further off than this (weekly limits are 7 days) is not believed."""


def rate_limit_delay_s(resets_in_s: float | None, step: int, base_s: float, max_s: float) -> float:
    """How long a rate-limited session parks: until the reset the agent gave, else growing."""
    if resets_in_s is not None and math.isfinite(resets_in_s):
        return min(max(0.0, resets_in_s), RATE_LIMIT_MAX_PARK_S)
    return backoff_delay_s(step, base_s, max_s)


def backoff_delay_s(
    step: int, base_s: float, max_s: float, jitter: Callable[[], float] = lambda: 1.0
) -> float:
    """The delay before restart `step` (0-based): doubling from `base_s`, capped, jittered."""
    if base_s <= 0:
        return 0.0
    raw = base_s * math.pow(2, min(step, 62))
    return min(raw, max_s) * jitter()


# ----- which sessions `up` starts, and what a new daemon does with a stored state ---------


def stopping_for_down(state: State, reason: str | None) -> bool:
    """Stopped, or being stopped, by `herd down`: the next `herd up` starts it again."""
    return state in (State.STOPPED, State.STOPPING) and reason == "down"


def up_starts(autostart: bool, state: State, reason: str | None) -> bool:
    """`herd up` with no names starts an autostart session that is idle or was downed."""
    return autostart and (state == State.IDLE or stopping_for_down(state, reason))


def budget_raised(record: SessionRecord, budget: Budget, fleet_budget: Budget) -> bool:
    """A session stopped by a budget whose limit now leaves room (`herd up` starts it)."""
    if record.state != State.STOPPED:
        return False
    stopped_by = fleet_budget if record.budget_stop_scope == "fleet" else budget
    return raised_since_stop(stopped_by, record.reason, record.budget_stop_limit)


def wanted_by_up(config: SessionConfig, record: SessionRecord, fleet_budget: Budget) -> bool:
    """`herd up` with no names starts this session: autostart, and idle, downed, or stopped by
    a budget that a person has since raised; never an archived one."""
    if config.archived:
        return False
    if config.autostart and budget_raised(record, config.budget, fleet_budget):
        return True
    return up_starts(config.autostart, record.state, record.reason)


def up_finishes_stop(state: State, reason: str | None) -> bool:
    """A `herd down` whose daemon was killed mid-stop: `up` finishes that stop first."""
    return state == State.STOPPING and stopping_for_down(state, reason)


class Recovery(StrEnum):
    """What a new daemon does with a session whose stored run is no longer live."""

    NOTHING = "nothing"
    END_STOPPED = "end-stopped"
    """The daemon died after recording the run's end, before ending the task."""
    REARM_BACKOFF = "rearm-backoff"
    """A restart was pending: relaunch at once."""
    FAIL_LOST = "fail-lost"
    """Active, but no live run is recorded: the daemon died mid-launch."""
    RELAUNCH = "relaunch"
    """A task (or restart) began but no run was recorded yet: nothing ran, so launch it now."""
    JUDGE_AGAIN = "judge-again"
    """The run's end is recorded but the daemon died before the exit rules moved the task."""


def without_live_run(state: State, stop_requested: bool, run_ended: bool = False) -> Recovery:
    """A new daemon finds this stored state and no run that has not ended: what now?

    `run_ended`: the task's last run is recorded with its end (not merely absent)."""
    if state == State.STOPPING and (stop_requested or run_ended):
        return Recovery.END_STOPPED
    if state == State.BACKOFF:
        return Recovery.REARM_BACKOFF
    if state == State.STARTING:
        # A run is recorded before its spawn, so with none recorded no agent of it can exist:
        # starting it now cannot make a second copy.
        return Recovery.RELAUNCH
    if state in (State.RUNNING, State.PAUSED, State.WAITING_INPUT) and run_ended:
        # Its end (exit code, output) is on record: judging it now is what the dead daemon
        # was about to do, so nothing is lost and nothing runs twice.
        return Recovery.JUDGE_AGAIN
    if state in (State.RUNNING, State.STOPPING, State.PAUSED, State.WAITING_INPUT):
        return Recovery.FAIL_LOST
    return Recovery.NOTHING


def ended_unwatched(state: State, stop_requested: bool) -> bool:
    """A run that ended while no daemon watched was being stopped: end the task `stopped`."""
    return state == State.STOPPING or stop_requested


def adopted_state(state: State) -> State | None:
    """The state a re-adopted live run puts the session in (None: it stays as it is)."""
    # A run held at the approval gate is still stopped (SIGSTOP): it keeps waiting for a person.
    kept = (
        State.RUNNING,
        State.PAUSED,
        State.STOPPING,
        State.WAITING_APPROVAL,
        State.WAITING_INPUT,
    )
    return None if state in kept else State.RUNNING


def task_end_kind(state: State) -> str:
    """The event kind that ends a task in `state`."""
    return {State.COMPLETED: "completed", State.FAILED: "failed"}.get(state, "stopped")


def table_lines() -> list[str]:
    """The transition table, one `from -> to : triggers` line per row."""
    return [
        f"{row.source:<16} -> {row.target:<16} {','.join(sorted(row.triggers)):<28} {row.why}"
        for row in TABLE
    ]
