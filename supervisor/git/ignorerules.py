"""Which files ignored now a clean after the reset would remove: the agent's `.gitignore` hid them.

An agent that adds `newwork/` to `.gitignore` and works there has its work skipped by `add -A`;
the reset then brings back the old `.gitignore`, under which `newwork/` is untracked work for the
clean. The rules after the reset are asked of git itself (`check-ignore`) in a scratch folder
holding the target's `.gitignore` files, and the untracked ones the reset leaves, at their paths.
Only needed when a `.gitignore` differs between the rescue's tree and the target.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from agentherd.sessions.checkpoint import GitPaths
from agentherd.supervisor.git.gitproc import GitDeadline
from agentherd.supervisor.git.gitrun import run_ok

IGNORE_FILE = ".gitignore"


def is_ignore_file(path: str) -> bool:
    """True for a `.gitignore` at any depth."""
    return PurePosixPath(path).name == IGNORE_FILE


def split_z(raw: bytes) -> list[str]:
    """A NUL-separated git listing as paths (file names are bytes to git: kept via fsdecode)."""
    return [os.fsdecode(item) for item in raw.split(b"\0") if item]


def literal(path: str) -> str:
    """A pathspec naming exactly `path` from the top, whatever characters it holds."""
    return f":(top,literal){path}"


def unignored_after_reset(
    paths: GitPaths,
    index_env: Mapping[str, str],
    target: str,
    prefix: str,
    deadline: GitDeadline | None,
) -> list[str]:
    """Files (relative to the top) ignored now that the target's rules leave to the clean."""
    top = paths.worktree
    scope = [literal(prefix)] if prefix else []
    listed = run_ok(
        top,
        *("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"),
        "--",
        *scope,
        env=index_env,
        deadline=deadline,
    )
    entries = split_z(listed)
    if not entries:
        return []
    with tempfile.TemporaryDirectory(prefix="herd-ignore-") as folder:
        rules = _RulesAfterReset(paths, Path(folder), target, deadline)
        kept = rules.not_ignored(entries)
        dirs = [entry for entry in kept if entry.endswith("/")]
        files = [entry for entry in kept if not entry.endswith("/")]
        if dirs:  # a whole folder ignored now: which of its files the target's rules ignore
            inside = run_ok(
                top,
                *("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--"),
                *(literal(d) for d in dirs),
                env=index_env,
                deadline=deadline,
            )
            files += rules.not_ignored(split_z(inside))
    return files


class _RulesAfterReset:
    """A scratch folder with the ignore files the worktree will have after a reset to `target`."""

    def __init__(self, paths: GitPaths, folder: Path, target: str, deadline: GitDeadline | None):
        self.paths = paths
        self.folder = folder
        self.deadline = deadline
        listing = run_ok(
            paths.worktree, "ls-tree", "-r", "-z", "--name-only", target, deadline=deadline
        )
        self.tracked = [p for p in split_z(listing) if is_ignore_file(p)]
        self._write_tracked(target)
        self._keep_untracked("")
        self.seen: set[str] = {""}

    def _write_tracked(self, target: str) -> None:
        """The target's own `.gitignore` files, as the reset writes them."""
        if not self.tracked:
            return
        request = "".join(f"{target}:{path}\n" for path in self.tracked).encode()
        out = run_ok(
            self.paths.worktree, "cat-file", "--batch", stdin=request, deadline=self.deadline
        )
        at = 0
        for path in self.tracked:
            header_end = out.index(b"\n", at)
            fields = out[at:header_end].split()
            size = int(fields[2]) if len(fields) == 3 and fields[1] == b"blob" else -1
            at = header_end + 1
            if size < 0:
                continue  # missing or not a blob (a folder named .gitignore)
            destination = self.folder / path
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(out[at : at + size])
            at += size + 1

    def _keep_untracked(self, folder: str) -> None:
        """An untracked `.gitignore` in `folder` outlives the reset, and the clean reads it."""
        ignore = f"{folder}/{IGNORE_FILE}" if folder else IGNORE_FILE
        on_disk = self.paths.worktree / ignore
        if ignore not in self.tracked and on_disk.is_file() and not on_disk.is_symlink():
            (self.folder / ignore).write_bytes(on_disk.read_bytes())

    def _prepare(self, entry: str) -> None:
        """The folders on `entry`'s way (and it, when it is one), with their ignore files."""
        parts = PurePosixPath(entry.rstrip("/")).parts
        depth = len(parts) if entry.endswith("/") else len(parts) - 1
        for n in range(1, depth + 1):
            folder = "/".join(parts[:n])
            if folder not in self.seen:
                self.seen.add(folder)
                (self.folder / folder).mkdir(parents=True, exist_ok=True)
                self._keep_untracked(folder)

    def not_ignored(self, entries: Sequence[str]) -> list[str]:
        """The `entries` (a trailing `/` marks a folder) the rules after the reset do not ignore."""
        for entry in entries:
            self._prepare(entry)
        out = run_ok(
            self.folder,
            f"--git-dir={self.paths.git_dir}",
            f"--work-tree={self.folder}",
            *("check-ignore", "--no-index", "--verbose", "--non-matching", "-z", "--stdin"),
            stdin=b"".join(os.fsencode(e) + b"\0" for e in entries),
            ok_codes=(0, 1),
            deadline=self.deadline,
        )
        fields = out.split(b"\0")
        found = []
        for at in range(0, len(fields) - 3, 4):  # source, line, pattern, path
            pattern, path = fields[at + 2], os.fsdecode(fields[at + 3])
            if not pattern or pattern.startswith(b"!"):
                found.append(path)
        return found
