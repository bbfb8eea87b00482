"""Warnings open, repeat, get acknowledged and close; the approval gate; notifications."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import FAST, PY, SIMAGENT, Herd, make_repo, script, sim_repo, wait_until

from agentherd.tui.dashboard.app import HerdApp

WAITING_SCRIPT = """
    import pathlib, time
    print("starting", flush=True)
    go = pathlib.Path("go")
    while not go.exists():
        time.sleep(0.02)
    print("back at work", flush=True)
    time.sleep(60)
"""
"""An agent that falls silent until the test creates the file `go`, then writes again."""


def badge(herd: Herd, name: str = "api") -> list[str]:
    return [w["kind"] for w in herd.status(name)["warnings"]]


def closed(herd: Herd, kind: str, name: str = "api") -> list[dict[str, Any]]:
    return [e for e in herd.events(name, "warning-closed") if e["data"]["kind"] == kind]


def test_stalled_opens_once_acks_and_closes_when_the_agent_writes(herd: Herd) -> None:
    work = herd.root / "work"
    work.mkdir()
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{work}"
        command = {script(WAITING_SCRIPT)}
        budget = {{ stall = "0.3s" }}
        stop_grace = "1s"
    """)
    client = herd.start()
    client.call("start", name="api")
    wait_until(lambda: "stalled" in badge(herd))
    [warning] = [w for w in herd.status("api")["warnings"] if w["kind"] == "stalled"]
    assert warning["count"] == 1 and warning["opened_seq"] == warning["seq"]

    acked = herd.cli("ack", "api", "stalled")
    assert acked.returncode == 0, acked.stderr
    assert "acknowledged stalled" in acked.stdout
    assert "stalled" not in badge(herd), "an acknowledged warning leaves the badge"
    [ack] = herd.events("api", "warning-acked")
    assert ack["data"]["kind"] == "stalled"
    unknown = herd.cli("ack", "api", "plan-tampered")
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1
    assert "no unacknowledged open warning 'plan-tampered'" in unknown.stderr

    (work / "go").write_text("")
    found = wait_until(lambda: closed(herd, "stalled"), what="stalled closed by output")
    assert found[0]["data"]["by"] == "output"
    assert len(herd.events("api", "stalled")) == 1
    client.call("stop", name="api", socket_timeout_s=None)


def test_a_stop_closes_stalled_only_and_the_report_keeps_the_rest(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {
        script('''
            import subprocess, time
            open("stray.txt", "w").write("x")
            subprocess.run(["git", "add", "stray.txt"], check=True)
            subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", "commit",
                            "-qm", "stray"], check=True)
            time.sleep(60)
        ''')
    }
        scope = ["src/**"]
        budget = {{ stall = "0.3s" }}
        stop_grace = "1s"
    """)
    client = herd.start()
    client.call("start", name="api")
    wait_until(lambda: {"stalled", "out-of-scope"} <= set(badge(herd)), timeout_s=30)
    client.call("stop", name="api", socket_timeout_s=None)
    wait_until(lambda: closed(herd, "stalled"))
    assert closed(herd, "out-of-scope") == []
    assert badge(herd) == ["out-of-scope"]
    report = client.call("report", name="api")["report"]
    assert [w["kind"] for w in report["remains"]["open_warnings"]] == ["out-of-scope"]


def test_a_missing_plan_is_no_warning_until_written_and_a_fixed_plan_closes_it(
    herd: Herd,
) -> None:
    work = herd.root / "work"
    work.mkdir()
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{work}"
        command = {script("import time; time.sleep(60)")}
        plan = "feature_list.json"
        stop_grace = "1s"
    """)
    client = herd.start()
    client.call("start", name="api")
    herd.wait_state("api", "running")
    passes = client.call("info")["reconcile_passes"]
    wait_until(lambda: client.call("info")["reconcile_passes"] >= passes + 3)
    assert herd.events("api", "plan-invalid") == [], "no plan yet is not a broken plan"
    plan = work / "feature_list.json"
    plan.write_text(json.dumps([{"id": "a", "title": "A", "passes": False}]))
    wait_until(lambda: herd.status("api")["plan"])
    plan.write_text("[{ half written")
    wait_until(lambda: "plan-invalid" in badge(herd), what="plan-invalid opens")
    plan.write_text(json.dumps([{"id": "a", "title": "A", "passes": True}]))
    wait_until(lambda: closed(herd, "plan-invalid"), what="plan-invalid closed")
    assert "plan-invalid" not in badge(herd)
    client.call("stop", name="api", socket_timeout_s=None)


def gated(
    herd: Herd,
    features: int = 4,
    action: str = "pause",
    delay_s: float = 0.3,
    held_until: Path | None = None,
) -> Path:
    """The simulated agent tampers with its plan; on_drift pauses it for a person (if the
    daemon sees the change before the agent's last `delay_s` steps end its run; with
    `held_until`, the agent waits before feature 3 until that file exists, so it always does)."""
    repo = sim_repo(herd.root / "repo", features=features)
    hold = ["--wait-at", f"3:{held_until}"] if held_until is not None else []
    agent = json.dumps([*SIMAGENT, "--delay", str(delay_s), "--tamper-at", "2", *hold])
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {agent}
        agent = "claude"
        restart = "never"
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        on_drift = {{ plan-tampered = "{action}" }}
        stop_grace = "2s"
    """)
    return repo


def test_approve_adopts_the_plan_and_the_run_continues_to_completion(herd: Herd) -> None:
    gated(herd)
    client = herd.start()
    client.call("start", name="api")
    waiting = herd.wait_state("api", "waiting-approval", timeout_s=30)
    assert (waiting["task_state"], waiting["reason"]) == ("input_required", "plan-tampered")
    assert "plan-tampered" in badge(herd)
    # What `notify` sends a phone: the change, items counted from 1 as the Plan tab does.
    [held] = herd.events("api", "waiting-approval")
    assert held["message"].startswith('plan-tampered (reworded item 2 "'), held["message"]
    approved = herd.cli("approve", "api")
    assert approved.returncode == 0, approved.stderr
    assert herd.status("api")["state"] in ("running", "completed")
    assert closed(herd, "plan-tampered"), "approval settles the tampering"
    ended = herd.wait_state("api", "completed", "failed", timeout_s=60)
    assert ended["state"] == "completed", ended["reason"]
    assert ended["plan"]["changed_items"] == []


def test_approving_the_change_a_finished_task_failed_for_closes_it_and_names_the_next_step(
    herd: Herd,
) -> None:
    """An ended task stays ended (terminal states are final): approval settles the warning."""
    gated(herd, action="warn")
    client = herd.start()
    client.call("start", name="api")
    failed = herd.wait_state("api", "failed", "completed", timeout_s=60)
    assert (failed["state"], failed["reason"]) == ("failed", "plan-tampered")
    approved = herd.cli("approve", "api")
    assert approved.returncode == 0, approved.stderr
    assert "failed (plan-tampered)" in approved.stdout
    assert "herd start api" in approved.stdout
    assert closed(herd, "plan-tampered")
    status = herd.status("api")
    assert (status["state"], status["reason"]) == ("failed", "plan-tampered")
    assert status["plan"]["changed_items"] == [], "the approved plan is the baseline now"
    assert "plan-tampered" not in badge(herd)


def test_rejecting_the_change_a_finished_task_failed_for_says_how_to_go_on(herd: Herd) -> None:
    repo = gated(herd, action="warn")
    client = herd.start()
    client.call("start", name="api")
    herd.wait_state("api", "failed", "completed", timeout_s=60)
    total = len(json.loads((repo / "feature_list.json").read_text()))
    rejected = herd.cli("reject", "api")
    assert rejected.returncode == 0, rejected.stderr
    assert len(json.loads((repo / "feature_list.json").read_text())) == total + 1
    assert "herd start api" in rejected.stdout
    status = herd.status("api")
    assert (status["state"], status["reason"]) == ("failed", "plan-tampered")
    assert status["plan"]["passing"] < status["plan"]["total"]


def test_reject_restores_the_baseline_and_the_run_continues(herd: Herd) -> None:
    repo = gated(herd)
    client = herd.start()
    client.call("start", name="api")
    herd.wait_state("api", "waiting-approval", timeout_s=30)
    total = len(json.loads((repo / "feature_list.json").read_text()))
    rejected = herd.cli("reject", "api")
    assert rejected.returncode == 0, rejected.stderr
    assert herd.events("api", "rejected")

    def items() -> int | None:
        """The plan's length; None while the resumed agent is rewriting the file."""
        try:
            return len(json.loads((repo / "feature_list.json").read_text()))
        except ValueError:
            return None

    wait_until(lambda: items() == total + 1, what="the baseline back, read whole")
    assert closed(herd, "plan-tampered")
    status = herd.status("api")
    assert status["state"] != "waiting-approval"
    client.call("stop", name="api", socket_timeout_s=None)


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


@pytest.mark.anyio
async def test_the_dashboard_key_acknowledges_the_selected_sessions_warnings(herd: Herd) -> None:
    import anyio

    work = herd.root / "work"
    work.mkdir()
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{work}"
        command = {script(WAITING_SCRIPT)}
        budget = {{ stall = "0.3s" }}
        stop_grace = "1s"
    """)
    client = herd.start()
    client.call("start", name="api")
    await anyio.to_thread.run_sync(lambda: wait_until(lambda: "stalled" in badge(herd)))
    assert herd.daemon is not None
    app = HerdApp(herd.daemon.socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            if app.statuses:
                break
            await pilot.pause(0.05)
        await pilot.press("a")
        for _ in range(200):
            if herd.events("api", "warning-acked"):
                break
            await pilot.pause(0.05)
    assert "stalled" not in badge(herd)
    await anyio.to_thread.run_sync(lambda: client.call("stop", name="api", socket_timeout_s=None))


# ----- notify --------------------------------------------------------------------------------

RECORDER = """
import json, sys
with open(sys.argv[1], "a") as out:
    out.write(json.dumps(sys.argv[2:]) + "\\n")
"""
"""A notify command that appends the argv it got, one JSON list a line."""


def received(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_notify_gets_exactly_the_events_asked_for_with_a_literal_message(herd: Herd) -> None:
    log = herd.root / "notified.jsonl"
    evil = '/nonexistent/it\'s "x"; $(touch pwned) `id`\nsecond line'
    repo = sim_repo(herd.root / "repo", features=3)
    verify = json.dumps([PY, "-c", "raise SystemExit(1)"])
    notify = json.dumps([PY, "-c", RECORDER, str(log), "{session}", "{kind}", "{message}"])
    herd.write(f"""
        notify = {notify}
        notify_on = ["failed", "verify-failed"]

        [[session]]
        name = "evil"
        command = {json.dumps([evil])}
        restart = "never"

        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {json.dumps([*SIMAGENT, "--delay", "0.05"])}
        agent = "claude"
        restart = "never"
        plan = "feature_list.json"
        verify = {verify}
    """)
    client = herd.start()
    client.call("start", name="evil")
    client.call("start", name="api")
    herd.wait_state("evil", "failed")
    herd.wait_state("api", "failed", "completed", timeout_s=60)
    wait_until(lambda: len(received(log)) >= 3, what="three notifications")
    got = received(log)
    [failed_evil] = [g for g in got if g[:2] == ["evil", "failed"]]
    message = herd.events("evil", "failed")[-1]["message"]
    assert failed_evil[2] == message, "the message is one literal argv element"
    assert "$(touch pwned) `id`" in message and 'it\\\'s "x";' in message
    assert not (herd.root / "pwned").exists() and not Path("pwned").exists()
    assert len(herd.events("api", "verify-failed")) >= 2
    by_kind = sorted((g[0], g[1]) for g in got)
    assert by_kind == [("api", "failed"), ("api", "verify-failed"), ("evil", "failed")], (
        "verify-failed notifies once per opening, not on each repeat"
    )


def test_a_failing_or_hanging_notify_is_recorded_and_blocks_nothing(tmp_path: Path) -> None:
    herd = Herd(tmp_path, timings=replace(FAST, notify_timeout_s=0.5))
    try:
        hang = json.dumps([PY, "-c", "import time; time.sleep(60)"])
        herd.write(f"""
            notify = {hang}
            notify_on = ["failed", "completed"]

            [[session]]
            name = "api"
            command = {script("raise SystemExit(4)")}
            restart = "never"
        """)
        client = herd.start()
        client.call("start", name="api")
        herd.wait_state("api", "failed")
        [failure] = wait_until(lambda: herd.events("api", "notify-failed"), timeout_s=10)
        assert failure["data"]["timed_out"] is True
        assert "notify-failed" in badge(herd)
        assert client.call("start", name="api"), "the daemon answers meanwhile"
    finally:
        herd.down()


def test_a_new_daemon_keeps_the_gate_and_a_pending_verdict(herd: Herd) -> None:
    gated(herd)
    client = herd.start()
    client.call("start", name="api")
    herd.wait_state("api", "waiting-approval", timeout_s=30)
    herd.stop_daemon()
    herd.start()
    assert herd.status("api")["state"] == "waiting-approval", "the run is still SIGSTOPped"
    assert herd.cli("approve", "api").returncode == 0
    ended = herd.wait_state("api", "completed", "failed", timeout_s=60)
    assert ended["state"] == "completed", ended["reason"]


def test_a_new_daemon_judges_a_verifying_task_again(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=2)
    slow_pass = json.dumps([PY, "-c", "import time; time.sleep(1.5)"])
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {json.dumps([*SIMAGENT, "--delay", "0"])}
        agent = "claude"
        restart = "never"
        plan = "feature_list.json"
        verify = {slow_pass}
    """)
    herd.start().call("start", name="api")
    herd.wait_state("api", "verifying", timeout_s=30)
    herd.stop_daemon()
    herd.start()
    ended = herd.wait_state("api", "completed", "failed", timeout_s=60)
    assert ended["state"] == "completed", ended["reason"]
    assert ended["checkpoint"]["verified"] is True
