"""The fast path's sha256 and socket, from the C modules, agree with hashlib and socket."""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentherd.tui.cli import fastwire


@given(st.binary())
def test_sha256_is_hashlibs(data: bytes) -> None:
    assert fastwire.sha256_hex(data) == hashlib.sha256(data).hexdigest()


def test_readline_splits_and_joins_what_the_socket_delivers(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    big = b"x" * 200_000

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(100)
            conn.sendall(b"one\ntwo\n" + big[:70_000])
            conn.sendall(big[70_000:] + b"\nlast")

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with fastwire.LineSocket(path, 10.0) as sock:
            sock.send(b"hi\n")
            lines = [sock.readline() for _ in range(5)]
    finally:
        thread.join()
        server.close()
    assert lines == [b"one\n", b"two\n", big + b"\n", b"last", b""]


def test_a_refused_connection_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        fastwire.LineSocket(str(tmp_path / "none.sock"), 1.0)


def test_the_fast_path_imports_no_socket_or_hashlib() -> None:
    """Each costs a verb milliseconds of CPU; the C modules underneath do the work (JSON is
    the stdlib's `json`, and with it `re`)."""
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, agentherd.tui.cli.fastpath; print(*sorted(sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in ("socket", "hashlib", "click", "pydantic"):
        assert name not in loaded
