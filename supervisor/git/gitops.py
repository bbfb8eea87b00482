"""Git access for herd, one import for the other wings: checkpoints, rescues, resets, scratch
worktrees.

Each job lives in its own module (`gitrun` how git is run, `gitrepo` where a repository is,
`history` and `diffs` reads, `rescue`, `reset`, `scratch`); this module names what callers use.
Every function is synchronous and meant for a worker thread (`anyio.to_thread.run_sync`).
"""

from __future__ import annotations

from agentherd.supervisor.git.diffs import changes, changes_from_before, diffstat, files_touched
from agentherd.supervisor.git.gitproc import GitCancelled, GitDeadline, GitError, GitTimeout
from agentherd.supervisor.git.gitrepo import (
    RepoChanged,
    check_identity,
    git_paths,
    head_sha,
    identity,
    is_git_repo,
)
from agentherd.supervisor.git.gitrun import NotAGitRepo, first_line, run_git
from agentherd.supervisor.git.history import (
    commits_between,
    head_checkpoint,
    new_commits,
    read_at,
    resolve_commit,
)
from agentherd.supervisor.git.rescue import (
    RESCUE_IDENTITY,
    Rescued,
    SavedRef,
    keep_head,
    rescue,
    save_rescue,
)
from agentherd.supervisor.git.reset import reset_worktree
from agentherd.supervisor.git.scratch import common_dir_of, remove_scratch, scratch_worktree

__all__ = [
    "RESCUE_IDENTITY",
    "GitCancelled",
    "GitDeadline",
    "GitError",
    "GitTimeout",
    "NotAGitRepo",
    "RepoChanged",
    "Rescued",
    "SavedRef",
    "changes",
    "check_identity",
    "common_dir_of",
    "changes_from_before",
    "commits_between",
    "diffstat",
    "files_touched",
    "first_line",
    "git_paths",
    "head_checkpoint",
    "head_sha",
    "identity",
    "is_git_repo",
    "keep_head",
    "new_commits",
    "read_at",
    "remove_scratch",
    "rescue",
    "reset_worktree",
    "resolve_commit",
    "run_git",
    "save_rescue",
    "scratch_worktree",
]
