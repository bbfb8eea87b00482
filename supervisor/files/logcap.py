"""Per-session disk cap on run output: the oldest runs' logs go first, then the running log's
middle (its head and newest tail stay).

The middle of a running log is punched out (a hole: the disk frees it, offsets stay valid for
the readers following the log); once the run is over, `compact` rewrites the log as the bytes
it kept, so its size is what it holds and a copy or backup reads no gigabytes of zeros.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentherd.supervisor.files import agentfiles
from agentherd.supervisor.files.paths import OUTPUT_FILE

log = logging.getLogger("herd.logcap")

LOG_HEAD_KEEP_BYTES = 64 * 1024
"""The start of a capped run's log is kept: the agent's first lines say what it is (a session
id, a model); at most a quarter of the cap."""

LOG_TAIL_KEEP_FRACTION = 0.5
"""A capped log keeps this share of the cap as its newest output, leaving the rest as room to
grow before the next cut (so a steady writer is cut now and then, not on every check)."""

FLOOD_CALM_S = 0.1
"""A flood guard thread ends after this long with little growth (the event loop takes over)."""

COMPACT_CHUNK_BYTES = 1 << 20
"""An ended log is copied this much at a time into its compact form."""

COMPACTING_SUFFIX = ".compacting"
"""The end of the compact copy's name beside the log, until it replaces the log."""

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02

_libc = ctypes.CDLL(None, use_errno=True)
_fallocate = getattr(_libc, "fallocate64", None) or _libc.fallocate
_fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
_fallocate.restype = ctypes.c_int


def disk_bytes(info: os.stat_result) -> int:
    """What a file costs on disk: a punched log's size counts its holes, its blocks do not."""
    return min(info.st_size, info.st_blocks * 512)


def punch_hole(fd: int, offset: int, length: int) -> None:
    """Free `length` bytes at `offset` without moving later bytes (offsets stay valid)."""
    if _fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


@dataclass
class RunningLogCap:
    """Keeps one running log within the cap: the middle is punched out (or, where the
    filesystem cannot punch holes, the file is cut back to its head with a marker)."""

    path: Path
    dropped_bytes: int = 0
    """Bytes of output removed from this log so far."""
    punched_to: int = 0
    """Everything between the head and this offset is a hole already."""
    cut_to: int | None = None
    """Set when the log was cut back (no hole punching): readers resume at this offset."""
    last_size: int = 0
    _can_punch: bool = True

    def check(self, cap_bytes: int) -> tuple[int, int]:
        """Cut the log if it costs more than `cap_bytes` on disk; return how much it grew since
        the last check and its room left under the cap (both tell when to look again)."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return 0, cap_bytes
        grew = max(0, info.st_size - self.last_size)
        self.last_size = info.st_size
        room = cap_bytes - disk_bytes(info)
        if room >= 0:
            return grew, room
        # Only the file herd made: a symlink or a second name could point at a person's file.
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            return grew, 0
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return grew, 0
        try:
            opened = os.fstat(fd)
            if (opened.st_ino, opened.st_dev) == (info.st_ino, info.st_dev):
                self._cut(fd, opened, cap_bytes)
                return grew, max(0, cap_bytes - disk_bytes(os.fstat(fd)))
        except OSError as exc:
            log.warning("cannot cap %s: %s", self.path, exc)
        finally:
            os.close(fd)
        return grew, 0

    def guard_flood(
        self, cap_bytes: int, interval_s: float, calm_bytes: int, stop: threading.Event
    ) -> None:
        """In a worker thread: check every `interval_s` until the log grows less than
        `calm_bytes` in FLOOD_CALM_S (the event loop, busy parsing that flood, looks too rarely)."""
        window_grew = 0
        window_end = time.monotonic() + FLOOD_CALM_S
        while not stop.wait(interval_s) and self._can_punch:  # a cut-back log needs the tailer
            grew, _ = self.check(cap_bytes)
            window_grew += grew
            if time.monotonic() >= window_end:
                if window_grew < calm_bytes:
                    return
                window_grew = 0
                window_end = time.monotonic() + FLOOD_CALM_S

    def _cut(self, fd: int, info: os.stat_result, cap_bytes: int) -> None:
        block = max(info.st_blksize, 4096)
        head = _round_up(min(LOG_HEAD_KEEP_BYTES, cap_bytes // 4), block)
        tail = int(cap_bytes * LOG_TAIL_KEEP_FRACTION)
        if self._can_punch:
            start = max(head, self.punched_to)
            end = (info.st_size - tail) // block * block
            if end <= start:
                return
            try:
                punch_hole(fd, start, end - start)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS):
                    raise
                self._can_punch = False
            else:
                self.punched_to = end
                self.dropped_bytes += end - start
                return
        # No holes here (some filesystems): cut back to the head and say so in the file.
        dropped = info.st_size - head
        os.ftruncate(fd, head)
        with contextlib.suppress(OSError):
            appender = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.write(appender, dropped_marker(dropped))
            finally:
                os.close(appender)
        self.dropped_bytes += dropped
        self.cut_to = head
        self.last_size = head


def dropped_marker(dropped_bytes: int) -> bytes:
    """The line that stands where the cap dropped output, in a log cut back or compacted."""
    return f"\n[herd: {dropped_bytes} bytes of output dropped here (log_max_bytes)]\n".encode()


def data_ranges(fd: int, size: int) -> list[tuple[int, int]]:
    """(start, end) of each stretch of a file that holds data, in order; its holes left out."""
    ranges: list[tuple[int, int]] = []
    offset = 0
    while offset < size:
        start = agentfiles.next_data(fd, offset, size)
        if start >= size:
            break
        try:
            end = min(size, os.lseek(fd, start, os.SEEK_HOLE))
        except OSError:
            end = size
        if end <= start:  # no hole where data was just found: the filesystem says nothing
            end = size
        ranges.append((start, end))
        offset = end
    return ranges


def punched(info: os.stat_result) -> bool:
    """True when a file has fewer blocks than its size: the cap punched holes in it."""
    return stat.S_ISREG(info.st_mode) and info.st_blocks * 512 < info.st_size


def compact(path: Path, stop: Callable[[], bool] = lambda: False) -> int:
    """Rewrite an ended run's punched log as the bytes it kept, a marker line where output was
    dropped; returns the bytes of holes taken out (0: nothing to do).

    Call only once the run is over: nothing writes the log nor reads it by offset. The copy
    replaces the log by a rename, so a reader that has it open reads the old one to its end.
    `stop` is asked between chunks: True leaves the log as it was (CompactionStopped).
    """
    info = os.lstat(path)
    if not punched(info) or info.st_nlink != 1:
        return 0
    source = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        opened = os.fstat(source)
        if (opened.st_ino, opened.st_dev) != (info.st_ino, info.st_dev):
            return 0
        ranges = data_ranges(source, opened.st_size)
        if ranges == [(0, opened.st_size)]:
            return 0  # fewer blocks, no holes (a compressing filesystem)
        # A name of its own (two compactions of one log never share a copy).
        target, name = tempfile.mkstemp(COMPACTING_SUFFIX, path.name + ".", path.parent)
        copy = Path(name)
        try:
            os.fchmod(target, stat.S_IMODE(opened.st_mode))
            removed = _copy_kept(source, target, ranges, opened.st_size, stop)
            os.fsync(target)
            os.utime(target, ns=(opened.st_atime_ns, opened.st_mtime_ns))
            now = os.lstat(path)
            if (now.st_ino, now.st_size, now.st_mtime_ns) != (
                opened.st_ino,
                opened.st_size,
                opened.st_mtime_ns,
            ):
                raise OSError(f"{path} changed while it was compacted")
            os.replace(copy, path)
        except BaseException:
            with contextlib.suppress(OSError):
                copy.unlink()
            raise
        finally:
            os.close(target)
        return removed
    finally:
        os.close(source)


def _copy_kept(
    source: int, target: int, ranges: list[tuple[int, int]], size: int, stop: Callable[[], bool]
) -> int:
    """Write each data range, and a marker for each hole before, between and after them."""
    removed = 0
    at = 0
    for start, end in [*ranges, (size, size)]:
        if start > at:
            _write_all(target, dropped_marker(start - at))
            removed += start - at
        while start < end:
            if stop():
                raise CompactionStopped("the daemon is going down")
            chunk = os.pread(source, min(COMPACT_CHUNK_BYTES, end - start), start)
            if not chunk:
                break
            _write_all(target, chunk)
            start += len(chunk)
        at = end
    return removed


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def compact_ended(
    session_runs: Path, below_run: int, stop: Callable[[], bool] = lambda: False
) -> list[tuple[int, int]]:
    """Compact the punched logs of a session's runs before `below_run` (all of them ended);
    returns (run, bytes of holes taken out) of each log compacted. `stop`: as for `compact`."""
    done = []
    for number, path, _ in run_logs(session_runs):
        if number >= below_run:
            continue
        try:
            removed = compact(path, stop)
        except OSError as exc:  # left punched: it still costs only its kept bytes on disk
            log.warning("cannot compact %s: %s", path, exc)
            continue
        if removed:
            done.append((number, removed))
    return done


class CompactionStopped(Exception):
    """A compaction was stopped midway (the log is left as it was, punched)."""


def _round_up(value: int, block: int) -> int:
    return -(-value // block) * block


def run_logs(session_runs: Path) -> list[tuple[int, Path, int]]:
    """(run number, path, size) of every run log of a session, oldest run first."""
    found = []
    try:
        folders = [entry.name for entry in os.scandir(session_runs) if entry.name.isdigit()]
    except OSError:  # no run yet
        return []
    for name in folders:  # scandir, not glob: this runs for every session on the event loop
        path = session_runs / name / OUTPUT_FILE
        with contextlib.suppress(OSError):
            found.append((int(name), path, disk_bytes(path.stat())))
    return sorted(found)


def enforce_cap(
    session_runs: Path, cap_bytes: int, current_run: int
) -> tuple[list[tuple[int, int]], int]:
    """Delete old runs' logs until the total fits `cap_bytes`: the (run, bytes) deleted, and
    the bytes the other runs' logs still hold (the current one is counted live). One look at
    the folder for both: this runs for every session once a reconcile period."""
    logs = run_logs(session_runs)
    total = sum(size for _, _, size in logs)
    deleted = []
    for number, path, size in logs:
        if total <= cap_bytes or number == current_run:
            break
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        total -= size
        deleted.append((number, size))
    return deleted, total - sum(size for number, _, size in logs if number == current_run)


def bytes_before(session_runs: Path, current_run: int) -> int:
    """Bytes kept for the runs before `current_run` (the current one is counted live)."""
    return sum(size for number, _, size in run_logs(session_runs) if number != current_run)
