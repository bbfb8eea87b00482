"""A start waits for the wrapper to exec the agent, from the wrapper's own list of children:
never before the exec, at once after it, and not at all once the wrapper has ended."""

from __future__ import annotations

import subprocess
import sys

import anyio
import psutil
import pytest

from agentherd.supervisor.process import execwait

PARENT = (
    "import subprocess, sys; sys.stdin.readline(); "
    "subprocess.run(['sleep', '600']) if sys.argv[1] == 'fork' else None"
)
NOT_YET_S = 0.5
"""How long the wait must still be waiting while the parent has no child."""


def _parent(mode: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", PARENT, mode], stdin=subprocess.PIPE)


def _stop(parent: subprocess.Popen[bytes]) -> None:
    """Kill the parent and its child and wait until both are gone (a SIGKILL sent is not yet a
    process ended: under load the leftover check once still found `sleep 600` running)."""
    listed = execwait._read_proc(f"/proc/{parent.pid}/task/{parent.pid}/children") or b""
    children = []
    for child in listed.split():
        try:
            children.append(psutil.Process(int(child)))
        except psutil.NoSuchProcess:
            continue
        subprocess.run(["kill", "-9", child.decode()], check=False)
    parent.kill()
    parent.wait(10)
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, alive


@pytest.mark.pidns
@pytest.mark.parametrize("by_scan", [False, True], ids=["children-list", "pid-scan"])
def test_the_wait_ends_at_the_childs_exec_not_before(by_scan: bool) -> None:
    wait = execwait._wait_agent_exec_by_scan if by_scan else execwait.wait_agent_exec
    parent = _parent("fork")
    assert parent.stdin is not None
    try:

        async def main() -> None:
            with anyio.move_on_after(NOT_YET_S) as waiting:
                await wait(parent.pid)
            assert waiting.cancelled_caught, "returned before the parent had any child"
            parent.stdin.write(b"go\n")  # type: ignore[union-attr]
            parent.stdin.flush()  # type: ignore[union-attr]
            with anyio.fail_after(execwait.AGENT_EXEC_WAIT_S - 1):
                await wait(parent.pid)
            listed = execwait._read_proc(f"/proc/{parent.pid}/task/{parent.pid}/children")
            assert listed, "returned, but the parent has no child"
            child_argv = execwait._read_proc(f"/proc/{int(listed.split()[0])}/cmdline")
            assert child_argv == b"sleep\x00600\x00"

        anyio.run(main)
    finally:
        _stop(parent)


@pytest.mark.pidns
def test_the_wait_ends_when_the_wrapper_has_ended() -> None:
    parent = _parent("exit")
    assert parent.stdin is not None
    parent.stdin.write(b"go\n")
    parent.stdin.flush()
    try:

        async def main() -> None:
            with anyio.fail_after(execwait.AGENT_EXEC_WAIT_S - 1):
                while not execwait._zombie_or_gone(parent.pid):
                    await anyio.sleep(0.01)
                await execwait.wait_agent_exec(parent.pid)

        anyio.run(main)
    finally:
        _stop(parent)
