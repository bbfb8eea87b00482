"""The lifecycle table and its rules, without a process: every row, every decision branch."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from conftest import FAST, script

from agentherd.sessions import lifecycle
from agentherd.sessions.config import Budget, parse_config
from agentherd.sessions.lifecycle import (
    TABLE,
    Action,
    ExitFacts,
    IllegalTransition,
    Recovery,
    Trigger,
    after_exit,
)
from agentherd.sessions.records import Event, SessionRecord
from agentherd.sessions.states import (
    ACTIVE_STATES,
    RUN_STATES,
    TERMINAL_STATES,
    State,
    task_state,
)
from agentherd.supervisor.files.store import Store
from agentherd.supervisor.session.context import Context
from agentherd.supervisor.session.news import News

ROWS = [(row.source, row.target, trigger) for row in TABLE for trigger in sorted(row.triggers)]


@pytest.mark.parametrize(("source", "target", "trigger"), ROWS, ids=lambda v: str(v))
def test_every_row_of_the_table_is_allowed(source: State, target: State, trigger: Trigger) -> None:
    assert lifecycle.allowed(source, target, trigger)
    lifecycle.check(source, target, trigger)


def test_every_move_outside_the_table_is_refused() -> None:
    allowed = set(ROWS)
    refused = 0
    for move in itertools.product(State, State, Trigger):
        if move in allowed:
            continue
        refused += 1
        assert not lifecycle.allowed(*move)
        with pytest.raises(IllegalTransition):
            lifecycle.check(*move)
    assert refused > len(allowed)


def test_the_moves_later_issues_need_have_their_row() -> None:
    """Approval gate, budget stops, rate-limit parking and the final verdict have their place."""
    assert lifecycle.allowed(State.RUNNING, State.WAITING_APPROVAL, Trigger.DRIFT_PAUSE)
    assert lifecycle.allowed(State.WAITING_APPROVAL, State.RUNNING, Trigger.APPROVE)
    assert lifecycle.allowed(State.WAITING_APPROVAL, State.STOPPING, Trigger.REJECT)
    assert lifecycle.allowed(State.RUNNING, State.STOPPING, Trigger.BUDGET)
    assert lifecycle.allowed(State.STOPPING, State.STOPPED, Trigger.BUDGET)
    assert lifecycle.allowed(State.BACKOFF, State.STOPPED, Trigger.BUDGET)
    assert lifecycle.allowed(State.RUNNING, State.BACKOFF, Trigger.RATE_LIMIT)
    assert lifecycle.allowed(State.RUNNING, State.VERIFYING, Trigger.VERIFY)
    for target in (State.COMPLETED, State.FAILED, State.BACKOFF):
        assert lifecycle.allowed(State.VERIFYING, target, Trigger.VERDICT)
    assert task_state(State.VERIFYING) == "working"
    assert State.VERIFYING in ACTIVE_STATES


def test_every_state_is_reachable_and_every_active_state_can_be_stopped() -> None:
    targets = {row.target for row in TABLE}
    assert targets == set(State) - {State.IDLE}
    for state in ACTIVE_STATES - {State.STOPPING}:
        assert lifecycle.allowed(state, State.STOPPED, Trigger.STOPPED) or lifecycle.allowed(
            state, State.STOPPING, Trigger.STOP
        ), state


def test_no_move_leaves_a_terminal_state_but_a_new_task() -> None:
    for row in TABLE:
        if row.source in TERMINAL_STATES:
            assert row.target in (State.STARTING, State.QUEUED), row  # queued: it has `after`
            assert row.triggers == frozenset({Trigger.START}), row


def test_a_queued_task_starts_waits_or_ends_and_never_holds_a_run() -> None:
    """Chaining (`after`): in by a start, out by its `after` sessions' ends or a person."""
    for ended in (State.IDLE, *TERMINAL_STATES):
        assert lifecycle.allowed(ended, State.QUEUED, Trigger.START)
    assert lifecycle.allowed(State.QUEUED, State.STARTING, Trigger.AFTER_DONE)
    assert lifecycle.allowed(State.QUEUED, State.STARTING, Trigger.START)  # `start --now`
    assert lifecycle.allowed(State.QUEUED, State.QUEUED, Trigger.AFTER_DONE)
    for by in (Trigger.AFTER_FAILED, Trigger.STOPPED, Trigger.BUDGET):
        assert lifecycle.allowed(State.QUEUED, State.STOPPED, by)
    for target in (State.RUNNING, State.COMPLETED, State.FAILED, State.STOPPING, State.BACKOFF):
        assert not any(lifecycle.allowed(State.QUEUED, target, by) for by in Trigger), target
    assert task_state(State.QUEUED) == "working" and State.QUEUED in ACTIVE_STATES
    assert State.QUEUED not in RUN_STATES  # holds no worktree: its `after` may work there
    assert lifecycle.without_live_run(State.QUEUED, False) is Recovery.NOTHING


# ----- exit rules ----------------------------------------------------------------------------


def facts(**changes: object) -> ExitFacts:
    """A run of 10 s that crashed at t=1000, under on-failure, with nothing before it."""
    base = ExitFacts(
        run=3,
        outcome="exit 1",
        policy="on-failure",
        ran_s=10.0,
        stable_after_s=60.0,
        backoff_step=2,
        now_s=1000.0,
        crash_window_s=600.0,
        max_crashes=5,
    )
    return ExitFacts(**{**base.__dict__, **changes})  # type: ignore[arg-type]


def test_a_rate_limit_or_refused_resume_is_no_crash() -> None:
    """Neither counts toward the crash loop, nor asks for a rescue and reset."""
    full = (500.0, 600.0, 700.0, 800.0)
    for outcome in ("rate-limit", "resume-refused"):
        decision = after_exit(facts(outcome=outcome, crash_times=full))
        assert decision.action is Action.RESTART and not decision.crashed
        assert decision.crash_times == full
    assert after_exit(facts(outcome="rate-limit")).backoff_step == 2


def test_rate_limit_waits_for_the_reset_else_grows() -> None:
    assert lifecycle.rate_limit_delay_s(42.0, 5, 60.0, 3600.0) == 42.0
    assert lifecycle.rate_limit_delay_s(-3.0, 0, 60.0, 3600.0) == 0.0
    assert lifecycle.rate_limit_delay_s(1e12, 0, 60.0, 3600.0) == 8 * 24 * 3600.0
    waits = [lifecycle.rate_limit_delay_s(None, step, 60.0, 3600.0) for step in range(8)]
    assert waits == [60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 3600.0, 3600.0]


@pytest.mark.parametrize(
    ("changes", "action", "reason", "message"),
    [
        ({"outcome": "success", "policy": "never"}, Action.COMPLETE, None, "completed (run 3)"),
        ({"outcome": "success"}, Action.COMPLETE, None, "completed (run 3)"),
        ({"outcome": "success", "policy": "always"}, Action.RESTART, "exited", ""),
        ({"policy": "never"}, Action.FAIL, "exit 1", "failed: run 3 exit 1"),
        ({"policy": "always"}, Action.RESTART, "crashed", ""),
        ({"disk_full": True}, Action.RESTART, "disk-full", ""),
        ({"outcome": "rate-limit"}, Action.RESTART, "rate-limit", ""),
        (
            {"outcome": "rate-limit", "policy": "never"},
            Action.FAIL,
            "rate-limit",
            "failed: run 3 rate-limit",
        ),
        (
            {"outcome": "permission-denied"},
            Action.FAIL,
            "permission-denied",
            "failed: run 3 was denied permission to use its tools",
        ),
        ({"outcome": "resume-refused"}, Action.RESTART, "resume-refused", ""),
        (
            {"crash_times": (500.0, 600.0, 700.0, 800.0)},
            Action.FAIL,
            "crash-loop",
            "failed: 5 crashes within 600s (max_crashes 5)",
        ),
    ],
    ids=[
        "never-success",
        "on-failure-success",
        "always-success",
        "never-crash",
        "always-crash",
        "disk-full",
        "rate-limit-parks",
        "rate-limit-never",
        "permission-denied-fails",
        "resume-refused-runs-command",
        "crash-loop",
    ],
)
def test_after_exit_branches(
    changes: dict[str, object], action: Action, reason: str | None, message: str
) -> None:
    decision = after_exit(facts(**changes))
    assert (decision.action, decision.reason, decision.message) == (action, reason, message)
    assert (
        decision.state
        == {
            Action.COMPLETE: State.COMPLETED,
            Action.FAIL: State.FAILED,
            Action.RESTART: State.BACKOFF,
        }[action]
    )
    assert decision.early_exit is None


def test_a_crash_counts_in_the_window_and_old_crashes_drop_out() -> None:
    decision = after_exit(facts(crash_times=(100.0, 500.0)))
    assert decision.action is Action.RESTART and decision.crashed
    assert decision.crash_times == (500.0, 1000.0)  # 100 is outside the 600 s window


def test_a_disk_full_exit_does_not_count_as_a_crash() -> None:
    decision = after_exit(facts(crash_times=(900.0,) * 4, disk_full=True))
    assert decision.action is Action.RESTART and decision.crash_times == (900.0,) * 4


def test_a_stable_run_resets_the_backoff_and_a_short_one_keeps_it() -> None:
    assert after_exit(facts(ran_s=60.0)).backoff_step == 0
    assert after_exit(facts(ran_s=59.0)).backoff_step == 2


def until_done(**changes: object) -> ExitFacts:
    """A clean until-done exit with a plan of 10 items."""
    return facts(outcome="success", policy="until-done", plan_total=10, **changes)


def test_until_done_completes_when_every_item_passes() -> None:
    decision = after_exit(until_done(plan_all_passing=True, passing_now=10))
    assert decision.action is Action.COMPLETE
    assert decision.message == "completed: every plan item passes"


def test_until_done_restarts_a_run_that_passed_a_new_item_with_a_fresh_backoff() -> None:
    decision = after_exit(until_done(passing_now=4, passing_at_run_start=3, idle_runs=2))
    assert decision.action is Action.RESTART and decision.reason == "exited"
    assert (decision.idle_runs, decision.backoff_step, decision.early_exit) == (0, 0, None)


def test_until_done_with_no_plan_seen_at_run_start_counts_as_progress() -> None:
    decision = after_exit(until_done(passing_now=None, passing_at_run_start=None))
    assert decision.action is Action.RESTART and decision.idle_runs == 0


def test_until_done_warns_of_an_idle_run_and_fails_the_third() -> None:
    first = after_exit(until_done(passing_now=3, passing_at_run_start=3))
    assert first.action is Action.RESTART and first.idle_runs == 1
    assert first.backoff_step == 2  # an idle run does not reset the backoff
    assert first.early_exit == (
        "run 3 exited cleanly but no new plan item passes (3 of 10); 1/3 in a row"
    )
    third = after_exit(until_done(passing_now=3, passing_at_run_start=3, idle_runs=2))
    assert (third.action, third.reason) == (Action.FAIL, "no-progress")
    assert third.message == "failed: 3 runs in a row passed no new plan item"
    assert third.early_exit is not None and "3/3" in third.early_exit


def test_backoff_doubles_caps_and_jitters() -> None:
    assert lifecycle.backoff_delay_s(0, 1.0, 300.0) == 1.0
    assert lifecycle.backoff_delay_s(3, 1.0, 300.0) == 8.0
    assert lifecycle.backoff_delay_s(20, 1.0, 300.0) == 300.0
    assert lifecycle.backoff_delay_s(10_000, 1.0, 300.0) == 300.0  # no overflow
    assert lifecycle.backoff_delay_s(2, 1.0, 300.0, lambda: 0.5) == 2.0
    assert lifecycle.backoff_delay_s(5, 0.0, 300.0) == 0.0


# ----- up, down and a new daemon -------------------------------------------------------------


@pytest.mark.parametrize(
    ("autostart", "state", "reason", "starts"),
    [
        (True, State.IDLE, None, True),
        (True, State.STOPPED, "down", True),
        (True, State.STOPPING, "down", True),
        (True, State.STOPPED, "user", False),
        (True, State.COMPLETED, None, False),
        (True, State.RUNNING, None, False),
        (False, State.IDLE, None, False),
    ],
)
def test_which_sessions_up_starts(
    autostart: bool, state: State, reason: str | None, starts: bool
) -> None:
    assert lifecycle.up_starts(autostart, state, reason) is starts


@pytest.mark.parametrize(
    ("autostart", "limit_now", "starts"),
    [(True, 2000, True), (True, 1000, False), (False, 2000, False)],
)
def test_up_starts_an_autostart_session_whose_stopping_budget_was_raised(
    tmp_path: Path, autostart: bool, limit_now: int, starts: bool
) -> None:
    """Stopped by its `tokens` limit at 1000: `herd up` starts it again once the limit is higher."""
    toml = f'[[session]]\nname = "a"\ncommand = ["true"]\nautostart = {str(autostart).lower()}\n'
    toml += f"budget = {{ tokens = {limit_now} }}\n"
    config = parse_config(toml, tmp_path / "herd.toml").sessions[0]
    record = SessionRecord(name="a", state=State.STOPPED, reason="budget:tokens")
    record.budget_stop_limit, record.budget_stop_scope = 1000, "session"
    assert lifecycle.wanted_by_up(config, record, Budget()) is starts


def test_up_finishes_only_a_stop_that_down_began() -> None:
    assert lifecycle.up_finishes_stop(State.STOPPING, "down")
    assert not lifecycle.up_finishes_stop(State.STOPPED, "down")
    assert not lifecycle.up_finishes_stop(State.STOPPING, "user")


@pytest.mark.parametrize(
    ("state", "stop_requested", "run_ended", "then"),
    [
        (State.STOPPING, True, False, Recovery.END_STOPPED),
        (State.STOPPING, False, True, Recovery.END_STOPPED),
        (State.STOPPING, False, False, Recovery.FAIL_LOST),
        (State.BACKOFF, False, True, Recovery.REARM_BACKOFF),
        (State.STARTING, False, False, Recovery.RELAUNCH),
        (State.STARTING, False, True, Recovery.RELAUNCH),
        (State.RUNNING, False, False, Recovery.FAIL_LOST),
        (State.RUNNING, False, True, Recovery.JUDGE_AGAIN),
        (State.PAUSED, False, False, Recovery.FAIL_LOST),
        (State.PAUSED, False, True, Recovery.JUDGE_AGAIN),
        (State.IDLE, False, False, Recovery.NOTHING),
        (State.COMPLETED, False, True, Recovery.NOTHING),
        (State.WAITING_APPROVAL, False, False, Recovery.NOTHING),
    ],
)
def test_what_a_new_daemon_does_without_a_live_run(
    state: State, stop_requested: bool, run_ended: bool, then: Recovery
) -> None:
    """`run_ended`: the last run's end is on record (the daemon died before moving the task)."""
    assert lifecycle.without_live_run(state, stop_requested, run_ended) is then


def test_what_a_new_daemon_does_with_a_run_that_ended_unwatched_or_lives() -> None:
    assert lifecycle.ended_unwatched(State.STOPPING, False)
    assert lifecycle.ended_unwatched(State.RUNNING, True)
    assert not lifecycle.ended_unwatched(State.RUNNING, False)
    for state in (State.RUNNING, State.PAUSED, State.STOPPING):
        assert lifecycle.adopted_state(state) is None
    assert lifecycle.adopted_state(State.STARTING) is State.RUNNING
    assert lifecycle.allowed(State.STARTING, State.RUNNING, Trigger.ADOPT)


def test_task_end_kinds() -> None:
    assert lifecycle.task_end_kind(State.COMPLETED) == "completed"
    assert lifecycle.task_end_kind(State.FAILED) == "failed"
    assert lifecycle.task_end_kind(State.STOPPED) == "stopped"


# ----- the supervisor's one door ---------------------------------------------------------------


class KindsHeard(News):
    """News that keeps the kinds of the events it is told of, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.kinds: list[str] = []

    def announce(self, events: list[Event]) -> None:
        self.kinds.extend(e.kind for e in events)
        super().announce(events)


def test_the_supervisor_refuses_an_illegal_move_and_commits_a_legal_one_with_its_event(
    tmp_path: Path,
) -> None:
    from agentherd.supervisor.session.supervisor import SessionSupervisor

    herd_toml = tmp_path / "herd.toml"
    config = parse_config('[[session]]\nname = "api"\ncommand = ["true"]\n', herd_toml)
    store = Store(tmp_path / "state.db")
    heard = KindsHeard()
    announced = heard.kinds
    ctx = Context(
        store,
        tmp_path,
        None,  # type: ignore[arg-type]  # no task group: nothing here starts a task
        FAST,
        herd_toml,
        news=heard,
    )
    supervisor = SessionSupervisor(config.sessions[0], SessionRecord(name="api"), ctx)
    with pytest.raises(IllegalTransition, match="idle -> completed"):
        supervisor._transition(State.COMPLETED, None, by=Trigger.EXIT)
    assert supervisor.record.state == State.IDLE and store.sessions() == {}
    event = supervisor.make_event("task-started", "task api/1 started")
    supervisor._transition(State.STARTING, None, event, by=Trigger.START)
    assert store.sessions()["api"].state == State.STARTING
    assert [e.kind for e in store.events(session="api")] == announced == ["task-started"]
    store.close()


@pytest.mark.pidns
@pytest.mark.timeout(60)
def test_a_run_that_exits_just_as_a_stop_takes_the_lock_is_recorded_by_the_stop(
    tmp_path: Path,
) -> None:
    """The stop/exit race: the stop records the end; the exit handler then applies no policy.

    Before the fix the stop ended the task `stopped` without recording the run's end, and the
    exit handler, next on the lock, applied `on-failure` to the stopped task: stopped -> backoff.
    """
    import anyio

    from agentherd.supervisor.session.supervisor import SessionSupervisor

    go = tmp_path / "go"
    herd_toml = tmp_path / "herd.toml"
    code = (
        f"import os, sys, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
        "sys.exit(1)"
    )
    config = parse_config(
        f'[[session]]\nname = "api"\ncwd = "{tmp_path}"\nrestart = "on-failure"\n'
        f"command = {script(code)}\n",
        herd_toml,
    )
    store = Store(tmp_path / "state.db")
    heard = KindsHeard()
    kinds = heard.kinds

    async def scenario() -> None:
        async with anyio.create_task_group() as tg:
            ctx = Context(store, tmp_path, tg, FAST, herd_toml, news=heard)
            supervisor = SessionSupervisor(config.sessions[0], SessionRecord(name="api"), ctx)
            await supervisor.start()
            run = supervisor.run
            assert run is not None
            async with supervisor._lock:  # the stop holds the lock when the run ends on its own
                go.write_text("")
                with anyio.fail_after(30):
                    await run.exited.wait()
                await supervisor._stop_locked(kill=False, reason="user")
            with anyio.fail_after(30):  # the exit handler takes the lock next and must do nothing
                while not run.handled or supervisor._lock.locked():
                    await anyio.sleep(0.01)
                await anyio.wait_all_tasks_blocked()
            assert supervisor.record.state == State.STOPPED
            assert supervisor.record.reason == "user"
            tg.cancel_scope.cancel()

    anyio.run(scenario)
    runs = [e for e in store.events(session="api") if e.kind == "run-exited"]
    assert len(runs) == 1 and runs[0].data.get("exit_code") == 1
    assert "restart-scheduled" not in kinds and kinds.count("task-started") == 1
    # The folder's not-a-git-repo warning is looked up off the loop: a loaded run heard it last.
    assert [kind for kind in kinds if kind != "not-a-git-repo"][-1] == "stopped"
    store.close()


def test_waiting_input_is_entered_and_left_by_the_agents_own_signal() -> None:
    """An agent at its prompt waits for a person (input_required); typed input moves it on; the
    run may end, be stopped or be paused from there, and a new daemon keeps the state."""
    assert task_state(State.WAITING_INPUT) == "input_required"
    assert State.WAITING_INPUT in RUN_STATES
    assert lifecycle.allowed(State.RUNNING, State.WAITING_INPUT, Trigger.AGENT_WAITS)
    assert lifecycle.allowed(State.WAITING_INPUT, State.RUNNING, Trigger.AGENT_WORKS)
    assert not lifecycle.allowed(State.PAUSED, State.WAITING_INPUT, Trigger.AGENT_WAITS)
    for target in (State.COMPLETED, State.FAILED, State.BACKOFF, State.VERIFYING):
        trigger = Trigger.VERIFY if target is State.VERIFYING else Trigger.EXIT
        assert lifecycle.allowed(State.WAITING_INPUT, target, trigger)
    assert lifecycle.allowed(State.WAITING_INPUT, State.STOPPING, Trigger.STOP)
    assert lifecycle.allowed(State.WAITING_INPUT, State.PAUSED, Trigger.PAUSE)
    assert lifecycle.allowed(State.WAITING_INPUT, State.FAILED, Trigger.LOST)
    assert lifecycle.adopted_state(State.WAITING_INPUT) is None
    assert lifecycle.without_live_run(State.WAITING_INPUT, False, True) is Recovery.JUDGE_AGAIN
    assert lifecycle.without_live_run(State.WAITING_INPUT, False, False) is Recovery.FAIL_LOST
