"""The terminal of an interactive run: a tiny holder of the pty's master end, its log, viewers.

Run as a script, stdlib only (`python3 -I -S ptyholder.py FOLDER ROWS COLS LOCK_FD READY_FD
ARGV...`), in its own session like dtach and abduco: it outlives the dashboard and the daemon,
whose death and re-adoption never touch the terminal. It starts ARGV (the run's wrapper) as the
session leader of a new pseudo-terminal, appends every byte the terminal shows to the run's
`output.log` exactly, keeps a bounded replay of what draws the current screen, and serves
`term.sock` in the run's folder to any number of viewers, one of them typing at a time. It
writes the leader's PID on READY_FD once the socket listens, and exits as its child did.
The frame format is documented in docs/architecture.md ("The terminal of an interactive run").
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import selectors
import signal
import socket
import struct
import sys
import termios
import time
import traceback

SOCKET_NAME = "term.sock"
OUTPUT_NAME = "output.log"
TAG_VAR = "HERD_RUN_TAG"
HOLDER_TAG_VAR = "HERD_HOLDER_TAG"
"""The run's tag reaches the holder here, not in TAG_VAR: the holder is no process of the run."""

HEADER = struct.Struct("!cI")
"""A frame: one kind byte, the payload's length (4 bytes, big-endian), the payload."""
SIZE = struct.Struct("!HH")
"""A `z` frame's payload: rows, columns."""
MAX_FRAME_BYTES = 1 << 20
"""A viewer's frame longer than this is not herd's: the viewer is dropped."""
REPLAY_KEEP_BYTES = 256 * 1024
"""The replay is cut when it holds three times this: to its last full clear among the newest
twice this, else to about this much of the newest output."""
VIEWER_BACKLOG_BYTES = 8 << 20
"""A viewer this far behind is dropped (it attaches again), never a brake on the agent."""
READ_BYTES = 65536

SIGNALS_VAR = "HERD_SIGNALS"
"""The run's signals file (supervisor/session/inputwait.py): the holder appends to it what the
agent's terminal reports of its state."""

STATE_MARK = b"\x1b]7501;"
STATE_REPORT = re.compile(rb"\x1b\]7501;([^\x07\x1b]{0,200})(?:\x07|\x1b\\)")
"""Codex's terminal state report (OSC 7501: `state=blocked:app=codex:kind=question`)."""
EXIT_FLUSH_S = 1.0
"""At the child's exit the viewers get this long (all together) to take the last bytes and
the exit frame."""

_MODE = re.compile(rb"\x1b\[\?([0-9;]+)([hl])")
_FULL_CLEAR = re.compile(rb"\x1b\[2J|\x1bc|\x1b\[\?(?:1049|1047|47)h")


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    """One frame of the terminal socket's protocol."""
    return HEADER.pack(kind, len(payload)) + payload


class Frames:
    """Cuts a byte stream into (kind, payload) frames."""

    def __init__(self, limit: int = MAX_FRAME_BYTES) -> None:
        self.buffer = bytearray()
        self.limit = limit

    def feed(self, data: bytes) -> list[tuple[bytes, bytes]]:
        """The frames completed by `data`; ValueError on a frame over the limit."""
        self.buffer += data
        found = []
        while len(self.buffer) >= HEADER.size:
            kind, length = HEADER.unpack_from(self.buffer)
            if length > self.limit:
                raise ValueError(f"frame of {length} bytes")
            end = HEADER.size + length
            if len(self.buffer) < end:
                break
            found.append((kind, bytes(self.buffer[HEADER.size : end])))
            del self.buffer[:end]
        return found


class Replay:
    """What redraws the current screen: the newest output from its last full clear, at most
    about REPLAY_KEEP_BYTES, after the private modes (alternate screen, bracketed paste, mouse)
    that the cut-off part left set. A cheap search, never a parse: the viewer parses."""

    def __init__(self, keep_bytes: int = REPLAY_KEEP_BYTES) -> None:
        self.keep_bytes = keep_bytes
        self.buffer = bytearray()
        self.modes: dict[bytes, bytes] = {}

    def add(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > 3 * self.keep_bytes:
            self._cut()

    def _cut(self) -> None:
        """Start at the last full clear when it is among the newest 2 x keep bytes, else on a
        line's start about keep bytes from the end: either way at least keep bytes of room."""
        cut = None
        for match in _FULL_CLEAR.finditer(self.buffer, len(self.buffer) - 2 * self.keep_bytes):
            cut = match.start()
        if cut is None:
            floor = len(self.buffer) - self.keep_bytes
            newline = self.buffer.find(b"\n", floor)
            cut = newline + 1 if newline >= 0 else floor
        for match in _MODE.finditer(self.buffer, 0, cut):
            for mode in match.group(1).split(b";"):
                if mode:
                    self.modes[mode] = match.group(2)
        del self.buffer[:cut]

    def snapshot(self) -> bytes:
        """The bytes a viewer replays to see the screen as it is."""
        prefix = b"".join(b"\x1b[?" + mode + value for mode, value in self.modes.items())
        return prefix + bytes(self.buffer)


class Viewer:
    """One connection: its unread frames and what it sent so far."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.frames = Frames()
        self.out = bytearray()
        self.told_view_only = False


def set_size(fd: int, rows: int, cols: int) -> None:
    """The terminal's window size (the kernel sends SIGWINCH to its foreground group)."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def get_size(fd: int) -> tuple[int, int]:
    """(rows, columns) of a terminal."""
    rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    return rows, cols


class TerminalStates:
    """The agent's terminal state reports, each change as a line of the run's signals file.

    Codex says in its output when it works, is blocked on a person (its question, an approval)
    or idles (`state=working|blocked|idle|done`); no hook of its fires at its question.
    """

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.rest = b""
        """The end of the last chunk that may begin a report the next one completes."""
        self.last: dict[str, str] | None = None

    def feed(self, data: bytes) -> None:
        """Look at the terminal's next bytes for reports."""
        if self.path is None:
            return
        chunk = self.rest + data
        start = chunk.rfind(STATE_MARK)
        if start != -1:
            for found in STATE_REPORT.finditer(chunk):
                self._saw(found.group(1))
            if STATE_REPORT.match(chunk, start) is None and len(chunk) - start <= 512:
                self.rest = chunk[start:]  # a report the next bytes complete
                return
        self.rest = chunk[-(len(STATE_MARK) - 1) :]  # a mark cut in two (too short for one)

    def _saw(self, body: bytes) -> None:
        fields = dict(
            part.split("=", 1) for part in body.decode("ascii", "replace").split(":") if "=" in part
        )
        if fields == self.last or "state" not in fields or self.path is None:
            return
        self.last = fields
        line = json.dumps({"hook_event_name": "TerminalState", **fields}) + "\n"
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except OSError:  # the signals are a hint: the terminal goes on without them
            pass


class TerminalHolder:
    """The holder's loop: the master end, the listening socket, the viewers, the child."""

    def __init__(
        self,
        master: int,
        listener: socket.socket,
        log_fd: int,
        child: int,
        signals_path: str | None = None,
    ) -> None:
        self.master = master
        self.listener = listener
        self.log_fd = log_fd
        self.child = child
        self.pidfd = os.pidfd_open(child)
        self.replay = Replay()
        self.states = TerminalStates(signals_path)
        self.viewers: dict[int, Viewer] = {}
        self.writer: Viewer | None = None
        self.to_master = bytearray()
        self.selector = selectors.DefaultSelector()
        self.master_open = True
        self.status: int | None = None

    def run(self) -> int:
        """Serve until the child exits; its exit code (128+N for a signal)."""
        os.set_blocking(self.master, False)
        self.listener.setblocking(False)
        self.selector.register(self.master, selectors.EVENT_READ, "master")
        self.selector.register(self.listener, selectors.EVENT_READ, "listen")
        self.selector.register(self.pidfd, selectors.EVENT_READ, "child")
        while self.status is None:
            for key, events in self.selector.select():
                self._ready(key, events)
        self._drain_master()
        self._finish()
        return self.status

    def _ready(self, key: selectors.SelectorKey, events: int) -> None:
        if key.data == "master":
            if events & selectors.EVENT_READ:
                self._read_master()
            if events & selectors.EVENT_WRITE and self.master_open:
                self._write_master()
        elif key.data == "listen":
            self._accept()
        elif key.data == "child":
            _, status = os.waitpid(self.child, 0)
            code = os.waitstatus_to_exitcode(status)
            self.status = 128 - code if code < 0 else code
        else:
            viewer = self.viewers.get(key.fd)
            try:
                if viewer is not None and events & selectors.EVENT_READ:
                    self._read_viewer(viewer)
                viewer = self.viewers.get(key.fd)
                if viewer is not None and events & selectors.EVENT_WRITE:
                    self._flush(viewer)
            except Exception:  # a viewer's trouble never ends the terminal (nor the agent)
                traceback.print_exc()
                if viewer is not None:
                    self._drop(viewer)

    def _read_master(self) -> bool:
        try:
            data = os.read(self.master, READ_BYTES)
        except BlockingIOError:
            return False
        except OSError:  # EIO: no process has the terminal open any more
            data = b""
        if not data:
            self.master_open = False
            self.selector.unregister(self.master)
            return False
        view = memoryview(data)
        while view:  # the log takes every byte, exactly
            view = view[os.write(self.log_fd, view) :]
        self.replay.add(data)
        self.states.feed(data)
        out = frame(b"o", data)
        for viewer in list(self.viewers.values()):
            self._send(viewer, out)
        return True

    def _drain_master(self) -> None:
        """The child is gone: take what the terminal still holds (its children may hold it)."""
        while self.master_open and self._read_master():
            pass

    def _write_master(self) -> None:
        try:
            sent = os.write(self.master, self.to_master)
        except BlockingIOError:
            sent = 0
        except OSError:
            sent = len(self.to_master)
        del self.to_master[:sent]
        self._watch_master()

    def _watch_master(self) -> None:
        if self.master_open:
            wanted = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.to_master else 0)
            self.selector.modify(self.master, wanted, "master")

    def _accept(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except BlockingIOError:
            return
        sock.setblocking(False)
        viewer = Viewer(sock)
        self.viewers[sock.fileno()] = viewer
        self.selector.register(sock, selectors.EVENT_READ, "viewer")
        rows, cols = get_size(self.master)
        hello = {"rows": rows, "cols": cols, "pid": self.child, "writer": self.writer is None}
        self._send(viewer, frame(b"h", json.dumps(hello).encode()))
        self._send(viewer, frame(b"r", self.replay.snapshot()))

    def _read_viewer(self, viewer: Viewer) -> None:
        try:
            data = viewer.sock.recv(READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        try:
            frames = viewer.frames.feed(data) if data else None
        except ValueError:
            frames = None
        if frames is None:
            self._drop(viewer)
            return
        for kind, payload in frames:
            if kind == b"i":
                self._input(viewer, payload)
            elif kind == b"c":
                self._claim(viewer)
            elif kind == b"s" and self.master_open:  # one message (`herd send`), whoever types
                self.to_master += payload
                self._watch_master()
            elif kind == b"z" and len(payload) == SIZE.size and self.writer in (None, viewer):
                rows, cols = SIZE.unpack(payload)
                if rows and cols and (rows, cols) != get_size(self.master):
                    set_size(self.master, rows, cols)
                    # A viewer that models the screen (the dashboard's tab) needs its size.
                    for other in list(self.viewers.values()):
                        self._send(other, frame(b"z", payload))

    def _claim(self, viewer: Viewer) -> bool:
        """Make `viewer` the writer if none is; True when it is the writer. The others are
        told once that they only view."""
        if self.writer is None:
            self.writer = viewer
            self._send(viewer, frame(b"w", json.dumps({"writer": True}).encode()))
        if self.writer is viewer:
            return True
        if not viewer.told_view_only:
            viewer.told_view_only = True
            note = {"writer": False, "note": "another attach is typing: this one only views"}
            self._send(viewer, frame(b"n", json.dumps(note).encode()))
        return False

    def _input(self, viewer: Viewer, data: bytes) -> None:
        """Keys from the one viewer typing; the first to type when none does becomes it."""
        if self._claim(viewer) and self.master_open:
            self.to_master += data
            self._watch_master()

    def _send(self, viewer: Viewer, data: bytes) -> None:
        viewer.out += data
        if len(viewer.out) > VIEWER_BACKLOG_BYTES:
            self._drop(viewer)
            return
        self._flush(viewer)

    def _flush(self, viewer: Viewer) -> None:
        try:
            sent = viewer.sock.send(viewer.out)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._drop(viewer)
            return
        del viewer.out[:sent]
        wanted = selectors.EVENT_READ | (selectors.EVENT_WRITE if viewer.out else 0)
        self.selector.modify(viewer.sock, wanted, "viewer")

    def _drop(self, viewer: Viewer) -> None:
        if self.viewers.pop(viewer.sock.fileno(), None) is None:
            return
        self.selector.unregister(viewer.sock)
        viewer.sock.close()
        if self.writer is viewer:
            self.writer = None

    def _finish(self) -> None:
        """Tell every viewer how the child ended, give them a moment to read it, close."""
        done = frame(b"x", json.dumps({"status": self.status}).encode())
        deadline = time.monotonic() + EXIT_FLUSH_S  # all of them together: the run's end waits
        for viewer in list(self.viewers.values()):
            viewer.out += done
            with contextlib.suppress(OSError, ValueError):
                viewer.sock.settimeout(max(0.0, deadline - time.monotonic()))
                viewer.sock.sendall(viewer.out)
            viewer.sock.close()
        self.viewers.clear()


def start_child(argv: list[str], slave: int, env: dict[str, str]) -> int:
    """Fork the child as the leader of a new session whose controlling terminal is `slave`."""
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        for fd in (0, 1, 2):
            os.dup2(slave, fd)
        if slave > 2:
            os.close(slave)
        # Python ignores these; an ignored signal would stay ignored in the agent.
        for number in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(number, signal.SIG_DFL)
        os.execve(argv[0], argv, env)
    except BaseException as exc:  # noqa: BLE001 (the child must never return into the holder)
        with contextlib.suppress(OSError):
            os.write(2, f"herd: cannot start {argv[0]}: {exc}\n".encode())
    os._exit(127)


def main(args: list[str]) -> int:
    """FOLDER ROWS COLS LOCK_FD READY_FD ARGV...: hold the run's terminal until its child ends."""
    folder, rows, cols, lock_fd, ready_fd = (
        args[0],
        int(args[1]),
        int(args[2]),
        *map(int, args[3:5]),
    )
    argv = args[5:]
    env = dict(os.environ)
    tag = env.pop(HOLDER_TAG_VAR, None)
    if tag:
        env[TAG_VAR] = tag
    folder_fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    # Through the folder's descriptor: a run folder's path may pass sun_path's 107 bytes.
    path = f"/proc/self/fd/{folder_fd}/{SOCKET_NAME}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old_mask)
    listener.listen(16)
    log_fd = os.open(f"{folder}/{OUTPUT_NAME}", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    master, slave = os.openpty()
    set_size(master, rows, cols)
    child = start_child(argv, slave, env)
    os.close(slave)
    os.close(lock_fd)  # only the run's processes hold its alive lock: the holder is not one
    os.write(ready_fd, f"{child}\n".encode())
    os.close(ready_fd)
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        # A stop is for the run: the holder waits for its child, then exits as it did.
        signal.signal(number, lambda *_: None)
    try:
        return TerminalHolder(master, listener, log_fd, child, env.get(SIGNALS_VAR)).run()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
