"""A run's processes: find every one it provably owns, signal only those, stop the tree."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

import anyio
import psutil

from agentherd.supervisor.process import ancestry, cgroups, gonecheck, proctable
from agentherd.supervisor.process.runfolder import lock_held
from agentherd.supervisor.process.runid import RunIdentity, signal_name

log = logging.getLogger("herd.procs")

CREATE_TIME_SLACK_S = 0.05
"""psutil's start times are rounded to clock ticks: two readings of one process differ this much."""


def leader_alive(identity: RunIdentity) -> bool:
    """True while the run's leader process (checked by start time, not PID alone) lives."""
    if identity.pid is None or identity.create_time is None or identity.pid <= 1:
        return False
    try:
        proc = psutil.Process(identity.pid)
        return (
            abs(proc.create_time() - identity.create_time) < CREATE_TIME_SLACK_S
            and proc.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.Error:
        return False


def run_alive(identity: RunIdentity, folder: Path) -> bool:
    """True while anything of the run lives: its leader, its lock, or its cgroup."""
    return leader_alive(identity) or lock_held(folder) or cgroups.populated(identity.cgroup)


def _refusal(pid: int, pgid: int | None) -> str | None:
    """Why no signal may ever go to this process, or None when it may."""
    if pid <= 1:
        return "PID 1 and below are never signalled"
    if pid == os.getpid():
        return "it is the daemon itself"
    if pgid is not None and pgid <= 1:
        return f"its process group {pgid} is not a run's"
    if pgid is not None and pgid == os.getpgrp():
        return "it is in the daemon's own process group"
    if pid in ancestry.ancestor_pids():
        return "it is an ancestor of the daemon"
    return None


def _confirmed_group(identity: RunIdentity) -> int | None:
    """The run's process group, only while its leader is the very process herd started."""
    pgid, pid, created = identity.pgid, identity.pid, identity.create_time
    if pgid is None or pid is None or created is None:
        return None
    reason = _refusal(pgid, pgid) or (None if pgid == pid else "it is not the leader's")
    if reason is not None:
        log.warning("refused process group %s of run %s: %s", pgid, identity.tag, reason)
        return None
    try:
        # A zombie leader still holds its PID, so its group cannot be anyone else's yet.
        if abs(psutil.Process(pgid).create_time() - created) < CREATE_TIME_SLACK_S:
            return pgid
    except psutil.Error:
        pass
    return None  # leader gone or recycled: only the tag and the cgroup prove membership now


Known = dict[tuple[int, float], psutil.Process]
"""Processes proven to be a run's during one stop, by (pid, start time): they stay proven."""


def run_processes(
    identity: RunIdentity, known: Known | None = None, not_before: float | None = None
) -> list[psutil.Process]:
    """Every live process the run provably owns: its cgroup, its confirmed group, its env tag.

    The process table is a shared scan begun no earlier than `not_before` (default: now), so
    runs stopping together share one scan per poll.
    """
    found: list[psutil.Process] = []
    in_cgroup = cgroups.members(identity.cgroup)
    group = _confirmed_group(identity)
    table = proctable.SHARED.table(not_before)
    candidates: dict[int, proctable.Entry] = {}
    for entry in table.by_tag.get(identity.tag, []) if identity.tag else []:
        candidates[entry.pid] = entry
    if group is not None:
        for entry in table.by_pgid.get(group, []):
            if _in_group(entry, identity):
                candidates[entry.pid] = entry
    for pid in in_cgroup:
        member = table.by_pid.get(pid)
        if member is not None:
            candidates[pid] = member
    if known is not None:
        for entry in table.entries:
            if (entry.pid, entry.create_time) in known:
                candidates[entry.pid] = entry
    for entry in candidates.values():
        key = (entry.pid, entry.create_time)
        if known is not None and key in known:
            found.append(known[key])
            continue
        found.append(entry.proc)
        if known is not None:
            known[key] = entry.proc
    return found


def _in_group(entry: proctable.Entry, identity: RunIdentity) -> bool:
    """A member of the run's confirmed group, started no earlier than the run itself."""
    if identity.create_time is None:
        return False
    return entry.create_time >= identity.create_time - CREATE_TIME_SLACK_S


def find_leader(tag: str) -> RunIdentity | None:
    """The wrapper (group leader) of the run carrying `tag`, if any process of it lives."""
    for entry in proctable.SHARED.table().by_tag.get(tag, []) if tag else []:
        if entry.pid > 1 and entry.pgid == entry.pid:
            return RunIdentity(entry.pid, entry.pid, entry.create_time, tag)
    return None


def send_checked(proc: psutil.Process, signum: int) -> bool:
    """Send one signal, unless the target is PID <= 1, the daemon, its group or its ancestor.

    Every signal herd sends to an agent goes through here, so no caller can get it wrong;
    a refusal is logged. psutil refuses a PID reused since `proc` was found.
    """
    try:
        pgid: int | None = os.getpgid(proc.pid)
    except OSError:
        return False
    reason = _refusal(proc.pid, pgid)
    if reason is not None:
        log.warning("refused to send %s to pid %d: %s", signal_name(signum), proc.pid, reason)
        return False
    try:
        proc.send_signal(signum)
    except psutil.Error:
        return False
    return True


def signal_run(
    identity: RunIdentity,
    signum: int,
    known: Known | None = None,
    group_done: int | None = None,
    not_before: float | None = None,
) -> int:
    """Send `signum` to every process of the run (each re-checked by psutil); returns how many.

    Processes still in `group_done`, a group `signal_group` signalled as a whole, are skipped:
    a second SIGINT or SIGTERM makes some agents quit at once instead of cleanly. The process
    scan began no earlier than `not_before` (default: now).
    """
    return sum(
        send_checked(proc, signum)
        for proc in run_processes(identity, known, not_before)
        if group_done is None or not _in_pgid(proc.pid, group_done)
    )


def signal_group(identity: RunIdentity, signum: int) -> int | None:
    """Send `signum` to the run's process group at once, without a process scan, while its
    leader is the very process herd started; return the group, or None if none was signalled.

    A fleet's `herd down` signalled each run only after a scan of every process on the
    machine, which 200 stops took seconds to share; the scan still follows, for what escaped.
    """
    group = _confirmed_group(identity)
    if group is None:
        return None
    try:
        os.killpg(group, signum)
    except OSError:
        return None
    return group


def signal_cgroup(identity: RunIdentity, signum: int, group_done: int | None) -> bool:
    """Send `signum` to the members of the run's cgroup outside `group_done`; False (nothing
    sent) when the run has no cgroup herd made, so the caller scans every process instead.

    Every process of the run is in its cgroup (the wrapper moved in before starting the
    agent), so what left the group is found in `cgroup.procs`, not by reading the environment
    of every process on the machine: that scan was most of a fleet's `herd down`. An empty
    cgroup means the whole run has ended already (the checks that it is gone read the
    cgroup too: gonecheck).
    """
    if not cgroups.is_run_cgroup(identity.cgroup):
        return False
    for pid in cgroups.members(identity.cgroup):  # none: every process of the run has ended
        if group_done is not None and _in_pgid(pid, group_done):
            continue
        try:
            send_checked(psutil.Process(pid), signum)
        except psutil.Error:
            continue  # gone meanwhile
    return True


def _in_pgid(pid: int, pgid: int) -> bool:
    try:
        return os.getpgid(pid) == pgid
    except OSError:
        return False


def pause_run(identity: RunIdentity, timeout_s: float, poll_s: float) -> bool:
    """SIGSTOP the run until every process of it shows as stopped; False if one never did.

    A process forked after a pass, or busy in the kernel, is stopped again at the next pass.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        running = [proc for proc in run_processes(identity) if not _stopped(proc)]
        if not running:
            return True
        if time.monotonic() >= deadline:
            return False
        for proc in running:
            send_checked(proc, signal.SIGSTOP)
        time.sleep(poll_s)


def _stopped(proc: psutil.Process) -> bool:
    """Stopped by a signal, or already ended: nothing of it runs."""
    try:
        return proc.status() in {
            psutil.STATUS_STOPPED,
            psutil.STATUS_TRACING_STOP,
            psutil.STATUS_ZOMBIE,
        }
    except psutil.Error:
        return True


def _kill_run(identity: RunIdentity, known: Known) -> int:
    """SIGKILL the whole run: its cgroup at once (any namespace), then each process found."""
    cgroups.kill(identity.cgroup)
    return signal_run(identity, signal.SIGKILL, known)


def _run_gone(identity: RunIdentity, known: Known, not_before: float) -> bool:
    """Nothing of the run left: its cgroup empty and its leader gone where it has a cgroup
    (gonecheck), else nothing in a process scan begun after `not_before`."""
    by_cgroup = gonecheck.gone_by_cgroup(identity, leader_alive(identity), known)
    if by_cgroup is not None:
        return by_cgroup
    gone = not run_processes(identity, known, not_before)
    return gone and not cgroups.populated(identity.cgroup)


async def stop_tree(
    identity: RunIdentity,
    stop_signal: int,
    grace_s: float,
    kill_wait_s: float,
    poll_s: float,
    continue_first: bool = False,
    leader_exited: anyio.Event | None = None,
) -> bool:
    """Signal the run, wait `grace_s`, SIGKILL what is left, wait `kill_wait_s`.

    Returns True when nothing of the run is left; False means it could not be killed.
    A process proven to be the run's stays so for the whole stop, even once its leader is gone.
    `leader_exited`, set once the leader (the daemon's own child, reaped by the child watcher)
    has exited: until then the run is not gone, and the grace is waited without process scans.
    """
    known: Known = {}
    asked = time.monotonic()
    if stop_signal != signal.SIGKILL:
        group = signal_group(identity, stop_signal)  # a few /proc reads: fine on the loop
        if not await anyio.to_thread.run_sync(signal_cgroup, identity, stop_signal, group):
            # Any scan begun since the stop was asked for finds what escaped the group: runs
            # stopping together share it, instead of each waiting for a scan begun after its turn.
            await anyio.to_thread.run_sync(signal_run, identity, stop_signal, known, group, asked)
        if continue_first:
            await anyio.to_thread.run_sync(signal_run, identity, signal.SIGCONT, known)
        signalled = time.monotonic()
        if leader_exited is not None:
            # A live leader is a process of the run: polling scans (every process's
            # environment, shared by the runs stopping together) cannot find the run gone
            # before it exits, and 200 stops' polls were most of `herd down`'s time.
            with anyio.move_on_after(grace_s):
                await leader_exited.wait()
        grace_left_s = max(0.0, signalled + grace_s - time.monotonic())
        if await _wait_empty(identity, known, grace_left_s, poll_s):
            return True
    return await _wait_empty(identity, known, kill_wait_s, poll_s, kill=True)


async def _wait_empty(
    identity: RunIdentity, known: Known, timeout_s: float, poll_s: float, kill: bool = False
) -> bool:
    """Wait until nothing of the run is left, killing again what a fork left behind."""
    deadline = time.monotonic() + timeout_s
    while True:
        poll_began = time.monotonic()  # a scan from before the signals cannot tell "gone"
        if kill:
            await anyio.to_thread.run_sync(_kill_run, identity, known)
        if await anyio.to_thread.run_sync(_run_gone, identity, known, poll_began):
            return True
        if time.monotonic() >= deadline:
            return False
        await anyio.sleep(poll_s)
