"""A cgroup v2 per run, where the machine lets herd make one: it holds every descendant.

A process can leave its process group (`setsid`) and clear its environment (`env -i`), which
hides it from the group and the env tag; it cannot leave its cgroup without write access to
another one. So where a run has a cgroup, a stop finds (`cgroup.procs`) and kills
(`cgroup.kill`, at once, in any PID namespace) everything the agent started. Without
`cgroup.kill` (kernels before 5.14) the members are killed one by one, again at each poll.

Where no cgroup can be made (no cgroup2 mount, or no permission to create a child of the
daemon's own cgroup: not root and not delegated), herd falls back to the process group plus
the env tag, with one log line. Then a descendant that both leaves the group (`setsid`) and
clears `HERD_RUN_TAG` from its environment survives a stop, and so does one that only clears
its environment and outlives the run's wrapper (the group leader).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from functools import cache
from pathlib import Path

log = logging.getLogger("herd.cgroups")

RUN_PREFIX = "herd-run-"
"""Every cgroup herd makes is named so; herd never writes to a cgroup without this prefix."""

STALE_AFTER_S = 600.0
"""An empty run cgroup this old is garbage: a wrapper moves into its new one within
milliseconds, and an ended run's is never used again (its path was lost with a state.db)."""

_warned: set[str] = set()


def _warn_once(key: str, message: str, *args: object) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning(message, *args)


@cache  # read for every look at a run's cgroup: five or more per stop
def _cgroup2_mount() -> Path | None:
    """Where the unified (v2) hierarchy is mounted, from /proc/self/mountinfo."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            fields = left.split(" ")
            if len(fields) > 4 and fields[3] == "/":  # the hierarchy's root, not a bind of part
                return Path(fields[4])
    return None


def _own_cgroup() -> str | None:
    """The daemon's own cgroup v2 path (the `0::<path>` line of /proc/self/cgroup)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            path = line[3:].strip()
            return path if path.startswith("/") and "(deleted)" not in path else None
    return None


@cache
def _base_dir() -> Path | None:
    """The folder of the daemon's own cgroup, under which each run gets a child."""
    mount = _cgroup2_mount()
    own = _own_cgroup()
    if mount is None or own is None:
        return None
    base = mount / own.lstrip("/")
    return base if (base / "cgroup.procs").exists() else None


def create(tag: str) -> Path | None:
    """Make the run's cgroup; None (and one log line) where the machine does not allow it."""
    base = _base_dir()
    if base is None:
        _warn_once(
            "no-cgroup2",
            "no cgroup v2 hierarchy for this daemon: runs are tracked by process group and "
            "env tag only (a descendant that calls setsid and clears its env escapes a stop)",
        )
        return None
    path = base / f"{RUN_PREFIX}{tag}"
    try:
        path.mkdir()
    except FileExistsError:
        pass
    except OSError as exc:
        _warn_once(
            "mkdir",
            "cannot create a cgroup under %s (%s): runs are tracked by process group and env "
            "tag only (a descendant that calls setsid and clears its env escapes a stop)",
            base,
            exc,
        )
        return None
    return path


def is_run_cgroup(path: str | Path | None) -> bool:
    """True for a cgroup herd made for a run, which holds neither this daemon nor PID 1."""
    if not path:
        return False
    folder = Path(path)
    if not folder.name.startswith(RUN_PREFIX) or not (folder / "cgroup.procs").exists():
        return False
    mount = _cgroup2_mount()
    if mount is None or mount not in folder.parents:
        return False
    inside = "/" + str(folder.relative_to(mount))
    for pid in ("self", "1"):
        try:
            text = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("0::"):
                theirs = line[3:].strip()
                if theirs == inside or theirs.startswith(inside + "/"):
                    return False
    return True


def _checked(path: str | Path | None) -> Path | None:
    """The run cgroup's folder, or None when `path` is not one herd may touch."""
    return Path(path) if path and is_run_cgroup(path) else None


def members(path: str | Path | None) -> set[int]:
    """PIDs (as this daemon sees them) of the processes in the run's cgroup."""
    folder = _checked(path)
    if folder is None:
        return set()
    try:
        text = (folder / "cgroup.procs").read_text()
    except OSError:
        return set()
    # A process outside this daemon's PID namespace reads as 0: it cannot be signalled by pid.
    return {int(word) for word in text.split() if word.isdigit() and int(word) > 1}


def populated(path: str | Path | None) -> bool:
    """True while any process (in any PID namespace) is in the run's cgroup."""
    folder = _checked(path)
    if folder is None:
        return False
    try:
        text = (folder / "cgroup.events").read_text()
    except OSError:
        return False
    return "populated 1" in text.splitlines()


def kill(path: str | Path | None) -> bool:
    """SIGKILL everything in the run's cgroup at once; False where `cgroup.kill` is missing."""
    folder = _checked(path)
    if folder is None:
        return False
    try:
        (folder / "cgroup.kill").write_text("1")
    except OSError as exc:
        _warn_once("kill", "cgroup.kill is not available (%s); killing by pid instead", exc)
        return False
    return True


def remove(path: str | Path | None) -> None:
    """Remove the run's cgroup once it is empty (the kernel refuses while it is populated)."""
    folder = _checked(path)
    if folder is not None:
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def sweep_stale(now_s: float | None = None) -> int:
    """Remove empty run cgroups left beside this daemon's (their runs' state was lost)."""
    base = _base_dir()
    if base is None:
        return 0
    now_s = time.time() if now_s is None else now_s
    removed = 0
    for folder in base.glob(f"{RUN_PREFIX}*"):
        try:
            if now_s - folder.stat().st_mtime < STALE_AFTER_S or populated(folder):
                continue
            os.rmdir(folder)  # the kernel refuses a populated one, whatever we read before
        except OSError:
            continue
        removed += 1
    return removed
