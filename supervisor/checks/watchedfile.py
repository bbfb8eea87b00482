"""The files an agent writes for herd (plan, progress): safe reads, and whether one changed."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agentherd.sessions.plan import DEFAULT_MAX_PLAN_BYTES
from agentherd.supervisor.files import agentfiles

PROGRESS_TAIL_BYTES = 256 * 1024
"""Only the end of a long progress file is read: the latest entries live there."""


@dataclass(frozen=True)
class FileSignature:
    """Enough of a file's stat to know it did not change since the last read."""

    inode: int
    size: int
    mtime_ns: int


def signature(path: Path) -> FileSignature | None:
    """The file's signature now, or None when it cannot be read."""
    try:
        info = path.stat()
    except OSError:
        return None
    return FileSignature(info.st_ino, info.st_size, info.st_mtime_ns)


def modified_at(signature: FileSignature) -> datetime:
    """When the file was last written, from its signature."""
    return datetime.fromtimestamp(signature.mtime_ns / 1e9, UTC)


def read_plan(path: Path) -> bytes:
    """The plan's bytes: a regular file within the size bound (an agent may plant a FIFO)."""
    return agentfiles.read_regular(path, DEFAULT_MAX_PLAN_BYTES)


def read_progress_tail(path: Path) -> bytes:
    """The end of the progress file: a regular file, read from its tail."""
    return agentfiles.read_regular_tail(path, PROGRESS_TAIL_BYTES)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace a file in one rename, so its reader never sees it half written."""
    temporary = path.with_name(f".{path.name}.herd-tmp")
    temporary.unlink(missing_ok=True)  # whatever the agent left there (a FIFO would block)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)
