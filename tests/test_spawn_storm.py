"""A fleet starting and stopping at once: each session gets its own outcome, whatever the
others do."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest
from conftest import Herd, make_repo, script, wait_until

from agentherd.supervisor.process import execwait

SLEEPER = script("""
    import time
    print("working", flush=True)
    time.sleep(600)
""")

SESSIONS = 12
BROKEN = 5
"""This session's program does not exist: its start fails among eleven that succeed."""


def test_one_session_that_cannot_start_among_many_fails_alone(herd: Herd) -> None:
    blocks = []
    for index in range(SESSIONS):
        (herd.root / f"w{index}").mkdir()
        command = '["/nonexistent/agent"]' if index == BROKEN else SLEEPER
        blocks.append(f'[[session]]\nname = "s{index}"\ncwd = "w{index}"\ncommand = {command}\n')
    herd.write("\n".join(blocks))
    client = herd.start()
    started = client.call("up")
    assert len(started) == SESSIONS
    statuses = wait_until(
        lambda: (
            (found := {s["session"]: s for s in client.call("ls")})
            and all(s["state"] in ("running", "failed") for s in found.values())
            and found
        ),
        what="every start to have ended one way or the other",
    )
    failed = {name: s["reason"] for name, s in statuses.items() if s["state"] == "failed"}
    assert failed == {f"s{BROKEN}": "spawn-failed"}
    wait_until(
        lambda: all(
            s["last_line"] == "working" for s in client.call("ls") if s["state"] != "failed"
        ),
        what="every other agent's first line to be read (the watch caught up with the starts)",
    )


COUNTS_SIGTERMS = """
    import os, signal, sys, time
    def on_term(signum, frame):
        with open(os.environ["TERMS_FILE"], "a") as terms:
            terms.write("TERM\\n")
        time.sleep(0.5)  # a second SIGTERM meanwhile would be written too
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)
    print("ready", flush=True)
    time.sleep(600)
"""


@pytest.mark.pidns
def test_a_stop_sends_the_agent_one_sigterm_not_one_per_way_of_finding_it(herd: Herd) -> None:
    """The run's group is signalled at once, then a scan looks for what escaped it: a process
    of the group must not get the signal twice (a second SIGTERM or SIGINT makes some agents
    quit at once instead of cleanly)."""
    terms = herd.root / "terms"
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{make_repo(herd.root / "api")}"
        command = {script(COUNTS_SIGTERMS)}
        env = {{ TERMS_FILE = "{terms}" }}
        stop_grace = "5s"
    """)
    client = herd.start()
    client.call("start", name="api")
    wait_until(lambda: herd.status("api")["last_line"] == "ready", what="the agent to be ready")
    stopped = client.call("stop", name="api")
    assert stopped["state"] == "stopped"
    assert terms.read_text() == "TERM\n"


@pytest.mark.pidns
def test_the_exec_wait_finds_a_child_among_the_newer_pids() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; subprocess.run(['sleep', '600'])"],
    )
    try:
        wrapper = psutil.Process(parent.pid)
        children = wait_until(lambda: wrapper.children(), what="the child to be forked")
        found = execwait._newer_children(wrapper)
        assert [p.pid for p in found] == [p.pid for p in children]
    finally:
        forked = psutil.Process(parent.pid).children()
        for proc in forked:
            proc.kill()
        parent.kill()
        parent.wait(10)
        psutil.wait_procs(forked, timeout=10)  # reaped by PID 1 once orphaned: gone, not zombies
