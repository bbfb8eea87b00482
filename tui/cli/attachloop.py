"""An attached terminal: the run's current screen first, then its live bytes both ways, until
the detach key (alone) or the run's end."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import termios
import time
import tty
from collections.abc import Callable
from dataclasses import dataclass

from agentherd.supervisor.process.ptyholder import SIZE, Frames, frame, get_size
from agentherd.tui import screenmodel

RESIZE_SETTLE_S = 0.05
"""A resize is passed on once the window kept its size this long: a drag is one resize."""
HELLO_WAIT_S = 5.0
"""How long the holder may take to send the screen."""
READ_BYTES = 65536
ENTER = b"\x1b[22;0t\x1b[?1049h"
"""The attach draws on the outer terminal's alternate screen (its title saved): the shell's
comes back after, with the modes the agent may have set turned off."""
LEAVE = (
    b"\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1l\x1b[?25h\x1b[0m"
    b"\x1b[?1049l\x1b[23;0t"
)


@dataclass
class Ended:
    """How an attach ended: detached (the run goes on), or the run ended with `status`."""

    detached: bool
    status: int | None = None


def first_screen(sock: socket.socket) -> tuple[dict[str, object], bytes, Frames]:
    """The holder's hello and its replay (what draws the screen now); the frames reader."""
    frames = Frames(limit=1 << 30)
    hello: dict[str, object] | None = None
    sock.settimeout(HELLO_WAIT_S)
    while True:
        data = sock.recv(READ_BYTES)
        if not data:
            raise ConnectionError("the terminal closed before it sent its screen")
        for kind, payload in frames.feed(data):
            if kind == b"h":
                hello = json.loads(payload)
            elif kind == b"r" and hello is not None:
                return hello, payload, frames


def attach(
    sock: socket.socket, detach_key: bytes, title: str, on_writer: Callable[[], None]
) -> Ended:
    """Attach the controlling terminal (fds 0 and 1) to the run behind `sock`."""
    hello, replay, frames = first_screen(sock)
    sock.setblocking(False)
    rows, cols = get_size(0)
    screen = screenmodel.screen_of(replay, int(str(hello["rows"])), int(str(hello["cols"])))
    saved = termios.tcgetattr(0)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    old_wakeup = signal.set_wakeup_fd(wake_write)
    old_winch = signal.signal(signal.SIGWINCH, lambda *_: None)
    try:
        tty.setraw(0)
        _write(1, ENTER + f"\x1b]2;{title}\x07".encode() + screenmodel.draw(screen, rows, cols))
        # The writer from the start, when no one else is: what the attached terminal sends by
        # itself (answers to the agent's queries, focus reports) must not make a viewer one.
        sock.sendall(frame(b"c") + frame(b"z", SIZE.pack(rows, cols)))
        return _loop(sock, frames, detach_key, wake_read, title, on_writer)
    finally:
        _write(1, LEAVE)
        termios.tcsetattr(0, termios.TCSAFLUSH, saved)
        signal.signal(signal.SIGWINCH, old_winch)
        signal.set_wakeup_fd(old_wakeup)
        os.close(wake_read)
        os.close(wake_write)


def _loop(
    sock: socket.socket,
    frames: Frames,
    detach_key: bytes,
    wake: int,
    title: str,
    on_writer: Callable[[], None],
) -> Ended:
    """Keys to the run, its bytes to the terminal; a window resize once it settles."""
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ, "keys")
    selector.register(sock, selectors.EVENT_READ, "run")
    selector.register(wake, selectors.EVENT_READ, "signal")
    resized_at: float | None = None
    pending = bytearray()
    while True:
        timeout = (
            None
            if resized_at is None
            else max(0.0, resized_at + RESIZE_SETTLE_S - time.monotonic())
        )
        for key, _ in selector.select(timeout):
            if key.data == "keys":
                keys = os.read(0, READ_BYTES)
                if keys == detach_key or not keys:  # alone: a paste holding it never detaches
                    return Ended(detached=True)
                pending += frame(b"i", keys)
            elif key.data == "signal":
                with contextlib.suppress(BlockingIOError):
                    os.read(wake, 512)
                resized_at = time.monotonic()
            else:
                try:
                    data = sock.recv(READ_BYTES)
                except BlockingIOError:
                    continue
                if not data:
                    return Ended(detached=False)
                for kind, payload in frames.feed(data):
                    if kind == b"o":
                        _write(1, payload)
                    elif kind == b"w":
                        on_writer()
                    elif kind == b"n":  # another attach types: this one views
                        _write(1, f"\x1b]2;{title}: view only, another attach types\x07".encode())
                    elif kind == b"x":
                        return Ended(detached=False, status=json.loads(payload).get("status"))
        if resized_at is not None and time.monotonic() >= resized_at + RESIZE_SETTLE_S:
            resized_at = None
            pending += frame(b"z", SIZE.pack(*get_size(0)))
        if pending:
            with contextlib.suppress(BlockingIOError):
                del pending[: sock.send(pending)]


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
