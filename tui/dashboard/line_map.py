"""Where each line of a run's output starts, kept sparse: memory bounded whatever the log's length.

The indexer (tui/dashboard/logfile.py `LineIndex`) sends a checkpoint, a line start and its
line number,
once per `checkpoint_bytes` of log. A line's exact start is found by reading its block (from
its checkpoint, at most `checkpoint_bytes`: every other start of a block lies within that
much) and splitting it; a few blocks' starts are kept, newest use last. Blocks the log cap
punched out whole (all zeros, as SEEK_DATA says) are merged into one gap block whose lines
each show the cap's marker, so the checkpoints stay bounded by the bytes the log keeps.
"""

from __future__ import annotations

import contextlib
import os
from array import array
from bisect import bisect_right
from collections import OrderedDict
from pathlib import Path

from agentherd.tui.dashboard.logfile import CHECKPOINT_BYTES, IndexStep, open_regular, scan

BLOCKS_KEPT = 16
"""Blocks whose exact line starts are kept: a screen or two around where the view reads."""

COMPACT_FIRST_AT = 4096
"""Merging blocks the log cap punched out is first tried at this many checkpoints (128 MiB of
log at 32 KiB each), then each time their number doubles."""


class LineMap:
    """The lines of one file: a checkpoint per block, the exact starts of a few blocks (file
    I/O: small preads; a copy serves a search in a thread)."""

    def __init__(self, path: Path | None, checkpoint_bytes: int = CHECKPOINT_BYTES) -> None:
        self.path = path
        self.checkpoint_bytes = checkpoint_bytes
        self.offsets = array("Q", [0])
        """Checkpoint offsets, ascending: each a line start; block i begins at offsets[i]."""
        self.lines = array("Q", [0])
        """The line number starting at each checkpoint."""
        self.gaps: set[int] = set()
        """Checkpoint offsets of blocks the log cap punched out whole (all zeros)."""
        self.complete = 0
        self.next_start = 0
        self.end_bytes = 0
        self.blocks_read = 0
        """Blocks read from the file to split them (what tests bound)."""
        self._blocks: OrderedDict[tuple[int, int, int], array[int]] = OrderedDict()
        self._fd: int | None = None
        self._compact_at = COMPACT_FIRST_AT

    # ----- growing ---------------------------------------------------------------------------

    @property
    def line_count(self) -> int:
        """Complete lines, plus a last line still being written."""
        return self.complete + (1 if self.end_bytes > self.next_start else 0)

    def grow(self, step: IndexStep) -> None:
        """Take what the indexer found (from scratch on a restart)."""
        if step.restart:
            self.offsets, self.lines = array("Q", [0]), array("Q", [0])
            self.gaps.clear()
            self._blocks.clear()
            self._compact_at = COMPACT_FIRST_AT
        self.offsets.extend(step.offsets)
        self.lines.extend(step.lines)
        self.complete, self.next_start = step.complete, step.next_start
        self.end_bytes = step.indexed_bytes
        if len(self.offsets) >= self._compact_at:
            self.compact()
            self._compact_at = max(COMPACT_FIRST_AT, 2 * len(self.offsets))

    def copy(self) -> LineMap:
        """An independent copy (its own descriptor), for a search in a thread."""
        other = LineMap(self.path, self.checkpoint_bytes)
        other.offsets, other.lines = array("Q", self.offsets), array("Q", self.lines)
        other.gaps = set(self.gaps)
        other.complete, other.next_start, other.end_bytes = (
            self.complete,
            self.next_start,
            self.end_bytes,
        )
        return other

    def close(self) -> None:
        """Let go of the file."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _file(self) -> int | None:
        if self._fd is None and self.path is not None:
            self._fd = open_regular(self.path)
        return self._fd

    def compact(self) -> None:
        """Merge the blocks lying wholly inside a punched region into one gap block each."""
        fd = self._file()
        if fd is None:
            return
        regions = holes(fd, self.end_bytes)
        if not regions:
            return
        offsets, lines = self.offsets, self.lines
        kept_offsets, kept_lines = array("Q"), array("Q")
        gaps: set[int] = set()
        last = len(offsets) - 1  # the newest block stays open
        for block in range(len(offsets)):
            first = offsets[block]
            inside = block < last and _within(regions, first, offsets[block + 1])
            if inside and kept_offsets and kept_offsets[-1] in gaps:
                continue  # this block joins the gap block before it
            kept_offsets.append(first)
            kept_lines.append(lines[block])
            if inside:
                gaps.add(first)
        self.offsets, self.lines, self.gaps = kept_offsets, kept_lines, gaps
        self._blocks.clear()

    # ----- lines and offsets -----------------------------------------------------------------

    def start_of(self, number: int) -> int:
        """The offset where line `number` starts (0 <= number <= complete)."""
        if number >= self.complete:
            return self.next_start
        block = bisect_right(self.lines, number) - 1
        if self.offsets[block] in self.gaps:  # all zeros: one byte a line reads as the marker
            return self.offsets[block] + number - self.lines[block]
        return self._starts(block)[number - self.lines[block]]

    def end_of(self, number: int) -> int:
        """The offset where line `number` ends (its newline included)."""
        return self.start_of(number + 1) if number < self.complete else self.end_bytes

    def line_of(self, offset: int) -> int:
        """The line holding byte `offset`."""
        block = bisect_right(self.offsets, offset) - 1
        if self.offsets[block] in self.gaps:
            first, _, count = self._block_span(block)
            return self.lines[block] + min(offset - first, count - 1)
        starts = self._starts(block)
        return self.lines[block] + max(0, bisect_right(starts, offset) - 1)

    def _block_span(self, block: int) -> tuple[int, int, int]:
        """(first offset, end offset, line count) of block `block`."""
        first = self.offsets[block]
        if block + 1 < len(self.offsets):
            return first, self.offsets[block + 1], self.lines[block + 1] - self.lines[block]
        # The newest block: its lines so far (the last may still be written).
        return first, max(first, self.next_start), self.line_count - self.lines[block]

    def _starts(self, block: int) -> array[int]:
        """The exact line starts of block `block`, read and split once, then kept a while."""
        first, end, count = self._block_span(block)
        key = (first, end, count)
        found = self._blocks.get(key)
        if found is not None:
            self._blocks.move_to_end(key)
            return found
        found = self._split(first, end, count)
        self._blocks[key] = found
        if len(self._blocks) > BLOCKS_KEPT:
            self._blocks.popitem(last=False)
        return found

    def _split(self, first: int, end: int, count: int) -> array[int]:
        """Read a block (at most `checkpoint_bytes`: every start but the first lies within
        that much of it) and note where its `count` lines start."""
        starts = array("Q", [first])
        fd = self._file()
        data = b""
        if fd is not None and count > 1:
            with contextlib.suppress(OSError):
                data = os.pread(fd, min(self.checkpoint_bytes, end - first), first)
            self.blocks_read += 1
        at = data.find(b"\n")
        while at >= 0 and len(starts) < count:
            if first + at + 1 > end:
                break
            starts.append(first + at + 1)
            at = data.find(b"\n", at + 1)
        if len(starts) < count:
            return _fill_hole(starts, data, first, end, count)
        return starts


def _fill_hole(starts: array[int], data: bytes, first: int, end: int, count: int) -> array[int]:
    """A block the log cap punched into since it was indexed: its newlines there are zeros
    now. The lost lines are placed one byte apart at the zeros' start, so each reads as the
    cap's marker and every line number after stays as it was."""
    zeros = data.find(b"\0")
    hole = first + zeros if zeros >= 0 else end - 1
    missing = count - len(starts)
    before = array("Q", (s for s in starts if s <= hole))
    after = [s for s in starts if s > hole]
    at = hole if before[-1] < hole else hole + 1
    limit = after[0] if after else end
    for _ in range(missing):
        before.append(min(at, max(limit - 1, before[-1])))
        at += 1
    before.extend(after)
    return before


def holes(fd: int, size: int) -> list[tuple[int, int]]:
    """The punched regions [start, end) of a file, as SEEK_HOLE and SEEK_DATA report them."""
    found: list[tuple[int, int]] = []
    position = 0
    while position < size:
        try:
            hole = os.lseek(fd, position, os.SEEK_HOLE)
        except OSError:  # no SEEK_HOLE here: the file is all data
            break
        if hole >= size:
            break
        try:
            data = os.lseek(fd, hole, os.SEEK_DATA)
        except OSError:  # ENXIO: a hole to the end
            data = size
        found.append((hole, min(data, size)))
        position = data
    return found


def _within(regions: list[tuple[int, int]], first: int, end: int) -> bool:
    """[first, end) lies inside one of `regions` (few: a log has one hole, growing)."""
    return any(start <= first and end <= stop for start, stop in regions)


def find_line(line_map: LineMap, needle: str, from_line: int, step: int) -> int | None:
    """The first line after (`step` 1) or before (-1) `from_line` whose bytes hold `needle`
    (any case), wrapping around; read in slices (file I/O: in a thread, on a copy)."""
    if line_map.line_count <= 0 or not needle or line_map.path is None:
        return None
    pattern = needle.lower().encode("utf-8")
    fd = open_regular(line_map.path)
    if fd is None:
        return None
    try:
        after = line_map.end_of(from_line)
        before = line_map.start_of(from_line)
        end = line_map.end_bytes
        order = [(after, end), (0, before)] if step > 0 else [(0, before), (after, end)]
        for low, high in order:
            found = scan(fd, low, high, pattern, forward=step > 0)
            if found is not None:
                return line_map.line_of(found)
        return None
    finally:
        os.close(fd)
        line_map.close()
