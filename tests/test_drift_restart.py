"""What drift remembers outlives the daemon: failure streaks across kill -9 and `herd down`/`up`.

`drift.repeated_failure = 3`: two failures the same way under one daemon and a third under the
next open `repeated-failure` with streak 3, as without the restart. The daemon is the real one,
started by `herd up --no-tui` in its own process, so it can be killed with SIGKILL (in a PID
namespace, marker pidns). The simulated agent and the crashing command wait on files the test
creates, so each checkpoint or crash happens when the test says.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import HERD, PY, SIMAGENT, pid_gone, sim_repo, wait_until

from agentherd.sessions.records import SessionRecord
from agentherd.supervisor.api.client import Client
from agentherd.supervisor.files.paths import socket_path_for
from agentherd.supervisor.files.store import Change, Store
from agentherd.supervisor.files.storeschema import SCHEMA_VERSION

PASS_FILE = "pass"


def verify_argv(gates: Path) -> str:
    """A TOML verify argv: one failing test, the same each time, until `gates/pass` exists."""
    code = (
        "import os, sys\n"
        f"if os.path.exists({str(gates / PASS_FILE)!r}): sys.exit(0)\n"
        "print('FAILED tests/test_app.py::test_it - assert 0'); sys.exit(1)"
    )
    return json.dumps([PY, "-c", code])


def crashing_argv(gates: Path) -> str:
    """A TOML argv: run K (counted in `gates/count`) waits for `gates/goK`, then crashes the same
    way every time."""
    code = (
        "import pathlib, sys, time\n"
        f"gates = pathlib.Path({str(gates)!r})\n"
        "count = gates / 'count'\n"
        "k = int(count.read_text()) + 1 if count.exists() else 1\n"
        "count.write_text(str(k))\n"
        "print(f'run {k} waiting', flush=True)\n"
        "while not (gates / f'go{k}').exists():\n"
        "    time.sleep(0.02)\n"
        "print('boom: database is locked', flush=True)\n"
        "sys.exit(3)"
    )
    return json.dumps([PY, "-c", code])


class CliHerd:
    """A herd.toml in a temp folder served by real `herd up` daemons, one process each."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.gates = root / "gates"
        self.gates.mkdir()
        self.client = Client(socket_path_for(root / ".herd"))

    def herd(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [HERD, *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=90,
            stdin=subprocess.DEVNULL,
        )

    def up(self) -> None:
        done = self.herd("up", "--no-tui")
        assert done.returncode == 0, done.stderr

    def release(self, name: str) -> None:
        (self.gates / name).write_text("")

    def status(self) -> dict[str, Any]:
        return self.client.call("status", target="api")  # type: ignore[no-any-return]

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.client.call("events", session="api") if e["kind"] == kind]

    def wait_events(self, kind: str, count: int) -> list[dict[str, Any]]:
        return wait_until(  # type: ignore[no-any-return]
            lambda: (found := self.events(kind)) and len(found) >= count and found,
            timeout_s=60,
            what=f"{count} {kind} event(s)",
        )

    def restart_daemon(self, how: str) -> None:
        """A new daemon: the old one killed with SIGKILL, or brought down and up gracefully."""
        if how == "down-up":
            done = self.herd("down")
            assert done.returncode == 0, done.stderr
        else:
            pid = int((self.root / ".herd" / "daemon.lock").read_text())
            os.kill(pid, signal.SIGKILL)
            wait_until(
                lambda: pid_gone(pid),
                what="the killed daemon to be gone",
            )
        self.up()
        wait_until(lambda: self.client.ping(), what="the new daemon to answer")


@pytest.fixture
def cli_herd(tmp_path: Path) -> Iterator[CliHerd]:
    herd = CliHerd(tmp_path)
    yield herd
    if herd.client.ping():
        herd.herd("down")


def write_config(herd: CliHerd, command: str, extra: str) -> None:
    (herd.root / "herd.toml").write_text(
        f"""
[[session]]
name = "api"
cwd = "{herd.root / "repo"}"
command = {command}
stop_grace = "2s"
restart_delay = "0"
drift = {{ repeated_failure = 3 }}
{extra}
"""
    )


def simagent_argv(herd: CliHerd, gated: range) -> str:
    waits = [f"--wait-at={n}:{herd.gates / str(n)}" for n in gated]
    return json.dumps([*SIMAGENT, "--delay", "0.05", *waits])


SIM = (
    'agent = "claude"\nplan = "feature_list.json"\nprogress = "claude-progress.txt"\n'
    'restart = "never"\n'
)

HOW = ["kill-9", "down-up"]


@pytest.mark.pidns
@pytest.mark.timeout(180)
@pytest.mark.parametrize("how", HOW)
def test_the_third_same_verify_failure_opens_repeated_failure_across_a_daemon_restart(
    cli_herd: CliHerd, how: str
) -> None:
    herd = cli_herd
    sim_repo(herd.root / "repo", features=4)
    write_config(
        herd, simagent_argv(herd, range(2, 5)), SIM + f"verify = {verify_argv(herd.gates)}"
    )
    herd.up()
    # The starting commit and feature 1 fail verification the same way; the agent then waits.
    herd.wait_events("verify-failed", 2)
    assert herd.events("repeated-failure") == []
    herd.restart_daemon(how)
    assert herd.events("repeated-failure") == [], "a restart alone raises nothing"
    herd.release("2")
    [raised] = herd.wait_events("repeated-failure", 1)
    assert raised["data"]["streak"] == 3 and raised["data"]["source"] == "verify", raised
    assert len(herd.events("verify-failed")) == 3
    [warning] = [w for w in herd.status()["warnings"] if w["kind"] == "repeated-failure"]
    assert warning["count"] == 1
    # A pass ends it: the warning closes and the next failure starts a streak of one.
    herd.release(PASS_FILE)
    herd.release("3")
    herd.wait_events("verify-passed", 1)
    closed = [
        e for e in herd.events("warning-closed") if e["data"].get("kind") == "repeated-failure"
    ]
    assert closed and closed[0]["data"]["by"] == "verify-passed"


@pytest.mark.pidns
@pytest.mark.timeout(180)
def test_a_pass_before_the_restart_still_starts_the_streak_over(cli_herd: CliHerd) -> None:
    """fail, fail, pass, SIGKILL, fail, fail: no warning (the pass was kept too); a third: one."""
    herd = cli_herd
    sim_repo(herd.root / "repo", features=6)
    write_config(
        herd, simagent_argv(herd, range(2, 7)), SIM + f"verify = {verify_argv(herd.gates)}"
    )
    herd.up()
    herd.wait_events("verify-failed", 2)
    herd.release(PASS_FILE)
    herd.release("2")
    herd.wait_events("verify-passed", 1)
    herd.restart_daemon("kill-9")
    (herd.gates / PASS_FILE).unlink()
    herd.release("3")
    herd.wait_events("verify-failed", 3)
    herd.release("4")
    herd.wait_events("verify-failed", 4)
    assert herd.events("repeated-failure") == [], "two failures since the pass, not four"
    herd.release("5")
    [raised] = herd.wait_events("repeated-failure", 1)
    assert raised["data"]["streak"] == 3, raised


@pytest.mark.pidns
@pytest.mark.timeout(180)
@pytest.mark.parametrize("how", HOW)
def test_the_third_same_crash_opens_repeated_failure_across_a_daemon_restart(
    cli_herd: CliHerd, how: str
) -> None:
    herd = cli_herd
    sim_repo(herd.root / "repo", features=1)
    write_config(
        herd,
        crashing_argv(herd.gates),
        'restart = "on-failure"\nmax_crashes = 100\nrestart_delay_max = "0.1s"',
    )
    herd.up()
    herd.release("go1")
    herd.wait_events("run-exited", 1)
    herd.release("go2")
    herd.wait_events("run-exited", 2)
    wait_until(lambda: (herd.gates / "count").read_text() == "3", what="run 3 to wait")
    assert herd.events("repeated-failure") == []
    herd.restart_daemon(how)
    # After kill -9 run 3 is adopted; after `herd down` / `up` run 4 is the next crash.
    nxt = "go3" if how == "kill-9" else "go4"
    wait_until(lambda: (herd.gates / "count").read_text() == nxt[2:], what="the next run")
    assert herd.events("repeated-failure") == [], "a restart alone raises nothing"
    herd.release(nxt)
    [raised] = herd.wait_events("repeated-failure", 1)
    assert raised["data"]["streak"] == 3 and raised["data"]["source"] == "crash", raised


def test_a_store_written_before_the_streaks_were_kept_opens_with_none(tmp_path: Path) -> None:
    """No new schema version: the streaks and the stall clock are fields of the session
    record's JSON. A record an older herd wrote (without them) reads with empty streaks and no
    stall clock; one written now keeps them through a new store."""
    path = tmp_path / "state.db"
    store = Store(path)
    kept = SessionRecord(
        name="api",
        drift_streaks={"verify": ("ab" * 16, 2), "crash": ("cd" * 16, 1)},
        stall_since_at="2026-12-02T05:00:00.000Z",
    )
    store.commit(Change(session=kept))
    store.commit(Change(session=SessionRecord(name="old")))
    store.close()
    db = sqlite3.connect(path)
    [(data,)] = db.execute("SELECT data FROM sessions WHERE name='old'").fetchall()
    older = {
        key: value
        for key, value in json.loads(data).items()
        if key not in ("drift_streaks", "stall_since_at", "stall_paused_at")
    }
    db.execute("UPDATE sessions SET data=? WHERE name='old'", (json.dumps(older),))
    [(version,)] = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchall()
    db.commit()
    db.close()
    assert int(version) == SCHEMA_VERSION
    again = Store(path)
    records = again.sessions()
    again.close()
    assert records["old"].drift_streaks == {} and records["old"].stall_since_at is None
    assert records["api"].drift_streaks == {"verify": ("ab" * 16, 2), "crash": ("cd" * 16, 1)}
    assert records["api"].stall_since_at == "2026-12-02T05:00:00.000Z"
