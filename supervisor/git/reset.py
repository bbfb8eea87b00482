"""Putting a worktree back at a commit after a crash: a reset and a clean of exactly what the
rescue saved, in the session's own folder only."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Sequence
from pathlib import Path

from agentherd.sessions.checkpoint import GitPaths
from agentherd.supervisor.git import gitfiles
from agentherd.supervisor.git.gitproc import GitDeadline, GitError, wait_locks_free
from agentherd.supervisor.git.gitrepo import head_or_none, inside, repo_paths
from agentherd.supervisor.git.gitrun import run_ok, run_raw
from agentherd.supervisor.git.history import resolve_commit
from agentherd.supervisor.git.ignorerules import literal, split_z
from agentherd.supervisor.git.rescue import Rescued
from agentherd.supervisor.git.rescuetree import HONEST_STAT, scope_of

MAX_UNSAVED_NAMED = 5
"""How many of the files a rescue could not store a refused reset names."""


def reset_worktree(
    worktree: Path,
    sha: str,
    keep: Sequence[Path] = (),
    deadline: GitDeadline | None = None,
    rescued: Rescued | None = None,
) -> None:
    """Reset the session's folder to `sha`, then remove the untracked files `rescued` holds.

    The folder is `worktree` itself when it lies below the repository's top: there, HEAD moves
    with `git reset --keep` (a person's edits elsewhere stay; one the move would overwrite
    makes it fail), else by `git reset --hard`. The clean removes only untracked files the
    rescue saved, never one it could not (without `rescued`, every untracked file goes, as
    `git clean -d` removes them); ignored files stay.
    Paths in `keep` (herd.toml when it lives in the worktree) are never cleaned, and keep
    their bytes when committed: the person's edit is not the agent's work.
    Call only when no process of the run is alive. A leftover `index.lock` (or a ref's lock:
    `write_locks`) is removed only when no live process may hold it (a killed daemon's `git
    reset` can still be running): until `deadline`, we wait for it; after, GitError and nothing
    is reset.
    """
    paths = repo_paths(worktree)
    head = gitfiles.head_sha(paths)
    if head == gitfiles.UNKNOWN:
        head = head_or_none(paths.worktree, deadline)
    # Resetting to HEAD itself (a crash's restart from the last checkpoint) needs no lookup.
    full = sha if sha == head else resolve_commit(worktree, sha)
    top = paths.worktree
    if rescued is not None and rescued.unsaved:
        named = ", ".join(rescued.unsaved[:MAX_UNSAVED_NAMED])
        more = len(rescued.unsaved) - MAX_UNSAVED_NAMED
        raise GitError(
            f"{len(rescued.unsaved)} changed files could not be saved ({named}"
            + (f" and {more} more" if more > 0 else "")
            + f"); {top} was not reset"
        )
    scope = rescued.scope if rescued is not None else scope_of(paths, worktree)
    wait_locks_free(top, write_locks(paths), deadline)
    kept = _read_kept(top, inside(top, keep))
    if scope:
        _reset_folder(top, scope, full, head or "", deadline)
    else:
        run_ok(top, "reset", "--hard", "--quiet", full, deadline=deadline)
    for path, data in kept.items():  # a committed herd.toml the person edited stays edited
        with contextlib.suppress(OSError):
            if (top / path).read_bytes() != data:
                (top / path).write_bytes(data)
    removable = rescued.removable if rescued is not None else None
    remove_untracked(top, scope, removable, inside(top, keep), deadline)


def write_locks(paths: GitPaths) -> list[Path]:
    """The lock files a git killed mid-write leaves, each of which a reset (or the agent's next
    commit) trips on: the index's, HEAD's and its branch's, ORIG_HEAD's and packed-refs'."""
    found = [paths.git_dir / name for name in ("index.lock", "HEAD.lock", "ORIG_HEAD.lock")]
    found.append(paths.common_dir / "packed-refs.lock")
    branch = gitfiles.head_ref(paths)
    if branch is not None:
        found.append(paths.common_dir / f"{branch}.lock")
    return found


def _reset_folder(
    top: Path, scope: str, full: str, head: str, deadline: GitDeadline | None
) -> None:
    """Put the folder `scope` back at HEAD, index and files, then move HEAD to `full` keeping
    every other local change (`reset --keep` refuses one it would overwrite)."""
    restore = ("restore", "--source=HEAD", "--staged", "--worktree", "--", literal(scope))
    done = run_raw(top, *restore, deadline=deadline)
    if done.returncode != 0 and b"did not match any file" not in done.stderr:
        raise GitError(f"git restore failed in {top}: {done.stderr.decode(errors='replace')}")
    if head != full:
        run_ok(top, "reset", "--keep", "--quiet", full, deadline=deadline)


def remove_untracked(
    top: Path,
    scope: str,
    removable: Collection[str] | None,
    keep: Collection[str],
    deadline: GitDeadline | None,
) -> list[str]:
    """Delete the untracked, not ignored files in `scope` that are in `removable` (paths from
    the top; None: all of them, as `git clean -d` does) and not in `keep`, then the folders
    they leave empty; the paths deleted.

    The list is git's own (`ls-files --others --exclude-standard`, what `git clean` removes), so
    the clean's rules hold; a file the rescue does not hold stays. A nested repository is never
    removed, nor the session's own folder.
    """
    if removable is not None and not removable:
        return []
    listed = run_ok(top, *HONEST_STAT, "ls-files", "-z", "--others", "--exclude-standard", "--",
                    *([literal(scope)] if scope else []), deadline=deadline)  # fmt: skip
    removed = []
    for path in split_z(listed):
        if path.endswith("/") or path in keep:
            continue  # a nested repository (git lists its folder), or herd.toml
        if removable is not None and path not in removable:
            continue  # not saved: it stays
        with contextlib.suppress(FileNotFoundError):
            os.unlink(top / path)
            removed.append(path)
    _prune_empty(top, scope, removed)
    return removed


def _prune_empty(top: Path, scope: str, removed: Sequence[str]) -> None:
    """Remove the folders `removed` left empty, deepest first, up to (not) the session's own."""
    stop = top / scope if scope else top
    folders = {(top / path).parent for path in removed}
    for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
        while folder != stop and stop in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                break  # not empty (an ignored file, another folder), or gone already
            folder = folder.parent


def _read_kept(top: Path, paths: Sequence[str]) -> dict[str, bytes]:
    """The bytes of each kept file that exists, so that `reset --hard` cannot change them."""
    kept = {}
    for path in paths:
        with contextlib.suppress(OSError):
            kept[path] = (top / path).read_bytes()
    return kept
