"""Where a session really stands: plan counts and drift, progress, checkpoints, verification."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from conftest import FAST, PY, SIMAGENT, Herd, git, make_repo, script, sim_repo, wait_until

IDLE = script("import time; time.sleep(60)")


def watched(repo: Path, name: str = "api", command: str = IDLE, extra: str = "") -> str:
    return f"""
        [[session]]
        name = "{name}"
        cwd = "{repo}"
        command = {command}
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        stop_grace = "2s"
        {extra}
    """


def test_plan_counts_progress_and_checkpoints_follow_the_agent(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=3)
    agent = json.dumps([*SIMAGENT, "--delay", "0.05"])
    herd.write(watched(repo, command=agent, extra='agent = "claude"'))
    herd.start().call("start", name="api")
    status = herd.wait_state("api", "completed", timeout_s=30)
    status = wait_until(lambda: (s := herd.status("api"))["plan"]["passing"] == 3 and s)
    assert status["plan"] == {"passing": 3, "total": 3, "changed_items": []}
    assert any("Session" in entry for entry in status["progress"]["latest"])
    assert status["progress"]["updated_at"].endswith("Z")
    head = git(repo, "rev-parse", "HEAD").strip()
    wait_until(lambda: (c := herd.status("api")["checkpoint"]) and c["sha"] == head)
    checkpoint = herd.status("api")["checkpoint"]
    assert checkpoint["subject"].startswith("Implement") and checkpoint["verified"] is None
    recorded = [e["data"]["sha"] for e in herd.events("api", "checkpoint")]
    assert head in recorded and len(recorded) >= 4, "every new commit is recorded"
    assert status["usage"]["total_tokens"] > 0 and status["usage"]["cost_usd"] > 0


def test_plan_tampering_is_reported_against_the_baseline(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=4)
    herd.write(watched(repo))
    herd.start()
    wait_until(lambda: herd.status("api")["plan"], what="the baseline")
    plan = json.loads((repo / "feature_list.json").read_text())
    plan[0]["passes"] = True  # allowed: a flip to passing
    plan[1]["description"] = "something easier"  # forbidden: reworded
    plan.pop()  # forbidden: removed
    tmp = repo / "feature_list.json.tmp"
    tmp.write_text(json.dumps(plan, indent=2))
    tmp.rename(repo / "feature_list.json")  # an atomic replace, as agents write
    status = wait_until(lambda: (s := herd.status("api"))["plan"]["changed_items"] and s)
    changes = {(c["index"], c["change"]) for c in status["plan"]["changed_items"]}
    assert changes == {(1, "reworded"), (3, "removed")}
    assert status["plan"]["passing"] == 1 and status["plan"]["total"] == 3
    tampered = herd.events("api", "plan-tampered")
    assert len(tampered) == 1 and "reworded" in tampered[0]["message"]
    # Items counted from 1, with their text, as the Plan tab and a phone's notice read them;
    # the JSON keeps its 0-based `index` (above).
    said = tampered[0]["message"]
    assert 'reworded item 2 "' in said and "something easier" in said, said
    assert 'removed item 4 "' in said, said
    assert any(w["kind"] == "plan-tampered" for w in herd.status("api")["warnings"])


def test_a_broken_plan_keeps_the_last_good_one_and_warns_once(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=2)
    herd.write(watched(repo))
    herd.start()
    wait_until(lambda: herd.status("api")["plan"], what="the baseline")
    (repo / "feature_list.json").write_text('[{"description": "half written", "pas')
    status = wait_until(lambda: (s := herd.status("api"))["plan"].get("error") and s)
    assert status["plan"]["total"] == 2, "the last good plan stays"
    assert "feature_list.json: not JSON" in status["plan"]["error"]
    (repo / "feature_list.json").write_text('{"wrong": "shape"}')
    wait_until(lambda: "expected a list" in (herd.status("api")["plan"].get("error") or ""))
    (repo / "feature_list.json").write_bytes(b"[" + b" " * (50 << 20) + b"]")
    wait_until(lambda: "too large" in (herd.status("api")["plan"].get("error") or ""))
    (repo / "feature_list.json").unlink()
    wait_until(lambda: "deleted" in (herd.status("api")["plan"].get("error") or ""))
    kinds = [e["message"] for e in herd.events("api", "plan-invalid")]
    assert len(kinds) == 4, "\n".join(kinds)
    assert herd.status("api")["plan"]["total"] == 2


def test_binary_progress_and_a_repo_without_commits_warn_and_never_crash(herd: Herd) -> None:
    empty = herd.root / "empty"
    empty.mkdir()
    git(empty, "init", "-q", "-b", "main")
    (empty / "claude-progress.txt").write_bytes(bytes(range(256)) * 10)
    plain = herd.root / "plain"
    plain.mkdir()
    (plain / "claude-progress.txt").write_text("## Session 1\n- did a thing\n")
    herd.write(watched(empty) + watched(plain, name="plain"))
    herd.start()
    binary = wait_until(lambda: herd.events("api", "progress-invalid"))
    assert "looks binary" in binary[0]["message"]
    no_commits = wait_until(lambda: herd.events("api", "git-unavailable"))
    assert "no commits yet" in no_commits[0]["message"]
    assert herd.status("api")["checkpoint"] is None
    plain_status = wait_until(lambda: (s := herd.status("plain"))["progress"]["latest"] and s)
    assert "did a thing" in plain_status["progress"]["latest"][-1]
    wait_until(lambda: herd.events("plain", "not-a-git-repo"))
    assert len(herd.events("plain", "not-a-git-repo")) == 1


def test_an_agent_that_makes_its_own_repository_ends_on_its_last_commit(tmp_path: Path) -> None:
    """A session started in a folder that is no repository yet (a new project): the agent runs
    `git init` and commits, and its end is judged on its last commit, not a reconcile later."""
    herd = Herd(tmp_path, timings=replace(FAST, reconcile_s=600.0))  # the end's own look only
    new = herd.root / "new"
    new.mkdir()
    agent = script(
        """
        import subprocess
        def git(*args):
            subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@a", *args], check=True)
        git("init", "-q", "-b", "main")
        for step in (1, 2, 3):
            open("step.txt", "w").write(str(step))
            git("add", "step.txt")
            git("commit", "-q", "-m", f"step {step}")
        """
    )
    herd.write(f'[[session]]\nname = "new"\ncwd = "{new}"\ncommand = {agent}\nrestart = "never"\n')
    try:
        herd.start().call("start", name="new")
        ended = herd.wait_state("new", "completed")
        assert ended["checkpoint"] is not None, "its end was judged without its commits"
        assert ended["checkpoint"]["sha"] == git(new, "rev-parse", "HEAD").strip()
    finally:
        herd.down()


def test_verification_runs_against_the_commit_not_the_dirty_tree(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo", {"answer.txt": "good\n"})
    verify = json.dumps([PY, "-c", "import sys; sys.exit(open('answer.txt').read() != 'good\\n')"])
    herd.write(watched(repo, extra=f"verify = {verify}"))
    herd.start()
    first = git(repo, "rev-parse", "HEAD").strip()
    wait_until(
        lambda: (c := herd.status("api")["checkpoint"]) and c["verified"] is True, timeout_s=30
    )
    (repo / "answer.txt").write_text("bad\n")  # the agent's dirty, uncommitted edit
    (repo / "other.txt").write_text("x\n")
    git(repo, "add", "other.txt")
    git(repo, "commit", "-q", "-m", "second")  # commits other.txt only
    second = git(repo, "rev-parse", "HEAD").strip()
    wait_until(
        lambda: (c := herd.status("api")["checkpoint"])["sha"] == second and c["verified"] is True,
        timeout_s=30,
    )
    assert (repo / "answer.txt").read_text() == "bad\n", "the agent's tree is untouched"
    passed = {e["data"]["sha"] for e in herd.events("api", "verify-passed")}
    assert {first, second} <= passed
    assert (
        "herd-verify" not in git(repo, "worktree", "list")
        and len(git(repo, "worktree", "list").splitlines()) == 1
    )


def test_a_look_while_git_moves_head_misses_no_commit(herd: Herd) -> None:
    """git appends `logs/HEAD` before it moves the ref: looks between the two (the new log, the
    old HEAD) must not take the log as seen, or the commit goes unrecorded until the next one
    (a CI run: a fast agent's last commit was never verified)."""
    repo = make_repo(herd.root / "repo")
    herd.write(watched(repo))
    herd.start()
    first = git(repo, "rev-parse", "HEAD").strip()
    wait_until(lambda: (c := herd.status("api")["checkpoint"]) and c["sha"] == first)
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    new = git(repo, "commit-tree", tree, "-p", first, "-m", "mid-update").strip()
    with (repo / ".git/logs/HEAD").open("a") as log:  # git's first half of a commit
        log.write(f"{first} {new} t <t@t> 1700000000 +0000\tcommit: mid-update\n")
    passes = herd.client.call("info")["reconcile_passes"]
    wait_until(lambda: herd.client.call("info")["reconcile_passes"] >= passes + 3, what="looks")
    assert herd.status("api")["checkpoint"]["sha"] == first
    ref = repo / ".git/refs/heads/main"  # the second half: the ref moves, the log stays
    ref.with_suffix(".lock").write_text(f"{new}\n")
    ref.with_suffix(".lock").rename(ref)
    wait_until(lambda: herd.status("api")["checkpoint"]["sha"] == new, 10, "the moved HEAD")


def test_a_failing_checkpoint_that_claims_done_is_flagged(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=2)
    verify = json.dumps([PY, "-c", "import sys; print('2 failed'); sys.exit(1)"])
    agent = json.dumps([*SIMAGENT, "--delay", "0", "--one-per-run"])
    herd.write(watched(repo, command=agent, extra=f'verify = {verify}\nagent = "claude"'))
    herd.start().call("start", name="api")
    claims = wait_until(lambda: herd.events("api", "claims-done-but-fails"), timeout_s=30)
    assert "Feature 1" in claims[0]["message"]
    failed = herd.events("api", "verify-failed")
    assert failed and "2 failed" in failed[-1]["data"]["output_tail"]
    checkpoint = wait_until(
        lambda: (c := herd.status("api")["checkpoint"]).get("verification") and c
    )
    assert checkpoint["verification"]["passed"] is False
    assert checkpoint["verification"]["output_tail"] == "2 failed"
    shown = herd.cli("status", "api").stdout
    assert "verify:        exit 1 after" in shown and "2 failed" in shown


@pytest.mark.pidns
def test_a_hanging_verify_times_out_and_its_tree_is_killed(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    verify = json.dumps([PY, "-c", "import time; time.sleep(60)"])
    herd.write(watched(repo, extra=f'verify = {verify}\nverify_timeout = "0.5s"'))
    herd.start()
    failed = wait_until(lambda: herd.events("api", "verify-failed"), timeout_s=30)
    assert failed[0]["data"]["timed_out"] is True
    assert herd.status("api")["checkpoint"]["verified"] is False


def test_restart_from_verified_picks_the_last_verified_commit(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo", {"ok.txt": "1\n"})
    verify = json.dumps([PY, "-c", "import os, sys; sys.exit(not os.path.exists('ok.txt'))"])
    marker = herd.root / "crashed"
    agent = script(f"""
        import os, pathlib, subprocess, sys, time
        marker = pathlib.Path({str(marker)!r})
        if marker.exists():
            time.sleep(60)
        go = pathlib.Path("go")
        while not go.exists():
            time.sleep(0.02)
        marker.write_text("x")
        sys.exit(1)
    """)
    herd.write(
        watched(
            repo,
            command=agent,
            extra=f'verify = {verify}\nrestart_from = "verified"\nrestart_delay = 0',
        )
    )
    client = herd.start()
    good = git(repo, "rev-parse", "HEAD").strip()
    wait_until(
        lambda: (c := herd.status("api")["checkpoint"]) and c["verified"] is True, timeout_s=30
    )
    client.call("start", name="api")
    git(repo, "rm", "-q", "ok.txt")
    git(repo, "commit", "-q", "-m", "break it")
    bad = git(repo, "rev-parse", "HEAD").strip()
    wait_until(
        lambda: (c := herd.status("api")["checkpoint"])["sha"] == bad and c["verified"] is False,
        timeout_s=30,
    )
    (repo / "go").write_text("crash now")
    wait_until(lambda: herd.events("api", "worktree-reset"), timeout_s=30)
    assert herd.events("api", "worktree-reset")[0]["data"]["sha"] == good
    assert git(repo, "rev-parse", "HEAD").strip() == good
    client.call("stop", name="api", socket_timeout_s=None)


def test_until_done_runs_one_fresh_session_per_feature_until_the_plan_passes(
    herd: Herd,
) -> None:
    repo = sim_repo(herd.root / "repo", features=3)
    agent = json.dumps([*SIMAGENT, "--delay", "0", "--one-per-run"])
    herd.write(
        watched(
            repo, command=agent, extra='restart = "until-done"\nrestart_delay = 0\nagent = "claude"'
        )
    )
    herd.start().call("start", name="api")
    status = herd.wait_state("api", "completed", timeout_s=30)
    assert status["handle"] == "api/1" and status["run"] == 3
    assert status["reason"] is None and status["plan"]["passing"] == 3
    assert "every plan item passes" in herd.events("api", "completed")[0]["message"]


def test_until_done_stops_a_loop_that_passes_nothing_new(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=2)
    herd.write(
        watched(
            repo,
            command=script('print("did nothing")'),
            extra='restart = "until-done"\nrestart_delay = 0',
        )
    )
    herd.start().call("start", name="api")
    status = herd.wait_state("api", "failed", timeout_s=30)
    assert status["reason"] == "no-progress"
    assert len(herd.events("api", "early-exit")) == 3


def test_the_report_says_what_changed_passed_remains_and_what_to_do(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=3)
    agent = json.dumps([*SIMAGENT, "--delay", "0", "--crash-at", "2", "--crash-once"])
    resume = json.dumps([*SIMAGENT, "--delay", "0", "--resume", "{session_id}"])
    verify = json.dumps([PY, "-c", "print('ok')"])
    herd.write(
        watched(
            repo,
            command=agent,
            extra=f'agent = "claude"\nresume = {resume}\nverify = {verify}\nrestart_delay = 0',
        )
    )
    herd.start().call("start", name="api")
    herd.wait_state("api", "completed", timeout_s=30)
    wait_until(lambda: (herd.root / ".herd/reports/api.md").exists(), what="the report file")
    wait_until(lambda: herd.status("api")["checkpoint"]["verified"] is True, timeout_s=30)
    result = herd.cli("report", "api", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["passed"]["plan_passing"] == 3 and report["passed"]["plan_total"] == 3
    assert report["remains"]["items_failing"] == []
    assert report["incidents"]["rescued"][0]["ref"] == "refs/herd/api/rescue/1"
    assert len(report["incidents"]["crashes"]) == 1
    assert report["changed"]["diffstat"]["files"] > 0
    assert report["usage"]["cost_usd"] > 0
    status = herd.status("api")
    assert status["usage"]["total_tokens"] == report["usage"]["total_tokens"], (
        "the task's usage adds every run (each run is its own process)"
    )
    assert status["usage"]["cost_usd"] == pytest.approx(report["usage"]["cost_usd"])
    markdown = herd.cli("report", "api").stdout
    for section in ("What changed", "What passed", "What remains", "Incidents", "Next steps"):
        assert section in markdown, section
    assert "refs/herd/api/rescue/1" in markdown


def test_approve_adopts_the_changed_plan_as_the_new_baseline(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=3)
    herd.write(watched(repo))
    herd.start()
    wait_until(lambda: herd.status("api")["plan"], what="the baseline")
    plan = json.loads((repo / "feature_list.json").read_text())
    plan.pop()
    (repo / "feature_list.json").write_text(json.dumps(plan))
    wait_until(lambda: herd.status("api")["plan"]["changed_items"])
    result = herd.cli("approve", "api")
    assert result.returncode == 0 and "plan approved (0/2 passing)" in result.stdout
    assert herd.status("api")["plan"] == {"passing": 0, "total": 2, "changed_items": []}
    assert herd.events("api", "plan-approved")


def _git_children() -> list[psutil.Process]:
    """`git` processes started by this test process (the daemon runs in it)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name() == "git" and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.Error:
            continue
    return found


def test_many_commits_leave_no_git_process_behind(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    herd.write(watched(repo))
    herd.start()
    wait_until(lambda: herd.status("api")["checkpoint"], what="the first checkpoint")
    for number in range(20):
        (repo / f"f{number}.txt").write_text(f"{number}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"step {number}")
    head = git(repo, "rev-parse", "HEAD").strip()
    wait_until(lambda: herd.status("api")["checkpoint"]["sha"] == head)
    assert len(herd.events("api", "checkpoint")) == 21
    wait_until(lambda: _git_children() == [], what="no git process left (GitPython cat-file)")


def test_a_linked_worktree_session_sees_its_own_commits(herd: Herd) -> None:
    main = make_repo(herd.root / "main")
    linked = herd.root / "linked"
    git(main, "worktree", "add", "-q", "-b", "feature", str(linked))
    (linked / "claude-progress.txt").write_text("## Session 1\n- set up\n")
    herd.write(watched(linked))
    herd.start()
    wait_until(lambda: (c := herd.status("api")["checkpoint"]) and c["subject"] == "initial")
    (linked / "work.txt").write_text("done\n")
    git(linked, "add", "work.txt")
    git(linked, "commit", "-q", "-m", "work in the linked worktree")
    status = wait_until(
        lambda: (s := herd.status("api"))["checkpoint"]["subject"].startswith("work in") and s
    )
    assert status["checkpoint"]["sha"] == git(linked, "rev-parse", "HEAD").strip()
    git(main, "commit", "-q", "--allow-empty", "-m", "on main, not this session's branch")
    assert herd.status("api")["checkpoint"]["subject"].startswith("work in")


def test_logs_progress_prints_the_progress_file(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    (repo / "claude-progress.txt").write_text("## Session 1\n- \x1b[31mdid\x1b[0m a thing\n")
    herd.write(watched(repo))
    herd.start()
    result = herd.cli("logs", "api", "--progress")
    assert result.returncode == 0 and "did" in result.stdout


def test_reject_writes_the_baseline_back_and_keeps_progress(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=3)
    herd.write(watched(repo))
    herd.start()
    wait_until(lambda: herd.status("api")["plan"], what="the baseline")
    original = json.loads((repo / "feature_list.json").read_text())
    plan = json.loads((repo / "feature_list.json").read_text())
    plan[0]["passes"] = True  # progress, kept
    plan[1]["description"] = "something easier"  # drift, undone
    plan.pop()  # drift, undone
    (repo / "feature_list.json").write_text(json.dumps(plan))
    wait_until(lambda: herd.status("api")["plan"]["changed_items"])
    result = herd.cli("reject", "api")
    assert result.returncode == 0 and "plan restored (1/3 passing)" in result.stdout
    restored = json.loads((repo / "feature_list.json").read_text())
    assert [i["description"] for i in restored] == [i["description"] for i in original]
    assert [i["passes"] for i in restored] == [True, False, False]
    assert herd.status("api")["plan"] == {"passing": 1, "total": 3, "changed_items": []}
    assert herd.events("api", "plan-rejected")
    again = herd.cli("reject", "api")
    assert again.returncode == 2 and "matches its baseline" in again.stderr


def test_a_commit_outside_scope_raises_a_warning(herd: Herd) -> None:
    repo = sim_repo(herd.root / "repo", features=2)
    herd.write(watched(repo, extra='scope = ["src/**", "tests/**"]'))
    herd.start()
    wait_until(lambda: herd.status("api")["checkpoint"], what="the first checkpoint")
    (repo / "src").mkdir(exist_ok=True)
    (repo / "src" / "ok.py").write_text("x = 1\n")
    (repo / "claude-progress.txt").write_text("## Session 9\n- did a thing\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "in scope")
    (repo / "infra.tf").write_text("resource {}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "rewrites the infrastructure")
    warned = wait_until(lambda: herd.events("api", "out-of-scope"))
    assert len(warned) == 1 and warned[0]["data"]["files"] == ["infra.tf"]
    assert any(w["kind"] == "out-of-scope" for w in herd.status("api")["warnings"])
