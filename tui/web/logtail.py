"""A run's output as a page shows it: complete lines made readable like `herd logs` does on a
terminal (stream-json summarised, escapes inert), read by offset and bounded."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agentherd.sessions.adapters.summary import summarize
from agentherd.supervisor.files.tailer import LogTailer

LINE_CHARS = 2000
"""A readable line is cut here; `herd logs --raw` has every byte."""

TAIL_BYTES = 64 << 10
"""A page opens on at most this much of the end of the log."""

TAIL_LINES = 200
"""... and at most this many of its lines."""

STEP_BYTES = 64 << 10
"""A stream sends at most this much output per step; an agent that writes faster is skipped
ahead (and the page says how much it skipped), so no browser falls behind without end."""


@dataclass
class Lines:
    """Readable lines and where the reading stopped (the next byte to read)."""

    lines: list[str] = field(default_factory=list)
    offset: int = 0
    skipped_bytes: int = 0


def _readable(chunk: bytes) -> list[str]:
    return [summarize(line, LINE_CHARS) for line in chunk.split(b"\n")]


def tail(path: Path, count: int = TAIL_LINES, ended: bool = False) -> Lines:
    """The last `count` complete lines (with `ended`, the unfinished last line too) and the
    offset after them, where a stream takes over."""
    try:
        size = path.stat().st_size
    except OSError:
        return Lines()
    tailer = LogTailer(path, max(0, size - TAIL_BYTES), log_refusal=False, reopen_replaced=False)
    try:
        data = tailer.read_new(TAIL_BYTES)
    finally:
        tailer.close()
    end = tailer.offset
    if end > len(data):  # the read began inside a line: that line is not shown cut
        data = data.partition(b"\n")[2]
    if ended:
        body, offset = (data.removesuffix(b"\n") if data else None), end
    else:
        cut = data.rfind(b"\n")
        body = data[:cut] if cut >= 0 else None
        offset = end - len(data) + cut + 1
    lines = _readable(body) if body is not None else []
    return Lines(lines[-count:], offset)


class Follower:
    """New complete lines of one run's log from an offset, a step at a time."""

    def __init__(self, path: Path, offset: int, step_bytes: int = STEP_BYTES) -> None:
        self.step_bytes = step_bytes
        self.tailer = LogTailer(path, offset, log_refusal=False, reopen_replaced=False)
        self._pending = b""
        self._cut = False
        """The next bytes begin inside a line (the stream skipped ahead): drop up to its end."""

    @property
    def offset(self) -> int:
        """Where the next complete line begins: a reconnecting page resumes here."""
        return self.tailer.offset - len(self._pending)

    def step(self, ended: bool = False) -> Lines:
        """The lines written since the last step; with `ended` (the run is over), its
        unfinished last line too."""
        skipped = self.tailer.skipped_bytes
        behind = self._behind()
        data = self.tailer.read_new(self.step_bytes)
        if self._cut and data:
            self._cut, data = b"\n" not in data, data.partition(b"\n")[2]
        *complete, self._pending = (self._pending + data).split(b"\n")
        lines = _readable(b"\n".join(complete)) if complete else []
        if ended and self._pending and not self.tailer.has_more():
            lines.append(summarize(self._pending, LINE_CHARS))
            self._pending = b""
        return Lines(lines, self.offset, self.tailer.skipped_bytes - skipped + behind)

    def _behind(self) -> int:
        """Skip to the last `step_bytes` of the log when more than that waits unread."""
        try:
            size = self.tailer.path.stat().st_size
        except OSError:
            return 0
        waiting = size - self.tailer.offset
        if waiting <= 2 * self.step_bytes:
            return 0
        skip = waiting - self.step_bytes
        self.tailer.offset += skip
        self._pending, self._cut = b"", True
        return skip

    def close(self) -> None:
        """Let go of the file."""
        self.tailer.close()
