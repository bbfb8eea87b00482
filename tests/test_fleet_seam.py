"""The seam (supervisor/api/fleetapi.py): the same behaviour through every `Fleet` implementation.

Each test runs against the local daemon; the cluster implementation joins the parameter list
when Postgres is present (tests/fleets.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import script, wait_until
from fleets import IMPLEMENTATIONS, FleetWorld, open_world

from agentherd.sessions.states import WAIT_TIMEOUT_EXIT
from agentherd.sessions.status import SessionStatus
from agentherd.supervisor.api.fleetapi import Fleet

SLEEPER = script("""
    import time
    print("working", flush=True)
    time.sleep(60)
""")
QUICK = script("""
    print("done", flush=True)
""")
SESSIONS = f"""
[[session]]
name = "long"
command = {SLEEPER}
restart = "never"

[[session]]
name = "quick"
command = {QUICK}
restart = "never"
"""


@pytest.fixture(params=IMPLEMENTATIONS)
def world(request: pytest.FixtureRequest, tmp_path: Path) -> FleetWorld:
    database = None
    if request.param == "cluster":
        from pgcluster import require_cluster_extra

        require_cluster_extra(module_level=False)
        database = request.getfixturevalue("pg_url")
    with open_world(request.param, tmp_path, SESSIONS, database) as opened:
        yield opened  # type: ignore[misc]


def _state(fleet: Fleet, name: str) -> str:
    status = fleet.status(name)
    assert isinstance(status, SessionStatus)
    return status.state


def test_every_implementation_is_a_fleet(world: FleetWorld) -> None:
    assert isinstance(world.fleet, Fleet)


def test_list_names_every_session_before_any_starts(world: FleetWorld) -> None:
    listed = world.fleet.list()
    assert sorted(s.session for s in listed) == ["long", "quick"]
    assert all(s.state == "idle" for s in listed)


def test_start_gives_a_handle_and_the_run_is_seen_running(world: FleetWorld) -> None:
    fleet = world.fleet
    reply = fleet.start("long")
    assert reply.handle == "long/1" and reply.session == "long"
    wait_until(lambda: _state(fleet, "long") == "running", what="long to run")
    again = fleet.start("long")
    assert again.handle == "long/1"  # already running: the current handle, no second run


def test_stop_ends_the_task_and_wait_says_stopped(world: FleetWorld) -> None:
    fleet = world.fleet
    handle = fleet.start("long").handle
    wait_until(lambda: _state(fleet, "long") == "running", what="long to run")
    stopped = fleet.stop("long")
    assert stopped.state == "stopped"
    waited = fleet.wait(handle, timeout_s=10)
    assert (waited.state, waited.exit) == ("stopped", 3)


def test_wait_returns_completed_for_a_task_that_finishes(world: FleetWorld) -> None:
    fleet = world.fleet
    handle = fleet.start("quick").handle
    waited = fleet.wait(handle, timeout_s=30)
    assert (waited.handle, waited.state, waited.exit) == ("quick/1", "completed", 0)


def test_wait_times_out_on_a_task_still_working(world: FleetWorld) -> None:
    fleet = world.fleet
    handle = fleet.start("long").handle
    waited = fleet.wait(handle, timeout_s=0.2)
    assert waited.exit == WAIT_TIMEOUT_EXIT
    fleet.stop("long")


def test_restart_begins_a_new_task(world: FleetWorld) -> None:
    fleet = world.fleet
    fleet.start("long")
    wait_until(lambda: _state(fleet, "long") == "running", what="long to run")
    reply = fleet.restart("long")
    assert reply.handle == "long/2"
    wait_until(lambda: _state(fleet, "long") == "running", what="long to run again")
    fleet.stop("long")


def test_events_hold_the_task_in_order_and_filter_by_session(world: FleetWorld) -> None:
    fleet = world.fleet
    fleet.wait(fleet.start("quick").handle, timeout_s=30)
    kinds = [e.kind for e in fleet.events(session="quick")]
    assert kinds.index("run-started") < kinds.index("run-exited") < kinds.index("completed")
    seqs = [e.seq for e in fleet.events()]
    assert seqs == sorted(seqs)
    later = [e.seq for e in fleet.events(since=seqs[-2])]
    # The newest event and any that came since the look (a completed task may still be written
    # to: its report), never one at or before `since`.
    assert later[:1] == seqs[-1:] and later == sorted(later)


def test_follow_yields_events_as_they_come(world: FleetWorld) -> None:
    fleet = world.fleet
    last = max((e.seq for e in fleet.events()), default=0)
    fleet.start("quick")
    seen: list[str] = []
    for event in fleet.follow(since=last, session="quick"):
        seen.append(event.kind)
        if event.kind == "completed":
            break
    assert "run-started" in seen


def test_report_of_a_finished_session(world: FleetWorld) -> None:
    fleet = world.fleet
    fleet.wait(fleet.start("quick").handle, timeout_s=30)
    report = fleet.report("quick")
    assert "quick" in report.markdown


def test_status_of_a_past_task_by_handle(world: FleetWorld) -> None:
    fleet = world.fleet
    fleet.wait(fleet.start("quick").handle, timeout_s=30)
    fleet.wait(fleet.start("quick").handle, timeout_s=30)
    first = fleet.status("quick/1")
    assert getattr(first, "handle", None) == "quick/1"
