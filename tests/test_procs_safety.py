"""Signals go only to a run's own processes: never PID 1, group 0 or 1, or the daemon's group.

Tests marked `pidns` could signal the wrong process on unfixed code: run them only inside a
private PID namespace (`unshare --pid --fork --mount-proc`). Each keeps a bystander in the
test's own process group (which reads 0 inside such a namespace) that records every signal.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import psutil
import pytest
from conftest import PY, Herd, script, wait_until

from agentherd.sessions.records import RunRecord, SessionRecord, TaskRecord
from agentherd.sessions.states import State
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.files.store import Change, Store
from agentherd.supervisor.process import cgroups, procs, runfolder, runid, spawn

SLEEPER = script("""
    import time
    print("working", flush=True)
    time.sleep(600)
""")

_BYSTANDER = """
import pathlib, signal, sys, time
log = pathlib.Path(sys.argv[1])
def note(number, frame):
    with log.open("a") as out:
        out.write(signal.Signals(number).name + "\\n")
for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGCONT", "SIGUSR1", "SIGQUIT"):
    signal.signal(getattr(signal, name), note)
log.write_text("")
while True:
    time.sleep(0.05)
"""


class Bystander:
    """A process in the test's own group that notes every signal it gets (SIGKILL: it dies)."""

    def __init__(self, folder: Path) -> None:
        self.log = folder / f"bystander-{uuid.uuid4().hex[:8]}.log"
        self.process = subprocess.Popen([PY, "-c", _BYSTANDER, str(self.log)])
        wait_until(self.log.exists, what="the bystander to be ready")

    def assert_untouched(self) -> None:
        assert self.process.poll() is None, f"the bystander died ({self.process.returncode})"
        assert psutil.Process(self.process.pid).status() != psutil.STATUS_STOPPED
        assert self.log.read_text() == "", f"the bystander got {self.log.read_text().split()}"

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def bystander(tmp_path: Path) -> Iterator[Bystander]:
    watcher = Bystander(tmp_path)
    try:
        yield watcher
    finally:
        watcher.close()


# ----- the lowest level: what may be signalled at all ------------------------------------


@pytest.mark.pidns
@pytest.mark.parametrize(
    "which", ["pid 0, group 0", "pid 1, group 1", "the test's own group", "a bystander's group"]
)
def test_an_identity_naming_pid_0_group_1_or_our_own_group_signals_nothing(
    which: str, bystander: Bystander, caplog: pytest.LogCaptureFixture
) -> None:
    identity = {
        "pid 0, group 0": runid.RunIdentity(0, 0, 0.0, "no-such-tag"),
        "pid 1, group 1": runid.RunIdentity(1, 1, 0.0, "no-such-tag"),
        "the test's own group": runid.RunIdentity(os.getpid(), os.getpgrp(), 0.0, "no-such-tag"),
        "a bystander's group": runid.RunIdentity(
            bystander.process.pid, os.getpgrp(), 0.0, "no-such-tag"
        ),
    }[which]
    caplog.set_level(logging.WARNING, logger="herd.procs")
    assert procs.run_processes(identity) == []
    assert procs.signal_run(identity, signal.SIGTERM) == 0
    gone = anyio.run(procs.stop_tree, identity, signal.SIGTERM, 0.2, 0.2, 0.02)
    assert gone, "nothing of such a run exists, so nothing is left of it"
    bystander.assert_untouched()
    assert "refused process group" in caplog.text


@pytest.mark.pidns
def test_the_sender_refuses_pid_1_the_daemon_and_its_group(
    bystander: Bystander, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="herd.procs")
    for pid in (1, os.getpid(), bystander.process.pid):
        assert not procs.send_checked(psutil.Process(pid), signal.SIGCONT), pid
    bystander.assert_untouched()
    assert caplog.text.count("refused to send SIGCONT") == 3
    other = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        assert procs.send_checked(psutil.Process(other.pid), signal.SIGTERM)
        assert other.wait(10) == -signal.SIGTERM
    finally:
        other.kill()
        other.wait()


# ----- way (a): a spawn that fails with something other than OSError ----------------------


@pytest.mark.pidns
def test_a_spawn_failure_of_any_kind_ends_the_run_and_a_new_daemon_signals_nothing(
    herd: Herd, bystander: Bystander
) -> None:
    herd.write(f"""
        [[session]]
        name = "a"
        command = {SLEEPER}
        restart = "on-failure"
    """)
    client = herd.start()
    assert herd.daemon is not None
    supervisor = herd.daemon.sessions["a"]
    # A NUL in the environment makes the spawn raise ValueError, not OSError (herd check
    # may refuse it in herd.toml; the supervisor must survive it whatever the source).
    supervisor.config = supervisor.config.model_copy(update={"env": {"X": "a\x00b"}})
    started = client.call("start", name="a")
    assert started["state"] == "failed"
    status = herd.status("a")
    assert (status["state"], status["reason"], status["pid"]) == ("failed", "spawn-failed", None)
    assert "embedded null byte" in herd.events("a", "failed")[0]["message"]
    store = herd.daemon.store
    assert store is not None
    run = store.run("a", 1)
    assert run is not None and run.ended_at is not None and run.pid is None
    # `herd down; herd up`: the new daemon reconciles the failed run and signals no one.
    herd.stop_daemon()
    herd.start()
    assert herd.status("a")["state"] == "failed"
    bystander.assert_untouched()


@pytest.mark.pidns
def test_a_nul_in_env_from_herd_toml_never_leaves_a_session_starting(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "a"
        command = {SLEEPER}
        env = {{ X = "a\\u0000b" }}
    """)
    up = herd.cli("up", "--no-tui")
    try:
        # Refused by the config check (exit 2), or the spawn fails and the session says so.
        assert up.returncode in (0, 2), up.stderr
        if up.returncode == 0:
            (status,) = json.loads(herd.cli("ls", "--json").stdout)
            assert (status["state"], status["reason"]) == ("failed", "spawn-failed"), status
    finally:
        herd.cli("down")


# ----- way (b): the daemon died between recording a run and spawning it ------------------


def _record_a_pidless_run(state_dir: Path, session: str, tag: str) -> None:
    """The state a kill -9 leaves between writing a run and spawning it: a run with no pid."""
    store = Store(state_dir / "state.db")
    try:
        at = "2026-12-01T00:00:00.000Z"
        store.commit(
            Change(
                session=SessionRecord(
                    name=session, state=State.STARTING, handle=f"{session}/1", run=1
                ),
                task=TaskRecord(handle=f"{session}/1", session=session, first_run=1, started_at=at),
                run=RunRecord(
                    session=session,
                    run=1,
                    handle=f"{session}/1",
                    argv=["x"],
                    tag=tag,
                    started_at=at,
                ),
            )
        )
    finally:
        store.close()
    (state_dir / "runs" / session / "1").mkdir(parents=True, exist_ok=True)


@pytest.mark.pidns
def test_a_run_recorded_without_a_pid_and_gone_is_ended_without_a_signal(
    herd: Herd, bystander: Bystander
) -> None:
    herd.write(f"""
        [[session]]
        name = "a"
        command = {SLEEPER}
        restart = "never"
    """)
    herd.start()
    herd.stop_daemon()
    _record_a_pidless_run(herd.root / ".herd", "a", uuid.uuid4().hex)
    herd.start()
    status = herd.wait_state("a", "failed")
    assert status["reason"] == "exit unknown" and status["pid"] is None
    exited = herd.events("a", "run-exited")
    assert [e["message"] for e in exited] == ["run 1 ended: exit unknown"]
    bystander.assert_untouched()


_LOCK_HOLDER = """
import fcntl, os, pathlib, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
pathlib.Path(sys.argv[2]).write_text("held")
time.sleep(600)
"""


@pytest.mark.pidns
def test_a_pidless_run_whose_lock_is_held_is_adopted_and_stopped_by_its_tag_only(
    herd: Herd, bystander: Bystander
) -> None:
    herd.write(f"""
        [[session]]
        name = "a"
        command = {SLEEPER}
        restart = "never"
        stop_grace = "5s"
    """)
    herd.start()
    herd.stop_daemon()
    tag = uuid.uuid4().hex
    _record_a_pidless_run(herd.root / ".herd", "a", tag)
    folder = herd.root / ".herd" / "runs" / "a" / "1"
    ready = herd.root / "holder-ready"
    # The holder is not its group's leader (find_leader cannot find it): a shell without the
    # tag leads the group, as when a run's wrapper died and its agent lives on.
    holder = subprocess.Popen(
        [
            "/bin/sh",
            "-c",
            f'{runid.TAG_VAR}={tag} "$@"; :',
            "sh",
            PY,
            "-c",
            _LOCK_HOLDER,
            str(folder / runfolder.LOCK_FILE),
            str(ready),
        ],
        start_new_session=True,
    )
    try:
        wait_until(ready.exists, what="the lock holder")
        herd.start()
        assert herd.wait_state("a", "running")["pid"] is None
        assert herd.events("a", "adopted")
        stopped = herd.client.call("stop", name="a", socket_timeout_s=None)
        assert stopped["state"] == "stopped"
        holder.wait(10)  # its shell ends once its tagged process is gone
        assert not runfolder.lock_held(folder)
        bystander.assert_untouched()
    finally:
        holder.kill()
        holder.wait()


# ----- way (c): state.db deleted while an agent runs -------------------------------------


@pytest.mark.pidns
def test_a_held_run_lock_refuses_a_start_at_once_and_never_launches_beside_it(
    herd: Herd, bystander: Bystander
) -> None:
    herd.write(f"""
        [[session]]
        name = "a"
        command = {SLEEPER}
    """)
    client = herd.start()
    old_pid = client.call("start", name="a") and herd.wait_state("a", "running")["pid"]
    old_agent = psutil.Process(old_pid)
    old_cgroup = _cgroup_of(old_pid)  # its path goes with state.db: removed by hand below
    run_1 = herd.root / ".herd" / "runs" / "a" / "1"

    def kill_run_1() -> None:
        users = runfolder.folder_users(run_1)
        for proc in users:
            proc.kill()
        psutil.wait_procs(users, timeout=10)

    try:
        herd.stop_daemon()
        for name in ("state.db", "state.db-wal", "state.db-shm"):
            (herd.root / ".herd" / name).unlink(missing_ok=True)
        client = herd.start()  # a fresh store: run numbers start at 1 again
        refused = herd.cli("start", "a", timeout_s=20)
        assert refused.returncode == 2, refused
        message = refused.stderr.strip()
        assert len(message.splitlines()) == 1 and "of an earlier run still hold" in message, message
        assert f"pid {old_pid}" in message
        assert client.ping(), "the daemon still answers"
        assert herd.status("a")["state"] == "idle"
        old_tree = {old_pid, *(p.pid for p in old_agent.children(recursive=True))}
        assert {p.pid for p in runfolder.folder_users(run_1)} == old_tree, "no second agent"
        # `herd restart` is refused the same way, at once.
        with pytest.raises(ApiError, match="of an earlier run still hold"):
            client.call("restart", name="a", socket_timeout_s=20)
        # Once it is gone, a start works; the forgotten run's log is kept apart, not mixed in.
        kill_run_1()
        client.call("start", name="a")
        herd.wait_state("a", "running")
        assert sorted(p.name.split(".")[0] for p in run_1.parent.iterdir()) == ["1", "1"]
        client.call("stop", name="a", socket_timeout_s=None)
    finally:
        kill_run_1()
        cgroups.remove(old_cgroup)
    bystander.assert_untouched()


def _cgroup_of(pid: int) -> str | None:
    """The cgroup herd made for the run of `pid`, if it made one."""
    return psutil.Process(pid).environ().get("HERD_CGROUP")


def test_launch_never_blocks_on_a_held_lock(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    ready = tmp_path / "ready"
    holder = subprocess.Popen(
        [PY, "-c", _LOCK_HOLDER, str(folder / runfolder.LOCK_FILE), str(ready)]
    )
    try:
        wait_until(ready.exists, what="the lock holder")

        async def launch() -> None:
            with anyio.fail_after(5):
                await spawn.launch(
                    [sys.executable, "-c", "pass"], tmp_path, os.environ, folder, "t"
                )

        with pytest.raises(spawn.RunFolderBusy, match="of an earlier run still hold"):
            anyio.run(launch)
    finally:
        holder.kill()
        holder.wait()
