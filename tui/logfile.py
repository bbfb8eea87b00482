"""A run's output file read by offset: where each line starts, and any line's bytes on demand.

The output view keeps only the line starts (eight bytes a line); the text of a line is read
from the file when it scrolls into view, so a log of any size opens, scrolls and searches in
bounded work per frame. File I/O: the index grows in a worker thread; reading the few lines
on screen is a small `pread`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from array import array
from dataclasses import dataclass, field
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


@dataclass
class LineIndex:
    """The byte offset where each line of a growing file starts (file I/O: use in a thread)."""

    path: Path
    starts: array[int] = field(default_factory=lambda: array("Q", [0]))
    """starts[i] is where line i begins; the last entry is where the next line will begin."""
    indexed_bytes: int = 0
    truncated: bool = False
    """The file shrank since the last step: the index started over."""

    def step(self, max_bytes: int = INDEX_STEP_BYTES) -> array[int]:
        """Index up to `max_bytes` more of the file; return the line starts it found."""
        fd = open_regular(self.path)
        if fd is None:
            return array("Q")
        try:
            size = os.fstat(fd).st_size
            if size < self.indexed_bytes:
                self.starts, self.indexed_bytes, self.truncated = array("Q", [0]), 0, True
            data = os.pread(fd, min(max_bytes, size - self.indexed_bytes), self.indexed_bytes)
        finally:
            os.close(fd)
        base = self.indexed_bytes
        found = array("Q")
        at = data.find(b"\n")
        while at >= 0:
            found.append(base + at + 1)
            at = data.find(b"\n", at + 1)
        self.indexed_bytes += len(data)
        self.starts.extend(found)
        return found


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


def find_line(
    path: Path, starts: array[int], end_bytes: int, needle: str, from_line: int, step: int
) -> int | None:
    """The first line after (`step` 1) or before (-1) `from_line` whose bytes hold `needle`
    (any case), wrapping around; read in SEARCH_CHUNK_BYTES slices (file I/O: in a thread)."""
    count = len(starts) - (1 if starts[-1] >= end_bytes else 0)
    if count <= 0 or not needle:
        return None
    pattern = needle.lower().encode("utf-8")
    fd = open_regular(path)
    if fd is None:
        return None
    try:
        order = (
            [(_line_end(starts, from_line, end_bytes), end_bytes), (0, starts[from_line])]
            if step > 0
            else [(0, starts[from_line]), (_line_end(starts, from_line, end_bytes), end_bytes)]
        )
        for low, high in order:
            found = _scan(fd, low, high, pattern, forward=step > 0)
            if found is not None:
                return _line_of(starts, found)
        return None
    finally:
        os.close(fd)


def _line_end(starts: array[int], line: int, end_bytes: int) -> int:
    return starts[line + 1] if line + 1 < len(starts) else end_bytes


def _line_of(starts: array[int], offset: int) -> int:
    """The line holding byte `offset` (a binary search over the starts)."""
    low, high = 0, len(starts) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if starts[middle] <= offset:
            low = middle
        else:
            high = middle - 1
    return low


def _scan(fd: int, low: int, high: int, pattern: bytes, forward: bool) -> int | None:
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
