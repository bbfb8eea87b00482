"""The budget keeper on narrow inputs: a session's inputs in, a check and a stop out.

No daemon and no session supervisor: a stand-in holds a ledger and the inputs, and records what
the keeper hands back, as the session would commit it.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import anyio

from agentherd.sessions.adapters import Usage
from agentherd.sessions.config import parse_config
from agentherd.sessions.lifecycle import budget_raised
from agentherd.sessions.records import RunRecord, SessionRecord
from agentherd.sessions.states import State
from agentherd.supervisor.files.store import Change, Store
from agentherd.supervisor.session.budgets import BudgetCheck, BudgetKeeper
from agentherd.supervisor.session.liverun import LiveRun
from agentherd.supervisor.session.news import News
from agentherd.supervisor.session.spend import SessionSpend, SpendInputs


class StandIn:
    """A session as the keeper sees it (the `Budgeted` protocol), recording what it is told."""

    def __init__(self, store: Store, inputs: SpendInputs) -> None:
        self.spend = SessionSpend(store, sample_every_s=10.0)
        self.inputs = inputs
        self.checks: list[BudgetCheck] = []
        self.stopped: list[str] = []

    def spend_inputs(self) -> SpendInputs:
        return self.inputs

    def take_budget_check(self, check: BudgetCheck) -> None:
        self.checks.append(check)

    async def stop(self, kill: bool = False, reason: str = "user") -> None:
        self.stopped.append(reason)


def running(tmp_path: Path, tokens: int, budget: str) -> tuple[Store, SpendInputs]:
    config = parse_config(
        f'[[session]]\nname = "api"\ncommand = ["true"]\nbudget = {{ {budget} }}\n',
        tmp_path / "herd.toml",
    ).sessions[0]
    record = SessionRecord(
        name="api", state=State.RUNNING, handle="api/1", run=1, task_started_at=None
    )
    usage = Usage(input_tokens=tokens)
    return Store(tmp_path / "state.db"), SpendInputs(config, record, None, usage, None, {})


def test_the_keeper_hands_a_warning_and_a_stop_back_for_the_session_to_commit(
    tmp_path: Path,
) -> None:
    store, inputs = running(tmp_path, 900, "tokens = 1000, warn_at = 0.8")
    session = StandIn(store, inputs)

    async def scenario() -> None:
        async with anyio.create_task_group() as tg:
            keeper = BudgetKeeper({"api": session}, store, News(), tg, check_every_s=1.0)
            keeper.check_one(session)
            [check] = session.checks
            assert [e.kind for e in check.warnings] == ["budget-warning"]
            assert check.warned == ("tokens",) and check.warned_for == "api/1"
            assert check.stop is None and session.stopped == []
            inputs.record.budget_warned = list(check.warned)  # as the session writes it
            inputs.record.budget_warned_for = check.warned_for
            session.inputs = SpendInputs(
                inputs.config, inputs.record, None, Usage(input_tokens=1200), None, {}
            )
            keeper.check_one(session)
            stop = session.checks[-1].stop
            assert stop is not None and stop.reason == "budget:tokens"
            assert (stop.event.kind, stop.scope, stop.limit) == ("budget-stop", "session", 1000)
            assert session.checks[-1].warnings == ()  # the stop says it
            keeper.check_one(session)  # a stop under way is not asked again
            assert session.checks[-1].stop is None
            await anyio.wait_all_tasks_blocked()
            assert session.stopped == ["budget:tokens"]
            tg.cancel_scope.cancel()

    anyio.run(scenario)
    store.close()


def test_a_budget_stopped_session_is_wanted_again_once_its_limit_is_raised(
    tmp_path: Path,
) -> None:
    store, inputs = running(tmp_path, 0, "tokens = 1000")
    record = inputs.record
    record.state, record.reason = State.STOPPED, "budget:tokens"
    record.budget_stop_limit, record.budget_stop_scope = 1000, "session"
    fleet = inputs.config.budget
    assert not budget_raised(record, inputs.config.budget, fleet)
    raised = inputs.config.budget.model_copy(update={"tokens": 2000})
    assert budget_raised(record, raised, fleet)
    record.budget_stop_scope = "fleet"  # the fleet's limit stopped it: the fleet's counts
    assert not budget_raised(record, raised, fleet)
    store.close()


def test_a_run_that_starts_and_ends_between_two_looks_counts_once_it_ended(
    tmp_path: Path,
) -> None:
    """A look after a run's number was taken and before its launch sees nothing of it; a run
    short enough to come and go before the next look still counts at that look (the fleet's
    `usage_total` once left such a session out for good: the first look's sum was kept)."""
    store, inputs = running(tmp_path, 0, "tokens = 1000")
    ledger = SessionSpend(store, sample_every_s=10.0)
    assert ledger.facts(inputs, time.time()).ended.usage == Usage()  # nothing watched yet
    run = RunRecord(
        session="api",
        run=1,
        handle="api/1",
        argv=["true"],
        started_at="2026-12-04T12:00:00Z",
        ended_at="2026-12-04T12:00:01Z",
        usage=Usage(input_tokens=700).to_json(),
    )
    store.commit(Change(run=run))
    watched = cast(LiveRun, SimpleNamespace(record=run))  # its end and usage recorded
    ended = replace(inputs, record=inputs.record.model_copy(update={"state": State.COMPLETED}))
    after = ledger.facts(replace(ended, live=watched), time.time())
    assert after.ended.usage.input_tokens == 700
    store.close()
