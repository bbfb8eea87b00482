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


def clean_verify_leftovers(verify_root: Path, repos: Iterable[Path]) -> Cleaned:
    """Stop the processes of, and remove, every scratch worktree under `verify_root`.

    `repos` (the sessions' worktrees) are searched for registrations of scratch worktrees
    whose folder never got a `.git` file (a kill during `worktree add`).
    """
    cleaned = Cleaned()
    folders = [p for p in verify_root.glob("*/*") if p.is_dir() and _SCRATCH_NAME.match(p.name)]
    tags = {m.group("tag") for p in folders if (m := _SCRATCH_NAME.match(p.name))}
    cleaned.processes = stop_tagged(tags)
    for folder in folders:
        _remove(folder, repos)
        if not folder.exists():
            cleaned.worktrees.append(folder)
    return cleaned


def _admin_of(folder: Path) -> Path | None:
    """The registration folder (`<common>/worktrees/<id>`) that the worktree's `.git` names."""
    try:
        pointer = (folder / ".git").read_text().strip()
    except OSError:
        return None
    if not pointer.startswith("gitdir: "):
        return None
    admin = Path(pointer[len("gitdir: ") :])
    try:
        points_back = Path((admin / "gitdir").read_text().strip()) == (folder / ".git").absolute()
    except OSError:
        return None
    return admin if points_back and admin.parent.name == "worktrees" else None


def _remove(folder: Path, repos: Iterable[Path]) -> None:
    """Delete a scratch worktree and its registration only (no `git worktree prune`).

    Without a `.git` file (a kill during `worktree add`), the sessions' repositories are
    searched for the registration pointing at it.
    """
    admin = _admin_of(folder)
    shutil.rmtree(folder, ignore_errors=True)
    if admin is not None:
        shutil.rmtree(admin, ignore_errors=True)
        return
    for repo in repos:
        try:
            common = gitops.git_paths(repo).common_dir
        except gitops.NotAGitRepo:
            continue
        if gitops.forget_worktree(common, folder):
            return
