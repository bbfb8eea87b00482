"""A notify command ends whole: what it leaves behind (`sleep &`, `setsid sleep &`, a double
fork) is killed when it ends or times out, with a cgroup and without one."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from conftest import FAST, PY, Herd, script, wait_until

from agentherd.supervisor.process import cgroups


def _cgroups_work() -> bool:
    probe = cgroups.create(f"probe-{uuid.uuid4().hex}")
    if probe is None:
        return False
    cgroups.remove(probe)
    return True


MODES = [
    pytest.param(
        "cgroup",
        marks=pytest.mark.skipif(not _cgroups_work(), reason="this machine makes no cgroup"),
    ),
    "no-cgroup",
]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """With a cgroup where the machine allows one, and as where it does not."""
    if request.param == "no-cgroup":
        monkeypatch.setattr(cgroups, "create", lambda tag: None)
    yield request.param


def leaving(marker: Path, tag: str, then: str) -> str:
    """A TOML notify argv that leaves three sleeps behind (in its group, setsid, and setsid
    after a double fork), waits until all three run, writes `marker`, then runs `then`."""
    code = (
        f"sleep 600.{tag}1 & setsid sleep 600.{tag}2 & "
        f"setsid sh -c 'sleep 600.{tag}3 & exit 0' & "
        f"while [ $(pgrep -fc '^sleep 600.{tag}') -lt 3 ]; do sleep 0.01; done; "
        f'touch "$0"; {then}'
    )
    return json.dumps(["/bin/sh", "-c", code, str(marker)])


def leftovers(tag: str) -> list[psutil.Process]:
    """The sleeps of this test's notify command still alive."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["status"] == psutil.STATUS_ZOMBIE or len(cmdline) != 2:
            continue
        if cmdline[0] == "sleep" and cmdline[1].startswith(f"600.{tag}"):
            found.append(proc)
    return found


def failing_session(herd: Herd, notify: str) -> None:
    herd.write(f"""
        notify = {notify}
        notify_on = ["failed"]

        [[session]]
        name = "api"
        command = {script("raise SystemExit(3)")}
        restart = "never"
    """)


@pytest.mark.pidns
def test_what_a_notify_command_leaves_behind_ends_with_it(tmp_path: Path, mode: str) -> None:
    herd = Herd(tmp_path)
    tag = str(uuid.uuid4().int % 10**6)
    marker = tmp_path / "notified"
    failing_session(herd, leaving(marker, tag, "exit 0"))
    try:
        herd.start().call("start", name="api")
        herd.wait_state("api", "failed")
        wait_until(marker.exists, what="the notify command to run")
        wait_until(lambda: not leftovers(tag), timeout_s=15, what="its leftovers to be killed")
        assert not herd.events("api", "notify-failed"), "it exited 0: no failure"
    finally:
        herd.down()
        left = leftovers(tag)
        for proc in left:
            proc.kill()
    assert not left, f"left running after herd down: {[p.cmdline() for p in left]}"


@pytest.mark.pidns
def test_a_notify_command_that_times_out_is_ended_whole(tmp_path: Path, mode: str) -> None:
    herd = Herd(tmp_path, timings=replace(FAST, notify_timeout_s=1.0))
    tag = str(uuid.uuid4().int % 10**6)
    marker = tmp_path / "notified"
    failing_session(herd, leaving(marker, tag, f"exec {PY} -c 'import time; time.sleep(600)'"))
    try:
        herd.start().call("start", name="api")
        herd.wait_state("api", "failed")
        wait_until(marker.exists, what="the notify command to run")
        [failure] = wait_until(lambda: herd.events("api", "notify-failed"), timeout_s=15)
        assert failure["data"]["timed_out"] is True
        wait_until(lambda: not leftovers(tag), timeout_s=15, what="its leftovers to be killed")
    finally:
        herd.down()
        left = leftovers(tag)
        for proc in left:
            proc.kill()
    assert not left, f"left running after herd down: {[p.cmdline() for p in left]}"
