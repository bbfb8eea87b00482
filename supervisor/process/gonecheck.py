"""Whether a stopped run is gone, read from its cgroup instead of a scan of every process.

Every process of a run lives in the run's cgroup (the wrapper moves in before it starts the
agent, and leaving needs write access to another cgroup), so once the leader has exited and
the cgroup is empty, nothing of the run is left. `herd down` of 200 runs polled a shared scan
of every process on the machine (its environment read for the run tag) until each was gone:
seconds of a fleet's stop. A run without a cgroup herd can trust is still checked by the scan.
"""

from __future__ import annotations

from typing import Protocol

import psutil

from agentherd.supervisor.process import cgroups


class _Run(Protocol):
    @property
    def cgroup(self) -> str | None: ...


def gone_by_cgroup(
    identity: _Run, leader_alive: bool, known: dict[tuple[int, float], psutil.Process]
) -> bool | None:
    """True or False from the run's cgroup; None when it has none to trust (scan instead).

    `known` holds the processes proven to be the run's during this stop: any still alive
    keeps the run from being gone, wherever it is now.
    """
    if not cgroups.is_run_cgroup(identity.cgroup):
        return None
    if leader_alive or cgroups.populated(identity.cgroup):
        return False
    return not any(_alive(proc) for proc in known.values())


def _alive(proc: psutil.Process) -> bool:
    """Running and not a zombie; psutil tells a PID reused since it was found from it."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
