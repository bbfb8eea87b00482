"""Saving an agent's work on refs of herd's own before a reset: the dirty tree, or HEAD.

A rescue commit is made by git's own plumbing (`add` and `write-tree` in a temporary index,
`commit-tree`, `update-ref`; `rescuetree` builds the trees), so it saves what the reset and
clean then remove (the reset removes nothing else), with
the config git honours (a filter driver in `add`, a commit encoding) and none of the user's
hooks, fsmonitor or signing (`gitrun` turns them off).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentherd.sessions.checkpoint import GitPaths
from agentherd.supervisor.git import gitfiles, rescuetree
from agentherd.supervisor.git.gitproc import GitDeadline, GitError
from agentherd.supervisor.git.gitrepo import head_or_none, repo_paths
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
    return _commit(paths, tree, [head] if head is not None else [], message, deadline)


def _commit(
    paths: GitPaths, tree: str, parents: Sequence[str], message: str, deadline: GitDeadline | None
) -> str:
    """A commit of `tree` on `parents` by herd's identity, written by `git commit-tree`."""
    linked = [arg for parent in parents for arg in ("-p", parent)]
    commit_args = ["commit-tree", tree, *linked, "-m", message]
    out = run_ok(paths.worktree, *commit_args, env=RESCUE_IDENTITY, deadline=deadline)
    return out.strip().decode("ascii")


@dataclass(frozen=True)
class Rescued:
    """A rescue done for a reset: where it saved the work, and what the reset may remove."""

    saved: SavedRef | None
    """The rescue commit, or None when there was nothing to save."""
    removable: frozenset[str] = frozenset()
    """Untracked paths (from the top) the rescue holds: the clean after the reset removes
    these and nothing else."""
    unsaved: tuple[str, ...] = ()
    """Changed files git could not store: the reset must not overwrite them."""
    scope: str = ""
    """The session's folder from the top ("" for the whole worktree): all the reset touches."""


def save_rescue(
    worktree: Path,
    ref: str,
    message: str,
    exclude: Sequence[Path] = (),
    deadline: GitDeadline | None = None,
) -> SavedRef | None:
    """Commit the dirty tree to a NEW ref (see `rescue`); None when there is nothing to save."""
    return rescue(worktree, ref, message, exclude, deadline).saved


def rescue(
    worktree: Path,
    ref: str,
    message: str,
    exclude: Sequence[Path] = (),
    deadline: GitDeadline | None = None,
    target: str | None = None,
) -> Rescued:
    """Commit everything a reset of `worktree` to `target` (default HEAD) would lose to a NEW ref.

    The commit's tree is the worktree of the session's folder (`worktree`; outside it, HEAD's):
    staged, modified and untracked files, assumed-unchanged edits, and files the agent's own
    `.gitignore` hides that the clean would remove. When the index holds what neither HEAD nor
    that tree does (`git add f; rm f`), its tree is a second parent, as `git stash` keeps it.
    The real index, the worktree and HEAD are left exactly as they are, no hook runs and no
    user identity is needed. Untracked paths in `exclude` (herd.toml living in the worktree)
    are not the agent's work: the rescue holds them as HEAD does.
    A rescue ref is never moved: when `ref` exists (the same run rescued again, e.g. by a new
    daemon after a kill mid-reset), the commit goes on `ref.2`, `ref.3`..., unless one of them
    already holds this very tree on this HEAD.
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
    scope = rescuetree.scope_of(paths, worktree) if head else ""
    head_tree = _head_tree(paths, head, deadline)
    trees = rescuetree.build(paths, head, head_tree, target, scope, exclude, deadline)
    index = trees.index if trees.index not in (None, head_tree, trees.worktree) else None
    done = functools.partial(Rescued, removable=trees.removable, unsaved=trees.unsaved, scope=scope)
    if trees.worktree == head_tree and index is None:
        return done(None)
    # Mostly neither the ref nor a copy exists yet: then no git process need list them.
    copies = [] if gitfiles.no_ref_like(paths, ref) else _copies(top, ref, deadline)
    earlier = tuple(name for name, *_ in copies)
    for name, sha, copy_tree, parents in copies:
        if copy_tree == trees.worktree and _same_parents(top, parents, head, index, deadline):
            return done(SavedRef(name, sha, tuple(e for e in earlier if e != name)))
    message = message or "herd rescue"
    on = [head] if head is not None else []
    if index is not None:
        on.append(write_commit(paths, index, head, f"{message}: the index", deadline))
    written = _commit(paths, trees.worktree, on, message, deadline)
    name = _create_ref(top, ref, written, "herd rescue", earlier, deadline)
    return done(SavedRef(name, written, earlier))


def _same_parents(
    top: Path, parents: str, head: str | None, index: str | None, deadline: GitDeadline | None
) -> bool:
    """True when a rescue commit's `parents` are `head` and (when given) a commit of `index`."""
    found = parents.split()
    if found[:1] != ([head] if head else []):
        return False
    if index is None:
        return len(found) == (1 if head else 0)
    if len(found) != 2:
        return False
    tree = run_raw(top, "rev-parse", f"{found[1]}^{{tree}}", deadline=deadline).stdout.strip()
    return tree.decode("ascii", "replace") == index


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
