"""Each of the seven drift kinds is raised by what it names, and none by a well-behaved run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import PY, SIMAGENT, Herd, make_repo, script, sim_repo, wait_until

from agentherd.sessions.drift import DRIFT_WARNINGS

DRIFT_KINDS = tuple(DRIFT_WARNINGS)
"""The drift kinds that open a warning, from the registry (sessions/drift.py)."""

FAILING_VERIFY = json.dumps(
    [PY, "-c", "print('FAILED tests/test_app.py::test_it - assert 0'); raise SystemExit(1)"]
)


def sim_session(repo: Path, *flags: str, extra: str = "") -> str:
    """A [[session]] running the simulated agent on `repo` with everything drift looks at."""
    agent = json.dumps([*SIMAGENT, "--delay", "0.05", *flags])
    return f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {agent}
        agent = "claude"
        restart = "never"
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        scope = ["src/**", "tests/**"]
        stop_grace = "2s"
        {extra}
    """


def kinds(herd: Herd) -> list[str]:
    return [e["kind"] for e in herd.events("api")]


def drift_seen(herd: Herd) -> set[str]:
    return set(kinds(herd)) & set(DRIFT_KINDS)


def test_a_well_behaved_run_raises_no_drift_and_completes_once_verified(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=3)
    herd.write(
        sim_session(
            repo,
            extra='verify = "true"\n'
            'budget = { wall_time = "1h", cost_usd = 100, turns = 10000, stall = "30s" }',
        )
    )
    herd.start().call("start", name="api")
    done = herd.wait_state("api", "completed", "failed", timeout_s=60)
    assert done["state"] == "completed", done["reason"]
    seen = kinds(herd)
    assert drift_seen(herd) == set(), seen
    assert seen.index("verifying") < seen.index("completed"), "completion waited for the verdict"
    assert done["checkpoint"]["verified"] is True


def test_plan_tampered_and_a_removed_item_is_no_completion(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=4)
    herd.write(sim_session(repo, "--tamper-at", "2"))
    herd.start().call("start", name="api")
    ended = herd.wait_state("api", "failed", "completed", timeout_s=60)
    assert "plan-tampered" in drift_seen(herd)
    assert ended["plan"]["passing"] == ended["plan"]["total"], "every item left passes"
    assert (ended["state"], ended["reason"]) == ("failed", "plan-tampered")
    failed = herd.events("api", "failed")[-1]
    assert "removed or reworded" in failed["message"]


def test_claims_done_but_fails_repeated_failure_and_an_unverified_end(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=3)
    gates = herd.root / "gates"
    gates.mkdir()
    waits = [f"--wait-at={n}:{gates / str(n)}" for n in (2, 3)]
    herd.write(sim_session(repo, *waits, extra=f"verify = {FAILING_VERIFY}"))
    herd.start().call("start", name="api")
    # One commit at a time, each verified before the next: a look at git that finds two new
    # commits verifies only the newest, and the streak counts verdicts.
    for verdicts, gate in ((1, "2"), (2, "3")):
        wait_until(
            lambda n=verdicts: len(herd.events("api", "verify-failed")) >= n,
            timeout_s=30,
            what=f"{verdicts} failed verification(s)",
        )
        (gates / gate).write_text("")
    ended = herd.wait_state("api", "failed", "completed", timeout_s=60)
    assert (ended["state"], ended["reason"]) == ("failed", "unverified")
    wait_until(lambda: {"claims-done-but-fails", "repeated-failure"} <= drift_seen(herd))
    [repeated] = herd.events("api", "repeated-failure")[:1]
    assert repeated["data"]["source"] == "verify" and repeated["data"]["streak"] == 3
    assert len({e["data"]["sha"] for e in herd.events("api", "verify-failed")}) >= 3


def test_repeated_failure_from_the_same_crash_again_and_again(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "api"
        command = {script("import sys; print('boom: db locked', flush=True); sys.exit(3)")}
        restart = "on-failure"
        restart_delay = "0"
        max_crashes = 5
    """)
    herd.start().call("start", name="api")
    repeated = wait_until(lambda: herd.events("api", "repeated-failure"))
    assert repeated[0]["data"]["source"] == "crash" and repeated[0]["data"]["streak"] == 3
    herd.wait_state("api", "failed", timeout_s=30)


def test_stalled_with_on_drift_restart_relaunches_with_resume(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=3)
    herd.write(
        sim_session(
            repo,
            "--stall-at",
            "2",
            # 2 s, not less: a stall before the agent's first line (a cold start under load)
            # leaves no session id to resume, and the restart rightly runs `command`.
            extra='budget = { stall = "2s" }\non_drift = { stalled = "restart" }\n'
            "resume = " + json.dumps([*SIMAGENT, "--delay", "0.05", "--resume", "{session_id}"]),
        )
    )
    client = herd.start()
    client.call("start", name="api")
    wait_until(lambda: herd.events("api", "stalled"), timeout_s=30)
    wait_until(lambda: herd.events("api", "restart-scheduled"), timeout_s=30)
    [first_exit] = herd.events("api", "run-exited")[:1]
    assert first_exit["data"]["signal"] == "SIGTERM", "on_drift stopped the stalled run"
    started = wait_until(lambda: herd.events("api", "run-started")[1:], timeout_s=30)
    assert started[0]["data"]["mode"] == "resume"
    reasons = [e for e in herd.events("api", "warning-closed") if e["data"]["kind"] == "stalled"]
    assert reasons, "the new run closes the stall"
    client.call("stop", name="api", socket_timeout_s=None)


def test_out_of_scope(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=2)
    text = sim_session(repo).replace('scope = ["src/**", "tests/**"]', 'scope = ["src/**"]')
    herd.write(text)
    herd.start().call("start", name="api")
    herd.wait_state("api", "completed", "failed", timeout_s=60)
    [first] = herd.events("api", "out-of-scope")[:1]
    assert "tests/test_feature_1.py" in first["message"]


def test_burn_without_progress_when_spend_buys_no_plan_item(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    (repo / "plan.json").write_text(json.dumps([{"id": "a", "title": "A", "passes": False}]))
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {
        script('''
            import time
            while True:
                print("thinking", flush=True)
                time.sleep(0.05)
        ''')
    }
        plan = "plan.json"
        stop_grace = "1s"
        budget = {{ wall_time = "1h" }}
        drift = {{ burn_without_progress = 0.0003 }}
    """)
    client = herd.start()
    client.call("start", name="api")
    [burn] = wait_until(lambda: herd.events("api", "burn-without-progress"), timeout_s=30)[:1]
    assert burn["data"]["dimension"] == "wall_time"
    assert any(w["kind"] == "burn-without-progress" for w in herd.status("api")["warnings"])
    # An item flips to passing: the cause is gone.
    (repo / "plan.json").write_text(json.dumps([{"id": "a", "title": "A", "passes": True}]))
    wait_until(
        lambda: (
            not any(w["kind"] == "burn-without-progress" for w in herd.status("api")["warnings"])
        ),
        what="burn-without-progress closed by a flip",
    )
    closed = herd.events("api", "warning-closed")
    assert any(e["data"]["kind"] == "burn-without-progress" for e in closed)
    client.call("stop", name="api", socket_timeout_s=None)


def test_early_exit_is_a_clean_exit_with_failing_items_and_no_completion(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    plan: list[dict[str, Any]] = [{"id": "a", "title": "A", "passes": False}]
    (repo / "plan.json").write_text(json.dumps(plan))
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {script("print('all done!')")}
        plan = "plan.json"
        restart = "on-failure"
    """)
    herd.start().call("start", name="api")
    ended = herd.wait_state("api", "failed", "completed")
    assert (ended["state"], ended["reason"]) == ("failed", "plan-incomplete")
    assert herd.events("api", "early-exit")


def test_a_claim_git_cannot_check_is_reported_not_dropped(herd: Herd) -> None:
    """The plan at a failing checkpoint is too big for git to show: that is said, not hidden."""
    repo = make_repo(herd.root / "repo")
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {
        script('''
            import json, subprocess, time
            item = {"id": "a", "title": "A" * (9 * 1024 * 1024), "passes": True}
            open("plan.json", "w").write(json.dumps([item]))
            subprocess.run(["git", "add", "plan.json"], check=True)
            subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", "commit",
                            "-qm", "all done"], check=True)
            time.sleep(60)
        ''')
    }
        plan = "plan.json"
        verify = {FAILING_VERIFY}
        stop_grace = "1s"
    """)
    client = herd.start()
    client.call("start", name="api")
    [unchecked] = wait_until(lambda: herd.events("api", "claim-unchecked"), timeout_s=30)
    assert "plan.json" in unchecked["message"] and "bytes" in unchecked["message"]
    client.call("stop", name="api", socket_timeout_s=None)
