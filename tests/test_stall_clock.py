"""The stall clock counts the agent's silence only: not a new daemon's start, nor held time.

A new daemon that adopts a silent agent goes on from the silence its predecessor measured
(and raises no second `stalled` for one already open); time paused, at the approval gate, in
backoff or waiting out a rate limit never counts, also when the daemon restarts meanwhile.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import SIMAGENT, Herd, script, sim_repo, wait_until
from test_agent_outcomes import _session as replay_session

from agentherd.sessions.times import parse_iso


def quiet_agent(gate: Path) -> str:
    """A TOML argv: one line, then silence until `gate` exists, then a line and a long wait."""
    return script(f"""
        import os, time
        print("starting", flush=True)
        while not os.path.exists({str(gate)!r}):
            time.sleep(0.02)
        print("back", flush=True)
        time.sleep(60)
    """)


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie has ended)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def session(command: str, stall_s: float, extra: str = "") -> str:
    return f"""
        [[session]]
        name = "api"
        command = {command}
        restart = "never"
        stop_grace = "1s"
        budget = {{ stall = "{stall_s}s" }}
        {extra}
    """


def passes(herd: Herd, count: int) -> None:
    """Let `count` more reconcile passes (each judges the stall) go by."""
    first = herd.client.call("info")["reconcile_passes"]
    wait_until(lambda: herd.client.call("info")["reconcile_passes"] >= first + count)


def passes_spanning(herd: Herd, seconds: float) -> None:
    """Reconcile passes spanning at least `seconds` of the daemon's time."""
    passes(herd, int(seconds / herd.timings.reconcile_s) + 1)


def restart_daemon(herd: Herd) -> None:
    """A new daemon for the same agents (the old one exits as a crash would leave them)."""
    old = herd.thread
    herd.stop_daemon()
    assert old is not None
    wait_until(lambda: not old.is_alive(), what="the first daemon to exit")
    herd.start()


def closings(herd: Herd, kind: str) -> list[dict[str, Any]]:
    return [e for e in herd.events("api", "warning-closed") if e["data"].get("kind") == kind]


STALL_S = 4.0


def test_a_new_daemon_goes_on_counting_the_silence_from_the_agents_last_output(
    herd: Herd,
) -> None:
    """Three quarters of the threshold pass under one daemon, the rest under the next: the
    warning's idle time is counted from the agent's last line, not from the new daemon."""
    gate = herd.root / "gate"
    herd.write(session(quiet_agent(gate), STALL_S))
    herd.start().call("start", name="api")
    wait_until(lambda: herd.status("api")["last_line"] == "starting", what="the first line")
    log = herd.root / ".herd" / "runs" / "api" / "1" / "output.log"
    written = log.stat().st_mtime
    wait_until(lambda: time.time() - written >= 0.75 * STALL_S, timeout_s=30)
    assert herd.events("api", "stalled") == []
    restart_daemon(herd)
    [stalled] = wait_until(lambda: herd.events("api", "stalled"), timeout_s=30)
    raised = parse_iso(stalled["at"])
    assert raised is not None
    silent_s = raised.timestamp() - written
    idle_s = stalled["data"]["idle_s"]
    # From the restart it would be at most a quarter of the threshold less than the silence.
    assert idle_s >= silent_s - 0.5 * STALL_S, (idle_s, silent_s)
    gate.write_text("")
    [closing] = wait_until(lambda: closings(herd, "stalled"))
    assert closing["data"]["by"] == "output"
    herd.client.call("stop", name="api", socket_timeout_s=None)


def test_an_open_stall_stays_one_warning_across_a_restart_and_closes_on_output(
    herd: Herd,
) -> None:
    gate = herd.root / "gate"
    herd.write(session(quiet_agent(gate), 0.5))
    herd.start().call("start", name="api")
    wait_until(lambda: herd.events("api", "stalled"), what="the stall")
    restart_daemon(herd)
    passes_spanning(herd, 3 * 0.5)
    assert len(herd.events("api", "stalled")) == 1, "the same silence: no second stall"
    [warning] = [w for w in herd.status("api")["warnings"] if w["kind"] == "stalled"]
    assert warning["count"] == 1
    assert closings(herd, "stalled") == [], "old output read again ends no stall"
    gate.write_text("")
    [closing] = wait_until(lambda: closings(herd, "stalled"))
    assert closing["data"]["by"] == "output"
    herd.client.call("stop", name="api", socket_timeout_s=None)


HUSHED_AGENT = """
    import os, time
    while True:
        if os.path.exists({hush!r}):  # told while paused: silent a while once continued
            time.sleep(1.5)
            os.remove({hush!r})
        print("working", flush=True)
        time.sleep(0.05)
"""


def test_time_paused_across_a_restart_is_no_stall(herd: Herd) -> None:
    """Paused under one daemon, resumed under the next after twice the threshold: the agent's
    short silence after the resume is all that counts."""
    stall_s = 3.0
    hush = herd.root / "hush"
    herd.write(session(script(HUSHED_AGENT.format(hush=str(hush))), stall_s))
    client = herd.start()
    client.call("start", name="api")
    wait_until(lambda: herd.status("api")["last_line"] == "working", what="output")
    client.call("pause", name="api")
    hush.write_text("")
    restart_daemon(herd)
    assert herd.status("api")["state"] == "paused"
    passes_spanning(herd, 2 * stall_s)
    herd.client.call("resume", name="api")
    wait_until(lambda: not hush.exists(), what="the agent's silence after the resume")
    passes(herd, 2)
    assert herd.events("api", "stalled") == [], "the paused stretch counted as a stall"
    herd.client.call("stop", name="api", socket_timeout_s=None)


@pytest.mark.parametrize("restarted", [False, True], ids=["one-daemon", "daemon-restarted"])
def test_time_at_the_approval_gate_is_no_stall(herd: Herd, restarted: bool) -> None:
    """burn-without-progress holds a silent agent at the gate for twice the stall threshold
    (under one daemon, or two); approved, it stays silent a little longer: no stall, as its
    silence is short."""
    stall_s = 4.0
    gates = herd.root / "gates"
    gates.mkdir()
    repo = sim_repo(herd.root / "repo", features=2)
    agent = json.dumps([*SIMAGENT, "--delay", "0.05", f"--wait-at=2:{gates / '2'}"])
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {agent}
        agent = "claude"
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        restart = "never"
        stop_grace = "2s"
        budget = {{ wall_time = "1h", stall = "{stall_s}s" }}
        drift = {{ burn_without_progress = 0.0003 }}
        on_drift = {{ burn-without-progress = "pause" }}
    """)
    herd.start().call("start", name="api")
    herd.wait_state("api", "waiting-approval", timeout_s=30)
    if restarted:
        restart_daemon(herd)
        assert herd.status("api")["state"] == "waiting-approval"
    passes_spanning(herd, 2 * stall_s)
    done = herd.cli("approve", "api")
    assert done.returncode == 0, done.stderr
    assert herd.status("api")["state"] == "running"
    passes(herd, 3)  # the agent still waits at its gate, silent
    (gates / "2").write_text("")
    ended = herd.wait_state("api", "completed", "failed", timeout_s=30)
    assert ended["state"] == "completed", ended["reason"]
    assert herd.events("api", "stalled") == [], "time at the gate counted as a stall"


def test_backoff_between_runs_is_no_stall(herd: Herd) -> None:
    """A crash, then three times the stall threshold of backoff before the next run."""
    count = herd.root / "count"
    command = script(f"""
        import pathlib, sys
        count = pathlib.Path({str(count)!r})
        runs = int(count.read_text()) + 1 if count.exists() else 1
        count.write_text(str(runs))
        print(f"run {{runs}}", flush=True)
        sys.exit(3 if runs == 1 else 0)
    """)
    herd.write(
        session(command, 0.5).replace('restart = "never"', 'restart = "on-failure"')
        + '        restart_delay = "1.5s"\n'
    )
    herd.start().call("start", name="api")
    ended = herd.wait_state("api", "completed", "failed", timeout_s=30)
    assert ended["state"] == "completed", ended["reason"]
    assert [e["data"]["delay_s"] for e in herd.events("api", "restart-scheduled")] == [1.5]
    assert herd.events("api", "stalled") == [], "the backoff counted as a stall"


def test_a_rate_limit_wait_is_no_stall(herd: Herd, tmp_path: Path) -> None:
    """The agent's limit resets 3 s after it says so; the stall threshold is 1 s."""
    repo = sim_repo(tmp_path / "repo", features=1)
    plans = {"command:1": ["limit-in:3", "claude-limit"], "resume:2": ["claude-stream"]}
    herd.write(replay_session(repo, plans) + 'budget = { stall = "1s" }\n')
    herd.start().call("start", name="main")
    parked = herd.wait_state("main", "backoff", "failed", "completed")
    assert parked["reason"] == "rate-limit", parked
    status = herd.wait_state("main", "completed", "failed", timeout_s=30)
    assert status["state"] == "completed", status["reason"]
    assert herd.events("main", "stalled") == [], "the rate-limit wait counted as a stall"


# ----- other drift conditions a new daemon must settle ----------------------------------------


def test_a_plan_fixed_under_a_new_daemon_closes_plan_invalid(herd: Herd) -> None:
    """The plan broke under one daemon; the next one reads it fixed and closes the warning
    (it closed only when the daemon that saw it break saw it read again)."""
    work = herd.root / "work"
    work.mkdir()
    plan = work / "feature_list.json"
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{work}"
        command = {script("import time; time.sleep(60)")}
        plan = "feature_list.json"
        stop_grace = "1s"
    """)
    herd.start().call("start", name="api")
    herd.wait_state("api", "running")
    plan.write_text(json.dumps([{"id": "a", "title": "A", "passes": False}]))
    wait_until(lambda: herd.status("api")["plan"], what="the plan read")
    plan.write_text("[{ half written")
    wait_until(
        lambda: any(w["kind"] == "plan-invalid" for w in herd.status("api")["warnings"]),
        what="plan-invalid to open",
    )
    restart_daemon(herd)
    plan.write_text(json.dumps([{"id": "a", "title": "A", "passes": True}]))
    [closing] = wait_until(lambda: closings(herd, "plan-invalid"), what="plan-invalid to close")
    assert closing["data"]["by"] == "plan"
    assert not any(w["kind"] == "plan-invalid" for w in herd.status("api")["warnings"])
    herd.client.call("stop", name="api", socket_timeout_s=None)


STUBBORN_AGENT = """
    import os, pathlib, signal, sys, time
    count, termed, die = (pathlib.Path(p) for p in ({count!r}, {termed!r}, {die!r}))
    runs = int(count.read_text()) + 1 if count.exists() else 1
    count.write_text(str(runs))
    print(f"run {{runs}}", flush=True)
    if runs > 1:
        sys.exit(0)
    def on_term(*_):  # the first stop signal is noted, the second one ends it
        if termed.exists():
            os._exit(1)
        termed.touch()
    signal.signal(signal.SIGTERM, on_term)
    while not die.exists():
        time.sleep(0.02)  # silent: stalled
    sys.exit(1)
"""


@pytest.mark.parametrize("ends", ["under-the-next-daemon", "while-no-daemon-runs"])
def test_an_on_drift_restart_cut_short_by_the_daemon_is_finished_by_the_next(
    herd: Herd, ends: str
) -> None:
    """on_drift = restart sends the stop signal, and the daemon exits before the run ends (a
    long stop_grace). The run still alive, the new daemon stops it again; ended meanwhile, its
    end is judged as that restart: either way it restarts for the same cause, rather than
    going on (or failing) as if nothing had been asked."""
    count, termed, die = herd.root / "count", herd.root / "termed", herd.root / "die"
    agent = script(STUBBORN_AGENT.format(count=str(count), termed=str(termed), die=str(die)))
    herd.write(
        session(agent, 0.5, 'on_drift = { stalled = "restart" }').replace(
            'stop_grace = "1s"', 'stop_grace = "60s"'
        )
    )
    herd.start().call("start", name="api")
    wait_until(termed.exists, what="on_drift's stop signal")
    pid = herd.status("api")["pid"]
    assert pid is not None, "run 1 ended under the first daemon"  # alive(None) is this process
    old = herd.thread
    herd.stop_daemon()
    assert old is not None
    wait_until(lambda: not old.is_alive(), what="the first daemon to exit")
    if ends == "while-no-daemon-runs":
        die.touch()
        wait_until(lambda: not alive(pid), what="run 1 to end")
    herd.start()
    ended = herd.wait_state("api", "completed", "failed", timeout_s=30)
    assert ended["state"] == "completed", ended["reason"]
    [scheduled] = herd.events("api", "restart-scheduled")
    assert herd.status("api")["run"] == 2
    exited = herd.events("api", "run-exited")[0]
    assert exited["data"]["exit_code"] == 1, "run 1 ended by the second signal or the file"
    assert scheduled["run"] == 1


SIGNAL_COUNTING_AGENT = """
    import pathlib, signal, sys, time
    signals, die = pathlib.Path({signals!r}), pathlib.Path({die!r})
    def on_term(*_):  # each stop signal is counted; the line after it closes the stall warning
        with signals.open("a") as counted:
            counted.write("x")
        print("noted", flush=True)
    signal.signal(signal.SIGTERM, on_term)
    print("up", flush=True)
    while not die.exists():
        time.sleep(0.02)  # silent: stalled
    sys.exit(1)
"""


def test_a_stall_again_while_on_drift_restart_stops_the_run_sends_no_second_signal(
    herd: Herd,
) -> None:
    """The stall warning closes on the line the agent writes at the stop signal and opens again
    in the silence after it, while on_drift's restart still waits out the grace: that stop is
    under way, and a second signal would end the run at once (seen under load: the first
    `stalled` opened before the agent's first line was read, the second one 50 ms later)."""
    signals, die = herd.root / "signals", herd.root / "die"
    agent = script(SIGNAL_COUNTING_AGENT.format(signals=str(signals), die=str(die)))
    herd.write(
        session(agent, 0.5, 'on_drift = { stalled = "restart" }').replace(
            'stop_grace = "1s"', 'stop_grace = "60s"'
        )
    )
    herd.start().call("start", name="api")
    wait_until(lambda: len(herd.events("api", "stalled")) >= 2, what="a second stall")
    passes(herd, 3)  # the second warning's on_drift action has had its turn
    assert signals.read_text() == "x", "one stop signal per restart"
    assert herd.status("api")["pid"] is not None, "the run waits out its grace"
    die.touch()
    [scheduled] = wait_until(lambda: herd.events("api", "restart-scheduled"), what="the restart")
    assert scheduled["run"] == 1
    assert herd.events("api", "run-exited")[0]["data"]["exit_code"] == 1, "ended by the file"
