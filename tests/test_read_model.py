"""One read model: status, report and events tell the same facts, before and after a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import PY, SIMAGENT, Herd, sim_repo, wait_until

from agentherd.sessions.open_warnings import WarningBook, fold
from agentherd.sessions.records import Event
from agentherd.supervisor.files.store import Store


def failing_fleet(herd: Herd) -> Path:
    """One simulated claude agent that passes a feature in one run; its verify always fails."""
    repo = sim_repo(herd.root / "repo", features=2)
    verify = json.dumps([PY, "-c", "import sys; print('2 failed'); sys.exit(1)"])
    agent = json.dumps([*SIMAGENT, "--delay", "0", "--one-per-run"])
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {agent}
        agent = "claude"
        restart = "never"
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        verify = {verify}
    """)
    return repo


def status_facts(status: dict[str, Any]) -> dict[str, Any]:
    """What status says about warnings, the checkpoint's verification and usage."""
    checkpoint = status["checkpoint"] or {}
    verification = checkpoint.get("verification") or {}
    return {
        "warnings": sorted(
            (w["kind"], w["message"], w["at"], w["count"]) for w in status["warnings"]
        ),
        "checkpoint": (checkpoint.get("sha"), checkpoint.get("verified")),
        "verification": (verification.get("passed"), verification.get("exit_code")),
        "usage": status["usage"],
    }


def report_facts(report: dict[str, Any]) -> dict[str, Any]:
    """What the report says about the same."""
    last = report["changed"]["checkpoints"][-1]
    verification = last["verification"] or {}
    return {
        "warnings": sorted(
            (w["kind"], w["message"], w["at"], w["count"])
            for w in report["remains"]["open_warnings"]
        ),
        "checkpoint": (last["sha"], last["verified"]),
        "verification": (verification.get("passed"), verification.get("exit_code")),
        "usage": report["usage"],
    }


def settled(herd: Herd) -> dict[str, Any]:
    """The status once the run ended and its final checkpoint's verdict is in."""

    def ready() -> dict[str, Any] | None:
        status = herd.status("api")
        checkpoint = status["checkpoint"] or {}
        kinds = {w["kind"] for w in status["warnings"]}
        # A clean exit with a plan item failing is not a completion (plan-incomplete).
        done = status["state"] == "failed" and checkpoint.get("verification")
        claims = "claims-done-but-fails" in kinds and "verify-failed" in kinds
        return status if done and claims else None

    return wait_until(ready, timeout_s=60, what="a run refused completion")


def test_status_agrees_with_report_and_events_after_a_daemon_restart(herd: Herd) -> None:
    """A failing verification and its warnings, usage and the last line outlive the daemon."""
    failing_fleet(herd)
    client = herd.start()
    client.call("start", name="api")
    before = settled(herd)
    report = client.call("report", name="api")["report"]
    assert status_facts(before) == report_facts(report)
    assert before["checkpoint"]["verified"] is False
    assert before["usage"]["turns"] > 0 and before["last_line"]

    herd.stop_daemon()
    client = herd.start()
    after = herd.status("api")  # at once: before the new daemon has read git again
    report = client.call("report", name="api")["report"]
    assert status_facts(after) == status_facts(before)
    assert status_facts(after) == report_facts(report)
    assert after["last_line"] == before["last_line"]
    for key in ("exit_code", "started_at", "ended_at", "run", "handle", "state"):
        assert after[key] == before[key], key
    assert after["checkpoint"]["verification"] == before["checkpoint"]["verification"]

    events = {e["seq"]: e for e in herd.events("api")}
    for warning in after["warnings"]:
        event = events[warning["seq"]]
        assert (event["kind"], event["message"], event["at"]) == (
            warning["kind"],
            warning["message"],
            warning["at"],
        )
        assert events[warning["opened_seq"]]["kind"] == warning["kind"]


def test_a_passing_verification_closes_the_failure_and_a_new_task_closes_everything(
    tmp_path: Path,
) -> None:
    """Warnings are records with an opening and a closing; the store keeps them for a new daemon."""
    store = Store(tmp_path / "state.db")
    book = WarningBook()

    def event(kind: str, message: str = "") -> None:
        from agentherd.supervisor.files.store import Change

        written = store.commit(
            Change(events=(Event(at=f"t{kind}", session="api", kind=kind, message=message),))
        )
        for item in written:
            book.take(item)

    event("verify-failed", "exit 1")
    event("verify-failed", "exit 2")
    event("stalled", "idle")
    assert [(w.kind, w.count, w.message) for w in store.open_warnings("api")] == [
        ("verify-failed", 2, "exit 2"),
        ("stalled", 1, "idle"),
    ]
    event("verify-passed")
    assert [w.kind for w in store.open_warnings("api")] == ["stalled"]
    assert [w.kind for w in book.open()] == ["stalled"]
    event("task-started")
    assert store.open_warnings("api") == [] and len(book) == 0
    closed = store._db.execute("SELECT kind, closed_seq FROM warnings ORDER BY kind").fetchall()
    assert [kind for kind, seq in closed if seq is None] == []
    store.close()


def test_an_older_store_gets_its_open_warnings_from_the_event_log(tmp_path: Path) -> None:
    """A state.db of schema 1 (no warning records) is upgraded with the warnings its log holds."""
    path = tmp_path / "state.db"
    store = Store(path)
    from agentherd.supervisor.files.store import Change

    store.commit(
        Change(events=(Event(at="t1", session="api", kind="verify-failed", message="exit 1"),))
    )
    store._db.execute("DROP TABLE warnings")
    store._db.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    store.close()
    upgraded = Store(path)
    assert [(w.kind, w.message) for w in upgraded.open_warnings("api")] == [
        ("verify-failed", "exit 1")
    ]
    upgraded.close()
    assert fold({}, Event(at="t", session=None, kind="stalled", message="")) == []
