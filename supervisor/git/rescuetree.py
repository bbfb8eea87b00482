"""The trees a rescue commits: the worktree and the index as the reset after it would lose them.

Built in a private index (a copy of the real one, for its staged content and cached stat data),
so the real index, the worktree and HEAD stay exactly as they are. Beyond what `add -A` sees:
files marked assume-unchanged (or written under `core.ignoreStat`), which `add` would skip and
the reset rewrite; untracked files the target tracks, which the reset would overwrite; files the
agent's own `.gitignore` hides, which the clean after the reset would remove; and the index's
own content, which the reset drops. What could not be stored is named, for the reset to spare.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentherd.sessions.checkpoint import GitPaths
from agentherd.supervisor.git import ignorerules, indexfile
from agentherd.supervisor.git.gitproc import GitDeadline, GitError
from agentherd.supervisor.git.gitrepo import inside
from agentherd.supervisor.git.gitrun import first_line, run_ok, run_raw
from agentherd.supervisor.git.ignorerules import literal, split_z

HONEST_STAT = ("-c", "core.ignoreStat=false", "-c", "core.untrackedCache=false")
"""Every file is looked at, whatever the config says: an assumed-unchanged edit is an edit, and
an untracked-cache extension in the copied index cannot hide a folder."""


@dataclass(frozen=True)
class RescueTrees:
    """What a rescue holds, as trees, and what its reset may remove."""

    worktree: str
    """The tree of the worktree: tracked edits and deletions, untracked files, staged ones."""
    index: str | None
    """The tree of the index, when it holds what neither HEAD nor the worktree does."""
    removable: frozenset[str]
    """Paths (from the top) the worktree tree holds and the target does not: all a clean after
    the reset may remove."""
    unsaved: tuple[str, ...]
    """Changed files git could not store (unreadable, vanished): the reset must not run."""


def scope_of(paths: GitPaths, worktree: Path) -> str:
    """The session's folder relative to the top ("" for the top itself): all a reset touches."""
    try:
        relative = Path(worktree).resolve().relative_to(paths.worktree.resolve())
    except ValueError:
        return ""
    return "" if str(relative) == "." else relative.as_posix()


def build(
    paths: GitPaths,
    head: str | None,
    head_tree: str,
    target: str | None,
    prefix: str,
    exclude: Sequence[Path],
    deadline: GitDeadline | None,
) -> RescueTrees:
    """The rescue's trees for a reset of `prefix` (the whole worktree when "") to `target`.

    `target` defaults to HEAD (whose tree is `head_tree`). Outside `prefix` the trees are
    HEAD's: that is not the session's. Untracked paths in `exclude` are held as HEAD has them
    (left out when HEAD has none).
    """
    top = paths.worktree
    scope = [literal(prefix)] if prefix and head else []
    # Most crashes leave an index that is HEAD's, with nothing assumed unchanged: then the
    # file says so, and neither its tree nor a refresh needs a git process.
    facts = indexfile.read(paths.git_dir / "index", len(head) // 2) if head else None
    with tempfile.TemporaryDirectory(prefix="herd-rescue-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        try:
            # copy2 keeps the index's mtime too, which git's racy-entry check compares against.
            shutil.copy2(paths.git_dir / "index", Path(tmp) / "index")
        except FileNotFoundError:
            if head is not None:
                run_ok(top, "read-tree", head, env=env, deadline=deadline)
        if scope and head:  # what is staged outside the session's folder is a person's
            outside = f":(top,exclude,literal){prefix}"
            run_ok(top, "reset", "-q", head, "--", outside, env=env, deadline=deadline)
        index_tree: str | None = head_tree
        if facts is None or facts.tree != head_tree:
            # Unmerged entries (a conflict) have no tree: the worktree's resolution counts.
            staged = run_raw(top, "write-tree", env=env, deadline=deadline)
            index_tree = staged.stdout.strip().decode("ascii") if staged.returncode == 0 else None
        if facts is None or facts.assume_valid:
            run_ok(top, *HONEST_STAT, "update-index", "-q", "--really-refresh", env=env,
                   ok_codes=(0, 1), deadline=deadline)  # fmt: skip
        # --ignore-errors: an unreadable file must not lose the rest (exit 1 then; a full
        # disk is fatal, 128, and nothing is reset).
        failed = _add(top, env, deadline, "-A", "--", *scope)
        _hold_as_head(top, env, head, exclude, deadline)
        against = _target_or_head(top, target, head, deadline)
        changes = _Changes.read(top, env, against, scope, deadline)
        forced = [path for path in changes.deleted if os.path.lexists(top / path)]
        if against and any(ignorerules.is_ignore_file(path) for path in changes.all):
            forced += ignorerules.unignored_after_reset(paths, env, against, prefix, deadline)
        held = inside(top, exclude)
        forced = [path for path in forced if path not in held]
        if forced:
            stdin = b"".join(os.fsencode(literal(path)) + b"\0" for path in forced)
            failed |= _add(top, env, deadline, "-f", "--pathspec-from-file=-",
                           "--pathspec-file-nul", stdin=stdin)  # fmt: skip
            changes = _Changes.read(top, env, against, scope, deadline)
        unsaved = [p for p in changes.deleted if p not in held and os.path.lexists(top / p)]
        if failed:
            unsaved += _differs_from_disk(top, env, scope, deadline)
        tree = run_ok(top, "write-tree", env=env, deadline=deadline).strip().decode("ascii")
    return RescueTrees(tree, index_tree, frozenset(changes.added), tuple(sorted(set(unsaved))))


def _add(
    top: Path, env: dict[str, str], deadline: GitDeadline | None, *args: str, stdin: bytes = b""
) -> bool:
    """`git add --ignore-errors <args>` in the private index; True when some file failed."""
    done = run_raw(top, *HONEST_STAT, "add", "--ignore-errors", *args, env=env, stdin=stdin,
                   deadline=deadline)  # fmt: skip
    if done.returncode not in (0, 1):
        raise GitError(f"git add failed in {top}: {first_line(done.stderr)}")
    return done.returncode == 1


def _target_or_head(
    top: Path, target: str | None, head: str | None, deadline: GitDeadline | None
) -> str | None:
    """The commit the reset goes to; HEAD when it names none git knows (the reset says so)."""
    if target is None or target == head:
        return head
    known = run_raw(top, "rev-parse", "-q", "--verify", f"{target}^{{commit}}", deadline=deadline)
    return known.stdout.strip().decode("ascii") if known.returncode == 0 else head


def _hold_as_head(
    top: Path,
    env: dict[str, str],
    head: str | None,
    exclude: Sequence[Path],
    deadline: GitDeadline | None,
) -> None:
    """Hold the paths in `exclude` (herd.toml) as HEAD has them: a person's, not the agent's."""
    for path in inside(top, exclude):
        unstage = (
            ["reset", "-q", head, "--"]
            if head
            else ["rm", "--cached", "-q", "--ignore-unmatch", "--"]
        )
        run_ok(top, *unstage, path, env=env, deadline=deadline)


def _differs_from_disk(
    top: Path, env: dict[str, str], scope: list[str], deadline: GitDeadline | None
) -> list[str]:
    """Tracked files whose bytes on disk the private index does not hold (their add failed).

    `diff` rather than `diff-files`: it compares contents where only the stat data differs."""
    out = run_ok(top, *HONEST_STAT, "diff", "--no-ext-diff", "--no-textconv", "--name-only", "-z",
                 "--", *scope, env=env, deadline=deadline)  # fmt: skip
    return split_z(out)


@dataclass(frozen=True)
class _Changes:
    """The private index against the target: paths it adds, paths it lacks, all it changes."""

    added: list[str]
    deleted: list[str]
    all: list[str]

    @classmethod
    def read(
        cls,
        top: Path,
        env: dict[str, str],
        target: str | None,
        scope: list[str],
        deadline: GitDeadline | None,
    ) -> _Changes:
        if target is None:  # before the first commit: no reset follows
            return cls([], [], [])
        out = run_ok(top, "diff-index", "--cached", "--no-renames", "--name-status", "-z",
                     target, "--", *scope, env=env, deadline=deadline)  # fmt: skip
        fields = split_z(out)
        added, deleted = [], []
        for status, path in zip(fields[::2], fields[1::2], strict=False):
            if status == "A":
                added.append(path)
            elif status == "D":
                deleted.append(path)
        return cls(added, deleted, fields[1::2])
