"""Agents' exits are learned through pidfds on the loop that started them: no thread per agent,
any number of loops, and only our own children are reaped."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import pytest

from agentherd.supervisor.process import childwatch

PAUSE = "import time; time.sleep(0.5); "
"""Children live while the threads are counted."""

pytestmark = pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="3.12 watches children through pidfds by itself"
)


async def run_children(count: int) -> tuple[list[int], int]:
    """Start `count` children that exit with their index; their codes and the peak thread count."""
    children = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", f"{PAUSE}raise SystemExit({i})")
        for i in range(count)
    ]
    peak = threading.active_count()
    return [await child.wait() for child in children], peak


def test_children_on_two_loops_report_their_exit_codes_without_a_thread_each() -> None:
    assert childwatch.use_pidfd_watcher()
    before = threading.active_count()
    codes, peak = asyncio.run(run_children(6))
    assert codes == list(range(6))
    assert peak - before < 6, "a thread per child"
    results: list[list[int]] = []
    other = threading.Thread(target=lambda: results.append(asyncio.run(run_children(3))[0]))
    other.start()
    other.join(60)
    assert results == [[0, 1, 2]]


def test_a_child_that_is_not_ours_is_never_reaped() -> None:
    assert childwatch.use_pidfd_watcher()
    bystander = subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"])
    codes, _ = asyncio.run(run_children(2))
    assert codes == [0, 1]
    assert bystander.wait(30) == 7  # its status was left for its own parent to read
