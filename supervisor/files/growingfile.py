"""The lines an agent appended to one of its own files since herd last looked, each byte read once.

Codex's rollout and Gemini CLI's chat grow while their run lives; herd reads them again and
again, so a look must cost what was added, never the whole file. A look reads at most a given
number of bytes (the rest waits for the next); a line longer than the bound of one entry is
passed over without being held. A file replaced (another inode) or cut shorter is read again
from its start: its readers take the largest running total or each entry once by its id, so a
second reading counts nothing twice.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentherd.supervisor.files.agentfiles import open_regular


class GrowingFile:
    """One agent file followed by offset: the complete lines added since the last look."""

    def __init__(self, path: Path, max_line_bytes: int) -> None:
        self.path = path
        self.max_line_bytes = max_line_bytes
        self.offset = 0
        """Where the next look starts reading."""
        self._identity: tuple[int, int] | None = None
        self._parts: list[bytes] = []
        """The start of a line whose end is not read yet."""
        self._held = 0
        self._skipping = False
        """The current line is already over the limit: its bytes are passed over."""

    def read_new(self, max_bytes: int) -> list[bytes]:
        """The complete lines in the next `max_bytes` added bytes ([] when none or unreadable)."""
        try:
            fd = open_regular(self.path)
        except OSError:
            return []
        try:
            info = os.fstat(fd)
            identity = (info.st_dev, info.st_ino)
            if identity != self._identity or info.st_size < self.offset:
                self._restart(identity)
            data = os.pread(fd, max(0, min(max_bytes, info.st_size - self.offset)), self.offset)
        except OSError:
            return []
        finally:
            os.close(fd)
        self.offset += len(data)
        return self._lines(data)

    def _restart(self, identity: tuple[int, int]) -> None:
        """Read a new or shortened file from its start."""
        self._identity = identity
        self.offset = 0
        self._parts, self._held, self._skipping = [], 0, False

    def _lines(self, data: bytes) -> list[bytes]:
        """Split `data` on newlines, after what the last look left unfinished."""
        found: list[bytes] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            piece = data[start : end + 1]
            if not self._skipping and self._held + len(piece) <= self.max_line_bytes:
                found.append(b"".join((*self._parts, piece)) if self._parts else piece)
            self._parts, self._held, self._skipping = [], 0, False
            start = end + 1
        rest = len(data) - start
        if rest and not self._skipping:
            if self._held + rest > self.max_line_bytes:
                self._parts, self._held, self._skipping = [], 0, True
            else:
                self._parts.append(data[start:])
                self._held += rest
        return found
