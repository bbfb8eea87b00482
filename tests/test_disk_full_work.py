"""A full disk during a state write, a checkpoint and a crash's rescue, then space returns:
nothing is lost, the daemon answers throughout (issue 22, not yet tried)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Herd, git, make_repo, script, wait_until

BIG_BYTES = 3 << 20
"""A committed file this big: a verification's checkout needs more room than a step leaves."""

ANSWER_WITHIN_S = 5.0
"""Every request to the daemon is answered this fast, full disk or not (generous: CI is slow)."""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs (root in a private mount namespace: the PID-namespace harness gives it),
    with an empty `filler` file."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)])
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        (mount / "filler").touch()
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def free_bytes(disk: Path) -> int:
    info = os.statvfs(disk)
    return info.f_bavail * info.f_frsize


def fill(disk: Path, leave_bytes: int) -> Path:
    """Take all the disk's room but `leave_bytes` (0: a full disk) with the `filler` file (made
    beforehand: on a full disk no file can be made)."""
    filler = disk / "filler"
    os.truncate(filler, 0)
    # Unbuffered: a buffered file keeps the bytes a full disk refused and raises again on close.
    with open(filler, "ab", buffering=0) as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 65536)
    os.truncate(filler, max(0, filler.stat().st_size - leave_bytes))
    return filler


class Answering:
    """Asks the daemon for the status between steps: each answer must come, and come fast."""

    def __init__(self, herd: Herd) -> None:
        self.herd = herd
        self.slowest_s = 0.0
        self.asked = 0

    def status(self) -> dict[str, object]:
        began = time.monotonic()
        found = self.herd.status("api")
        self.slowest_s = max(self.slowest_s, time.monotonic() - began)
        self.asked += 1
        return found

    def until(self, predicate: object, what: str, timeout_s: float = 60) -> dict[str, object]:
        last: list[dict[str, object]] = [{}]

        def holds() -> dict[str, object] | None:
            last[0] = self.status()
            return last[0] if predicate(last[0]) else None  # type: ignore[operator]

        try:
            return wait_until(holds, timeout_s, what, poll_s=0.05)  # type: ignore[no-any-return]
        except AssertionError as exc:
            shown = {k: last[0].get(k) for k in ("state", "reason", "run", "message")}
            events = [f"{e['kind']}: {e['message']}" for e in self.herd.events("api")]
            raise AssertionError(f"{exc}; last status {shown}; events {events}") from None


@pytest.mark.pidns
@pytest.mark.timeout(240)
def test_a_full_disk_loses_no_work_and_no_state(small_disk: Path) -> None:
    repo = make_repo(small_disk / "repo", {"README.md": "hello\n", "big.dat": "b" * BIG_BYTES})
    step = small_disk / "step"
    agent = script(f"""
        import os, pathlib, subprocess, sys, time
        step = pathlib.Path({str(step)!r})
        if pathlib.Path({str(small_disk / "ran")!r}).exists():
            sys.exit(0)  # the restarted run: done
        pathlib.Path({str(small_disk / "ran")!r}).write_text("x")
        pathlib.Path("blob.bin").write_bytes(os.urandom(3 << 20))  # more than the room left
        def wait(word):
            while not (step.exists() and step.read_text() == word):
                time.sleep(0.02)
        def put(path, text):  # herd's checkout of the commit fills the disk for a while
            for _ in range(3000):
                try:
                    return pathlib.Path(path).write_text(text)
                except OSError:
                    time.sleep(0.02)
            raise SystemExit("no room for the work after the commit in 60 s")
        wait("commit")
        pathlib.Path("README.md").write_text("checkpointed\\n")
        git = ["git", "-c", "user.name=a", "-c", "user.email=a@a"]
        subprocess.run([*git, "commit", "-qam", "the agent's checkpoint"], check=True)
        put("README.md", "uncommitted after it\\n")
        put("after.txt", "new work\\n")
        put({str(small_disk / "worked")!r}, "x")
        wait("crash")
        sys.exit(3)
    """)
    herd = Herd(small_disk).write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {agent}
        verify = "true"
        restart_delay = 0
        stop_grace = "2s"
    """)
    ask = Answering(herd)
    try:
        client = herd.start()
        client.call("start", name="api")
        ask.until(lambda s: s["state"] == "running", "the run")
        wait_until(lambda: herd.events("api", "verify-passed"), 60, "the first verification")
        wait_until((repo / "blob.bin").exists, 30, "the agent's first work")

        # 1. A state write on a full disk: the pause is held in memory, and answered.
        filler = fill(small_disk, 0)
        client.call("pause", name="api")
        ask.until(lambda s: s["state"] == "paused", "paused on a full disk")
        client.call("resume", name="api")
        ask.until(lambda s: s["state"] == "running", "resumed on a full disk")

        # 2. A checkpoint with room for the commit, not for its verification's checkout. Each
        # try of that checkout fills the disk until it fails (herd removes it and tries again
        # later), so the agent's writes after its commit can meet a full disk: they are written
        # again until they fit (a loaded run timed out here once, likely so).
        os.truncate(filler, 0)
        filler = fill(small_disk, 1 << 20)  # the commit, the WAL, the logs: not a checkout
        step.write_text("commit")
        wait_until((small_disk / "worked").exists, 60, "the agent's commit and work")
        checkpoint = git(repo, "rev-parse", "HEAD").strip()
        ask.until(lambda s: (s.get("checkpoint") or {}).get("sha") == checkpoint, "the checkpoint")

        # 3. A crash whose rescue needs more room than there is (but enough for a restart);
        # nor is there room for the checkpoint's verification yet.
        os.truncate(filler, 0)
        filler = fill(small_disk, 3 << 19)
        assert free_bytes(small_disk) > 1 << 20
        step.write_text("crash")
        ask.until(lambda s: s["run"] == 2 or s["reason"] == "disk-full", "the restart's turn")

        # 4. Space returns.
        os.truncate(filler, 0)
        ask.until(lambda s: s["state"] == "completed", "the restarted run to end")
        # The changes held while the disk refused them are written now, in order.
        wait_until(
            lambda: [e for e in herd.events("api", "run-started") if e["run"] == 2],
            60,
            "the held events written",
        )
        ask.status()
        kinds = [e["kind"] for e in herd.events("api")]
        # Nothing lost: the agent's work is in the worktree, or on a rescue ref.
        saved = herd.events("api", "rescue-saved")
        where = [repo] if not saved else []
        if saved:
            ref = saved[0]["data"]["ref"]
            assert git(repo, "show", f"{ref}:README.md") == "uncommitted after it\n"
            assert git(repo, "show", f"{ref}:after.txt") == "new work\n"
        else:
            assert "rescue-failed" in kinds, "\n".join(kinds)
            assert (repo / "README.md").read_text() == "uncommitted after it\n"
            assert (repo / "after.txt").read_text() == "new work\n"
            assert (repo / "blob.bin").stat().st_size == 3 << 20
        assert where is not None
        assert git(repo, "rev-parse", "HEAD").strip() == checkpoint
        # The checkpoint a full disk kept from being verified is verified once there is room.
        wait_until(
            lambda: any(
                e["data"].get("sha") == checkpoint for e in herd.events("api", "verify-passed")
            ),
            60,
            "the checkpoint verified",
        )
        assert not [
            e for e in herd.events("api", "verify-failed") if e["data"].get("sha") == checkpoint
        ], "a checkout the disk refused is no failing checkpoint"
        seqs = [e["seq"] for e in herd.events()]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        assert ask.slowest_s < ANSWER_WITHIN_S, f"slowest answer {ask.slowest_s:.1f}s"
        print(f"{ask.asked} status requests, slowest {ask.slowest_s * 1000:.0f} ms")
        herd.down()
        with sqlite3.connect(small_disk / ".herd" / "state.db") as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        herd.down()
