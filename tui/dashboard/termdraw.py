"""The Terminal tab's two translations: a modelled screen into Rich text, and Textual's keys
into the bytes a terminal would send the agent for them."""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text

from agentherd.tui.screenmodel import CURSOR_SHOWN, Screen

APP_CURSOR_MODE = 1
"""DECCKM: the agent asked for application cursor keys (`ESC O A`, not `ESC [ A`)."""
BRACKETED_PASTE_MODE = 2004

_CURSOR_KEYS = {"up": "A", "down": "B", "right": "C", "left": "D", "home": "H", "end": "F"}
_NAMED_KEYS = {
    "enter": "\r",
    "tab": "\t",
    "shift+tab": "\x1b[Z",
    "backspace": "\x7f",
    "escape": "\x1b",
    "delete": "\x1b[3~",
    "insert": "\x1b[2~",
    "pageup": "\x1b[5~",
    "pagedown": "\x1b[6~",
    "f1": "\x1bOP",
    "f2": "\x1bOQ",
    "f3": "\x1bOR",
    "f4": "\x1bOS",
    "f5": "\x1b[15~",
    "f6": "\x1b[17~",
    "f7": "\x1b[18~",
    "f8": "\x1b[19~",
    "f9": "\x1b[20~",
    "f10": "\x1b[21~",
    "f11": "\x1b[23~",
    "f12": "\x1b[24~",
}
"""What an xterm sends for the keys that are no character."""


def key_bytes(key: str, character: str | None, app_cursor: bool) -> bytes | None:
    """The bytes a terminal sends for Textual's `key` (its `character`), or None for a key
    no terminal would send (a modifier alone)."""
    if key in _CURSOR_KEYS:
        return f"\x1b{'O' if app_cursor else '['}{_CURSOR_KEYS[key]}".encode()
    if key in _NAMED_KEYS:
        return _NAMED_KEYS[key].encode()
    if key.startswith("ctrl+") and len(key) == 6 and key[5].isalpha():
        return bytes([ord(key[5].upper()) & 0x1F])
    if character:
        return character.encode()
    return None


MOUSE_MODES = (1000, 1002, 1003)
"""The private modes by which an agent asks for mouse reports (clicks, drags, all moves)."""
SGR_MOUSE_MODE = 1006
"""The mode asking for SGR's encoding (`ESC [ < b ; x ; y M|m`), any column and row."""


def mouse_bytes(button: int, col: int, row: int, pressed: bool, sgr: bool) -> bytes | None:
    """A mouse report as an xterm sends it: `button` 0-2 (left, middle, right) or 64/65 (wheel
    up, down), plus 4/8/16 for shift/meta/ctrl; `col` and `row` from 1. None where the old
    encoding cannot say the place (past column or row 223)."""
    if sgr:
        return f"\x1b[<{button};{col};{row}{'M' if pressed else 'm'}".encode()
    if col > 223 or row > 223:
        return None
    code = button if pressed else 3 | (button & 0b11100)  # a release names no button
    return bytes([0x1B, 0x5B, 0x4D, 32 + code, 32 + col, 32 + row])


def paste_bytes(text: str, bracketed: bool) -> bytes:
    """A paste as the agent asked for it: marked when it set bracketed paste."""
    data = text.replace("\r\n", "\r").replace("\n", "\r").encode()
    return b"\x1b[200~" + data + b"\x1b[201~" if bracketed else data


def _color(value: str) -> str | None:
    """Rich's name for one of pyte's colours (a name, `brightred`, or rrggbb), None: default."""
    if value == "default" or not value:
        return None
    if len(value) == 6 and all(c in "0123456789abcdefABCDEF" for c in value):
        return f"#{value}"
    if value.startswith("bright") and not value.startswith("bright_"):
        return f"bright_{value[6:]}"
    return value


_STYLES: dict[tuple[Any, ...], Style] = {}


def _style(char: Any) -> Style:
    """The Rich style of one modelled cell (cached: a screen has few distinct ones)."""
    key = (
        char.fg,
        char.bg,
        char.bold,
        char.italics,
        char.underscore,
        char.strikethrough,
        char.reverse,
        char.blink,
    )
    style = _STYLES.get(key)
    if style is None:
        try:
            style = Style(
                color=_color(char.fg),
                bgcolor=_color(char.bg),
                bold=char.bold or None,
                italic=char.italics or None,
                underline=char.underscore or None,
                strike=char.strikethrough or None,
                reverse=char.reverse or None,
                blink=char.blink or None,
            )
        except Exception:  # a colour Rich does not know draws in the default one
            style = Style()
        _STYLES[key] = style
    return style


def screen_text(screen: Screen, cursor: bool) -> Text:
    """The modelled screen as Rich text, line by line; with `cursor`, the cursor drawn
    (reversed) where the agent left it shown."""
    text = Text(no_wrap=True, overflow="crop")
    show_cursor = cursor and screen.has_mode(CURSOR_SHOWN)
    for y in range(screen.lines):
        line = screen.buffer[y]
        run: list[str] = []
        run_style: Style | None = None
        for x in range(screen.columns):
            char = line[x]
            if char.data == "":  # the right half of a wide character
                continue
            style = _style(char)
            if show_cursor and y == screen.cursor.y and x == screen.cursor.x:
                style = style + Style(reverse=not char.reverse)
            if style is not run_style and run:
                text.append("".join(run), run_style)
                run = []
            run_style = style
            run.append(char.data)
        if run:
            text.append("".join(run).rstrip() if run_style == Style() else "".join(run), run_style)
        if y < screen.lines - 1:
            text.append("\n")
    return text
