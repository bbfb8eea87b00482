"""The shared process scan: one scan serves every run that asked before it began, and a run
finds only its own processes in it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from agentherd.supervisor.process import procs, proctable, runid
from agentherd.supervisor.process.runid import RunIdentity

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def spawn(tag: str | None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != runid.TAG_VAR}
    if tag is not None:
        env[runid.TAG_VAR] = tag
    return subprocess.Popen(SLEEPER, env=env, start_new_session=True)


def test_callers_that_asked_before_a_scan_began_share_it() -> None:
    scans = proctable.SharedScans()
    asked_at = time.monotonic()
    first = scans.table()
    assert scans.table(not_before=asked_at) is first
    assert scans.scans == 1
    assert scans.table() is not first  # asking now needs a scan begun now
    assert scans.scans == 2


@pytest.mark.pidns
def test_a_run_finds_its_tagged_processes_and_no_bystander() -> None:
    tag = f"herd-test-{os.getpid()}-{time.monotonic_ns()}"
    ours, bystander = spawn(tag), spawn(None)
    try:
        deadline = time.monotonic() + 10
        while True:  # the environment is readable once the child has exec'd
            found = procs.run_processes(RunIdentity(None, None, None, tag))
            if found or time.monotonic() > deadline:
                break
        assert [p.pid for p in found] == [ours.pid]
        leader = procs.find_leader(tag)
        assert leader is not None and leader.pid == ours.pid
    finally:
        for child in (ours, bystander):
            child.kill()
            child.wait()
