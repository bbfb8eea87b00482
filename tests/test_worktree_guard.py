"""Two sessions never run in one worktree at once: the second start is refused, exit 2."""

from __future__ import annotations

import psutil
import pytest
from conftest import Herd, make_repo, script, wait_until

from agentherd.supervisor.api.protocol import ApiError

SLEEPER = script("""
    import time
    print("working", flush=True)
    time.sleep(600)
""")


def agents_in(herd: Herd) -> list[str]:
    """The sessions whose agents (the wrappers herd started) are alive now."""
    names = []
    for proc in psutil.process_iter(["environ", "status", "cmdline"]):
        environ = proc.info["environ"] or {}
        wrapper = (proc.info["cmdline"] or [""])[0] == "/bin/sh"
        ours = environ.get("HERD_RUN_DIR", "").startswith(str(herd.root))
        if wrapper and ours and proc.info["status"] != psutil.STATUS_ZOMBIE:
            names.append(environ["HERD_SESSION"])
    return sorted(names)


def test_a_second_session_naming_the_same_cwd_is_refused_while_the_first_runs(
    herd: Herd,
) -> None:
    (herd.root / "work").mkdir()
    herd.write(f"""
        [[session]]
        name = "first"
        cwd = "work"
        command = {SLEEPER}

        [[session]]
        name = "second"
        cwd = "work"
        command = {SLEEPER}
    """)
    client = herd.start()
    client.call("start", name="first")
    herd.wait_state("first", "running")
    refused = herd.cli("start", "second")
    assert refused.returncode == 2, refused
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "session first is running in the same worktree" in lines[0], lines
    assert herd.status("second")["state"] == "idle"
    wait_until(lambda: agents_in(herd) == ["first"], what="only first's agent")
    client.call("stop", name="first", socket_timeout_s=None)
    client.call("start", name="second")  # never at once is fine
    assert herd.wait_state("second", "running")
    wait_until(lambda: agents_in(herd) == ["second"], what="only second's agent")


def test_renaming_a_running_session_and_up_starts_no_second_agent(herd: Herd) -> None:
    repo = make_repo(herd.root / "repo")
    block = """
        [[session]]
        name = "{name}"
        cwd = "{cwd}"
        command = {command}
    """
    herd.write(block.format(name="old-name", cwd=repo, command=SLEEPER))
    client = herd.start()
    client.call("up")
    herd.wait_state("old-name", "running")
    herd.write(block.format(name="new-name", cwd=repo, command=SLEEPER))
    up = herd.cli("up", "--no-tui")
    assert up.returncode == 2, up
    assert "cannot start new-name: session old-name is running" in up.stderr
    assert len(up.stderr.strip().splitlines()) == 1
    assert herd.status("new-name")["state"] == "idle"
    wait_until(lambda: agents_in(herd) == ["old-name"], what="only old-name's agent")
    with pytest.raises(ApiError, match="old-name"):
        client.call("start", name="new-name")
