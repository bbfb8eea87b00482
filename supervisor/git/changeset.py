"""What changed between two trees (two commits, or a commit and the worktree): the files with
their +/- counts from one git process, then each file's diff text read on demand and cut at a
bound, so a 50 MB diff costs the files asked for, up to their bound, and no more."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from agentherd.supervisor.git import gitfiles
from agentherd.supervisor.git.gitproc import GitError
from agentherd.supervisor.git.gitrepo import Repo, open_repo, read
from agentherd.supervisor.git.gitrun import check_rev, read_prefix

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""The empty tree's id: what a root commit is compared with."""
BINARY_SNIFF_BYTES = 8000
"""An untracked file with a NUL byte in its first 8000 bytes is binary, as git decides."""
COUNT_CHUNK_BYTES = 1 << 20
COUNT_MAX_BYTES = 256 << 20
"""An untracked file's lines are counted in its first 256 MiB (a sparse file may be huge)."""

_STATUS = {"A": "added", "D": "deleted", "M": "modified", "T": "modified", "R": "renamed"}
_STATUS.update(C="copied")
# Every diff herd reads is git's own: no external diff, no textconv, no colour, no pager.
_DIFF_ARGS = ("diff", "--no-ext-diff", "--no-textconv", "--no-color", "-M")


@dataclass(frozen=True)
class FileChange:
    """One changed file: its path (and a rename's old path), lines added and removed (None
    for a binary file) and what happened to it."""

    path: str
    status: str
    added: int | None
    removed: int | None
    old_path: str | None = None

    @property
    def binary(self) -> bool:
        """True when git counts no lines in it."""
        return self.added is None

    def to_json(self) -> dict[str, object]:
        """The file's entry in a `diff` reply."""
        return {
            "path": self.path,
            "old_path": self.old_path,
            "status": self.status,
            "added": self.added,
            "removed": self.removed,
            "binary": self.binary,
        }


def parent_or_empty(worktree: Path, sha: str) -> str:
    """The first parent of the commit `sha`, or the empty tree for a root commit."""
    check_rev(sha)
    paths = gitfiles.find_paths(worktree)
    parents = gitfiles.commit_parents(paths, sha) if paths is not None else None
    if parents == ():
        return EMPTY_TREE
    if parents:
        return parents[0]
    try:
        _, out = read(open_repo(worktree), "rev-parse", "-q", "--verify", f"{sha}^1^{{commit}}")
    except GitError:
        return EMPTY_TREE
    return out.decode("ascii").strip() or EMPTY_TREE


def changed_files(
    worktree: Path, base: str, head: str | None, max_files: int
) -> tuple[list[FileChange], bool]:
    """The files changed from `base` to `head` (None: the worktree, untracked files too), at
    most `max_files` of them, and whether more were left out."""
    check_rev(base)
    repo = open_repo(worktree)
    revs = (base,) if head is None else (base, head)
    if head is not None:
        check_rev(head)
    _, raw = read(repo, *_DIFF_ARGS, "--raw", "--numstat", "-z", *revs, "--")
    files = _parse_raw_numstat(raw.split(b"\0"))
    if head is None:
        files += _untracked(repo, max_files + 1 - len(files))
    return files[:max_files], len(files) > max_files


def _parse_raw_numstat(tokens: list[bytes]) -> list[FileChange]:
    """`--raw --numstat -z` output: every file's raw entry (its status), then its counts."""
    statuses: list[tuple[str, str, str | None]] = []
    counts: list[tuple[int | None, int | None]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith(b":"):
            letter = token.split()[-1][:1].decode("ascii", "replace")
            if letter in ("R", "C"):
                old, new = os.fsdecode(tokens[i + 1]), os.fsdecode(tokens[i + 2])
                statuses.append((new, _STATUS[letter], old))
                i += 3
                continue
            statuses.append((os.fsdecode(tokens[i + 1]), _STATUS.get(letter, "modified"), None))
            i += 2
            continue
        if b"\t" in token:
            added, removed, name = token.split(b"\t", 2)
            counts.append((_count(added), _count(removed)))
            i += 1 if name else 3  # a rename's numstat names its two paths in the next tokens
            continue
        i += 1
    return [
        FileChange(path=path, status=status, old_path=old, added=c[0], removed=c[1])
        for (path, status, old), c in zip(statuses, counts, strict=False)
    ]


def _count(field: bytes) -> int | None:
    """A numstat count; None for a binary file's `-`."""
    return int(field) if field.isdigit() else None


def _untracked(repo: Repo, max_files: int) -> list[FileChange]:
    """The worktree's untracked, not ignored files as added ones, their lines counted."""
    if max_files <= 0:
        return []
    _, raw = read(repo, "ls-files", "-z", "--others", "--exclude-standard", "--")
    names = [os.fsdecode(name) for name in raw.split(b"\0") if name and not name.endswith(b"/")]
    return [_untracked_file(repo.top, name) for name in names[:max_files]]


def _untracked_file(top: Path, name: str) -> FileChange:
    """An untracked file's entry: its lines counted in chunks (None when it is binary). A link
    is one line (its target's name, as git shows it), never followed: the agent may point one
    at /dev/zero or at a file outside the worktree."""
    path = top / name
    try:
        mode = path.lstat().st_mode
    except OSError:
        return FileChange(path=name, status="untracked", added=0, removed=0)
    if stat.S_ISLNK(mode):
        return FileChange(path=name, status="untracked", added=1, removed=0)
    lines = 0
    last = b"\n"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return FileChange(path=name, status="untracked", added=0, removed=0)
            head = handle.read(BINARY_SNIFF_BYTES)
            if b"\0" in head:
                return FileChange(path=name, status="untracked", added=None, removed=None)
            chunk, read_bytes = head, len(head)
            while chunk and read_bytes <= COUNT_MAX_BYTES:
                lines += chunk.count(b"\n")
                last = chunk[-1:]
                chunk = handle.read(COUNT_CHUNK_BYTES)
                read_bytes += len(chunk)
    except OSError:
        pass
    return FileChange(path=name, status="untracked", added=lines + (last != b"\n"), removed=0)


def file_diff(
    worktree: Path, base: str, head: str | None, change: FileChange, max_bytes: int
) -> tuple[str, bool]:
    """(one file's diff text, whether it was cut at `max_bytes`); git stops once cut."""
    repo = open_repo(worktree)
    pins = {"GIT_DIR": str(repo.git_dir), "GIT_WORK_TREE": str(repo.top)}
    if change.status == "untracked":
        args: tuple[str, ...] = (*_DIFF_ARGS, "--no-index", "--", "/dev/null", change.path)
        data, cut = read_prefix(repo.top, *args, max_bytes=max_bytes)
    else:
        check_rev(base)
        revs = (base,) if head is None else (base, head)
        paths = (change.path,) if change.old_path is None else (change.old_path, change.path)
        literal = tuple(f":(top,literal){path}" for path in paths)
        args = (*_DIFF_ARGS, *revs, "--", *literal)
        data, cut = read_prefix(repo.top, *args, max_bytes=max_bytes, env=pins)
    return data.decode("utf-8", "replace"), cut
