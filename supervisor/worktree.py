"""Which worktree a session works in: two sessions must never run in one at once."""

from __future__ import annotations

from pathlib import Path


def tree_of(cwd: Path) -> Path:
    """The git worktree holding `cwd` (where `.git` is, found without running git), else `cwd`.

    Two sessions in one git worktree share more than files: a crash restart of one rescues and
    resets the tree under the other.
    """
    folder = cwd.resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return folder
