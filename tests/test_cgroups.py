"""A run's own cgroup catches what leaves its process group and clears its environment."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import psutil
import pytest
from conftest import Herd, script, wait_until

from agentherd.supervisor.process import cgroups


def _cgroups_work() -> bool:
    probe = cgroups.create(f"probe-{uuid.uuid4().hex}")
    if probe is None:
        return False
    cgroups.remove(probe)
    return True


needs_cgroups = pytest.mark.skipif(
    not _cgroups_work(),
    reason="this machine lets herd make no cgroup (see supervisor/process/cgroups.py)",
)


def escaping_agent(seconds: str) -> str:
    """An agent that double-forks a `sleep` with a cleared environment in a new session."""
    return script(f"""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execve("/bin/sleep", ["sleep", "{seconds}"], {{}})
            os._exit(0)
        os.wait()
        print("escaped", flush=True)
        time.sleep(600)
    """)


def _escapee(seconds: str) -> psutil.Process:
    """The `sleep` the agent left behind: no tag, no group, only the cgroup knows it."""

    def find() -> psutil.Process | None:
        for proc in psutil.process_iter(["cmdline", "environ", "status"]):
            alive = proc.info["status"] != psutil.STATUS_ZOMBIE
            if alive and proc.info["cmdline"] == ["sleep", seconds] and not proc.info["environ"]:
                return proc
        return None

    return wait_until(find, what="the escaped sleep")


def _gone(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _start_escaping_agent(herd: Herd) -> psutil.Process:
    """Start session `a`, whose agent leaves a setsid + env -i sleep behind; return that sleep."""
    seconds = f"600.{uuid.uuid4().int % 10**6}"  # names this test's escapee among all sleeps
    herd.write(f"""
        [[session]]
        name = "a"
        command = {escaping_agent(seconds)}
        stop_grace = "2s"
    """)
    herd.start().call("start", name="a")
    wait_until(lambda: herd.status("a")["last_line"] == "escaped", what="the agent to fork")
    return _escapee(seconds)


@needs_cgroups
def test_herd_stop_kills_a_descendant_that_called_setsid_and_cleared_its_env(
    herd: Herd,
) -> None:
    escapee = _start_escaping_agent(herd)
    try:
        stopped = herd.client.call("stop", name="a", socket_timeout_s=None)
        assert stopped["state"] == "stopped"
        assert _gone(escapee), "the setsid + env -i descendant survived herd stop"
    finally:
        if not _gone(escapee):
            escapee.kill()


@needs_cgroups
def test_a_new_daemon_stops_an_adopted_run_through_the_cgroup_it_recorded(herd: Herd) -> None:
    escapee = _start_escaping_agent(herd)
    try:
        assert herd.daemon is not None and herd.daemon.store is not None
        run = herd.daemon.store.run("a", 1)
        assert run is not None and run.cgroup is not None
        assert escapee.pid in cgroups.members(run.cgroup)
        herd.stop_daemon()
        client = herd.start()
        wait_until(lambda: herd.events("a", "adopted"), what="the run to be re-adopted")
        stopped = client.call("stop", name="a", socket_timeout_s=None)
        assert stopped["state"] == "stopped"
        assert _gone(escapee), "the setsid + env -i descendant survived herd stop"
        assert not Path(run.cgroup).exists(), "the empty cgroup is removed when the run ends"
    finally:
        if not _gone(escapee):
            escapee.kill()


@needs_cgroups
def test_a_run_that_ends_leaves_no_cgroup_behind(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "once"
        command = {script('print("done")')}
    """)
    client = herd.start()
    client.call("start", name="once")
    herd.wait_state("once", "completed")
    assert herd.daemon is not None and herd.daemon.store is not None
    run = herd.daemon.store.run("once", 1)
    assert run is not None and run.cgroup is not None
    wait_until(lambda: not Path(run.cgroup or "").exists(), what="the cgroup to be removed")
    assert Path(run.cgroup).name.startswith(cgroups.RUN_PREFIX)


@needs_cgroups
def test_a_new_daemon_removes_empty_run_cgroups_whose_state_was_lost(herd: Herd) -> None:
    old_empty, old_busy, fresh = (cgroups.create(uuid.uuid4().hex) for _ in range(3))
    assert old_empty is not None and old_busy is not None and fresh is not None
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        # Populated before it looks old: any daemon starting on this machine meanwhile (another
        # suite's) sweeps stale empty run cgroups, and took this one in that gap (a flake).
        (old_busy / "cgroup.procs").write_text(str(sleeper.pid))
        long_ago_s = time.time() - cgroups.STALE_AFTER_S - 60
        for folder in (old_empty, old_busy):
            os.utime(folder, (long_ago_s, long_ago_s))
        herd.write(f"""
            [[session]]
            name = "a"
            command = {script("pass")}
        """)
        herd.start()
        assert not old_empty.exists(), "an old empty run cgroup is garbage"
        assert old_busy.exists() and fresh.exists(), "a populated or new one is left alone"
    finally:
        sleeper.kill()
        sleeper.wait()
        wait_until(lambda: not cgroups.populated(old_busy), what="the sleeper to leave")
        for folder in (old_empty, old_busy, fresh):
            cgroups.remove(folder)


@needs_cgroups
def test_a_descendant_out_of_the_group_gets_the_stop_signal_not_only_the_kill(
    herd: Herd,
) -> None:
    """A stop signals what left the run's group through the cgroup's member list at once
    (procs.signal_cgroup, no longer through a scan of every process on the machine): the
    descendant gets the stop signal and can end cleanly, not SIGKILL after the grace."""
    termed = herd.root / "termed"
    ready = herd.root / "ready"
    catcher = (
        "import signal, sys, time\n"
        f"def on_term(*_):\n    open({str(termed)!r}, 'w').write('TERM')\n    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        f"open({str(ready)!r}, 'w').write('ready')\n"
        "time.sleep(600)\n"
    )
    agent = script(f"""
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execve(sys.executable, [sys.executable, "-c", {catcher!r}], {{}})
            os._exit(0)
        os.wait()
        print("escaped", flush=True)
        time.sleep(600)
    """)
    herd.write(f"""
        [[session]]
        name = "a"
        command = {agent}
        stop_grace = "20s"
    """)
    herd.start().call("start", name="a")
    wait_until(lambda: ready.exists(), what="the escaped catcher to set its handler")
    stopped = herd.client.call("stop", name="a", socket_timeout_s=None)
    assert stopped["state"] == "stopped"
    assert termed.read_text() == "TERM"
