"""Make terminal control and escape sequences in untrusted text inert for display."""

from __future__ import annotations

import re

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
        # Made inert before the "…" is added: an all-ASCII text translates by a fast path that
        # a non-ASCII character (the "…") would turn off, ten times slower.
        return inert(text[: limit_chars - 1]) + ELLIPSIS
    return inert(text)


_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
    r"|\x1b[@-_]"  # other two-byte escapes
)

_CURSOR_MOVES_RIGHT = frozenset("CGHf")
"""Final bytes of the CSI sequences a full-screen interface places words with (forward, to a
column, to a position) where a plain line has spaces."""


def _spacing(sequence: re.Match[str]) -> str:
    """A space for a cursor move between words (`claude` draws "? for shortcuts" so), else
    nothing."""
    moves = sequence.group()[-1] in _CURSOR_MOVES_RIGHT
    return " " if moves and sequence.start() > 0 else ""


DISPLAY_SCAN_BYTES = 64 * 1024
"""Only the end of a huge line is scanned for what a terminal would show last."""


def display_line(data: bytes, max_chars: int) -> str:
    """What a terminal would leave visible of one output line, made inert and cut to fit.

    Escape sequences are dropped (not shown as ^[ text) and only the text after the last
    carriage return is kept, so progress bars and colours read as words in a one-line view.
    """
    text = data[-DISPLAY_SCAN_BYTES:].decode("utf-8", errors="replace").rstrip("\r")
    text = _ESCAPE_SEQUENCE.sub(_spacing, text)
    text = text.rsplit("\r", 1)[-1]
    return inert_line(text.encode("utf-8"), max_chars)


_SGR = re.compile(r"\x1b\[[0-9;:]{0,64}m")
"""Select Graphic Rendition: colours and bold, the only sequence a view may pass on."""


def coloured_line(data: bytes, max_chars: int, as_terminal: bool) -> str:
    """One output line with its SGR colour sequences kept and every other control inert.

    `as_terminal` shows what a terminal would leave (other escapes dropped, only the text after
    the last carriage return); otherwise every other escape shows as `^[` text. Either way no
    cursor move, title, clipboard write or screen clear survives; `max_chars` counts the
    visible characters only.
    """
    text = data[: (max(max_chars, 1) + 2) * _UTF8_MAX_BYTES_PER_CHAR * 4].decode(
        "utf-8", errors="replace"
    )
    text = text.removesuffix("\r")
    if as_terminal:
        text = text.rsplit("\r", 1)[-1]
    pieces: list[str] = []
    visible = 0
    position = 0
    for found in [*_SGR.finditer(text), None]:
        end = found.start() if found is not None else len(text)
        plain = text[position:end]
        if as_terminal:
            plain = _ESCAPE_SEQUENCE.sub("", plain)
        plain = inert(plain)
        if visible + len(plain) > max_chars:
            pieces.append(plain[: max(0, max_chars - visible - 1)] + ELLIPSIS)
            break
        pieces.append(plain)
        visible += len(plain)
        if found is None:
            break
        pieces.append(found.group())
        position = found.end()
    return "".join(pieces)
