"""JSON, sha256 and a Unix socket for the fast CLI path, from the C modules alone.

`json`, `socket` and `hashlib` cost a verb ~10 ms of CPU between them (`re`, `enum`, the
socket enums, OpenSSL): `_json`, `_socket` and `_sha256` do the same work. The output of
`dumps_indented` is byte for byte `json.dumps(value, indent=2)` (tests/test_fastwire.py).
"""

from __future__ import annotations

import _json
import _socket

try:  # Python 3.11 (3.12 merged the sha2 family into _sha2: hashlib then, a few ms more)
    import _sha256 as _sha_module
except ImportError:  # pragma: no cover - depends on the interpreter
    import hashlib as _sha_module

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

INDENT = "  "
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_escape = _json.encode_basestring_ascii


class _ScanContext:
    """What `_json.make_scanner` reads off a JSONDecoder, with json.loads' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__
    memo: dict[str, str] = {}


_context: Any = _ScanContext()
_scan = _json.make_scanner(_context)


def sha256_hex(data: bytes) -> str:
    """The sha256 of `data` in hex, as hashlib gives it."""
    return _sha_module.sha256(data).hexdigest()


def loads(text: str) -> Any:
    """One JSON document, as json.loads reads it; ValueError when it is not one."""
    start = len(text) - len(text.lstrip(" \t\n\r"))
    try:
        value, end = _scan(text, start)
    except StopIteration as exc:
        raise ValueError(f"not JSON at character {exc.value}") from None
    if text[end:].strip(" \t\n\r"):
        raise ValueError(f"extra data after JSON at character {end}")
    return value


def _scalar(value: Any) -> str | None:
    """A JSON scalar as json.dumps writes it, or None for a list or an object."""
    if isinstance(value, str):
        return _escape(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    if isinstance(value, dict | list | tuple):
        return None
    raise TypeError(f"not JSON: {type(value).__name__}")


def _key(key: Any) -> str:
    """An object key as json.dumps writes it (strings; scalars turned into strings)."""
    if isinstance(key, str):
        return _escape(key)
    if isinstance(key, bool) or key is None or isinstance(key, int | float):
        text = _scalar(key)
        assert text is not None
        return _escape(text)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


_NEWLINES = ["\n" + INDENT * level for level in range(64)]
"""A newline and the indent of each nesting level, made once."""


def _newline(level: int) -> str:
    return _NEWLINES[level] if level < len(_NEWLINES) else "\n" + INDENT * level


def _write(value: Any, level: int, out: list[str]) -> None:
    """Append `value` at nesting `level` in json.dumps(indent=2)'s layout.

    Strings, None and exact ints are written inline, without a call per value: this is most
    of what `herd ls --json` prints (200 sessions' statuses)."""
    kind = type(value)
    if kind is not dict and kind is not list:
        text = _scalar(value)
        if text is not None:
            out.append(text)
            return
    if not value:
        out.append("{}" if isinstance(value, dict) else "[]")
        return
    inner = _newline(level + 1)
    after = "," + inner
    append = out.append
    if isinstance(value, dict):
        append("{")
        lead = inner
        for key, item in value.items():
            name = _escape(key) if type(key) is str else _key(key)
            kind = type(item)
            if kind is str:
                append(lead + name + ": " + _escape(item))
            elif item is None:
                append(lead + name + ": null")
            elif kind is int:
                append(lead + name + ": " + int.__repr__(item))
            else:
                append(lead + name + ": ")
                _write(item, level + 1, out)
            lead = after
        append(_newline(level) + "}")
    else:
        append("[")
        lead = inner
        for item in value:
            if type(item) is str:
                append(lead + _escape(item))
            else:
                append(lead)
                _write(item, level + 1, out)
            lead = after
        append(_newline(level) + "]")


def dumps_indented(value: Any) -> str:
    """`json.dumps(value, indent=2)`: what `herd status --json` prints."""
    out: list[str] = []
    _write(value, 0, out)
    return "".join(out)


def _compact(value: Any) -> str:
    """`value` as json.dumps writes it without indent."""
    text = _scalar(value)
    if text is not None:
        return text
    if isinstance(value, dict):
        return "{" + ", ".join(_key(k) + ": " + _compact(v) for k, v in value.items()) + "}"
    return "[" + ", ".join(_compact(item) for item in value) + "]"


def dumps_request(value: dict[str, Any]) -> bytes:
    """One request line for the control socket: `json.dumps(value)` and a newline."""
    return _compact(value).encode() + b"\n"


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
