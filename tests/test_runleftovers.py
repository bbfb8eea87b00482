"""The quick look for an ended run's leftovers: a tagged or grouped process is never missed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from agentherd.supervisor.process import cgroups
from agentherd.supervisor.process.runid import RunIdentity
from agentherd.supervisor.process.runleftovers import maybe_left, settle


@contextmanager
def sleeper(env: dict[str, str], new_session: bool) -> Iterator[subprocess.Popen[bytes]]:
    """A process that waits for its stdin to close; ended and reaped after the block."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        env={**os.environ, **env},
        start_new_session=new_session,
    )
    try:
        yield process
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(10)


def test_a_tagged_process_in_its_own_session_is_found_and_none_once_it_ended() -> None:
    identity = RunIdentity(999_999, 999_999, time.time(), "cafe01")
    with sleeper({"HERD_RUN_TAG": "cafe01"}, new_session=True):
        assert maybe_left(identity)
    assert not maybe_left(identity)


def test_an_empty_environment_of_a_young_process_is_a_maybe() -> None:
    """Straight after an exec the kernel shows a process's environment empty until the new
    program's is set up: the quick look cannot tell it from an untagged one, so the full scan
    decides (a tagged sleeper read that way was missed once in CI, 1 in ~1,600)."""
    identity = RunIdentity(999_999, 999_999, time.time(), "dead06")
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        env={},  # read the same way as one caught mid-exec
        start_new_session=True,
    )
    try:
        assert maybe_left(identity)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(10)


def test_a_process_in_the_runs_group_is_found() -> None:
    with sleeper({}, new_session=True) as process:
        assert maybe_left(RunIdentity(process.pid, process.pid, time.time() - 1, "feed02"))


def test_an_older_process_with_the_tag_is_not_the_runs() -> None:
    with sleeper({"HERD_RUN_TAG": "beef03"}, new_session=True):
        later = RunIdentity(999_999, 999_999, time.time() + 60, "beef03")
        assert not maybe_left(later)  # started before the run: not one of its processes


def test_without_a_known_start_the_full_scan_decides() -> None:
    assert maybe_left(RunIdentity(None, None, None, "abcd04"))


def test_settle_keeps_the_cgroup_of_a_run_that_may_have_left_a_process() -> None:
    """One worker call after a run's end: a leftover means the full scan, and its cgroup stays
    until that is done; nothing left means the cgroup is removed at once."""
    folder = cgroups.create(uuid.uuid4().hex)
    if folder is None:
        pytest.skip("this machine lets herd make no cgroup (see supervisor/process/cgroups.py)")
    try:
        with sleeper({"HERD_RUN_TAG": "face05"}, new_session=True):
            identity = RunIdentity(999_999, 999_999, time.time() - 1, "face05", str(folder))
            assert settle(identity, look=True)
            assert folder.exists()
        assert not settle(identity, look=True)
        assert not folder.exists()
    finally:
        cgroups.remove(folder)


def test_settle_after_a_requested_stop_only_removes_the_cgroup() -> None:
    with sleeper({"HERD_RUN_TAG": "face06"}, new_session=True):
        identity = RunIdentity(999_999, 999_999, time.time() - 1, "face06")
        assert not settle(identity, look=False)  # the stop swept the run already
