"""A Linux inotify descriptor read on the event loop: it wakes the daemon only on a change.

watchfiles' notify thread wakes every `step` ms to look at its stop event, whatever the fleet
does; an inotify fd in the loop's epoll costs nothing while the files are quiet.
"""

from __future__ import annotations

import ctypes
import os
import struct

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_ONESHOT = 0x80000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

WATCH_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
)
"""What a watched folder reports: its files written, created, deleted or renamed, and itself
deleted or moved (then the watch starts again)."""

FOLDER_GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED
"""Events on the watched folder itself that mean it no longer stands where it was."""

READ_BYTES = 64 * 1024
"""One read takes at most this much of the queue (hundreds of events)."""

_EVENT = struct.Struct("iIII")
"""struct inotify_event: wd, mask, cookie, len (then len bytes of NUL-padded name)."""

_libc = ctypes.CDLL(None, use_errno=True)
_libc.inotify_init1.argtypes = [ctypes.c_int]
_libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


class Inotify:
    """One inotify descriptor (non-blocking) and the folders it watches by watch descriptor."""

    def __init__(self) -> None:
        self.fd = _check(_libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC), "inotify_init1")
        self.folders: dict[int, str] = {}
        self.overflowed = False
        """Set when the kernel dropped events (its queue was full): anything may have changed."""
        self.oneshot: set[int] = set()
        """Watches that report one change and then end (the kernel removes them)."""
        self.fired: list[str] = []
        """Folders whose one-shot watch reported its change since the caller last emptied this."""

    def add(self, folder: str, oneshot: bool = False) -> None:
        """Watch one folder's entries (not recursive); raises OSError (ENOENT, ENOSPC).

        A one-shot watch reports the first change only (a chatty log's writes would each be an
        event): whoever reads the folder's files adds it again before reading them.
        """
        mask = WATCH_MASK | (IN_ONESHOT if oneshot else 0)
        wd = _check(_libc.inotify_add_watch(self.fd, os.fsencode(folder), mask), f"watch {folder}")
        self.folders[wd] = folder
        if oneshot:
            self.oneshot.add(wd)

    def read(self) -> tuple[list[str], bool]:
        """The paths changed since the last read, and whether a watched folder itself went."""
        paths: list[str] = []
        gone = False
        while True:
            try:
                data = os.read(self.fd, READ_BYTES)
            except BlockingIOError:
                return paths, gone
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                start = offset + _EVENT.size
                offset = start + length
                if mask & IN_Q_OVERFLOW:
                    self.overflowed = True
                    continue
                folder = self.folders.get(wd)
                if folder is None:
                    continue
                if wd in self.oneshot:  # its one event: the kernel has removed the watch
                    self.oneshot.discard(wd)
                    del self.folders[wd]
                    self.fired.append(folder)
                if mask & FOLDER_GONE:
                    gone = True
                    continue
                name = data[start:offset].rstrip(b"\0")
                if name:
                    paths.append(os.path.join(folder, os.fsdecode(name)))

    def close(self) -> None:
        """Let go of the descriptor (and with it every watch)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
