"""Read files an agent controls (plan, progress, run log): regular files only, bounded, no blocking.

An agent can replace its plan with a FIFO (an open or read that never returns) or a symlink to
/dev/zero (a read that never ends). Symlinks to regular files stay legitimate.
"""

from __future__ import annotations

import errno
import os
import stat


class NotARegularFile(OSError):
    """The path names a FIFO, device, socket or folder: herd refuses to read it."""


class FileTooLarge(OSError):
    """The file is larger than the reader's bound."""


def file_kind(mode: int) -> str:
    """What a stat mode names, in words for a message."""
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _refuse_unless_regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise NotARegularFile(f"is {file_kind(mode)}, not a regular file; make it a plain file")


def open_regular(path: os.PathLike[str] | str) -> int:
    """Open a regular file for reading without ever blocking; the caller closes the fd.

    The stat before the open keeps herd from opening a device at all (opening some has side
    effects); the fstat after it catches a swap between the two.
    """
    _refuse_unless_regular(os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        _refuse_unless_regular(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: os.PathLike[str] | str, max_bytes: int) -> bytes:
    """The whole file, if it is a regular file of at most `max_bytes`."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise FileTooLarge(f"is {size} bytes, over the {max_bytes} byte limit")
        chunks = []
        total = 0
        while chunk := os.read(fd, min(1 << 20, max_bytes + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # it grew while we read
                raise FileTooLarge(f"grew over the {max_bytes} byte limit while being read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_regular_tail(path: os.PathLike[str] | str, tail_bytes: int) -> bytes:
    """The last `tail_bytes` of a regular file (all of it when it is shorter)."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - tail_bytes)
        return os.pread(fd, size - start, start)
    finally:
        os.close(fd)


def next_data(fd: int, offset: int, size: int) -> int:
    """Where data resumes at or after `offset`: past a hole the log cap punched (else offset)."""
    try:
        return max(offset, os.lseek(fd, offset, os.SEEK_DATA))
    except OSError as exc:
        return size if exc.errno == errno.ENXIO else offset  # ENXIO: a hole to the end


def read_data(fd: int, offset: int, max_bytes: int, size: int) -> tuple[bytes, int]:
    """Up to `max_bytes` of data from `offset` on, skipping holes the log cap punched, and
    where it starts; bytes a punch zeroed while they were read are left out."""
    start = next_data(fd, offset, size)
    data = os.pread(fd, min(max_bytes, max(0, size - start)), start)
    if data:
        try:
            hole = os.lseek(fd, start, os.SEEK_HOLE)
        except OSError:
            return data, start
        if hole < start + len(data):
            data = data[: max(0, hole - start)]
    return data, start
