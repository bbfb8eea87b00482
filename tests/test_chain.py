"""Session chaining (`after`): links run in order under the real daemon, a failed link stops
the rest, a daemon restart keeps the queue, and `herd check` refuses what can never run."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from conftest import PY, SIMAGENT, Herd, make_repo, pid_gone, script, sim_repo, wait_until

from agentherd.sessions.chain import Link, Next, Step, next_step, start_waves
from agentherd.sessions.config import parse_config
from agentherd.sessions.configchecks import cluster_after_problems
from agentherd.sessions.states import State
from agentherd.sessions.status import SessionStatus
from agentherd.tui.dashboard.rows import detail_lines, row_cells


def link_script(name: str, gate: bool = False, exit_code: int = 0) -> str:
    """A run that (after `go-NAME` appears, when gated) appends its name to `order`, then exits."""
    return script(f"""
        import os, sys, time
        while {gate!r} and not os.path.exists("go-{name}"):
            time.sleep(0.02)
        with open("../order", "a") as f:
            f.write("{name}\\n")
        sys.exit({exit_code})
    """)


def chain_toml(herd: Herd, b_exit: int = 0, gate_a: bool = True) -> str:
    """Three sessions a -> b -> c (each `after` the one before), restart never, each in a
    folder of its own (two agents never share one)."""
    for name in "abc":
        (herd.root / name).mkdir(exist_ok=True)
    return f"""
        [defaults]
        restart = "never"

        [[session]]
        name = "a"
        cwd = "a"
        command = {link_script("a", gate=gate_a)}

        [[session]]
        name = "b"
        cwd = "b"
        command = {link_script("b", exit_code=b_exit)}
        after = ["a"]

        [[session]]
        name = "c"
        cwd = "c"
        command = {link_script("c")}
        after = ["b"]
    """


def order(herd: Herd) -> list[str]:
    path = herd.root / "order"
    return path.read_text().split() if path.exists() else []


# ----- the rules, without a process ----------------------------------------------------------


def test_a_link_waits_for_the_first_unfinished_and_never_runs_past_a_failure() -> None:
    done, running = Link(State.COMPLETED), Link(State.RUNNING)
    assert next_step(["a", "b"], {"a": done, "b": done}) == Next(Step.GO)
    assert next_step(["a", "b"], {"a": done, "b": running}).reason == "after:b"
    assert next_step(["a"], {}).reason == "after:a"  # not in the fleet: waited for
    failed = Link(State.FAILED, "exit 1")
    assert next_step(["a", "b"], {"a": running, "b": failed}).reason == "after-failed:b"
    stopped = Link(State.STOPPED, "user")
    assert next_step(["a"], {"a": stopped}).reason == "after-failed:a"
    # `herd down` stopped it: the next `herd up` runs it again, so its links keep waiting.
    assert next_step(["a"], {"a": Link(State.STOPPED, "down")}).reason == "after:a"


def test_up_starts_a_chain_first_link_first() -> None:
    after_of = {"c": ["b"], "b": ["a"], "x": []}
    assert start_waves(["c", "b", "a", "x"], after_of) == [["a", "x"], ["b"], ["c"]]
    assert start_waves(["c"], after_of) == [["c"]]  # its `after` not started with it


# ----- herd check ---------------------------------------------------------------------------


def test_check_refuses_a_cycle_and_an_unknown_name(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "a"
        command = {script("pass")}
        after = ["b"]

        [[session]]
        name = "b"
        command = {script("pass")}
        after = ["a", "nobody"]
    """)
    checked = herd.cli("check")
    assert checked.returncode == 2, checked
    lines = checked.stderr.strip().splitlines()
    assert (
        'herd.toml: session "b": after: no session is named "nobody"; '
        "name a session of this file or remove it"
    ) in lines
    assert (
        'herd.toml: session "a": after: "a" -> "b" -> "a" is a cycle: a session on it would '
        "wait for itself, so none could start; remove one of these `after` entries"
    ) in lines
    assert len(lines) == 2, lines


def test_after_in_defaults_is_refused(herd: Herd) -> None:
    herd.write(f"""
        [defaults]
        after = ["a"]

        [[session]]
        name = "a"
        command = {script("pass")}
    """)
    checked = herd.cli("check")
    assert checked.returncode == 2
    assert "herd.toml: defaults.after: after is per session; remove it" in checked.stderr


def test_check_warns_that_a_cluster_does_not_follow_after(tmp_path: Path) -> None:
    text = f"""
[cluster]
database_url_env = "HERD_TEST_DB"

[[session]]
name = "a"
command = {script("pass")}

[[session]]
name = "b"
command = {script("pass")}
after = ["a"]
"""
    config = parse_config(text, tmp_path / "herd.toml")
    assert [str(p) for p in cluster_after_problems(config)] == [
        'warning: herd.toml: session "b": after: is not followed across hosts yet: the '
        "cluster may start this session before a completed; run the chain without [cluster], "
        "or start each link yourself"
    ]


# ----- under the daemon ---------------------------------------------------------------------


def test_a_chain_of_three_runs_in_order(herd: Herd) -> None:
    herd.write(chain_toml(herd))
    client = herd.start()
    started = client.call("up")
    assert [(s["handle"], s.get("reason")) for s in started] == [
        ("a/1", None),
        ("b/1", "after:a"),
        ("c/1", "after:b"),
    ]
    herd.wait_state("a", "running")
    b, c = herd.status("b"), herd.status("c")
    assert (b["state"], b["reason"], b["task_state"]) == ("queued", "after:a", "working")
    assert (c["state"], c["reason"]) == ("queued", "after:b")
    listed = herd.cli("ls")
    assert "queued (after:a)" in listed.stdout and "queued (after:b)" in listed.stdout
    shown = SessionStatus.model_validate(b)  # the dashboard's row and its details
    # (with the not-a-git-repo badge once that look is done: the links are plain folders)
    assert row_cells(shown, 40)["state"][0].startswith("queued (after:a)")
    assert detail_lines(shown)[0].startswith("b  queued (after:a)")
    again = herd.cli("start", "c")
    assert again.stdout.strip() == "c/1"
    assert "c/1 queued (after:b): it starts once b has completed" in again.stderr
    (herd.root / "a" / "go-a").touch()
    waited = herd.cli("wait", "c/1")
    assert waited.returncode == 0, waited
    assert order(herd) == ["a", "b", "c"]
    assert [herd.status(n)["state"] for n in "abc"] == ["completed"] * 3
    queued = herd.events("c", "queued")
    assert queued and queued[0]["data"] == {"handle": "c/1", "waits_for": "b"}


def test_a_failed_link_stops_the_links_after_it(herd: Herd) -> None:
    herd.write(chain_toml(herd, b_exit=1, gate_a=False))
    client = herd.start()
    client.call("up")
    waited = herd.cli("wait", "c/1")
    assert waited.returncode == 3, waited  # stopped
    assert order(herd) == ["a", "b"]
    b, c = herd.status("b"), herd.status("c")
    assert (b["state"], b["reason"]) == ("failed", "exit 1")
    assert (c["state"], c["reason"], c["task_state"]) == (
        "stopped",
        "after-failed:b",
        "cancelled",
    )
    assert not herd.events("c", "run-started")
    report = herd.cli("report", "c")
    assert report.returncode == 0 and "after-failed:b" in report.stdout, report
    # Asked again while b still stands failed, c ends at once, with a handle of its own.
    again = herd.cli("start", "c")
    assert again.stdout.strip() == "c/2"
    assert "c/2 stopped (after-failed:b): b did not complete, so it cannot run" in again.stderr
    assert herd.cli("wait", "c/1").returncode == 3


def test_start_now_runs_a_queued_link_at_once(herd: Herd) -> None:
    herd.write(chain_toml(herd))
    client = herd.start()
    client.call("up")
    herd.wait_state("b", "queued")
    started = herd.cli("start", "b", "--now", "--json")
    assert json.loads(started.stdout)["handle"] == "b/1"
    herd.wait_state("c", "completed")  # b completed: c's turn came, a or not
    assert order(herd) == ["b", "c"]  # a still waits for its gate
    assert herd.status("a")["state"] == "running"
    (herd.root / "a" / "go-a").touch()
    herd.wait_state("a", "completed")


def test_a_daemon_restart_keeps_the_queue_and_its_order(herd: Herd, tmp_path: Path) -> None:
    herd.write(chain_toml(herd))
    client = herd.start()
    client.call("up")
    herd.wait_state("a", "running")
    herd.stop_daemon()  # a's agent keeps running; the queue is in state.db
    herd.start()
    assert herd.wait_state("b", "queued")["reason"] == "after:a"
    assert herd.status("c")["reason"] == "after:b"
    (herd.root / "a" / "go-a").touch()
    herd.wait_state("c", "completed")
    assert order(herd) == ["a", "b", "c"]
    wait_until(lambda: herd.status("a")["state"] == "completed", what="a re-adopted, completed")


def test_stopping_a_queued_link_ends_it_and_down_then_up_queues_it_again(herd: Herd) -> None:
    herd.write(chain_toml(herd))
    client = herd.start()
    client.call("up")
    herd.wait_state("c", "queued")
    stopped = herd.cli("stop", "b")
    assert stopped.stdout.strip() == "b: stopped (user)", stopped
    c = herd.wait_state("c", "stopped")
    assert c["reason"] == "after-failed:b"
    # A new task of each gets a handle of its own (the queued ones never ran).
    assert [herd.cli("start", n).stdout.strip() for n in "bc"] == ["b/2", "c/2"]
    assert herd.status("c")["reason"] == "after:b"
    herd.down()  # every link stopped (down): the next `up` queues them again
    client = herd.start()
    started = client.call("up")
    assert [(s["handle"], s.get("reason")) for s in started] == [
        ("a/2", None),
        ("b/3", "after:a"),
        ("c/3", "after:b"),
    ]
    (herd.root / "a" / "go-a").touch()
    herd.wait_state("c", "completed")
    assert order(herd) == ["a", "b", "c"]


FAILING_VERIFY = json.dumps([PY, "-c", "raise SystemExit(1)"])


@pytest.mark.parametrize("verify", ['"true"', FAILING_VERIFY], ids=["passes", "fails"])
def test_a_link_after_a_verifying_session_waits_for_its_verdict(herd: Herd, verify: str) -> None:
    """`completed` of a session with `verify` means verified: a failed verdict breaks the chain."""
    repo = sim_repo(herd.root / "repo", features=2)
    (herd.root / "b").mkdir()
    herd.write(f"""
        [defaults]
        restart = "never"

        [[session]]
        name = "schema"
        cwd = "{repo}"
        command = {json.dumps([*SIMAGENT, "--delay", "0.05"])}
        agent = "claude"
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        verify = {verify}

        [[session]]
        name = "b"
        cwd = "b"
        command = {link_script("b")}
        after = ["schema"]
    """)
    herd.start().call("up")
    ended = herd.wait_state("b", "completed", "stopped", timeout_s=60)
    schema = herd.status("schema")
    if verify == FAILING_VERIFY:
        assert (schema["state"], schema["reason"]) == ("failed", "unverified")
        assert (ended["state"], ended["reason"]) == ("stopped", "after-failed:schema")
        assert order(herd) == []
        return
    assert schema["state"] == "completed" and schema["checkpoint"]["verified"] is True
    seqs = {(e["session"], e["kind"]): e["seq"] for e in herd.events()}
    assert seqs[("schema", "verify-passed")] < seqs[("b", "task-started")]
    assert order(herd) == ["b"]


@pytest.mark.pidns
def test_a_link_whose_after_completed_while_the_daemon_was_dead_starts_next(herd: Herd) -> None:
    """kill -9 of the daemon mid-chain: a completes while none runs; the next one goes on."""
    herd.write(chain_toml(herd))
    assert herd.cli("up", "--no-tui").returncode == 0
    try:
        wait_until(lambda: "queued (after:b)" in herd.cli("ls").stdout, what="c queued")
        wait_until(lambda: json.loads(herd.cli("status", "a", "--json").stdout)["pid"])
        daemon_pid = int((herd.root / ".herd" / "daemon.lock").read_text())
        os.kill(daemon_pid, signal.SIGKILL)  # ours: `herd up` started it in this test's namespace
        wait_until(lambda: pid_gone(daemon_pid), what="the killed daemon gone")
        (herd.root / "a" / "go-a").touch()
        wait_until(lambda: (herd.root / ".herd/runs/a/1/exit_status").exists(), what="a's end")
        up = herd.cli("up", "--no-tui")
        assert up.returncode == 0, up
        waited = herd.cli("wait", "c/1", "--timeout", "60")
        assert waited.returncode == 0, waited
        assert order(herd) == ["a", "b", "c"]
    finally:
        herd.cli("down")


def test_restarting_a_link_keeps_the_links_after_it_queued(herd: Herd) -> None:
    """A restart ends the task it stops and begins another at once: the links after it wait on
    (they ended `after-failed` at the stop, when the restart was not yet done)."""
    make_repo(herd.root / "a")  # a checkpoint to restart from: the rescue and reset take a while
    herd.write(chain_toml(herd))
    client = herd.start()
    client.call("up")
    herd.wait_state("a", "running")
    herd.wait_state("c", "queued")
    restarted = herd.cli("restart", "a", "--from", "HEAD")
    assert restarted.returncode == 0 and restarted.stdout.strip() == "a/2", restarted
    assert herd.cli("wait", "a/1").returncode == 3  # the task the restart ended: stopped
    b = herd.status("b")
    assert (b["state"], b["reason"]) == ("queued", "after:a"), b
    (herd.root / "a" / "go-a").touch()
    herd.wait_state("c", "completed")
    assert order(herd) == ["a", "b", "c"]
