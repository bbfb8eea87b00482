"""`herd send` to an interactive session: the text typed into its terminal, then Enter.

Typed through the run's terminal holder as one `s` frame (whoever types there now keeps their
place), Enter a moment later as its own frame: an interface that tells a paste from typing by
timing (Claude Code does) would take an Enter inside the text for a new line. With `wait`, the
reply comes once the agent's turn ended: the session entered waiting-input again
(supervisor/session/inputwait.py), or the run ended, or `timeout_s` passed.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from agentherd.sessions.states import State
from agentherd.sessions.status import SendReply
from agentherd.supervisor.process.ptyholder import MAX_FRAME_BYTES, SOCKET_NAME, Frames, frame
from agentherd.supervisor.session.errors import SessionError
from agentherd.supervisor.session.supervisor import SessionSupervisor

TYPED = "typed"

ENTER_DELAY_S = 0.3
"""Enter follows the text after this pause, so the interface takes it as a key, not a paste."""

CONNECT_TIMEOUT_S = 10.0
"""The holder answers a new viewer at once; past this the terminal is taken for gone."""

POLL_S = 1.0


def type_into(folder: Path, text: str, enter_delay_s: float) -> None:
    """Type `text`, then Enter, into the terminal held in run folder `folder` (blocking)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(CONNECT_TIMEOUT_S)
        # Through the folder's descriptor: the path may pass sun_path's 107 bytes.
        folder_fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
        try:
            sock.connect(f"/proc/self/fd/{folder_fd}/{SOCKET_NAME}")
        finally:
            os.close(folder_fd)
        frames = Frames()
        hello: list[tuple[bytes, bytes]] = []
        while not hello:  # the holder's hello: it counts this connection as a viewer now
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("the terminal closed")
            hello = frames.feed(data)
        sock.sendall(frame(b"s", text.encode()))
        time.sleep(enter_delay_s)  # a worker thread's pause, never the loop's
        sock.sendall(frame(b"s", b"\r"))
        sock.shutdown(socket.SHUT_WR)  # the holder reads both frames, then this end's close
        while sock.recv(65536):
            pass


def interactive(supervisor: SessionSupervisor) -> bool:
    """True when the session's live run is on a terminal (a send is typed into it)."""
    live = supervisor.run
    return live is not None and live.config.interactive and not live.exited.is_set()


async def send_typed(
    supervisor: SessionSupervisor,
    request: dict[str, Any],
    origin: str,
    changed: Callable[[], anyio.Event],
    enter_delay_s: float = ENTER_DELAY_S,
) -> SendReply:
    """Type the text into the session's terminal; with `wait`, answer once its turn ended."""
    live = supervisor.run
    name = supervisor.config.name
    if live is None or live.exited.is_set():
        raise SessionError(f"{name} has no run, so no terminal to type into: `herd start {name}`")
    text = str(request["text"])
    if len(text.encode()) > MAX_FRAME_BYTES:
        raise SessionError(f"{name}: a typed message holds at most {MAX_FRAME_BYTES} bytes")
    number = live.record.run
    before = supervisor.input_wait.entered
    try:
        await anyio.to_thread.run_sync(type_into, live.tailer.path.parent, text, enter_delay_s)
    except OSError as exc:
        raise SessionError(
            f"{name}: run {number}'s terminal did not take the text ({exc})"
        ) from exc
    message_id = uuid.uuid4().hex[:12]
    desk = supervisor.desk
    event = desk.make_event(
        "message-typed",
        f"a message from {origin} was typed into run {number}'s terminal ({len(text)} characters)",
        number,
        message_id=message_id,
        origin=origin,
        chars=len(text),
    )
    desk.commit_events(event)
    reply = SendReply(
        session=name, message_id=message_id, outcome=TYPED, handle=supervisor.record.handle
    )
    reply.run = number
    if not request.get("wait"):
        return reply
    timeout_s = request.get("timeout_s")
    deadline = None if timeout_s is None else time.monotonic() + float(timeout_s)
    while True:
        event_now = changed()
        if supervisor.input_wait.entered > before:
            reply.run_outcome = "turn-ended"
            break
        if supervisor.run is not live or live.exited.is_set():
            reply.run_outcome = live.record.outcome or "ended"
            break
        remaining_s = None if deadline is None else deadline - time.monotonic()
        if remaining_s is not None and remaining_s <= 0:
            reply.run_outcome = "timeout"
            break
        with anyio.move_on_after(min(remaining_s or POLL_S, POLL_S)):
            await event_now.wait()
    reply.state = State(supervisor.record.state)
    return reply
