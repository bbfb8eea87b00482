"""`.herd/` is private whatever the umask, and a `.herd/` herd cannot write is one `herd:` line.

Agent output (which can echo keys) lives in `.herd/`: folders 0700 and files 0600 for every
umask, while the agents keep the umask they were started under.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import HERD, PY, git, make_repo, wait_until

AGENT = """
import os, subprocess, sys
with open("agent-made.txt", "w") as out:
    out.write(oct(os.umask(0)))
subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@a", "add", "agent-made.txt"])
subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qm", "work"])
print("sk-secret-key-in-the-output", flush=True)
"""
"""An agent that says what umask it got, makes a file and a commit, and prints a 'key'."""


def under_umask(mask: int, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the real `herd` with umask `mask` (and so its daemon and, through it, the agents)."""
    return subprocess.run(
        ["/bin/sh", "-c", f'umask {mask:03o}; exec "$0" "$@"', HERD, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )


def loose_entries(state_dir: Path) -> list[str]:
    """Everything in `state_dir` (itself included) that is not 0700 (folders) or 0600 (files)."""
    found = []
    for path in [state_dir, *state_dir.rglob("*")]:
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue  # a -wal or a scratch worktree going away while we look
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISDIR(info.st_mode):
            wanted = 0o700
        elif stat.S_ISREG(info.st_mode):
            wanted = 0o600
        else:
            continue
        if mode != wanted:
            found.append(f"{path.relative_to(state_dir.parent)} {mode:04o}")
    return found


@pytest.mark.parametrize("mask", [0o000, 0o022], ids=["umask-000", "umask-022"])
def test_the_state_folder_is_private_whatever_the_umask(tmp_path: Path, mask: int) -> None:
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "herd.toml").write_text(f"""
[[session]]
name = "api"
cwd = "repo"
command = {json.dumps([PY, "-c", AGENT])}
restart = "never"
verify = {json.dumps([PY, "-c", "print('checked')"])}
""")
    state_dir = tmp_path / ".herd"
    up = under_umask(mask, tmp_path, "up", "--no-tui")
    try:
        assert up.returncode == 0, up.stderr
        wait_until(
            lambda: (
                (state_dir / "reports" / "api.json").exists()
                and json.loads(under_umask(mask, tmp_path, "status", "api", "--json").stdout)[
                    "state"
                ]
                in ("completed", "failed")
            ),
            what="the task to end and its report to be written",
        )
        assert (repo / "agent-made.txt").read_text() == oct(mask), "the agent's umask is its own"
        made = stat.S_IMODE((repo / "agent-made.txt").stat().st_mode)
        assert made == 0o666 & ~mask, f"the agent's file is {made:04o}"
        assert git(repo, "log", "-1", "--format=%s").strip() == "work"
        for name in ("state.db", "state.db-wal", "state.db-shm", "daemon.log"):
            assert (state_dir / name).exists(), name
        assert (state_dir / "runs" / "api" / "1" / "output.log").exists()
        assert (state_dir / "runs" / "api" / "1" / "exit_status").exists()
        assert loose_entries(state_dir) == [], "while the daemon runs"
    finally:
        down = under_umask(mask, tmp_path, "down")
    assert down.returncode == 0, down.stderr
    assert loose_entries(state_dir) == [], "after `herd down`"


def test_an_older_herds_loose_state_folder_is_made_private(tmp_path: Path) -> None:
    """A `.herd/` left 0755 with 0644 files by an earlier herd is tightened at the next start."""
    (tmp_path / "herd.toml").write_text('[[session]]\nname = "api"\ncommand = ["true"]\n')
    state_dir = tmp_path / ".herd"
    (state_dir / "runs" / "api" / "1").mkdir(parents=True)
    for name in ("daemon.log", "state.db"):
        (state_dir / name).write_text("")
        (state_dir / name).chmod(0o644)
    state_dir.chmod(0o755)
    up = under_umask(0o022, tmp_path, "up", "--no-tui")
    try:
        assert up.returncode == 0, up.stderr
        assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
        for name in ("daemon.log", "state.db"):
            assert stat.S_IMODE((state_dir / name).stat().st_mode) == 0o600, name
    finally:
        down = under_umask(0o022, tmp_path, "down")
    assert down.returncode == 0, down.stderr


# ----- a state folder herd cannot write ---------------------------------------------------------


def read_only_runner() -> list[str] | None:
    """A prefix that runs a shell command with `.herd` bind-mounted read-only (a private mount
    namespace: the machine's mounts are untouched), or None where this machine cannot."""
    if shutil.which("unshare") is None:
        return None
    prefix = ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    probe = subprocess.run([*prefix, "true"], capture_output=True)
    return prefix if probe.returncode == 0 else None


RO_PREFIX = read_only_runner()


@pytest.mark.skipif(RO_PREFIX is None, reason="no private mount namespace on this machine")
@pytest.mark.parametrize(
    "verb",
    [["up", "--no-tui"], ["up"], ["daemon"]],
    ids=["up-no-tui", "up", "daemon"],
)
def test_a_read_only_state_folder_is_one_line_and_exit_2(tmp_path: Path, verb: list[str]) -> None:
    (tmp_path / "herd.toml").write_text('[[session]]\nname = "api"\ncommand = ["true"]\n')
    state_dir = tmp_path / ".herd"
    state_dir.mkdir()
    assert RO_PREFIX is not None
    inner = 'mount --bind .herd .herd && mount -o remount,ro,bind .herd && exec "$0" "$@"'
    done = subprocess.run(
        [*RO_PREFIX, "/bin/sh", "-c", inner, HERD, *verb],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("herd: "), done.stderr
    assert "Traceback" not in done.stderr
    assert str(state_dir) in lines[0] and "read-only" in lines[0].lower(), lines[0]
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert not any(state_dir.iterdir()), "nothing was written"
