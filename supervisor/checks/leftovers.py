"""What a daemon killed mid-verification leaves behind, found and removed by the next one.

A scratch worktree lives at `<state>/verify/<session>/<sha12>-<tag>`; every process of that
verification carries `HERD_VERIFY_TAG=<tag>` in its environment. Only one daemon serves a
state folder, so at start-up every such folder is a leftover.
"""

from __future__ import annotations

import logging
import os
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from agentherd.supervisor.checks.verify import KILL_WAIT_S, STOP_GRACE_S, VERIFY_TAG_VAR
from agentherd.supervisor.git import gitops

log = logging.getLogger("herd.leftovers")

_SCRATCH_NAME = re.compile(r"^[0-9a-f]{12}-(?P<tag>[0-9a-f]+)$")


@dataclass
class Cleaned:
    """What the clean-up found: scratch worktrees removed, processes stopped."""

    worktrees: list[Path] = field(default_factory=list)
    processes: list[int] = field(default_factory=list)


def _tagged(tags: set[str]) -> list[psutil.Process]:
    """Live processes whose environment carries one of the verification `tags`."""
    found = []
    me = os.getpid()
    for proc in psutil.process_iter(["pid", "status"]):
        if proc.info["pid"] in (me, 0, 1) or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            if proc.environ().get(VERIFY_TAG_VAR) in tags:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def stop_tagged(tags: set[str]) -> list[int]:
    """SIGTERM, then SIGKILL, every process of the given verifications; their pids."""
    if not tags:
        return []
    procs = _tagged(tags)
    for proc in procs:
        try:
            proc.send_signal(signal.SIGTERM)  # psutil refuses a pid reused since the scan
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=STOP_GRACE_S)
    for proc in alive + _tagged(tags):  # and anything forked meanwhile
        try:
            proc.kill()
        except psutil.Error:
            pass
    _, stuck = psutil.wait_procs(_tagged(tags), timeout=KILL_WAIT_S)
    for proc in stuck:
        log.warning("process %s of a killed verification survived SIGKILL", proc.pid)
    return [proc.pid for proc in procs]


def clean_verify_leftovers(verify_root: Path, repos: Mapping[str, Path]) -> Cleaned:
    """Stop the processes of, and remove, every scratch worktree under `verify_root`.

    `repos` maps each session to its worktree, whose repository holds the registrations of
    that session's scratch worktrees (`<verify_root>/<session>/<sha12>-<tag>`). A scratch
    worktree's folder is made first and removed last, so every leftover has its folder.
    """
    cleaned = Cleaned()
    folders = [p for p in verify_root.glob("*/*") if p.is_dir() and _SCRATCH_NAME.match(p.name)]
    tags = {m.group("tag") for p in folders if (m := _SCRATCH_NAME.match(p.name))}
    cleaned.processes = stop_tagged(tags)
    for folder in folders:
        repo = repos.get(folder.parent.name)
        gitops.remove_scratch(gitops.common_dir_of(repo) if repo else None, folder)
        if not folder.exists():
            cleaned.worktrees.append(folder)
    return cleaned
