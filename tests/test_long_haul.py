"""Under the real daemon, for a while: a session that crashes every second keeps the daemon's
memory, open files and watches flat; hundreds of sessions of `sleep` start, answer and stop.
Long variants (ten minutes, 500 sessions) are marked `slow`."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from conftest import Herd, make_repo, pid_gone, wait_until

MIB = 1 << 20


@dataclass
class Sample:
    """The daemon's resources at one moment of a crash loop."""

    run: int
    rss_bytes: int
    fds: int
    watches: int


def daemon_pid(herd: Herd) -> int:
    return int((herd.root / ".herd" / "daemon.lock").read_text())


def inotify_watches(pid: int) -> int:
    """Watches the process's inotify descriptors hold (one `inotify wd:` line each)."""
    count = 0
    for fdinfo in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            count += fdinfo.read_text().count("inotify wd:")
        except OSError:
            continue  # closed meanwhile
    return count


def session_run(herd: Herd, name: str) -> int:
    found = json.loads(herd.cli("status", name, "--json").stdout)
    return int(found.get("run") or 0)


def sample(herd: Herd, pid: int, run: int) -> Sample:
    """The daemon's figures over a few crashes' worth of looks: its peak memory and watches,
    and the fewest open files it held (a run's files and a rescue's git pipes come and go with
    each crash, more of them at once on a loaded machine: a leak raises the floor; the watches
    drop to none while the watch restarts for a new run's folder: a leak raises the peak)."""
    process = psutil.Process(pid)
    rss, fds, watches = 0, 1 << 30, 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        rss = max(rss, process.memory_info().rss)
        fds = min(fds, process.num_fds())
        watches = max(watches, inotify_watches(pid))
        time.sleep(0.05)
    return Sample(run, rss, fds, watches)


def crash_loop(
    herd: Herd, tmp_path: Path, duration_s: float, min_crashes: int
) -> tuple[Sample, Sample]:
    """A session that crashes every second for `duration_s` and at least `min_crashes` times,
    under `herd up`: the daemon's figures after a few crashes and at the end."""
    repo = make_repo(tmp_path / "repo")
    herd.write(f"""
        [[session]]
        name = "crashy"
        cwd = "{repo}"
        command = ["sh", "-c", "echo working; sleep 1; exit 3"]
        restart = "on-failure"
        restart_delay = 0
        max_crashes = 1000
        crash_window = "10s"
    """)
    up = herd.cli("up", "--no-tui")
    assert up.returncode == 0, up.stderr
    pid = daemon_pid(herd)
    try:
        wait_until(lambda: session_run(herd, "crashy") >= 5, timeout_s=60, what="five crashes")
        first = sample(herd, pid, session_run(herd, "crashy"))
        started = time.monotonic()
        while time.monotonic() - started < duration_s or session_run(herd, "crashy") < (
            first.run + min_crashes
        ):  # a loaded machine restarts slower: the crashes are counted, not only the time
            assert time.monotonic() - started < duration_s + 120, "the crashes stopped coming"
            time.sleep(1)
            assert psutil.pid_exists(pid), "the daemon died"
        last = sample(herd, pid, session_run(herd, "crashy"))
        status = json.loads(herd.cli("status", "crashy", "--json").stdout)
        assert status["state"] in ("running", "backoff", "starting"), status
    finally:
        down = herd.cli("down", timeout_s=120)
    assert down.returncode == 0, down.stdout + down.stderr
    print(f"crash loop: {first} -> {last}")  # the figures, in the pidns report (-rP)
    return first, last


def assert_flat(first: Sample, last: Sample, rss_growth_bytes: int) -> None:
    crashes = last.run - first.run
    assert last.fds <= first.fds + 2, f"open files grew over {crashes} crashes: {first} {last}"
    assert last.watches <= first.watches + 2, f"watches grew over {crashes} crashes"
    growth = last.rss_bytes - first.rss_bytes
    assert growth < rss_growth_bytes, f"RSS grew {growth / MIB:.1f} MiB over {crashes} crashes"


@pytest.mark.pidns
@pytest.mark.timeout(180)
def test_a_session_crashing_every_second_keeps_the_daemon_flat(herd: Herd, tmp_path: Path) -> None:
    first, last = crash_loop(herd, tmp_path, duration_s=20, min_crashes=10)
    assert last.run - first.run >= 10, (first, last)
    assert_flat(first, last, rss_growth_bytes=8 * MIB)


@pytest.mark.slow
@pytest.mark.pidns
@pytest.mark.timeout(900)
def test_a_session_crashing_every_second_for_ten_minutes_keeps_the_daemon_flat(
    herd: Herd, tmp_path: Path
) -> None:
    first, last = crash_loop(herd, tmp_path, duration_s=600, min_crashes=200)
    assert last.run - first.run >= 200, (first, last)
    assert_flat(first, last, rss_growth_bytes=16 * MIB)


def sleepers(herd: Herd, count: int) -> dict[str, float]:
    """`count` sessions of `sleep` under `herd up`: all run, `herd ls` answers, `herd down`
    ends them all and the daemon (exit 0). Returns the figures (seconds, MiB)."""
    herd.write(
        "".join(
            f'[[session]]\nname = "s{i}"\ncommand = ["sleep", "3600"]\ncwd = "s{i}"\n\n'
            for i in range(count)
        )
    )
    for i in range(count):
        (herd.root / f"s{i}").mkdir()
    started = time.monotonic()
    up = herd.cli("up", "--no-tui", timeout_s=300)
    figures = {"up_s": time.monotonic() - started}
    assert up.returncode == 0, up.stderr
    assert f"{count} of {count} session(s) active" in up.stdout + up.stderr
    pid = daemon_pid(herd)
    try:

        def running() -> bool:
            statuses = json.loads(herd.cli("ls", "--json").stdout)
            return sum(1 for s in statuses if s["state"] == "running" and s["pid"]) == count

        wait_until(running, timeout_s=300, what=f"{count} sessions running", poll_s=0.5)
        figures["all_running_s"] = time.monotonic() - started
        asked = time.monotonic()
        listed = herd.cli("ls", "--json")
        figures["ls_s"] = time.monotonic() - asked
        assert listed.returncode == 0 and len(json.loads(listed.stdout)) == count
        asked = time.monotonic()
        stopped = herd.cli("stop", "s0")
        figures["stop_one_s"] = time.monotonic() - asked
        assert stopped.returncode == 0, stopped.stderr
        daemon = psutil.Process(pid)
        figures["daemon_rss_mib"] = daemon.memory_info().rss / MIB
        figures["daemon_fds"] = daemon.num_fds()
        sleeping = [p for p in psutil.process_iter(["name"]) if p.info["name"] == "sleep"]
        assert len(sleeping) == count - 1
    finally:
        asked = time.monotonic()
        down = herd.cli("down", timeout_s=300)
        figures["down_s"] = time.monotonic() - asked
    assert down.returncode == 0, down.stdout + down.stderr
    wait_until(lambda: pid_gone(pid))
    left = [p for p in psutil.process_iter(["name"]) if p.info["name"] == "sleep"]
    assert not [p for p in left if p.status() != psutil.STATUS_ZOMBIE], "a sleep outlived down"
    print(f"{count} sleepers: {figures}")  # the figures, in the pidns report (-rP)
    return figures


@pytest.mark.pidns
@pytest.mark.timeout(300)
def test_fifty_sessions_of_sleep_start_answer_and_stop(herd: Herd) -> None:
    figures = sleepers(herd, 50)
    assert figures["ls_s"] < 10 and figures["stop_one_s"] < 20, figures


@pytest.mark.slow
@pytest.mark.pidns
@pytest.mark.timeout(900)
def test_five_hundred_sessions_of_sleep_start_answer_and_stop(herd: Herd) -> None:
    figures = sleepers(herd, 500)
    assert figures["ls_s"] < 10 and figures["stop_one_s"] < 20, figures
    assert figures["daemon_rss_mib"] < 300, figures
