"""The control API's server side: a private Unix socket, its peer identified, JSON lines."""

from __future__ import annotations

import errno
import logging
import os
import resource
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import anyio
from anyio.abc import SocketAttribute, SocketListener, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from agentherd.sessions.configchecks import open_files_needed
from agentherd.supervisor.api.protocol import (
    HERD_VERSION,
    PROTOCOL,
    ApiError,
    decode,
    encode,
)
from agentherd.supervisor.process.peer import Peer, identify

log = logging.getLogger("herd.api")

FD_SOFT_LIMIT = 16384
"""The daemon's open-file limit, raised at start from the usual 1024: room for MAX_CONNECTIONS
clients, thousands of sessions' logs and pidfds, git and the watcher. Higher (up to the hard
limit) only for a fleet that needs more (`open_files_needed`): agents inherit it, and some tools
walk every possible fd when they start a child."""

MAX_REQUEST_BYTES = 1 << 20
"""A request is a small JSON object; a longer line is refused (it would be held in memory)."""

MAX_CONNECTIONS = 256
"""Clients served at once (a dashboard, `herd wait`s, `logs -f`s); more are refused politely,
so idle connections cannot use up the daemon's file descriptors."""

REQUEST_IDLE_TIMEOUT_S = 60.0
"""A connection that sends no complete request line for this long is closed (its slot freed)."""

ACCEPT_BACKOFF_S = 0.1
"""After accept fails for want of file descriptors, wait this long before accepting again."""

REFUSE_SEND_TIMEOUT_S = 1.0
"""A refused client gets this long to take the "busy" reply before it is simply closed."""

MAX_REFUSED_READ_BYTES = 4096
"""What is read (and dropped) from a refused client: its hello."""

_OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class Sender(Protocol):
    """Sends a reply: `result=...` (final) or `stream=...` (one item of a stream)."""

    def __call__(self, **reply: Any) -> Awaitable[None]: ...


Handler = Callable[[dict[str, Any], Sender, Peer], Awaitable[None]]
"""Answers one request of the client `Peer` (who asks decides what it may ask: api/trust.py)."""


async def listen(path: Path) -> SocketListener:
    """Bind the socket with mode 0600 in its private folder, replacing a stale file."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    listener = await anyio.create_unix_listener(str(path), mode=0o600)
    return listener


def raise_fd_limit(sessions: int = 0) -> int:
    """Raise the soft open-file limit toward FD_SOFT_LIMIT, or what `sessions` sessions need
    when that is more (within the hard limit; `herd check` says when it cannot fit); return it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max(FD_SOFT_LIMIT, open_files_needed(sessions))
    wanted = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %s to %s: %s", soft, wanted, exc)
    return soft


async def serve(listener: SocketListener, handler: Handler) -> None:
    """Accept connections until cancelled; each gets its own task, and none can end this one."""
    active = 0
    out_of_fds_logged = False

    async def connection(stream: SocketStream) -> None:
        nonlocal active
        active += 1
        try:
            await _connection(stream, handler)
        except Exception:  # one bad connection must never end the daemon
            log.exception("a connection failed; it is closed, the daemon goes on")
        finally:
            active -= 1

    async with listener, anyio.create_task_group() as tg:
        while True:
            try:
                stream = await listener.accept()
            except anyio.BrokenResourceError as exc:
                cause = exc.__cause__
                if not isinstance(cause, OSError) or cause.errno not in _OUT_OF_DESCRIPTORS:
                    raise
                if not out_of_fds_logged:  # once per shortage, not 10 lines a second
                    log.error(
                        "cannot accept a connection (%s) with %d open; retrying in %.1fs",
                        cause.strerror,
                        active,
                        ACCEPT_BACKOFF_S,
                    )
                    out_of_fds_logged = True
                await anyio.sleep(ACCEPT_BACKOFF_S)
                continue
            if out_of_fds_logged:
                log.info("accepting connections again (%d open)", active)
                out_of_fds_logged = False
            if active >= MAX_CONNECTIONS:
                tg.start_soon(_refuse, stream, active)
            else:
                tg.start_soon(connection, stream)


async def _refuse(stream: SocketStream, active: int) -> None:
    """Tell a client over the connection cap to come back later, then close it."""
    log.warning("refused a connection: %d clients are connected already", active)
    busy = ApiError(
        "busy",
        f"the herd daemon is busy: it serves {MAX_CONNECTIONS} connections already; close some "
        "(`herd logs -f`, `herd wait`, dashboards) and try again",
    )
    async with stream:
        with anyio.move_on_after(REFUSE_SEND_TIMEOUT_S):
            try:
                await stream.send(encode({"id": None, "ok": False, "error": busy.to_json()}))
                # Take the client's first line before hanging up, so its send does not fail
                # (EPIPE) before it reads why.
                await stream.receive(MAX_REFUSED_READ_BYTES)
            except (
                anyio.BrokenResourceError,
                anyio.ClosedResourceError,
                anyio.EndOfStream,
                ConnectionError,
            ):
                pass  # it left first: nothing more to tell it


async def _connection(stream: SocketStream, handler: Handler) -> None:
    async with stream:
        # Off the loop: reading another process's /proc/<pid>/environ can wait on its memory.
        peer = await anyio.to_thread.run_sync(identify, stream.extra(SocketAttribute.raw_socket))
        if peer.uid not in (os.getuid(), 0):
            log.warning("refused a connection from uid %s", peer.uid)
            return
        reader = BufferedByteReceiveStream(stream)
        greeted = False
        try:
            while True:
                try:
                    with anyio.fail_after(REQUEST_IDLE_TIMEOUT_S):
                        line = await reader.receive_until(b"\n", MAX_REQUEST_BYTES)
                except (anyio.EndOfStream, anyio.IncompleteRead, TimeoutError):
                    return
                except anyio.DelimiterNotFound:
                    # The rest of the line cannot be skipped reliably: answer, then hang up.
                    too_long = ApiError(
                        "bad-request",
                        f"request line longer than {MAX_REQUEST_BYTES} bytes; connection closed",
                    )
                    await stream.send(
                        encode({"id": None, "ok": False, "error": too_long.to_json()})
                    )
                    return
                greeted = await _answer(stream, line, handler, greeted, peer)
                if not greeted:
                    return  # no handshake, or a protocol this daemon does not speak
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            return  # the client went away mid-reply (a closed dashboard, a ^C'd `herd logs -f`)


async def _answer(
    stream: SocketStream, line: bytes, handler: Handler, greeted: bool, peer: Peer
) -> bool:
    """Answer one request line; returns whether the connection has (now) completed `hello`."""
    request_id: Any = None

    async def send(**reply: Any) -> None:
        await stream.send(encode({"id": request_id, "ok": True, **reply}))

    try:
        request = decode(line)
        request_id = request.get("id")
        if request.get("op") != "hello" and not greeted:
            raise ApiError(
                "bad-request",
                f'the first message must be {{"op": "hello", "protocol": {PROTOCOL}, '
                '"version": "..."}; herd\'s clients send it for you',
            )
        if request.get("op") == "hello":
            if request.get("protocol") != PROTOCOL:
                raise ApiError(
                    "version-mismatch",
                    f"this daemon (herd {HERD_VERSION}) speaks protocol {PROTOCOL}, the client "
                    f"(herd {request.get('version')}) {request.get('protocol')}; restart the "
                    "daemon with `herd down && herd up`",
                )
            if request.get("version") != HERD_VERSION:
                log.info(
                    "a herd %s client talks to this %s daemon", request.get("version"), HERD_VERSION
                )
            await send(result={"version": HERD_VERSION, "protocol": PROTOCOL, "pid": os.getpid()})
            return True
        await handler(request, send, peer)
    except ApiError as exc:
        await stream.send(encode({"id": request_id, "ok": False, "error": exc.to_json()}))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
        raise
    except Exception as exc:  # one handler for every failure: reply, log, keep serving
        log.exception("request failed: %r", line[:200])
        error = ApiError("internal", f"{type(exc).__name__}: {exc}; see .herd/daemon.log")
        await stream.send(encode({"id": request_id, "ok": False, "error": error.to_json()}))
    return greeted
