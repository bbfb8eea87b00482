"""Files an agent controls (plan, progress, its run log) cannot hang or bloat the daemon."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import Herd, make_repo, script, wait_until

MEMORY_HEADROOM_BYTES = 1536 << 20
"""The test process may grow this much (address space) before allocations fail: a daemon
that read /dev/zero to its end would otherwise take the machine's memory."""

RSS_GROWTH_MAX_BYTES = 200 << 20
"""Reading hostile files must not grow the daemon by more than this."""


@pytest.fixture(autouse=True)
def memory_limit() -> Iterator[None]:
    """Cap this process's address space for the test, then give the old limit back."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = psutil.Process().memory_info().vms + MEMORY_HEADROOM_BYTES
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def release_fifo(path: Path) -> None:
    """Let a reader blocked in open() of this FIFO go (only matters for code that blocks)."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


SLEEPER = script("""
    import time
    print("working", flush=True)
    time.sleep(60)
""")


def session_toml(repo: Path, command: str = '["true"]', autostart: str = "false") -> str:
    return f"""
[[session]]
name = "a"
cwd = "{repo}"
command = {command}
autostart = {autostart}
plan = "feature_list.json"
progress = "progress.md"
stop_grace = "2s"
"""


def down_returns(herd: Herd) -> None:
    """`herd down` answers and the daemon's thread ends."""
    thread = herd.thread
    assert thread is not None
    herd.client.call("down", socket_timeout_s=30)
    thread.join(30)
    assert not thread.is_alive(), "the daemon did not exit after `down`"
    herd.thread = None


def invalid_events(herd: Herd, kind: str) -> list[str]:
    return [str(e["message"]) for e in herd.events("a", kind)]


def test_a_plan_symlinked_to_dev_zero_is_refused_without_growing_the_daemon(
    herd: Herd, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "feature_list.json").symlink_to("/dev/zero")
    rss_before = psutil.Process().memory_info().rss
    herd.write(session_toml(repo)).start()
    messages = wait_until(lambda: invalid_events(herd, "plan-invalid"), what="plan-invalid")
    assert messages == [
        "feature_list.json: is a character device, not a regular file; make it a plain file; "
        "keeping the last good plan"
    ]
    assert psutil.Process().memory_info().rss - rss_before < RSS_GROWTH_MAX_BYTES
    assert herd.status("a")["plan"]["error"] == messages[0]
    down_returns(herd)


def test_a_plan_that_is_a_fifo_blocks_nothing_and_down_still_works(
    herd: Herd, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    fifo = repo / "feature_list.json"
    os.mkfifo(fifo)
    try:
        herd.write(session_toml(repo)).start()
        messages = wait_until(lambda: invalid_events(herd, "plan-invalid"), what="plan-invalid")
        assert "is a FIFO, not a regular file" in messages[0]
        down_returns(herd)
    finally:
        release_fifo(fifo)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_hostile_progress_file_is_refused(herd: Herd, tmp_path: Path, kind: str) -> None:
    repo = make_repo(tmp_path / "repo")
    progress = repo / "progress.md"
    if kind == "fifo":
        os.mkfifo(progress)
    else:
        progress.symlink_to("/dev/zero")
    rss_before = psutil.Process().memory_info().rss
    try:
        herd.write(session_toml(repo)).start()
        messages = wait_until(
            lambda: invalid_events(herd, "progress-invalid"), what="progress-invalid"
        )
        what = "a FIFO" if kind == "fifo" else "a character device"
        assert messages == [
            f"progress.md: is {what}, not a regular file; make it a plain file; "
            "keeping the last entries"
        ]
        assert psutil.Process().memory_info().rss - rss_before < RSS_GROWTH_MAX_BYTES
        down_returns(herd)
    finally:
        release_fifo(progress)


def test_a_run_log_replaced_by_a_fifo_does_not_freeze_the_daemon(
    herd: Herd, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    client = herd.write(session_toml(repo, SLEEPER, "true")).start()
    client.call("up")
    herd.wait_state("a", "running")
    assert herd.daemon is not None
    supervisor = herd.daemon.sessions["a"]
    log = herd.root / ".herd" / "runs" / "a" / "1" / "output.log"
    wait_until(lambda: supervisor.run is not None and supervisor.run.last_line == "working")
    log.unlink()
    os.mkfifo(log)
    try:
        # The tailer looks for a replaced log once a second; 2.5 s of reconcile passes (each on
        # the event loop) prove the loop never blocked on the FIFO.
        passes = client.call("info")["reconcile_passes"]
        wait_until(
            lambda: client.call("info", socket_timeout_s=5)["reconcile_passes"] >= passes + 12,
            what="the daemon to keep working",
        )
        assert supervisor.run is not None
        assert "is a FIFO" in str(supervisor.run.tailer.refused)
        down_returns(herd)
    finally:
        release_fifo(log)


def test_a_committed_plan_over_the_bound_is_not_read_from_git(tmp_path: Path) -> None:
    from agentherd.supervisor.git import gitops

    repo = make_repo(tmp_path / "repo", {"feature_list.json": "[" + " " * 4096 + "]"})
    assert gitops.read_at(repo, "HEAD", "feature_list.json", 8192) is not None
    with pytest.raises(ValueError, match="over 1024"):
        gitops.read_at(repo, "HEAD", "feature_list.json", 1024)
    assert gitops.read_at(repo, "HEAD", "missing.json", 1024) is None
