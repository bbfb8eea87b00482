"""`python -I -S subreaper.py DEADLINE_S ARGV...`: run ARGV so that nothing it starts outlives it.

This process makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every process
ARGV's tree orphans (`setsid cmd &`, a double fork) is re-parented to it instead of to init:
the whole tree stays its descendants, found by their parent chain. Once ARGV exits, or at
DEADLINE_S (the daemon that started it may be gone), it SIGKILLs those descendants until none
is left, then exits with ARGV's status. It imports nothing of herd (it starts in ~20 ms with
`-I -S`) and joins `$HERD_CGROUP` first when given one.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36

SWEEP_LIMIT_S = 5.0
"""Kill passes stop after this long: a tree that forks faster than it is killed is not ours to
chase forever (the daemon's own sweep and the process group follow)."""


class Deadline(Exception):
    """DEADLINE_S passed (SIGALRM) or the daemon asked it to end (SIGTERM)."""


def _raise_deadline(signum: int, frame: object) -> None:
    raise Deadline


def descendants(root: int) -> list[int]:
    """Live (not zombie) descendants of `root`, from every process's parent in /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat_file:
                fields = stat_file.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if len(fields) > 1 and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    frontier = [root]
    while frontier:
        kids = children.get(frontier.pop(), [])
        found += kids
        frontier += kids
    return found


def reap() -> None:
    """Collect every exited child (the orphans it adopted among them)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def sweep() -> None:
    """SIGKILL every descendant, again and again, until none is left (or SWEEP_LIMIT_S)."""
    me = os.getpid()
    give_up = time.monotonic() + SWEEP_LIMIT_S
    while time.monotonic() < give_up:
        reap()
        left = descendants(me)
        if not left:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.001)


def main(argv: list[str]) -> int:
    deadline_s, command = float(argv[0]), argv[1:]
    cgroup = os.environ.pop("HERD_CGROUP", "")
    if cgroup:
        with contextlib.suppress(OSError), open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGALRM, _raise_deadline)
    signal.signal(signal.SIGTERM, _raise_deadline)
    signal.setitimer(signal.ITIMER_REAL, max(deadline_s, 0.001))
    status = 127
    try:
        pid = os.posix_spawnp(command[0], command, os.environ)
        _, raw = os.waitpid(pid, 0)
        status = os.waitstatus_to_exitcode(raw)
        status = status if status >= 0 else 128 - status
    except Deadline:
        status = 124
    except OSError:
        status = 127
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sweep()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
