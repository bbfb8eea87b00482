"""Saving an agent's work on refs of herd's own before a reset: the dirty tree, or HEAD.

A rescue commit is made by git's own plumbing (`add -A` and `write-tree` in a temporary index,
`commit-tree`, `update-ref`), so it saves exactly what the reset and clean then remove, with
the config git honours (a filter driver in `add`, a commit encoding) and none of the user's
hooks, fsmonitor or signing (`gitrun` turns them off).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentherd.sessions.checkpoint import GitPaths
from agentherd.supervisor.git import gitfiles
from agentherd.supervisor.git.gitproc import GitDeadline, GitError
from agentherd.supervisor.git.gitrepo import head_or_none, inside, repo_paths
from agentherd.supervisor.git.gitrun import check_rev, run_ok, run_raw

RESCUE_IDENTITY = {
    "GIT_AUTHOR_NAME": "herd",
    "GIT_AUTHOR_EMAIL": "herd@localhost",
    "GIT_COMMITTER_NAME": "herd",
    "GIT_COMMITTER_EMAIL": "herd@localhost",
}
"""Author and committer of rescue commits, so no user.name/user.email is needed."""

MAX_REF_COPIES = 1000
"""`<ref>.2` ... `<ref>.1000`: a run rescued more often than this has a bigger problem."""


@dataclass(frozen=True)
class SavedRef:
    """A commit herd saved on a ref of its own; `earlier` lists older copies for the same run."""

    ref: str
    sha: str
    earlier: tuple[str, ...] = ()


def _copies(top: Path, ref: str, deadline: GitDeadline | None) -> list[tuple[str, str, str, str]]:
    """(name, sha, tree, parents) of `ref` and its numbered copies `ref.2`, `ref.3`..."""
    raw = run_ok(
        top,
        "for-each-ref",
        "--format=%(refname)%00%(objectname)%00%(tree)%00%(parent)",
        ref,
        f"{ref}.*",
        deadline=deadline,
    )
    found = []
    for line in raw.decode("utf-8", "replace").splitlines():
        name, sha, tree, parents = (line.split("\0") + ["", "", ""])[:4]
        suffix = name[len(ref) :]
        if name == ref or (suffix.startswith(".") and suffix[1:].isdigit()):
            found.append((name, sha, tree, parents))
    return found


def _create_ref(
    top: Path, ref: str, sha: str, message: str, taken: Sequence[str], deadline: GitDeadline | None
) -> str:
    """Point a NEW ref at `sha`: `ref`, else the first free `ref.N`; an existing ref never moves.

    The empty old value makes `update-ref` refuse, atomically, a name that exists: another
    daemon (or a person) creating it meanwhile cannot be overwritten either. The ref is git's
    own process's to write: it finishes even when this daemon is killed meanwhile (a lock file
    of ours left behind would refuse every later rescue of this run).
    """
    for n in range(1, MAX_REF_COPIES + 1):
        name = ref if n == 1 else f"{ref}.{n}"
        if name in taken:
            continue
        if run_raw(top, "update-ref", "-m", message, name, sha, "", deadline=deadline).returncode:
            if run_raw(top, "show-ref", "--verify", "-q", name, deadline=deadline).returncode:
                raise GitError(f"git update-ref {name} failed in {top}")
            continue  # created by someone else since we looked: take the next name
        return name
    raise GitError(f"{ref} has {MAX_REF_COPIES} copies in {top}; not saving another")


def _dirty_tree(
    paths: GitPaths, head: str | None, exclude: Sequence[Path], deadline: GitDeadline | None
) -> str:
    """The tree of the worktree as `add -A` sees it (not ignored), built in a temporary index.

    Untracked paths in `exclude` are held as HEAD has them (left out when HEAD has none).
    """
    top = paths.worktree
    with tempfile.TemporaryDirectory(prefix="herd-rescue-") as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        try:
            # A copy keeps what is staged and the cached stat data (no full re-hash); copy2
            # keeps the index's mtime too, which git's racy-entry check compares against.
            shutil.copy2(paths.git_dir / "index", Path(tmp) / "index")
        except FileNotFoundError:
            if head is not None:
                run_ok(top, "read-tree", head, env=index, deadline=deadline)
        # --ignore-errors: an unreadable file must not lose the rest (exit 1 then).
        run_ok(top, "add", "-A", "--ignore-errors", env=index, ok_codes=(0, 1), deadline=deadline)
        for path in inside(top, exclude):
            # As HEAD has it: a committed herd.toml neither deleted nor edited, else left out.
            unstage = (
                ["reset", "-q", head, "--"]
                if head
                else ["rm", "--cached", "-q", "--ignore-unmatch", "--"]
            )
            run_ok(top, *unstage, path, env=index, deadline=deadline)
        return run_ok(top, "write-tree", env=index, deadline=deadline).strip().decode("ascii")


def _head_tree(paths: GitPaths, head: str | None, deadline: GitDeadline | None) -> str:
    """The tree of HEAD (git's empty tree before the first commit), from `.git` when it can."""
    top = paths.worktree
    if head is None:
        empty = run_ok(top, "hash-object", "-t", "tree", "--stdin", stdin=b"", deadline=deadline)
        return empty.strip().decode("ascii")
    loose_tree = gitfiles.commit_tree(paths, head)
    if loose_tree != gitfiles.UNKNOWN:
        return loose_tree
    return run_ok(top, "rev-parse", f"{head}^{{tree}}", deadline=deadline).strip().decode("ascii")


def write_commit(
    paths: GitPaths, tree: str, head: str | None, message: str, deadline: GitDeadline | None
) -> str:
    """The rescue commit of `tree` on `head`, written by `git commit-tree`; its sha."""
    parent = ["-p", head] if head is not None else []
    commit_args = ["commit-tree", tree, *parent, "-m", message]
    out = run_ok(paths.worktree, *commit_args, env=RESCUE_IDENTITY, deadline=deadline)
    return out.strip().decode("ascii")


def save_rescue(
    worktree: Path,
    ref: str,
    message: str,
    exclude: Sequence[Path] = (),
    deadline: GitDeadline | None = None,
) -> SavedRef | None:
    """Commit the dirty tree (staged, modified, untracked; not ignored) to a NEW ref.

    The real index, the worktree and HEAD are left exactly as they are, no hook runs and no
    user identity is needed: the tree is built in a temporary index. Untracked paths in
    `exclude` (herd.toml living in the worktree) are not the agent's work: the rescue holds
    them as HEAD does (left out when HEAD has none).
    A rescue ref is never moved: when `ref` exists (the same run rescued again, e.g. by a new
    daemon after a kill mid-reset), the commit goes on `ref.2`, `ref.3`..., unless one of them
    already holds this very tree on this HEAD. Returns None when there is nothing to save.
    """
    paths = repo_paths(worktree)
    top = paths.worktree
    if not ref.startswith("refs/") or (
        not gitfiles.valid_ref_name(ref) and run_raw(top, "check-ref-format", ref).returncode
    ):
        raise ValueError(f"not a ref name for a rescue: {ref!r} (e.g. refs/herd/api/rescue/3)")
    head = gitfiles.head_sha(paths)
    if head == gitfiles.UNKNOWN:
        head = head_or_none(top, deadline)
    tree = _dirty_tree(paths, head, exclude, deadline)
    if tree == _head_tree(paths, head, deadline):
        return None
    # Mostly neither the ref nor a copy exists yet: then no git process need list them.
    copies = [] if gitfiles.no_ref_like(paths, ref) else _copies(top, ref, deadline)
    earlier = tuple(name for name, *_ in copies)
    for name, sha, copy_tree, parents in copies:
        if copy_tree == tree and parents == (head or ""):
            return SavedRef(name, sha, tuple(e for e in earlier if e != name))
    written = write_commit(paths, tree, head, message or "herd rescue", deadline)
    name = _create_ref(top, ref, written, "herd rescue", earlier, deadline)
    return SavedRef(name, written, earlier)


def keep_head(
    worktree: Path, ref: str, target_sha: str, deadline: GitDeadline | None = None
) -> SavedRef | None:
    """Before HEAD moves back to `target_sha`, save it on a new `ref` unless nothing is lost.

    Nothing is lost when there is no HEAD yet or HEAD is already an ancestor of the target.
    """
    check_rev(target_sha)
    paths = repo_paths(worktree)
    top = paths.worktree
    head = gitfiles.head_sha(paths)
    if head == gitfiles.UNKNOWN:
        head = head_or_none(top, deadline)
    if head is None or head == target_sha:  # HEAD is its own ancestor: nothing to keep
        return None
    ancestor = run_raw(top, "merge-base", "--is-ancestor", head, target_sha, deadline=deadline)
    if ancestor.returncode == 0:
        return None
    copies = _copies(top, ref, deadline)
    for name, sha, *_ in copies:
        if sha == head:
            return SavedRef(name, sha)
    earlier = tuple(name for name, *_ in copies)
    name = _create_ref(top, ref, head, "herd: kept before a reset", earlier, deadline)
    return SavedRef(name, head, earlier)
