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


class Trees:
    """Each session's worktree as found when it last asked to start.

    The check before a start compares the starting session's tree, found afresh, with every
    busy session's; resolving all of theirs again on each start made a fleet's cold start
    quadratic (200 starts x 200 `realpath` walks: a tenth of its CPU). A busy session's tree
    is the one its agent was started in, so the one found at its own start is the right one.
    """

    def __init__(self) -> None:
        self._by_session: dict[str, tuple[Path, Path]] = {}

    def fresh(self, name: str, cwd: Path) -> Path:
        """Find the tree of `cwd` now, and remember it as `name`'s."""
        tree = tree_of(cwd)
        self._by_session[name] = (cwd, tree)
        return tree

    def known(self, name: str, cwd: Path) -> Path:
        """`name`'s tree as found at its last start, or now if `cwd` is not what it was then."""
        remembered = self._by_session.get(name)
        if remembered is not None and remembered[0] == cwd:
            return remembered[1]
        return self.fresh(name, cwd)
