"""A run's output file read by offset: its lines counted, a line start noted now and then,
and any line's bytes on demand.

The output view keeps one line start per CHECKPOINT_BYTES (tui/dashboard/line_map.py), not one per
line; the text of a line is read from the file when it scrolls into view, so a log of any
size opens, scrolls and searches in bounded work and memory. File I/O: the index grows in a
worker thread; reading the few lines on screen is a small `pread`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from array import array
from dataclasses import dataclass
from pathlib import Path

INDEX_STEP_BYTES = 8 << 20
"""One indexing step reads this much: a huge log is indexed in slices, the newest first shown
once the whole file is indexed (a 256 MiB log takes about a second, off the event loop)."""

LINE_READ_MAX_BYTES = 64 << 10
"""A longer line is read (and shown) from its start only; `herd logs` has all of it."""

SEARCH_CHUNK_BYTES = 1 << 20
"""Search reads the file in slices of this size, never the whole file at once."""


def open_regular(path: Path) -> int | None:
    """A read-only descriptor for `path` if it is a regular file (a FIFO or device in the
    log's place would block or never end), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


CHECKPOINT_BYTES = 32 << 10
"""A line start is remembered once per this many bytes (tui/dashboard/line_map.py finds the
ones between
by reading at most this much): the index costs 16 bytes per 32 KiB of log, not 8 per line."""


@dataclass
class IndexStep:
    """What one indexing step found: new checkpoints and where the indexed file ends."""

    offsets: array[int]
    """New checkpoints: byte offsets of line starts, ascending."""
    lines: array[int]
    """The line number starting at each new checkpoint."""
    complete: int
    """Complete lines (newlines) in the indexed bytes."""
    next_start: int
    """Where the line after the last newline starts (a last line may still be written)."""
    indexed_bytes: int
    restart: bool
    """The file shrank or was replaced: the index started over (the checkpoints begin at 0
    again, and the lines are read from the file as it is now)."""


@dataclass
class LineIndex:
    """Counts the lines of a growing file and notes a checkpoint line start every
    `checkpoint_bytes` (file I/O: use in a thread). It keeps no list: the view keeps the
    checkpoints it is sent (tui/dashboard/line_map.py)."""

    path: Path
    checkpoint_bytes: int = CHECKPOINT_BYTES
    indexed_bytes: int = 0
    complete: int = 0
    next_start: int = 0
    checkpoint: int = 0
    """The newest checkpoint's offset: the next is the first line start past it plus
    `checkpoint_bytes`."""
    inode: int | None = None
    """The file indexed: a log compacted once its run ended is a new file (a new start)."""

    def step(self, max_bytes: int = INDEX_STEP_BYTES) -> IndexStep:
        """Index up to `max_bytes` more of the file; return the checkpoints it found."""
        offsets, lines = array("Q"), array("Q")
        restart = False
        fd = open_regular(self.path)
        if fd is None:
            return IndexStep(
                offsets, lines, self.complete, self.next_start, self.indexed_bytes, False
            )
        try:
            info = os.fstat(fd)
            size = info.st_size
            replaced = self.inode is not None and info.st_ino != self.inode
            self.inode = info.st_ino
            if size < self.indexed_bytes or replaced:
                self.indexed_bytes = self.complete = self.next_start = self.checkpoint = 0
                restart = True
            data = os.pread(fd, min(max_bytes, size - self.indexed_bytes), self.indexed_bytes)
        finally:
            os.close(fd)
        base = self.indexed_bytes
        newlines = data.count(b"\n")  # counted in C: no Python work per line
        if newlines:
            counted, counted_to = self.complete, 0
            while True:  # one find per checkpoint, not per line
                want = self.checkpoint + self.checkpoint_bytes - 1 - base
                at = data.find(b"\n", max(0, want))
                if at < 0:
                    break
                counted += data.count(b"\n", counted_to, at + 1)
                counted_to = at + 1
                self.checkpoint = base + at + 1
                offsets.append(self.checkpoint)
                lines.append(counted)
            self.complete += newlines
            self.next_start = base + data.rfind(b"\n") + 1
        self.indexed_bytes += len(data)
        return IndexStep(
            offsets, lines, self.complete, self.next_start, self.indexed_bytes, restart
        )


class LineReader:
    """Reads lines of one file by their offsets; counts what it read, for tests to bound."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._fd = open_regular(path) if path is not None else None
        self.lines_read = 0

    def read(self, start: int, end: int) -> bytes:
        """The bytes of one line (its newline dropped), at most LINE_READ_MAX_BYTES of them."""
        if self._fd is None and self.path is not None:
            self._fd = open_regular(self.path)
        if self._fd is None or end <= start:
            return b""
        self.lines_read += 1
        try:
            data = os.pread(self._fd, min(end - start, LINE_READ_MAX_BYTES), start)
        except OSError:
            return b""
        return data[:-1] if data.endswith(b"\n") else data

    def close(self) -> None:
        """Let go of the file."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def scan(fd: int, low: int, high: int, pattern: bytes, forward: bool) -> int | None:
    """The offset of the first (or last) match of `pattern` in [low, high), slice by slice."""
    overlap = len(pattern) - 1
    if forward:
        at = low
        while at < high:
            data = os.pread(fd, min(SEARCH_CHUNK_BYTES + overlap, high - at), at).lower()
            hit = data.find(pattern)
            if hit >= 0:
                return at + hit
            at += SEARCH_CHUNK_BYTES
        return None
    at = high
    while at > low:
        begin = max(low, at - SEARCH_CHUNK_BYTES)
        data = os.pread(fd, min(at + overlap, high) - begin, begin).lower()
        hit = data.rfind(pattern)
        if hit >= 0:
            return begin + hit
        at = begin
    return None
