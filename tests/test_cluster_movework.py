"""Work moves with the session: with `[cluster] checkpoint_remote`, a killed host's commits are
on the remote, and the host that takes the session over resets to them before it runs it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from clusterhosts import HostProc, cluster_toml, fleet_of
from conftest import script, wait_until
from pgcluster import require_cluster_extra

require_cluster_extra()


pytestmark = [pytest.mark.cluster, pytest.mark.pidns, pytest.mark.timeout(180)]
STEPS = 5
"""Commits the simulated agent makes in all, one per step."""
KILL_AFTER = 2
"""Steps done on the first host before it dies."""
IDENTITY = ["-c", "user.name=agent", "-c", "user.email=agent@example.com"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *IDENTITY, *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def stepper(marks: Path, hold_on: str | None) -> str:
    """A simulated agent: one commit per step until STEPS, where it stands read from its own
    progress file (a fresh run after a move starts from it); on host `hold_on` it stops
    after KILL_AFTER steps and waits (to be killed with its host)."""
    return script(f"""
        import os, subprocess, time
        host = os.path.basename(os.path.dirname(os.getcwd()))
        ident = ["-c", "user.name=agent", "-c", "user.email=agent@example.com"]
        def mark(text):
            with open({str(marks)!r}, "a") as f:
                f.write(text + "\\n")
        mark(f"start {{host}}")
        try:
            done = len(open("progress.txt").read().splitlines())
        except FileNotFoundError:
            done = 0
        for step in range(done + 1, {STEPS} + 1):
            with open("progress.txt", "a") as f:
                f.write(f"step {{step}} on {{host}}\\n")
            with open(f"step-{{step}}.txt", "w") as f:
                f.write(host)
            subprocess.run(["git", "add", "-A"], check=True)
            subprocess.run(["git", *ident, "commit", "-q", "-m", f"step {{step}}"], check=True)
            mark(f"commit {{host}} {{step}}")
            if host == {hold_on!r} and step == {KILL_AFTER}:
                time.sleep(3600)
        mark(f"end {{host}}")
    """)


def remote_count(bare: Path, ref: str) -> int:
    """Commits behind `ref` in the bare remote (0 when it does not exist)."""
    found = subprocess.run(
        ["git", "rev-list", "--count", ref], cwd=bare, capture_output=True, text=True
    )
    return int(found.stdout) if found.returncode == 0 else 0


def remote_refs(bare: Path) -> list[str]:
    out = git(bare, "for-each-ref", "--format=%(refname)")
    return out.splitlines() if out else []


def make_repo(folder: Path) -> None:
    folder.mkdir()
    git(folder, "init", "-q")
    (folder / "README").write_text("work\n")
    git(folder, "add", "README")
    git(folder, "commit", "-q", "-m", "start")


def test_a_killed_hosts_commits_all_reach_the_host_that_finishes_the_session(
    tmp_path: Path,
    hosts: list[HostProc],
    pg_url: str,
) -> None:
    marks = tmp_path / "marks.txt"
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    toml = cluster_toml(
        f"""
        [[session]]
        name = "job"
        command = {stepper(marks, hold_on="h1")}
        cwd = "work"
        restart = "never"
        autostart = false
        """,
        checkpoint_remote=str(bare),
    )
    h1 = HostProc(tmp_path, "h1", toml, pg_url)
    h2 = HostProc(tmp_path, "h2", toml, pg_url)
    make_repo(h1.root / "work")
    (h2.root / "work").mkdir()  # empty: made a repository from the remote
    hosts += [h1, h2]
    for host in hosts:
        host.start()
    fleet = fleet_of(h1, pg_url)
    try:
        handle = fleet.start("job").handle  # both idle: the tie goes to h1
        wait_until(
            lambda: remote_count(bare, "refs/herd/job/last") == 1 + KILL_AFTER,
            60,
            "h1's commits on the remote",
        )
        on_h1 = git(h1.root / "work", "rev-list", "HEAD").splitlines()
        assert len(on_h1) == 1 + KILL_AFTER
        h1.kill()  # daemon and agent, as a machine's death
        waited = fleet.wait(handle, timeout_s=120)
        assert (waited.state, waited.exit) == ("completed", 0), h2.log()
        assert fleet.task_host(handle) == "h2"
    finally:
        fleet.close()
    on_h2 = git(h2.root / "work", "rev-list", "HEAD").splitlines()
    assert set(on_h1) <= set(on_h2), "a commit of h1 is missing on h2"
    assert len(on_h2) == 1 + STEPS
    lines = marks.read_text().splitlines()
    expected = [f"commit h1 {s}" for s in range(1, KILL_AFTER + 1)]
    expected += [f"commit h2 {s}" for s in range(KILL_AFTER + 1, STEPS + 1)]
    assert [x for x in lines if x.startswith("commit")] == expected, lines  # each step once
    assert [x for x in lines if x.startswith("start")] == ["start h1", "start h2"], lines
    progress = (h2.root / "work" / "progress.txt").read_text().splitlines()
    assert progress[:KILL_AFTER] == [f"step {s} on h1" for s in range(1, KILL_AFTER + 1)]
    # h2 pushes its own checkpoints on: the remote ends at the session's last commit.
    # Within seconds, not the minute of a reconcile pass: the run's end records its last
    # commits itself (the moved session's new repository was watched by no one yet).
    wait_until(lambda: remote_count(bare, "refs/herd/job/last") == 1 + STEPS, 30, "h2's push")
    assert git(bare, "rev-parse", "refs/herd/job/last") == on_h2[0]


def test_without_a_checkpoint_remote_nothing_is_pushed(
    tmp_path: Path,
    hosts: list[HostProc],
    pg_url: str,
) -> None:
    marks = tmp_path / "marks.txt"
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    toml = cluster_toml(f"""
        [[session]]
        name = "job"
        command = {stepper(marks, hold_on=None)}
        cwd = "work"
        restart = "never"
        autostart = false
    """)
    h1 = HostProc(tmp_path, "h1", toml, pg_url)
    make_repo(h1.root / "work")
    git(h1.root / "work", "remote", "add", "origin", str(bare))  # a remote, but not named
    hosts.append(h1.start())
    fleet = fleet_of(h1, pg_url)
    try:
        waited = fleet.wait(fleet.start("job").handle, timeout_s=60)
        assert (waited.state, waited.exit) == ("completed", 0), h1.log()
    finally:
        fleet.close()
    status = h1.client.call("status", target="job")
    assert status["checkpoint"]["sha"] == git(h1.root / "work", "rev-parse", "HEAD")
    assert remote_refs(bare) == []


def crasher(marks: Path) -> str:
    """Run 1 commits, leaves an untracked file and crashes; run 2 exits cleanly."""
    return script(f"""
        import os, subprocess, sys
        name = os.environ["HERD_SESSION"]
        ran = open({str(marks)!r}).read().split() if os.path.exists({str(marks)!r}) else []
        with open({str(marks)!r}, "a") as f:
            f.write(name + "\\n")
        if name in ran:
            sys.exit(0)
        with open("work.txt", "w") as f:
            f.write("committed")
        subprocess.run(["git", "add", "work.txt"], check=True)
        ident = ["-c", "user.name=agent", "-c", "user.email=agent@example.com"]
        subprocess.run(["git", *ident, "commit", "-q", "-m", "work"], check=True)
        with open("secret.txt", "w") as f:
            f.write("token-" + name)
        sys.exit(1)
    """)


def test_rescue_refs_are_pushed_and_a_failed_push_is_only_a_warning(
    tmp_path: Path,
    hosts: list[HostProc],
    pg_url: str,
) -> None:
    marks = tmp_path / "marks.txt"
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    blocks = "".join(
        f"""
        [[session]]
        name = "{name}"
        command = {crasher(marks)}
        cwd = "{name}"
        restart = "on-failure"
        restart_delay = "0s"
        autostart = false
        """
        for name in ("kept", "lost")
    )
    h1 = HostProc(tmp_path, "h1", cluster_toml(blocks, checkpoint_remote="herd"), pg_url)
    for name, url in (("kept", str(bare)), ("lost", str(tmp_path / "no-such-remote.git"))):
        make_repo(h1.root / name)
        git(h1.root / name, "remote", "add", "herd", url)  # the name, each repo its own
    hosts.append(h1.start())
    fleet = fleet_of(h1, pg_url)
    try:
        for name in ("kept", "lost"):
            waited = fleet.wait(fleet.start(name).handle, timeout_s=60)
            assert (waited.state, waited.exit) == ("completed", 0), h1.log()
    finally:
        fleet.close()
    rescue = "refs/herd/kept/hosts/h1/rescue/1"
    wait_until(lambda: rescue in remote_refs(bare), 30, "the rescue ref's push")
    assert git(bare, "show", f"{rescue}:secret.txt") == "token-kept"  # untracked files go too
    local_head = git(h1.root / "kept", "rev-parse", "HEAD")
    wait_until(lambda: "refs/herd/kept/last" in remote_refs(bare), 30, "the checkpoint's push")
    assert git(bare, "rev-parse", "refs/herd/kept/last") == local_head
    assert not any(ref.startswith("refs/herd/lost/") for ref in remote_refs(bare))
    wait_until(lambda: "checkpoint push failed" in h1.log(), 30, "the failed push's warning")
