"""Make terminal control and escape sequences in untrusted text inert for display."""

from __future__ import annotations

ELLIPSIS = "…"
"""Marks text that was cut to fit."""

_UTF8_MAX_BYTES_PER_CHAR = 4
"""A UTF-8 character takes at most this many bytes, so a byte prefix bounds the decoding work."""


def _build_table() -> dict[int, str]:
    """Map every C0 control (except tab and newline), DEL and C1 control to visible text."""
    table: dict[int, str] = {}
    for code in range(0x20):
        if chr(code) not in "\t\n":
            table[code] = "^" + chr(code + 0x40)
    table[0x7F] = "^?"
    for code in range(0x80, 0xA0):
        table[code] = f"\\x{code:02x}"
    return table


_INERT_TABLE = _build_table()


def inert(text: str) -> str:
    """Return text with control characters shown as caret or escape text (ESC -> "^[")."""
    return text.translate(_INERT_TABLE)


def inert_line(data: bytes, max_chars: int) -> str:
    """Decode one output line leniently, cut it to max_chars (with "…"), and make it inert.

    A single trailing carriage return (a CRLF line ending) is dropped rather than shown as "^M".
    """
    limit_chars = max(max_chars, 1)
    prefix_bytes = (limit_chars + 2) * _UTF8_MAX_BYTES_PER_CHAR
    cut = len(data) > prefix_bytes
    text = data[:prefix_bytes].decode("utf-8", errors="replace")
    if not cut and text.endswith("\r"):
        text = text[:-1]
    if cut or len(text) > limit_chars:
        text = text[: limit_chars - 1] + ELLIPSIS
    return inert(text)
