"""The fast path's JSON, sha256 and socket, from the C modules, agree with json/hashlib/socket."""

from __future__ import annotations

import hashlib
import json
import math
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentherd.tui.cli import fastwire

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.sampled_from(["é", "\u2028", "\x00", '"\\', "\ud800", "😀"])
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def _same(a: object, b: object) -> bool:
    """Equal, NaN included."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b and type(a) is type(b)


@given(json_values)
def test_what_status_json_prints_is_json_dumps_indent_2_byte_for_byte(value: object) -> None:
    assert fastwire.dumps_indented(value) == json.dumps(value, indent=2)


def test_odd_keys_deep_nesting_and_tuples_print_as_json_dumps_does() -> None:
    deep: object = "leaf"
    for _ in range(80):  # deeper than the indents made in advance
        deep = {"k": [deep, None, 1]}
    odd = {3: "a", 2.5: None, True: [1, (2, "b")], None: {}, "é": float("nan"), "t": ()}
    for value in (deep, odd, [odd, [], [[]], {"x": {"y": -0.0}}]):
        assert fastwire.dumps_indented(value) == json.dumps(value, indent=2)


@given(st.dictionaries(st.text(), json_values, max_size=5))
def test_a_request_line_is_json_dumps(value: dict[str, object]) -> None:
    assert fastwire.dumps_request(value) == json.dumps(value).encode() + b"\n"


@given(json_values, st.sampled_from(["", " ", "\n", " \t\r\n"]))
def test_loads_reads_what_json_writes(value: object, pad: str) -> None:
    for text in (json.dumps(value), json.dumps(value, indent=2)):
        assert _same(fastwire.loads(pad + text + pad), value)


@pytest.mark.parametrize("text", ["", "  ", "{", '{"a": 1} x', "[1,]", "nul", '"\\x"', "{'a': 1}"])
def test_loads_refuses_what_json_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        fastwire.loads(text)


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


def test_the_fast_path_imports_no_json_socket_hashlib_or_re() -> None:
    """Each costs a verb milliseconds of CPU; the C modules underneath do the work."""
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
    for name in ("json", "socket", "hashlib", "re", "enum"):
        assert name not in loaded
