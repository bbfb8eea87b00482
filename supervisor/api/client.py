"""Clients of the control API: a blocking one for the CLI and tests, an async one for the TUI."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from agentherd.supervisor.api.protocol import (
    HERD_VERSION,
    MAX_MESSAGE_BYTES,
    PROTOCOL,
    ApiError,
    decode,
    encode,
)


def _hello() -> dict[str, Any]:
    return {"op": "hello", "version": HERD_VERSION, "protocol": PROTOCOL}


def _check_hello(reply: dict[str, Any]) -> dict[str, Any]:
    if not reply.get("ok"):
        error = reply.get("error") or {}
        raise ApiError(error.get("code", "internal"), error.get("message", "hello refused"))
    result: dict[str, Any] = reply["result"]
    if result.get("protocol") != PROTOCOL:
        raise ApiError(
            "version-mismatch",
            f"the daemon speaks protocol {result.get('protocol')} (herd {result.get('version')}) "
            f"but this herd speaks {PROTOCOL} (herd {HERD_VERSION}); restart the daemon with "
            "`herd down && herd up`",
        )
    return result


def _result(reply: dict[str, Any]) -> Any:
    if reply.get("ok"):
        return reply.get("result")
    error = reply.get("error") or {}
    raise ApiError(error.get("code", "internal"), error.get("message", "request failed"))


class Client:
    """Blocking client: one connection per call (or per stream)."""

    def __init__(self, socket_path: Path, timeout_s: float | None = 30.0) -> None:
        self.socket_path = socket_path
        self.timeout_s = timeout_s
        self.daemon_version: str | None = None

    def _connect(self, timeout_s: float | None) -> tuple[socket.socket, Iterator[bytes]]:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        try:
            sock.connect(str(self.socket_path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            sock.close()
            raise ApiError(
                "no-daemon", "no herd daemon is running here; start one with `herd up`"
            ) from exc
        lines = _read_lines(sock)
        sock.sendall(encode(_hello()))
        hello = _check_hello(decode(next(lines)))
        self.daemon_version = str(hello.get("version"))
        return sock, lines

    def call(self, op: str, socket_timeout_s: float | None = -1.0, **args: Any) -> Any:
        """Send one request and return its result, or raise ApiError.

        `socket_timeout_s=None` waits as long as the daemon takes (stop, wait, down).
        """
        timeout_s = self.timeout_s if socket_timeout_s == -1.0 else socket_timeout_s
        sock, lines = self._connect(timeout_s)
        try:
            sock.sendall(encode({"id": 1, "op": op, **args}))
            try:
                return _result(decode(next(lines)))
            except StopIteration:
                raise ApiError(
                    "internal", "the daemon closed the connection; see .herd/daemon.log"
                ) from None
        finally:
            sock.close()

    def stream(self, op: str, **args: Any) -> Iterator[Any]:
        """Send one streaming request and yield each item until the daemon ends the stream."""
        sock, lines = self._connect(None)
        try:
            sock.sendall(encode({"id": 1, "op": op, **args}))
            for line in lines:
                reply = decode(line)
                if "stream" in reply:
                    yield reply["stream"]
                else:
                    _result(reply)
                    return
        finally:
            sock.close()

    def ping(self) -> bool:
        """True when a daemon answers on the socket."""
        try:
            self._connect(2.0)[0].close()
            return True
        except (ApiError, OSError, StopIteration):
            return False

    def answers(self) -> bool:
        """True when a daemon answers, False when none listens; ApiError `busy` when one is
        there but at its connection cap (it is running: never read it as gone)."""
        try:
            self._connect(2.0)[0].close()
            return True
        except ApiError as exc:
            if exc.code == "busy":
                raise
            return False
        except (OSError, StopIteration):
            return False


def _read_lines(sock: socket.socket) -> Iterator[bytes]:
    buffer = b""
    while True:
        newline = buffer.find(b"\n")
        if newline >= 0:
            line, buffer = buffer[:newline], buffer[newline + 1 :]
            yield line
            continue
        if len(buffer) > MAX_MESSAGE_BYTES:
            raise ApiError("internal", "reply too large")
        chunk = sock.recv(65536)
        if not chunk:
            return
        buffer += chunk


class AsyncClient:
    """Async client for the dashboard: calls and snapshot streams over anyio."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self.daemon_version: str | None = None

    async def _connect(self) -> tuple[Any, BufferedByteReceiveStream]:
        try:
            stream = await anyio.connect_unix(str(self.socket_path))
        except OSError as exc:
            raise ApiError(
                "no-daemon", "no herd daemon is running here; start one with `herd up`"
            ) from exc
        reader = BufferedByteReceiveStream(stream)
        await stream.send(encode(_hello()))
        hello = _check_hello(decode(await reader.receive_until(b"\n", MAX_MESSAGE_BYTES)))
        self.daemon_version = str(hello.get("version"))
        return stream, reader

    async def call(self, op: str, **args: Any) -> Any:
        """Send one request and return its result, or raise ApiError."""
        stream, reader = await self._connect()
        async with stream:
            await stream.send(encode({"id": 1, "op": op, **args}))
            try:
                line = await reader.receive_until(b"\n", MAX_MESSAGE_BYTES)
            except (anyio.EndOfStream, anyio.IncompleteRead):
                raise ApiError("internal", "the daemon closed the connection") from None
            return _result(decode(line))

    async def stream(self, op: str, **args: Any) -> AsyncIterator[Any]:
        """Yield each streamed item until the daemon ends the stream or the caller stops."""
        stream, reader = await self._connect()
        async with stream:
            await stream.send(encode({"id": 1, "op": op, **args}))
            while True:
                try:
                    line = await reader.receive_until(b"\n", MAX_MESSAGE_BYTES)
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    return
                reply = decode(line)
                if "stream" not in reply:
                    _result(reply)
                    return
                yield reply["stream"]
