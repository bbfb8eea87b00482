"""Waiting until a new run's wrapper has exec'd the agent, so a signal lands in the agent."""

from __future__ import annotations

import contextlib
import os
import time

import anyio
import psutil

AGENT_EXEC_WAIT_S = 5.0
"""A launch waits at most this long for the wrapper to exec the agent (milliseconds normally)."""
AGENT_EXEC_POLL_S = 0.005
CHILD_FULL_SCAN_EVERY = 8
"""Every this many polls for the agent's exec, look at every process, not just newer PIDs."""


async def wait_agent_exec(pid: int) -> None:
    """Return once the wrapper `pid` has exec'd the agent, or ended, or AGENT_EXEC_WAIT_S passed.

    Until the exec a signal lands in the wrapper: its trap swallows a stop signal meant for the
    agent (which then starts anyway), and a SIGSTOP freezes dash's vfork child before its exec,
    so the wrapper can never show as stopped. A run counts as running only after this.
    The quick looks run on the loop (a few /proc reads each): a worker thread per start, each
    polling every few milliseconds, took the GIL from the loop so often that a client's
    request waited hundreds of milliseconds during a fleet's start.
    """
    deadline = time.monotonic() + AGENT_EXEC_WAIT_S
    own = _read_proc(f"/proc/{pid}/cmdline")
    if own is None or _read_proc(f"/proc/{pid}/task/{pid}/children") is None:
        await _wait_agent_exec_by_scan(pid)  # a kernel without the children list
        return
    while time.monotonic() < deadline and not _zombie_or_gone(pid):
        # The wrapper's own list of children: two small reads a poll, where a look at every
        # newer PID's stat file (and a psutil object per child) was a tenth of a fleet's start.
        listed = _read_proc(f"/proc/{pid}/task/{pid}/children") or b""
        for child in listed.split():
            argv = _read_proc(f"/proc/{int(child)}/cmdline")
            if argv and argv != own:  # a vfork child shares the wrapper's until its exec
                return
        await anyio.sleep(AGENT_EXEC_POLL_S)


def _read_proc(path: str) -> bytes | None:
    """A /proc file's bytes, or None when the process (or the file) is gone."""
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return None


def _zombie_or_gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie until its parent reaps it) or is gone."""
    stat = _read_proc(f"/proc/{pid}/stat")
    return stat is None or stat.rpartition(b")")[2].split()[:1] == [b"Z"]


async def _wait_agent_exec_by_scan(pid: int) -> None:
    """`wait_agent_exec` where /proc lists no children: a scan of the newer PIDs instead."""
    deadline = time.monotonic() + AGENT_EXEC_WAIT_S
    try:
        wrapper = psutil.Process(pid)
        own = wrapper.cmdline()
        polls = 0
        while time.monotonic() < deadline and wrapper.status() != psutil.STATUS_ZOMBIE:
            polls += 1
            if polls % CHILD_FULL_SCAN_EVERY == 0:
                children = await anyio.to_thread.run_sync(wrapper.children)
            else:
                children = _newer_children(wrapper)
            for child in children:
                with contextlib.suppress(psutil.Error):
                    argv = child.cmdline()  # a vfork child shares the wrapper's until its exec
                    if argv and argv != own:
                        return
            await anyio.sleep(AGENT_EXEC_POLL_S)
    except psutil.Error:
        return  # the wrapper is gone: nothing is left to wait for


def _newer_children(parent: psutil.Process) -> list[psutil.Process]:
    """The children of `parent` among the PIDs above its own.

    A fork takes the next free PID, so a new wrapper's child is nearly always above it; reading
    only those spares the stat file of every process on the machine at each poll (psutil's
    `children()`), which was a tenth of a fleet's cold start. The PIDs wrap around at the
    limit: the full look every few polls finds a child below its parent.
    """
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit() or int(name) <= parent.pid:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat_file:
                fields = stat_file.read().rpartition(b")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if len(fields) > 1 and int(fields[1]) == parent.pid:
            with contextlib.suppress(psutil.Error):
                found.append(psutil.Process(int(name)))
    return found
