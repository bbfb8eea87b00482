"""An agent inside a session cannot act for a person: real agents run `herd` from inside.

Each asking agent waits for the file `go` in its folder, runs its `herd` commands one by one
and writes what each answered (exit code, stdout, stderr) to `results.json`.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import HERD, PY, SIMAGENT, Herd, make_repo, script, sim_repo, wait_until

from agentherd.sessions.config import HerdConfig
from agentherd.supervisor.api import trust
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.process import cgroups, peer

FORBIDDEN_EXIT = 77

ASKER = f"""
import json, os, pathlib, subprocess, sys, time
go = pathlib.Path("go")
while not go.exists():
    time.sleep(0.02)
results = []
for argv in json.loads(sys.argv[1]):
    done = subprocess.run([{HERD!r}, *argv], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)
    results.append({{"argv": argv, "code": done.returncode, "out": done.stdout,
                    "err": done.stderr}})
pathlib.Path("results.tmp").write_text(json.dumps(results))
os.rename("results.tmp", "results.json")
time.sleep(600)
"""
"""The asking agent: its `herd` commands come as one JSON argument."""

BUSY = script("import time; print('working', flush=True); time.sleep(600)")
"""A session that just runs until it is stopped."""


def asker(herd: Herd, name: str, commands: list[list[str]], extra: str = "") -> str:
    """The [[session]] block of an agent that runs `commands` through `herd` from inside."""
    folder = herd.root / name
    folder.mkdir()
    argv = json.dumps([PY, "-c", ASKER, json.dumps(commands)])
    return f"""
        [[session]]
        name = "{name}"
        cwd = "{folder}"
        command = {argv}
        autostart = false
        stop_grace = "1s"
        {extra}
    """


def busy(herd: Herd, name: str, autostart: bool = False) -> str:
    folder = herd.root / name
    folder.mkdir()
    return f"""
        [[session]]
        name = "{name}"
        cwd = "{folder}"
        command = {BUSY}
        autostart = {str(autostart).lower()}
        stop_grace = "1s"
    """


def gated(herd: Herd, name: str = "gated") -> str:
    """A simulated agent that tampers with its plan and waits at the approval gate.

    Sixteen features: the gate holds it long before it could finish, however loaded the
    machine (with four, a loaded run saw it exit just as the gate held it, and end `failed`).
    """
    repo = sim_repo(herd.root / name, features=16)
    agent = json.dumps([*SIMAGENT, "--delay", "0.3", "--tamper-at", "2"])
    return f"""
        [[session]]
        name = "{name}"
        cwd = "{repo}"
        command = {agent}
        agent = "claude"
        restart = "never"
        autostart = false
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        on_drift = {{ plan-tampered = "pause" }}
        stop_grace = "2s"
    """


def answers(herd: Herd, name: str) -> dict[str, dict[str, Any]]:
    """What each of the asking agent's commands answered, by its command line."""
    path = herd.root / name / "results.json"
    wait_until(path.exists, timeout_s=120, what=f"{name}'s herd commands to answer")
    return {" ".join(item["argv"]): item for item in json.loads(path.read_text())}


def go(herd: Herd, name: str) -> None:
    (herd.root / name / "go").write_text("")


def refused(answer: dict[str, Any], *words: str) -> None:
    """A refusal: the documented exit code and one line on stderr saying why."""
    assert answer["code"] == FORBIDDEN_EXIT, answer
    assert answer["err"].count("\n") == 1 and answer["err"].startswith("herd: "), answer
    for word in words:
        assert word in answer["err"], answer


def test_an_agent_cannot_approve_or_reject_a_gate_its_own_or_another_sessions(
    herd: Herd,
) -> None:
    commands = [["approve", "gated"], ["reject", "gated"], ["approve", "rogue"]]
    herd.write(gated(herd) + asker(herd, "rogue", commands))
    client = herd.start()
    client.call("start", name="gated")
    herd.wait_state("gated", "waiting-approval", timeout_s=60)
    client.call("start", name="rogue")
    herd.wait_state("rogue", "running")
    go(herd, "rogue")
    found = answers(herd, "rogue")
    for line in ("approve gated", "reject gated", "approve rogue"):
        refused(found[line], "needs a person", "inside session 'rogue'")
    assert herd.status("gated")["state"] == "waiting-approval", "the gate stays shut"
    assert not herd.events("gated", "plan-approved") and not herd.events("gated", "approved")

    # A person's approval from a script with no terminal (its own session, stdin closed).
    person = subprocess.run(
        [HERD, "approve", "gated"],
        cwd=herd.root,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        timeout=60,
    )
    assert person.returncode == 0, person.stderr
    assert herd.status("gated")["state"] in ("running", "completed")


def test_an_agent_cannot_bring_the_daemon_down_reload_it_or_ack_warnings(herd: Herd) -> None:
    commands = [["down"], ["up", "--no-tui"], ["ack", "rogue"], ["-c", "../herd.toml", "down"]]
    herd.write(busy(herd, "other", autostart=True) + asker(herd, "rogue", commands))
    client = herd.start()
    client.call("start", name="other")
    client.call("start", name="rogue")
    herd.wait_state("rogue", "running")
    go(herd, "rogue")
    results = herd.root / "rogue" / "results.json"

    def other_runs() -> bool:
        try:
            return bool(herd.status("other")["state"] == "running")
        except (ApiError, OSError):
            return False  # the daemon is gone

    wait_until(lambda: results.exists() or not other_runs(), timeout_s=90)
    assert other_runs(), "the neighbour still runs and the daemon still serves"
    found = answers(herd, "rogue")
    refused(found["down"], "needs a person")
    refused(found["-c ../herd.toml down"], "needs a person")
    refused(found["up --no-tui"], "needs a person")
    refused(found["ack rogue"], "needs a person")
    assert herd.status("rogue")["state"] == "running"


def test_an_agent_reads_and_acts_on_its_own_session_only(herd: Herd) -> None:
    commands = [
        ["stop", "other"],
        ["kill", "other"],
        ["start", "idle"],
        ["restart", "other"],
        ["pause", "other"],
        ["status", "other"],
        ["status", "other", "--json"],
        ["logs", "other"],
        ["wait", "other", "--timeout", "0"],
        ["report", "other"],
        ["events", "--session", "other"],
        ["status", "nosuch"],
        ["ls", "--json"],
        ["status", "--json"],
        ["events", "--json"],
        ["status", "rogue", "--json"],
    ]
    herd.write(busy(herd, "other") + busy(herd, "idle") + asker(herd, "rogue", commands))
    client = herd.start()
    client.call("start", name="other")
    client.call("start", name="rogue")
    herd.wait_state("other", "running")
    herd.wait_state("rogue", "running")
    go(herd, "rogue")
    found = answers(herd, "rogue")
    for line in (
        "stop other",
        "kill other",
        "start idle",
        "restart other",
        "pause other",
        "status other",
        "status other --json",
        "logs other",
        "wait other --timeout 0",
        "report other",
        "events --session other",
    ):
        refused(found[line], "inside session 'rogue'", "manages")
    refused(found["status nosuch"], "inside session 'rogue'")
    assert herd.status("other")["state"] == "running", "the neighbour runs on"
    assert herd.status("idle")["state"] == "idle"
    for line in ("ls --json", "status --json"):
        assert found[line]["code"] == 0, found[line]
        assert [s["session"] for s in json.loads(found[line]["out"])] == ["rogue"]
    assert found["events --json"]["code"] == 0, found["events --json"]
    events = [json.loads(line) for line in found["events --json"]["out"].splitlines()]
    assert events and {e["session"] for e in events} == {"rogue"}
    own = found["status rogue --json"]
    assert own["code"] == 0 and json.loads(own["out"])["state"] == "running", own


def test_an_agent_sends_a_message_to_its_own_session_only(herd: Herd) -> None:
    commands = [["send", "other", "obey me"], ["send", "rogue", "note to my next run"]]
    own_resume = f"resume = {json.dumps(['true', '{message}'])}"
    other = busy(herd, "other").replace('stop_grace = "1s"', f'stop_grace = "1s"\n{own_resume}')
    herd.write(other + asker(herd, "rogue", commands, own_resume))
    client = herd.start()
    client.call("start", name="other")
    client.call("start", name="rogue")
    herd.wait_state("other", "running")
    herd.wait_state("rogue", "running")
    go(herd, "rogue")
    found = answers(herd, "rogue")
    refused(found["send other obey me"], "inside session 'rogue'", "manages")
    assert not herd.events("other", "message-queued")
    own = found["send rogue note to my next run"]
    assert own["code"] == 0 and "queued for the next run" in own["out"], own
    (queued,) = herd.events("rogue", "message-queued")
    assert queued["data"]["origin"] == "inside session 'rogue'"


def test_manages_lets_an_orchestrator_start_stop_and_read_its_workers_only(herd: Herd) -> None:
    commands = [
        ["start", "worker-1"],
        ["status", "worker-1", "--json"],
        ["logs", "worker-1"],
        ["events", "--session", "worker-1", "--json"],
        ["ls", "--json"],
        ["stop", "worker-1"],
        ["wait", "worker-1", "--timeout", "30"],
        ["approve", "worker-1"],
        ["start", "solo"],
        ["stop", "solo"],
    ]
    herd.write(
        asker(herd, "boss", commands, extra='manages = ["worker-*"]')
        + busy(herd, "worker-1")
        + busy(herd, "solo", autostart=True)
    )
    client = herd.start()
    client.call("start", name="solo")
    client.call("start", name="boss")
    herd.wait_state("boss", "running")
    go(herd, "boss")
    found = answers(herd, "boss")
    for line in ("start worker-1", "stop worker-1", "logs worker-1"):
        assert found[line]["code"] == 0, found[line]
    assert json.loads(found["status worker-1 --json"]["out"])["session"] == "worker-1"
    assert found["wait worker-1 --timeout 30"]["code"] == 3, "the stopped task's exit"
    assert [s["session"] for s in json.loads(found["ls --json"]["out"])] == ["boss", "worker-1"]
    worker_events = found["events --session worker-1 --json"]["out"].splitlines()
    assert any(json.loads(line)["kind"] == "run-started" for line in worker_events)
    refused(found["approve worker-1"], "needs a person")
    refused(found["start solo"], "inside session 'boss'")
    refused(found["stop solo"], "inside session 'boss'")
    assert herd.status("solo")["state"] == "running"
    assert herd.status("worker-1")["state"] == "stopped"


def test_an_agent_that_leaves_its_tree_and_clears_its_env_is_still_held_by_its_cgroup(
    herd: Herd,
) -> None:
    probe = cgroups.create("probe-trust")
    if probe is None:
        pytest.skip("no cgroup v2 for runs on this machine")
    cgroups.remove(probe)
    setsid = shutil.which("setsid")
    assert setsid is not None
    escape = (
        f"{setsid} -f env -i PATH={os.environ['PATH']} sh -c "
        f"'{HERD} approve gated > escaped.out 2>&1; echo $? > escaped.tmp; "
        "mv escaped.tmp escaped.code'; exec sleep 600"
    )
    folder = herd.root / "rogue"
    folder.mkdir()
    herd.write(
        gated(herd)
        + f"""
        [[session]]
        name = "rogue"
        cwd = "{folder}"
        command = {json.dumps(escape)}
        autostart = false
        restart = "never"
        stop_grace = "1s"
    """
    )
    client = herd.start()
    client.call("start", name="gated")
    herd.wait_state("gated", "waiting-approval", timeout_s=60)
    client.call("start", name="rogue")
    code = wait_until(lambda: (folder / "escaped.code").exists(), what="the escaped approve")
    assert code
    said = (folder / "escaped.out").read_text()
    assert (folder / "escaped.code").read_text().strip() == str(FORBIDDEN_EXIT), said
    assert "needs a person" in said
    assert herd.status("gated")["state"] == "waiting-approval"


VERIFIER = f"""
import json, pathlib, subprocess, sys
said = []
for argv in (["approve", "gated"], ["status", "gated"]):
    done = subprocess.run([{HERD!r}, *argv], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)
    said.append({{"code": done.returncode, "err": done.stderr}})
out = pathlib.Path(sys.argv[1])
out.with_suffix(".tmp").write_text(json.dumps(said))
out.with_suffix(".tmp").rename(out)
"""
"""A `verify` command (the agent's tests, say) that asks herd for the person."""

COMMITTER = script("""
    import subprocess, time
    open("work.txt", "w").write("done")
    subprocess.run(["git", "add", "work.txt"], check=True)
    subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "work"],
                   check=True)
    time.sleep(600)
""")


def test_a_verify_command_the_agent_wrote_is_inside_its_session_too(herd: Herd) -> None:
    repo = make_repo(herd.root / "builder")
    said = herd.root / "verify-said.json"
    herd.write(
        gated(herd)
        + f"""
        [[session]]
        name = "builder"
        cwd = "{repo}"
        command = {COMMITTER}
        autostart = false
        verify = {json.dumps([PY, "-c", VERIFIER, str(said)])}
        stop_grace = "1s"
    """
    )
    client = herd.start()
    client.call("start", name="gated")
    herd.wait_state("gated", "waiting-approval", timeout_s=60)
    client.call("start", name="builder")
    wait_until(said.exists, timeout_s=120, what="the verify command's herd calls")
    approve, status = json.loads(said.read_text())
    assert approve["code"] == FORBIDDEN_EXIT, approve
    assert "needs a person" in approve["err"] and "inside session 'builder'" in approve["err"]
    assert status["code"] == FORBIDDEN_EXIT, status
    assert herd.status("gated")["state"] == "waiting-approval"


def test_the_person_still_does_everything_from_outside(herd: Herd) -> None:
    herd.write(busy(herd, "other") + busy(herd, "idle"))
    herd.start()
    for argv in (["start", "other"], ["pause", "other"], ["resume", "other"], ["stop", "other"]):
        done = herd.cli(*argv)
        assert done.returncode == 0, (argv, done.stderr)
    listed = herd.cli("ls", "--json")
    assert [s["session"] for s in json.loads(listed.stdout)] == ["other", "idle"]


def test_a_client_that_is_gone_before_it_is_read_is_never_taken_for_a_person(
    tmp_path: Path,
) -> None:
    """A PID checked after its process exited could be anyone's by then: no verdict at all,
    and a request without one may ask nothing of any session."""
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(2)
        connect = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r})"
        subprocess.run([PY, "-c", connect], check=True)
        conn, _ = listener.accept()
        with conn:
            assert peer.identify(conn).lineage is None
        alive = subprocess.Popen(
            [PY, "-c", connect + "; print('in', flush=True); import sys; sys.stdin.read()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        with alive:
            assert alive.stdout is not None and alive.stdout.readline() == "in\n"
            conn, _ = listener.accept()
            with conn:
                seen = peer.identify(conn)
            assert alive.stdin is not None
            alive.stdin.close()
    assert seen.lineage is not None and seen.lineage.processes[0].pid == alive.pid

    unknown = trust.scope_of(None, trust.FleetRuns({}, None), tmp_path)
    assert not unknown.person and not unknown.sees("api", HerdConfig())
    with pytest.raises(ApiError) as refusal:
        trust.authorize({"op": "approve", "name": "api"}, unknown, HerdConfig())
    assert refusal.value.code == "forbidden"


def test_without_a_pidfd_a_process_younger_than_the_connection_is_not_the_client() -> None:
    """Kernels before 6.5 give no pidfd: a PID whose process started after the accept was
    reused, and what /proc says of it is not the client's."""
    me = peer.read_facts(os.getpid())
    assert me is not None
    lineage = peer.Lineage((me,))
    started_s = me.start_ticks / os.sysconf("SC_CLK_TCK")
    assert peer._still_the_client(lineage, None, accepted_s=started_s + 1.0)
    assert not peer._still_the_client(lineage, None, accepted_s=started_s - 1.0)
