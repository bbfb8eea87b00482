"""One scan of the machine's processes, shared by every run that asks at about the same time.

`herd down` stops 200 runs at once and each polls for its leftovers: scanning every process
(and reading its environment for the run tag) once per run and per poll took 81 % of its time.
A scan is reused by every caller that asked no earlier than it began, so each poll round costs
about one scan whatever the number of runs. It only finds candidates: every signal still goes
through psutil, which refuses a PID reused since the scan.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

import psutil

TAG_VAR = "HERD_RUN_TAG"
RUN_DIR_VAR = "HERD_RUN_DIR"


@dataclass(frozen=True)
class Entry:
    """One live process as the scan saw it."""

    proc: psutil.Process
    pid: int
    create_time: float
    pgid: int | None
    tag: str | None
    run_dir: str | None


@dataclass
class Table:
    """The processes alive at `began` (monotonic), indexed the ways runs look for theirs."""

    began: float
    entries: list[Entry] = field(default_factory=list)
    by_tag: dict[str, list[Entry]] = field(default_factory=dict)
    by_pgid: dict[int, list[Entry]] = field(default_factory=dict)
    by_pid: dict[int, Entry] = field(default_factory=dict)


def scan() -> Table:
    """Every live, non-zombie process but this one, with its group, run tag and run folder."""
    table = Table(began=time.monotonic())
    me = os.getpid()
    for proc in psutil.process_iter(["pid", "create_time", "status"]):
        info = proc.info
        pid = info["pid"]
        if pid == me or info["status"] == psutil.STATUS_ZOMBIE or info["create_time"] is None:
            continue
        try:
            pgid: int | None = os.getpgid(pid)
        except OSError:
            continue  # gone since it was listed
        try:
            env = proc.environ()
        except (psutil.Error, OSError):
            env = {}
        entry = Entry(proc, pid, info["create_time"], pgid, env.get(TAG_VAR), env.get(RUN_DIR_VAR))
        table.entries.append(entry)
        table.by_pid[pid] = entry
        if entry.tag:
            table.by_tag.setdefault(entry.tag, []).append(entry)
        if pgid is not None:
            table.by_pgid.setdefault(pgid, []).append(entry)
    return table


class SharedScans:
    """Hands out a scan that began no earlier than the caller's `not_before`, scanning again
    only when none did; one scan at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: Table | None = None
        self.scans = 0
        """How many scans ran (the benchmarks and tests count them)."""

    def table(self, not_before: float | None = None) -> Table:
        """A scan that began at or after `not_before` (monotonic; default: now)."""
        wanted = time.monotonic() if not_before is None else not_before
        with self._lock:
            latest = self._latest
            if latest is not None and latest.began >= wanted:
                return latest
            latest = self._latest = scan()
            self.scans += 1
            return latest


SHARED = SharedScans()
"""The daemon's one sharer of scans."""
