"""What a daemon killed mid-verification leaves behind, found and removed by the next one.

A scratch worktree lives at `<state>/verify/<session>/<sha12>-<tag>`; every process of that
verification carries `HERD_VERIFY_TAG=<tag>` in its environment. Only one daemon serves a
state folder, so at start-up every such folder is a leftover.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from agentherd.supervisor.checks.verify import KILL_WAIT_S, STOP_GRACE_S, VERIFY_TAG_VAR
from agentherd.supervisor.git import gitops

log = logging.getLogger("herd.leftovers")

_SCRATCH_NAME = re.compile(r"^(?P<name>[0-9a-f]{12}-(?P<tag>[0-9a-f]{32}))$")
_ADMIN_NAME = re.compile(r"^(?P<name>[0-9a-f]{12}-(?P<tag>[0-9a-f]{32}))\d*$")
"""git names a worktree's registration after its folder, plus digits when the name is taken."""


@dataclass
class Cleaned:
    """What the clean-up found: scratch worktrees removed, processes stopped."""

    worktrees: list[str] = field(default_factory=list)  # their folders' names
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


def clean_verify_leftovers(verify_root: Path, repos: Iterable[Path]) -> Cleaned:
    """Stop the processes of, and remove, every scratch worktree under `verify_root`.

    A killed daemon's git may have been anywhere in adding or removing one: the folder can be
    gone while `repos` (the sessions' worktrees) still register it, or registered half-way.
    """
    cleaned = Cleaned()
    folders = [p for p in verify_root.glob("*/*") if p.is_dir() and _SCRATCH_NAME.match(p.name)]
    admins = _registrations(verify_root, repos, {p.name for p in folders})
    found = [(p, _SCRATCH_NAME.match(p.name)) for p in folders]
    found += [(p, _ADMIN_NAME.match(p.name)) for p in admins]
    cleaned.processes = stop_tagged({m.group("tag") for _, m in found if m})
    for path, _ in found:
        shutil.rmtree(path, ignore_errors=True)
    cleaned.worktrees = sorted({m.group("name") for p, m in found if m and not p.exists()})
    return cleaned


def _registrations(verify_root: Path, repos: Iterable[Path], folders: set[str]) -> list[Path]:
    """The registrations (`<common>/worktrees/<id>`) in `repos` of scratch worktrees: those
    whose `gitdir` lies under `verify_root`, and those of `folders` (names) a kill left
    before git wrote it (another project's verification may be writing one right now)."""
    root = verify_root.resolve()  # git writes the real path
    commons = set()
    for repo in repos:
        try:
            commons.add(gitops.repo_paths(repo).common_dir)
        except gitops.NotAGitRepo:
            continue
    found = []
    for common in commons:
        try:
            admins = [p for p in (common / "worktrees").iterdir() if _ADMIN_NAME.match(p.name)]
        except OSError:
            continue
        for admin in admins:
            try:
                pointer: Path | None = Path((admin / "gitdir").read_text().strip())
            except FileNotFoundError:
                pointer = None
            except OSError:
                continue
            if pointer is None:
                name = _ADMIN_NAME.match(admin.name)
                if name and name.group("name") in folders:
                    found.append(admin)
            elif pointer.is_relative_to(root):
                found.append(admin)
    return found
