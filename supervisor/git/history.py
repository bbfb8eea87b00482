"""Checkpoints read from git's history: HEAD's commit, the commits since a sha, a file at a sha."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from agentherd.sessions.checkpoint import Checkpoint, GitPaths
from agentherd.supervisor.git import gitfiles
from agentherd.supervisor.git.gitrepo import Repo, git_paths, open_repo, read
from agentherd.supervisor.git.gitrun import check_rev, run_raw

# One commit of `git log -z`: "/" marks a record (a path never starts with "/").
_LOG_FORMAT = "--format=/%H%x00%ct%x00%s"


def _parse_log(raw: bytes) -> list[Checkpoint]:
    """Checkpoints from `git log -z --numstat` in `_LOG_FORMAT`, in git's order."""
    tokens = raw.split(b"\0")
    found: list[Checkpoint] = []
    i = 0
    while i + 2 < len(tokens):
        if not tokens[i].startswith(b"/"):
            i += 1
            continue
        sha = tokens[i][1:].decode("ascii")
        at = datetime.fromtimestamp(int(tokens[i + 1]), UTC)
        subject = tokens[i + 2].decode("utf-8", "replace")
        i += 3
        files: list[str] = []
        insertions = deletions = 0
        while i < len(tokens) and not tokens[i].startswith(b"/"):
            # git separates the stat list from the header with a newline; each entry is
            # "added<TAB>deleted<TAB>path" ("-" for a binary file); a path may hold tabs.
            entry = tokens[i][1:] if not files and tokens[i].startswith(b"\n") else tokens[i]
            added, _, rest = entry.partition(b"\t")
            deleted, _, name = rest.partition(b"\t")
            if name:
                files.append(os.fsdecode(name))
                insertions += int(added) if added.isdigit() else 0
                deletions += int(deleted) if deleted.isdigit() else 0
            i += 1
        found.append(
            Checkpoint(
                sha=sha,
                at=at,
                subject=subject,
                files=tuple(files),
                insertions=insertions,
                deletions=deletions,
            )
        )
    return found


def _log(repo: Repo, revs: Sequence[str], limit: int) -> list[Checkpoint]:
    """Up to `limit` commits of `git log <revs>`, newest first, each with its files."""
    _, raw = read(
        repo,
        "log",
        "-z",
        _LOG_FORMAT,
        "--numstat",
        "--no-renames",
        "--diff-merges=first-parent",
        f"--max-count={limit}",
        "--ignore-missing",
        *revs,
        "--",
    )
    return _parse_log(raw)


def head_checkpoint(worktree: Path) -> Checkpoint | None:
    """The commit HEAD points at, with the files it changed; None before the first commit."""
    found = _log(open_repo(worktree), ["HEAD"], limit=1)
    return found[0] if found else None


def commits_between(
    worktree: Path, old_sha: str | None, new_sha: str, limit: int = 50
) -> list[Checkpoint]:
    """Commits reachable from `new_sha` and not from `old_sha`, oldest first (at most `limit`).

    When `old_sha` is not an ancestor of `new_sha` (after a reset, a rebase, or once it is
    gone), history was rewritten: only the checkpoint of `new_sha` is returned. An unknown
    `new_sha` gives [].
    """
    check_rev(new_sha)
    repo = open_repo(worktree)
    if old_sha is None:
        return list(reversed(_log(repo, [new_sha], limit)))
    check_rev(old_sha)
    status, _ = read(repo, "merge-base", "--is-ancestor", old_sha, new_sha, ok_codes=(0, 1, 128))
    if status != 0:
        return _log(repo, [new_sha], limit=1)
    return list(reversed(_log(repo, [new_sha, f"^{old_sha}"], limit)))


def new_commits(
    worktree: Path, old_sha: str | None, new_sha: str, limit: int, paths: GitPaths | None
) -> list[Checkpoint]:
    """`commits_between`, in one git process when `new_sha` is a loose commit whose only
    parent is `old_sha` (an agent's commit on top of the last checkpoint)."""
    if (
        old_sha is not None
        and paths is not None
        and gitfiles.commit_parents(paths, new_sha) == (old_sha,)
    ):
        return _log(open_repo(worktree), [new_sha], limit=1)
    return commits_between(worktree, old_sha, new_sha, limit)


def resolve_commit(worktree: Path, rev: str) -> str:
    """The full sha of the commit `rev` names; ValueError when there is none."""
    check_rev(rev)
    repo = open_repo(worktree)
    status, out = read(
        repo, "rev-parse", "-q", "--verify", f"{rev}^{{commit}}", ok_codes=(0, 1, 128)
    )
    where = repo.top
    if status != 0 or not out.strip():
        raise ValueError(f"no commit {rev!r} in {where}")
    return out.strip().decode("ascii")


def read_at(worktree: Path, rev: str, path: str, max_bytes: int | None = None) -> bytes | None:
    """The bytes of `path` (relative to the worktree top) at commit `rev`; None if absent.

    With `max_bytes`, a larger blob raises ValueError before it is read (an agent commits it).
    """
    check_rev(rev)
    top = git_paths(worktree).worktree
    if max_bytes is not None:
        size = run_raw(top, "cat-file", "-s", f"{rev}:{path}")
        if size.returncode != 0:
            return None
        if int(size.stdout) > max_bytes:
            raise ValueError(f"{path} at {rev} is {int(size.stdout)} bytes, over {max_bytes}")
    result = run_raw(top, "show", f"{rev}:{path}")
    return result.stdout if result.returncode == 0 else None
