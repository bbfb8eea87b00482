"""A quick look for processes an ended run left behind, before the full scan.

After a run's leader exits, its leftovers (a child still in its group, one in its cgroup, or
one carrying its env tag) must be stopped before a crash's rescue and reset. The full scan
(`procs.run_processes`) reads every process's environment through psutil: ~100 ms of a
worker among 100 agents, longer on a loaded machine, on every crash. Every leftover was
started after the run's leader, so only processes that young need a look at their environment.
"""

from __future__ import annotations

import os

import psutil

from agentherd.supervisor.process import cgroups
from agentherd.supervisor.process.proctable import TAG_VAR
from agentherd.supervisor.process.runid import RunIdentity

PF_KTHREAD = 0x00200000
"""The kernel-thread bit of a process's flags in /proc/PID/stat (linux/sched.h)."""

START_MARGIN_S = 2.0
"""Processes started up to this long before the leader are looked at too: start times are
rounded to clock ticks, and a generous margin only costs a few more reads."""


def maybe_left(identity: RunIdentity) -> bool:
    """False only when surely no process of the run lives; True: run the full scan."""
    if identity.create_time is None or identity.pgid is None:
        return True
    if cgroups.members(identity.cgroup):
        return True
    try:
        ticks_per_s = os.sysconf("SC_CLK_TCK")
        boot_s = psutil.boot_time()
        names = os.listdir("/proc")
    except (OSError, ValueError, psutil.Error):
        return True
    oldest_s = identity.create_time - START_MARGIN_S
    tag = f"{TAG_VAR}={identity.tag}".encode()
    me = os.getpid()
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat_file:
                fields = stat_file.read().rpartition(b")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if len(fields) < 20:
            return True
        # Fields after the command: state, ppid, pgrp, ... flags the 7th, starttime the 20th.
        state, pgrp, started_ticks = fields[0], int(fields[2]), int(fields[19])
        if state == b"Z" or boot_s + started_ticks / ticks_per_s < oldest_s:
            continue
        if int(fields[6]) & PF_KTHREAD:
            continue  # a kernel thread: no environment, never a run's
        if pgrp == identity.pgid or _carries(name, tag):
            return True
    return False


def _carries(pid: str, tag: bytes) -> bool:
    """True when process `pid` carries the run's tag in its environment (or may: unreadable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as env_file:
            env = env_file.read()
    except (FileNotFoundError, ProcessLookupError):
        return False  # gone
    except OSError:
        return True  # cannot tell: let the full scan decide
    if not env:
        # Just after an exec the kernel shows an empty environment until the new program's is
        # set up (18 of 1,500 reads straight after `Popen` here): cannot tell.
        return True
    return any(entry == tag for entry in env.split(b"\0"))


def settle(identity: RunIdentity, look: bool) -> bool:
    """After a run's end: True when a process of it may live (`maybe_left`, when `look`);
    otherwise its cgroup is removed at once, in the same worker call (one hop per crash)."""
    if look and maybe_left(identity):
        return True
    cgroups.remove(identity.cgroup)
    return False
