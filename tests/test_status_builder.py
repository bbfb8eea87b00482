"""The one status builder, pure: records in, the status's spend, budgets and warnings out."""

from __future__ import annotations

from typing import Any

from agentherd.sessions.adapters.usage import Usage
from agentherd.sessions.budget import Spend
from agentherd.sessions.config import Budget
from agentherd.sessions.open_warnings import WarningRecord
from agentherd.sessions.records import RunRecord, SessionRecord
from agentherd.sessions.spending import (
    FleetMember,
    SpendFacts,
    ended_runs,
    fleet_counted,
)
from agentherd.sessions.states import State
from agentherd.sessions.status import SessionStatus
from agentherd.sessions.status_builder import (
    StatusFacts,
    across_hosts,
    build,
    fleet_json,
    spend_fields,
)


def run(number: int, handle: str, start: str, end: str | None, **usage: Any) -> RunRecord:
    return RunRecord(
        session="api",
        run=number,
        handle=handle,
        argv=["agent"],
        started_at=start,
        ended_at=end,
        usage=Usage(**usage).to_json() if usage else {},
    )


RUNS = [
    run(1, "api/1", "2026-12-01T10:00:00Z", "2026-12-01T10:01:00Z", input_tokens=100, turns=1),
    run(2, "api/2", "2026-12-01T11:00:00Z", "2026-12-01T11:00:30Z", input_tokens=200, turns=1),
    run(3, "api/2", "2026-12-01T11:00:40Z", "2026-12-01T11:02:00Z", input_tokens=300, turns=2),
]
"""Two tasks: api/1 (one run, 60 s), api/2 (a run and its automatic restart, 120 s)."""

ENDED = SessionRecord(
    name="api",
    state=State.COMPLETED,
    handle="api/2",
    run=3,
    restarts=1,
    task_started_at="2026-12-01T11:00:00Z",
)


def test_the_task_and_the_life_are_counted_from_the_stored_runs() -> None:
    budget = Budget(tokens=1000, wall_time=3600, restarts=5, covers="life")
    facts = SpendFacts.from_runs(budget, ENDED, RUNS, "2026-12-01T11:02:00Z", 0.0)
    fields = spend_fields(ENDED, facts)
    assert fields["usage"].total_tokens == 500 and fields["usage"].turns == 3
    assert fields["usage_total"].total_tokens == 600
    spent = fields["budget"]
    assert spent["covers"] == "life" and spent["tokens"]["spent"] == 600
    assert spent["wall_time"]["spent"] == 180.0  # 60 s of api/1 and 120 s of api/2
    assert spent["restarts"]["spent"] == 1 and spent["projection"] is None


def test_a_watched_run_counts_once_live_and_never_again_from_the_store() -> None:
    running = ENDED.model_copy(update={"state": State.RUNNING, "run": 3})
    stored = [
        *RUNS[:2],
        run(3, "api/2", "2026-12-01T11:00:40Z", "2026-12-01T11:02:00Z", input_tokens=300),
    ]
    facts = SpendFacts(
        budget=Budget(),
        task_usage=Usage(input_tokens=200),
        ended=ended_runs(stored, "api/2", live_run=3),
        task_ended_at=None,
        now_unix_s=0.0,
        live_usage=Usage(input_tokens=350),
    )
    fields = spend_fields(running, facts)
    assert fields["usage"].total_tokens == 550
    assert fields["usage_total"].total_tokens == 650
    assert fields["budget"] is None  # no limit set


def test_the_fleet_counts_tasks_at_work_and_nothing_when_none_is() -> None:
    spent = Spend(Usage(input_tokens=10, cost_usd=0.5), 30.0, 0)
    idle = [FleetMember(spent, spent + spent, active=False)]
    by_task = Budget(cost_usd=10.0)
    assert fleet_counted(by_task, idle).usage.cost_usd == 0.0  # nothing spent, not unknown
    assert fleet_counted(Budget(cost_usd=10.0, covers="life"), idle).usage.cost_usd == 1.0
    fleet = fleet_json(by_task, [*idle, FleetMember(spent, spent, active=True)])
    assert fleet["usage"]["total_tokens"] == 20 and fleet["usage_total"]["total_tokens"] == 30
    assert fleet["budget"]["cost_usd"]["spent"] == 0.5


def test_warnings_on_the_badge_leave_out_acknowledged_ones() -> None:
    def warning(kind: str, acked: int | None = None) -> WarningRecord:
        at = "2026-12-01T11:00:00Z"
        return WarningRecord(
            session="api",
            kind=kind,
            opened_seq=1,
            opened_at=at,
            last_seq=2,
            last_at=at,
            message=kind,
            acked_seq=acked,
        )

    facts = StatusFacts(
        name="api",
        agent="plain",
        record=ENDED,
        run=RUNS[-1],
        alive=False,
        spend=SpendFacts.from_runs(Budget(), ENDED, RUNS, None, 0.0),
        warnings=[warning("stalled"), warning("budget-warning", acked=3)],
    )
    status = build(facts)
    assert [w.kind for w in status.warnings] == ["stalled"]
    assert status.pid is None and status.ended_at == RUNS[-1].ended_at


def test_across_hosts_a_lapsed_lease_shows_host_lost_and_a_never_run_session_no_host() -> None:
    running = SessionStatus(session="api", handle="api/1", state=State.RUNNING, host="a")
    assert across_hosts(running, host_alive=False).reason == "host-lost"
    assert across_hosts(running, host_alive=True).reason is None
    assert across_hosts(SessionStatus(session="b", host="a"), host_alive=True).host is None
