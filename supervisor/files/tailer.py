"""Read a growing log file by offset: new bytes only, truncation handled, bounded reads."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path

from agentherd.supervisor.files import agentfiles

log = logging.getLogger("herd.tailer")

READ_CHUNK_BYTES = 64 * 1024
"""At most this much is read per call: parsing 64 KiB of one-byte lines takes ~50 ms."""

REPLACED_CHECK_S = 1.0
"""How often an idle tailer looks whether its path now names another file (that is rare)."""


class LogTailer:
    """Remembers how far a file was read and returns what was appended since.

    The file stays open between reads (opening it is the costly part at a thousand reads a
    second); when nothing new is there, the path is checked for a replaced or deleted file.
    """

    def __init__(
        self, path: Path, offset: int = 0, log_refusal: bool = True, reopen_replaced: bool = True
    ) -> None:
        """Read `path` from `offset`; `log_refusal` False leaves saying why to the caller;
        `reopen_replaced` False keeps to the file first opened (a run's log, once its run ended,
        is replaced by its compact copy: the same output, not new output)."""
        self.path = path
        self.log_refusal = log_refusal
        self.reopen_replaced = reopen_replaced
        self.offset = offset
        self.truncations = 0
        self.skipped_bytes = 0
        """Bytes passed over because the log cap punched them out of the file."""
        self.refused: str | None = None
        """Why the path cannot be read (it is not a regular file), or None."""
        self._fd: int | None = None
        self._inode: int | None = None
        self._next_check = 0.0
        self.size_seen = 0
        """The file's size at the last read: reading up to it, the reader is at its end."""
        self.written_at = 0.0
        """The file's last write (wall clock, its mtime) as of the last read: a line read late
        was still written when the agent wrote it."""

    def read_new(self, max_bytes: int = READ_CHUNK_BYTES) -> bytes:
        """Bytes appended since the last call (at most `max_bytes`); b"" when nothing is new."""
        if self._fd is None and not self._open():
            return b""
        assert self._fd is not None
        stat = os.fstat(self._fd)
        size = self.size_seen = stat.st_size
        self.written_at = stat.st_mtime
        if size < self.offset:
            self.offset = 0  # truncated under us
            self.truncations += 1
        if size == self.offset:
            if self.reopen_replaced and self._replaced():
                self.close()
                self.offset = 0
                return self.read_new(max_bytes) if self._open() else b""
            return b""
        # Ranges the log cap punched out read as zeros and are no output: pass over them.
        data, start = agentfiles.read_data(self._fd, self.offset, max_bytes, size)
        self.skipped_bytes += start - self.offset
        self.offset = start + len(data)
        return data

    @property
    def opened(self) -> bool:
        """True while the file is open (it existed and is a regular file)."""
        return self._fd is not None

    def has_more(self) -> bool:
        """True when the file holds bytes not read yet."""
        if self._fd is None:
            try:
                return self.path.stat().st_size > self.offset
            except FileNotFoundError:
                return False
        return os.fstat(self._fd).st_size > self.offset

    def close(self) -> None:
        """Let go of the file (the run is over, or the file was replaced)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _open(self) -> bool:
        try:
            self._fd = agentfiles.open_regular(self.path)
        except FileNotFoundError:
            return False
        except OSError as exc:  # a FIFO or device planted in place of the log: never read it
            if self.refused is None and self.log_refusal:
                log.warning("not reading %s: %s", self.path, exc)
            self.refused = str(exc)
            return False
        self.refused = None
        self._inode = os.fstat(self._fd).st_ino
        return True

    def _replaced(self) -> bool:
        """True when the path now names another file (checked at most every REPLACED_CHECK_S)."""
        now = time.monotonic()
        if now < self._next_check:
            return False
        self._next_check = now + REPLACED_CHECK_S
        try:
            return os.stat(self.path).st_ino != self._inode
        except FileNotFoundError:
            return False  # keep reading the open file: the writer may still be appending
