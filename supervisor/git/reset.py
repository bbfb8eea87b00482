"""Putting a worktree back at a commit after a crash: `reset --hard` and `clean`, safely."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

from agentherd.supervisor.git import gitfiles
from agentherd.supervisor.git.gitproc import GitDeadline, wait_index_free
from agentherd.supervisor.git.gitrepo import inside, repo_paths
from agentherd.supervisor.git.gitrun import run_ok
from agentherd.supervisor.git.history import resolve_commit


def reset_worktree(
    worktree: Path, sha: str, keep: Sequence[Path] = (), deadline: GitDeadline | None = None
) -> None:
    """`git reset --hard sha` then `git clean -fd`: ignored files stay, untracked ones go.

    Paths in `keep` (herd.toml when it lives in the worktree) are never cleaned, and keep
    their bytes when committed: the person's edit is not the agent's work.
    Call only when no process of the run is alive. A leftover `index.lock` is removed only
    when no live process may hold it (a killed daemon's `git reset` can still be running):
    until `deadline`, we wait for it; after, GitError and nothing is reset.
    """
    paths = repo_paths(worktree)
    # Resetting to HEAD itself (a crash's restart from the last checkpoint) needs no lookup.
    full = sha if sha == gitfiles.head_sha(paths) else resolve_commit(worktree, sha)
    top = paths.worktree
    wait_index_free(top, paths.git_dir / "index.lock", deadline)
    kept = _read_kept(top, inside(top, keep))
    run_ok(top, "reset", "--hard", "--quiet", full, deadline=deadline)
    for path, data in kept.items():  # a committed herd.toml the person edited stays edited
        with contextlib.suppress(OSError):
            if (top / path).read_bytes() != data:
                (top / path).write_bytes(data)
    excludes = [arg for path in inside(top, keep) for arg in ("-e", "/" + path)]
    run_ok(top, "clean", "-f", "-d", "--quiet", *excludes, deadline=deadline)


def _read_kept(top: Path, paths: Sequence[str]) -> dict[str, bytes]:
    """The bytes of each kept file that exists, so that `reset --hard` cannot change them."""
    kept = {}
    for path in paths:
        with contextlib.suppress(OSError):
            kept[path] = (top / path).read_bytes()
    return kept
