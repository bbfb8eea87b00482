"""What changed between two commits: files, insertions and deletions, from one `git diff`."""

from __future__ import annotations

import os
import re
from pathlib import Path

from agentherd.supervisor.git import gitfiles
from agentherd.supervisor.git.gitproc import GitError
from agentherd.supervisor.git.gitrepo import open_repo, read
from agentherd.supervisor.git.gitrun import check_rev

_SHORTSTAT_RE = {
    "files": re.compile(rb"(\d+) files? changed"),
    "insertions": re.compile(rb"(\d+) insertions?\(\+\)"),
    "deletions": re.compile(rb"(\d+) deletions?\(-\)"),
}


def diffstat(worktree: Path, base_sha: str, head_sha: str) -> tuple[int, int, int]:
    """(files changed, insertions, deletions) from `base_sha` to `head_sha` (renames unpaired)."""
    check_rev(base_sha)
    check_rev(head_sha)
    args = ("--shortstat", "--no-renames", "--no-ext-diff", "--no-textconv")
    _, raw = read(open_repo(worktree), "diff", *args, base_sha, head_sha, "--")
    counts = [m.group(1) if (m := rx.search(raw)) else b"0" for rx in _SHORTSTAT_RE.values()]
    return int(counts[0]), int(counts[1]), int(counts[2])


def files_touched(worktree: Path, base_sha: str, head_sha: str) -> list[str]:
    """Paths added, changed or deleted from `base_sha` to `head_sha` (both sides of a rename)."""
    check_rev(base_sha)
    check_rev(head_sha)
    repo = open_repo(worktree)
    _, raw = read(repo, "diff", "--name-only", "-z", "--no-renames", base_sha, head_sha, "--")
    return [os.fsdecode(name) for name in raw.split(b"\0") if name]


def changes(worktree: Path, base_rev: str, head_sha: str) -> tuple[tuple[int, int, int], list[str]]:
    """`diffstat` and `files_touched` from one `git diff --numstat` (one git process, not two:
    `herd down` writes a report per session, and git's start-ups were most of its cost)."""
    check_rev(base_rev)
    check_rev(head_sha)
    args = ("--numstat", "-z", "--no-renames", "--no-ext-diff", "--no-textconv")
    _, raw = read(open_repo(worktree), "diff", *args, base_rev, head_sha, "--")
    files: list[str] = []
    insertions = deletions = 0
    for entry in raw.split(b"\0"):
        added, _, rest = entry.partition(b"\t")
        removed, _, name = rest.partition(b"\t")
        if not name:
            continue
        files.append(os.fsdecode(name))
        # A binary file shows `-`: counted as changed, with no lines (as --shortstat does).
        insertions += int(added) if added.isdigit() else 0
        deletions += int(removed) if removed.isdigit() else 0
    return (len(files), insertions, deletions), files


def changes_from_before(
    worktree: Path, first_sha: str, last_sha: str
) -> tuple[tuple[int, int, int], list[str]]:
    """`changes` from the parent of `first_sha` (from `first_sha` itself when it has none) to
    `last_sha`: what a task's checkpoints changed, in one git process when there is a parent."""
    paths = gitfiles.find_paths(worktree)
    if paths is not None and gitfiles.commit_parents(paths, first_sha) == ():
        # A root commit read from its object: no git process that fails on `~1` first, and
        # none at all for a task that stayed on it (`herd down` writes a report per session).
        return ((0, 0, 0), []) if first_sha == last_sha else changes(worktree, first_sha, last_sha)
    try:
        return changes(worktree, f"{first_sha}~1", last_sha)
    except GitError:  # a root commit has no parent: count from the commit itself
        return changes(worktree, first_sha, last_sha)
