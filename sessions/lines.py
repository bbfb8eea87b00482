"""Split a byte stream into lines in linear time, with a cap on the length of one line."""

from __future__ import annotations

DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024
"""One agent line can hold a whole file or tool output; 4 MiB keeps those and bounds memory."""


class TruncatedLine(bytes):
    """A line whose bytes beyond the cap were dropped."""

    __slots__ = ()


class LineSplitter:
    """Turn raw byte chunks into complete lines (without the newline), keeping a partial tail."""

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        """Create a splitter that keeps at most max_line_bytes of each line."""
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be at least 1, got {max_line_bytes}")
        self.max_line_bytes = max_line_bytes
        self.truncated_lines = 0
        self._parts: list[bytes] = []
        self._size_bytes = 0
        self._truncated = False
        self._pending = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add a chunk and return the lines it completed; truncated ones are TruncatedLine."""
        if not self._pending and len(chunk) <= self.max_line_bytes:
            # No line in it can pass the cap: split it in one call instead of line by line.
            lines = chunk.split(b"\n")
            tail = lines.pop()
            if tail:
                self._keep(tail, 0, len(tail))
            return lines
        lines = []
        start = 0
        end = len(chunk)
        while start < end:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                self._keep(chunk, start, end)
                break
            self._keep(chunk, start, newline)
            lines.append(self._take())
            start = newline + 1
        return lines

    def flush(self) -> bytes | None:
        """Return the last line that had no newline (at EOF), or None when there is none."""
        if not self._pending:
            return None
        return self._take()

    @property
    def pending_bytes(self) -> int:
        """How many bytes of an unfinished line are held."""
        return self._size_bytes

    def _keep(self, chunk: bytes, start: int, end: int) -> None:
        """Hold chunk[start:end] as part of the current line, up to the cap."""
        self._pending = True
        room_bytes = self.max_line_bytes - self._size_bytes
        length_bytes = end - start
        if length_bytes > room_bytes:
            self._truncated = True
            end = start + room_bytes
        if end > start:
            self._parts.append(chunk[start:end])
            self._size_bytes += end - start

    def _take(self) -> bytes:
        """Return the current line and start a new one."""
        line = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
        if self._truncated:
            self.truncated_lines += 1
            line = TruncatedLine(line)
        self._parts = []
        self._size_bytes = 0
        self._truncated = False
        self._pending = False
        return line
