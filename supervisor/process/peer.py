"""Who is asking on the control socket: the client process and its ancestors, read from /proc.

SO_PEERCRED names the process that connected by its PID, and a PID read later may be another
process's by then (the client exited and the PID was reused). So the client is pinned by a
pidfd (SO_PEERPIDFD, Linux 6.5 and later): what /proc said of its PID counts only if the
client is still alive once everything was read, when its PID cannot have been reused. Without
a pidfd, a process that started after the connection was accepted is known not to be the
client. Each ancestor must have started no later than its child (a reused PID is younger).
A client that cannot be read so has no lineage, and is never taken for a person.
"""

from __future__ import annotations

import errno
import os
import re
import select
import socket
import struct
import time
from dataclasses import dataclass

import psutil

from agentherd.supervisor.process import cgroups
from agentherd.supervisor.process.runid import TAG_VAR

SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)
"""Linux's socket option for a pidfd of the peer (Python 3.11 has no name for it)."""

MAX_ANCESTORS = 64
"""A chain of parents longer than this is cut (a deeper tree gains nothing: the run's wrapper
is an ancestor within a few levels of any agent's command)."""

START_SLACK_S = 0.02
"""Start times are in clock ticks (10 ms): a process started this much after the accept may
still be the client."""

_TAG = re.compile(r"[0-9a-f]{32}")
"""A run tag as herd makes them (uuid4 hex); anything else in the variable is not herd's."""

_TAG_PREFIX = f"{TAG_VAR}=".encode()


@dataclass(frozen=True)
class ProcessFacts:
    """What can tie one process to a run: its PID and session, start, cgroup and env tag."""

    pid: int
    sid: int | None
    start_ticks: int
    create_time: float
    """psutil's create_time (boot time plus start ticks): compared with a run's leader."""
    cgroup_tag: str | None
    """The tag of the herd run cgroup it is in (`herd-run-<tag>`, or a folder below one)."""
    env_tags: tuple[str, ...]
    """Each HERD_RUN_TAG in the environment it was started with (an agent may add more)."""


@dataclass(frozen=True)
class Lineage:
    """The client first, then its ancestors up to (not counting) the daemon or PID 1, then
    the leader of the client's session when that is not among them."""

    processes: tuple[ProcessFacts, ...]


@dataclass(frozen=True)
class Peer:
    """The process at the other end of a control connection."""

    pid: int | None
    uid: int | None
    lineage: Lineage | None
    """None when the client could not be read (it exited, or /proc refused): no verdict."""


def identify(sock: socket.socket) -> Peer:
    """The peer of a connected Unix socket, its lineage read from /proc and checked."""
    accepted_s = time.clock_gettime(time.CLOCK_BOOTTIME)
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return Peer(None, None, None)
    pid, uid, _ = struct.unpack("3i", creds)
    if pid <= 0:  # in a PID namespace this daemon cannot see into
        return Peer(None, uid, Lineage(()))
    pidfd = _peer_pidfd(sock)
    if pidfd == -1:
        return Peer(pid, uid, None)  # the kernel says the peer is gone already
    try:
        lineage = _lineage(pid, os.getpid())
        if lineage is None or not _still_the_client(lineage, pidfd, accepted_s):
            return Peer(pid, uid, None)
        return Peer(pid, uid, lineage)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _peer_pidfd(sock: socket.socket) -> int | None:
    """A pidfd of the peer; None where the kernel has none to give, -1 when the peer is gone."""
    try:
        return int(sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD))
    except OSError as exc:
        if exc.errno in (errno.ENOPROTOOPT, errno.EINVAL, errno.EOPNOTSUPP):
            return None  # a kernel before 6.5
        return -1


def _still_the_client(lineage: Lineage, pidfd: int | None, accepted_s: float) -> bool:
    """True when the facts read are the client's own: it still runs (pidfd), or without a
    pidfd, the process read did not start after the connection was accepted."""
    if pidfd is not None:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        return not poller.poll(0)  # readable once the process has exited
    if not lineage.processes:
        return True
    started_s = lineage.processes[0].start_ticks / os.sysconf("SC_CLK_TCK")
    return started_s <= accepted_s + START_SLACK_S


def _lineage(pid: int, daemon_pid: int) -> Lineage | None:
    """The client's facts and its ancestors'; None when the client itself cannot be read."""
    if pid == daemon_pid:
        return Lineage(())  # a client inside the daemon's own process
    client = read_facts(pid)
    if client is None:
        return None
    chain = [client]
    child = client
    while len(chain) < MAX_ANCESTORS:
        parent = _parent(child)
        if parent is None or parent.pid == daemon_pid:
            break
        chain.append(parent)
        child = parent
    sid = client.sid
    if sid is not None and sid > 1 and sid != daemon_pid and all(p.pid != sid for p in chain):
        leader = read_facts(sid)
        if leader is not None and leader.start_ticks <= client.start_ticks:
            chain.append(leader)
    return Lineage(tuple(chain))


def _parent(child: ProcessFacts) -> ProcessFacts | None:
    """The parent of `child`, as long as it is provably that (not a reused PID); else None."""
    for _ in range(2):  # a parent that exited meanwhile: the child has a new one; look again
        ppid = _ppid(child.pid)
        if ppid is None or ppid <= 1:
            return None
        parent = read_facts(ppid)
        if parent is not None and parent.start_ticks <= child.start_ticks:
            return parent
    return None


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name (which may hold spaces and parentheses)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read()
    except OSError:
        return None
    return data.rpartition(b")")[2].decode("ascii", "replace").split()


def _ppid(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields and len(fields) > 1 else None


def read_facts(pid: int) -> ProcessFacts | None:
    """One process's facts, or None when it is gone or a zombie."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] == "Z":
        return None
    # After the name: state ppid pgrp session ... starttime is the 20th (field 22 of stat).
    start_ticks = int(fields[19])
    create_time = psutil.boot_time() + start_ticks / os.sysconf("SC_CLK_TCK")
    return ProcessFacts(
        pid=pid,
        sid=int(fields[3]),
        start_ticks=start_ticks,
        create_time=create_time,
        cgroup_tag=_cgroup_tag(pid),
        env_tags=_env_tags(pid),
    )


def _cgroup_tag(pid: int) -> str | None:
    """The run tag of the herd run cgroup (v2) the process is in, if it is in one."""
    try:
        with open(f"/proc/{pid}/cgroup") as file:
            lines = file.read().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            for part in line[3:].split("/"):
                tag = part.removeprefix(cgroups.RUN_PREFIX)
                if tag != part and _TAG.fullmatch(tag):
                    return tag
    return None


def _env_tags(pid: int) -> tuple[str, ...]:
    """Every HERD_RUN_TAG of herd's form in the environment the process was started with."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            data = file.read()
    except OSError:
        return ()
    found = (e[len(_TAG_PREFIX) :] for e in data.split(b"\0") if e.startswith(_TAG_PREFIX))
    return tuple(t for t in (f.decode("ascii", "replace") for f in found) if _TAG.fullmatch(t))
