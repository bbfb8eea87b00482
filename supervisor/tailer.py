"""Read a growing log file by offset: new bytes only, truncation handled, bounded reads."""

from __future__ import annotations

import os
from pathlib import Path

READ_CHUNK_BYTES = 1 << 20
"""At most this much is read per call, so one flood cannot hold the event loop for long."""


class LogTailer:
    """Remembers how far a file was read and returns what was appended since."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        self.truncations = 0
        self._inode: int | None = None

    def read_new(self, max_bytes: int = READ_CHUNK_BYTES) -> bytes:
        """Bytes appended since the last call (at most `max_bytes`); b"" when nothing is new."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return b""
        try:
            info = os.fstat(fd)
            if self._inode is not None and info.st_ino != self._inode:
                self.offset = 0  # replaced by a new file
            self._inode = info.st_ino
            if info.st_size < self.offset:
                self.offset = 0  # truncated under us
                self.truncations += 1
            if info.st_size == self.offset:
                return b""
            data = os.pread(fd, min(max_bytes, info.st_size - self.offset), self.offset)
            self.offset += len(data)
            return data
        finally:
            os.close(fd)

    def has_more(self) -> bool:
        """True when the file holds bytes not read yet."""
        try:
            return self.path.stat().st_size > self.offset
        except FileNotFoundError:
            return False
