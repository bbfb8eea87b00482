"""Scratch worktrees: a detached checkout of a commit for a verification, always removed."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from agentherd.supervisor.git.gitproc import GitDeadline
from agentherd.supervisor.git.gitrepo import git_paths
from agentherd.supervisor.git.gitrun import run_ok, run_raw
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
    `dest` is made (empty) before git starts, so whoever finds a killed daemon's leftovers
    finds the folder of every git that may still be at work, and `env` (a tag) names them.
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
        remove_scratch(paths.worktree, where, env)


def remove_scratch(top: Path, where: Path, env: Mapping[str, str] | None = None) -> None:
    """Remove the scratch worktree at `where` and its registration, whatever state it is in.

    Only this worktree's registration goes: `git worktree prune` would also forget every other
    worktree whose folder is missing right now (a person's worktree on an unmounted disk).
    """
    if (where / ".git").exists():
        remove = ("worktree", "remove", "--force", "--force", str(where))
        if run_raw(top, *remove, env=env).returncode == 0:
            return
    shutil.rmtree(where, ignore_errors=True)
    forget_worktree(git_paths(top).common_dir, where)


def forget_worktree(common_dir: Path, where: Path) -> bool:
    """Delete the registration (under `<common>/worktrees/`) of the worktree at `where`.

    Also one `git worktree add` killed before it wrote where the worktree goes: named after
    the folder (plus digits when the name was taken) and without a `gitdir` file.
    """
    admin_root = common_dir / "worktrees"
    target = (where / ".git").absolute()
    half_made = re.compile(re.escape(where.name) + r"\d*")
    try:
        admins = list(admin_root.iterdir())
    except OSError:
        return False
    for admin in admins:
        try:
            pointer = Path((admin / "gitdir").read_text().strip())
        except FileNotFoundError:
            pointer = None
        except OSError:
            continue
        if pointer == target or (pointer is None and half_made.fullmatch(admin.name)):
            shutil.rmtree(admin, ignore_errors=True)
            return True
    return False
