"""sha256 and a Unix socket for the fast CLI path, from the C modules alone.

`socket` and `hashlib` cost a verb milliseconds of CPU (the socket enums, OpenSSL): `_socket`
and `_sha256` do the same work. JSON is the stdlib's `json` (fastpath.py).
"""

from __future__ import annotations

import _socket

try:  # Python 3.11 (3.12 merged the sha2 family into _sha2: hashlib then, a few ms more)
    import _sha256 as _sha_module
except ImportError:  # pragma: no cover - depends on the interpreter
    import hashlib as _sha_module


def sha256_hex(data: bytes) -> str:
    """The sha256 of `data` in hex, as hashlib gives it."""
    return _sha_module.sha256(data).hexdigest()


class LineSocket:
    """A Unix stream socket read one line at a time (socket.makefile's readline)."""

    def __init__(self, path: str, timeout_s: float | None) -> None:
        self._sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self._chunks: list[bytes] = []
        try:
            self._sock.settimeout(timeout_s)
            self._sock.connect(path)
        except BaseException:
            self._sock.close()
            raise

    def __enter__(self) -> LineSocket:
        return self

    def __exit__(self, *_: object) -> None:
        self._sock.close()

    def send(self, data: bytes) -> None:
        """Send all of `data`."""
        self._sock.sendall(data)

    def readline(self) -> bytes:
        """The next line with its newline; what is left at end of stream (b"" when nothing)."""
        while not self._chunks or b"\n" not in self._chunks[-1]:
            chunk = self._sock.recv(65536)
            if not chunk:
                rest = b"".join(self._chunks)
                self._chunks = []
                return rest
            self._chunks.append(chunk)
        line, _, rest = b"".join(self._chunks).partition(b"\n")
        self._chunks = [rest] if rest else []
        return line + b"\n"
