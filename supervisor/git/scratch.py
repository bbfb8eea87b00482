"""Scratch worktrees: a detached checkout of a commit for a verification, always removed."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from agentherd.supervisor.git.gitproc import GitDeadline
from agentherd.supervisor.git.gitrepo import git_paths, repo_paths
from agentherd.supervisor.git.gitrun import NotAGitRepo, run_ok
from agentherd.supervisor.git.history import resolve_commit


@contextmanager
def scratch_worktree(
    repo_worktree: Path,
    sha: str,
    dest: Path,
    deadline: GitDeadline | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[Path]:
    """A detached worktree of `sha` at `dest` for the block, removed afterwards (also on error).

    The checkout (filter drivers included) is bounded by `deadline`; a checkout that failed
    or was killed half-way is removed too. git runs from `dest`'s parent with `--git-dir`, so
    its process never works in the agent's worktree (a reset there would wait for it).
    `dest` is made (empty) before git starts and removed after its registration, so the
    folder outlives every other trace: whoever finds a killed daemon's leftovers finds them
    all by their folders, and `env` (a tag) names every git that may still be at work there.
    """
    full = resolve_commit(repo_worktree, sha)
    paths = git_paths(repo_worktree)
    where = Path(dest).absolute()
    add = ("worktree", "add", "--detach", "--quiet", str(where), full)
    where.mkdir(parents=True)  # raises when it exists: never remove a folder not made here
    try:
        run_ok(where.parent, f"--git-dir={paths.git_dir}", *add, env=env, deadline=deadline)
        yield where
    finally:
        remove_scratch(paths.common_dir, where)


def remove_scratch(common_dir: Path | None, where: Path) -> None:
    """Remove the scratch worktree at `where`: its registration, then its folder.

    Done here rather than by `git worktree remove`, whose git would live on if the daemon
    were killed, deleting the folder first. Only this worktree's registration goes: `git
    worktree prune` would also forget every other worktree whose folder is missing right
    now (a person's worktree on an unmounted disk).
    """
    admin = registration(common_dir, where)
    if admin is not None:
        shutil.rmtree(admin, ignore_errors=True)
    shutil.rmtree(where, ignore_errors=True)


def registration(common_dir: Path | None, where: Path) -> Path | None:
    """The registration (`<common>/worktrees/<id>`) of the worktree at `where`: the one its
    `.git` file names and that names it back, else one in `common_dir` that names it, or one
    `git worktree add` was killed in before writing that (named after the folder, plus
    digits when the name was taken)."""
    target = where.resolve() / ".git"
    try:
        named = Path((where / ".git").read_text().strip().removeprefix("gitdir: "))
        if named.parent.name == "worktrees" and _names(named, target):
            return named
    except OSError:
        pass
    if common_dir is None:
        return None
    half_made = re.compile(re.escape(where.name) + r"\d*")
    try:
        admins = list((common_dir / "worktrees").iterdir())
    except OSError:
        return None
    for admin in admins:
        if _names(admin, target) or (
            half_made.fullmatch(admin.name) and not (admin / "gitdir").exists()
        ):
            return admin
    return None


def _names(admin: Path, target: Path) -> bool:
    """Whether the registration `admin` is that of the worktree whose `.git` is `target`."""
    try:
        return Path((admin / "gitdir").read_text().strip()) == target
    except OSError:
        return False


def common_dir_of(repo: Path) -> Path | None:
    """Where the repository holding `repo` keeps its worktrees' registrations (None: no repo)."""
    try:
        return repo_paths(repo).common_dir
    except NotAGitRepo:
        return None
