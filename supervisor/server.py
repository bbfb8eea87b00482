"""The control API's server side: a private Unix socket, peer uid checked, JSON lines."""

from __future__ import annotations

import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import anyio
from anyio.abc import SocketAttribute, SocketListener, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from agentherd.supervisor.protocol import (
    HERD_VERSION,
    MAX_MESSAGE_BYTES,
    PROTOCOL,
    ApiError,
    decode,
    encode,
)

log = logging.getLogger("herd.api")


class Sender(Protocol):
    """Sends a reply: `result=...` (final) or `stream=...` (one item of a stream)."""

    def __call__(self, **reply: Any) -> Awaitable[None]: ...


Handler = Callable[[dict[str, Any], Sender], Awaitable[None]]


async def listen(path: Path) -> SocketListener:
    """Bind the socket with mode 0600 in its private folder, replacing a stale file."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    listener = await anyio.create_unix_listener(str(path), mode=0o600)
    return listener


def _peer_uid(stream: SocketStream) -> int | None:
    raw: socket.socket = stream.extra(SocketAttribute.raw_socket)
    try:
        creds = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    return int(struct.unpack("3i", creds)[1])


async def serve(listener: SocketListener, handler: Handler) -> None:
    """Accept connections until cancelled; each gets its own task."""
    async with listener:
        await listener.serve(lambda stream: _connection(stream, handler))


async def _connection(stream: SocketStream, handler: Handler) -> None:
    async with stream:
        uid = _peer_uid(stream)
        if uid not in (os.getuid(), 0):
            log.warning("refused a connection from uid %s", uid)
            return
        reader = BufferedByteReceiveStream(stream)
        greeted = False
        try:
            while True:
                try:
                    line = await reader.receive_until(b"\n", MAX_MESSAGE_BYTES)
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                    return
                greeted = await _answer(stream, line, handler, greeted)
                if not greeted:
                    return  # no handshake, or a protocol this daemon does not speak
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            return  # the client went away mid-reply (a closed dashboard, a ^C'd `herd logs -f`)


async def _answer(stream: SocketStream, line: bytes, handler: Handler, greeted: bool) -> bool:
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
        await handler(request, send)
    except ApiError as exc:
        await stream.send(encode({"id": request_id, "ok": False, "error": exc.to_json()}))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
        raise
    except Exception as exc:  # one handler for every failure: reply, log, keep serving
        log.exception("request failed: %r", line[:200])
        error = ApiError("internal", f"{type(exc).__name__}: {exc}; see .herd/daemon.log")
        await stream.send(encode({"id": request_id, "ok": False, "error": error.to_json()}))
    return greeted
