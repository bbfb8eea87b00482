"""herd's own files kept private whatever the umask: folders 0700, files 0600.

Agent output (which can echo keys) lives in `.herd/`. herd never sets its own umask, since the
agents it starts inherit it; instead every folder and file herd makes gets its mode at
creation, and a looser one an older herd left is tightened the next time herd opens it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

FOLDER_MODE = 0o700
FILE_MODE = 0o600


class StateDirUnwritable(Exception):
    """herd cannot write its state folder (a read-only file system, no permission, no room)."""

    def __init__(self, state_dir: Path, exc: OSError) -> None:
        where = exc.filename or state_dir
        reason = exc.strerror or str(exc)
        super().__init__(
            f"cannot write {where} ({reason}): herd keeps its state in {state_dir}, beside "
            "herd.toml; make that folder writable, or use a herd.toml in a writable folder"
        )


def _tighten(fd_or_path: int | Path, wanted: int) -> None:
    """Set the mode to `wanted` when it differs (a umask like 0o277 could leave it tighter
    still, and herd must write its own files)."""
    info = os.fstat(fd_or_path) if isinstance(fd_or_path, int) else os.lstat(fd_or_path)
    if stat.S_IMODE(info.st_mode) != wanted:
        if isinstance(fd_or_path, int):
            os.fchmod(fd_or_path, wanted)
        elif not stat.S_ISLNK(info.st_mode):  # never follow a link planted in the folder
            os.chmod(fd_or_path, wanted)


def make_folder(path: Path, under: Path | None = None) -> Path:
    """Create `path` and each missing parent below `under` as 0700 (`mkdir -p` would give the
    parents the umask's mode); an existing `path` is made 0700 too."""
    missing = []
    current = path
    while current != under and not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(FOLDER_MODE)
        _tighten(folder, FOLDER_MODE)
    if not missing:
        _tighten(path, FOLDER_MODE)
    return path


def open_file(path: Path, flags: int) -> int:
    """`os.open` creating `path` 0600 when missing; an existing one is made 0600."""
    fd = os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        _tighten(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def write_file(path: Path, text: str) -> None:
    """Write `text` to `path` (0600), replacing what was there."""
    with os.fdopen(open_file(path, os.O_WRONLY | os.O_TRUNC), "w") as out:
        out.write(text)


def tighten_file(path: Path) -> None:
    """Make an existing file 0600 (one an older herd left 0644); a missing one is fine."""
    with contextlib.suppress(FileNotFoundError):
        _tighten(path, FILE_MODE)
