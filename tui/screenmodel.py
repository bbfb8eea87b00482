"""A terminal's screen rebuilt from its bytes (pyte) and drawn again on another terminal: an
attach's first screen, correct before the agent redraws."""

from __future__ import annotations

import copy
import re
from typing import Any

import pyte
from pyte import graphics
from wcwidth import wcswidth

ALT_SCREEN_MODES = (1049, 1047, 47)
"""The private modes that switch to the alternate screen (1049 also saves the cursor)."""
CARRIED_MODES = (1, 1000, 1002, 1003, 1005, 1006, 1015, 2004)
"""Private modes the attached terminal must share with the screen: application cursor keys,
mouse reporting and its encodings, bracketed paste."""
CURSOR_SHOWN = 25

_FG = {name: code for code, name in {**graphics.FG_ANSI, **graphics.FG_AIXTERM}.items()}
_BG = {name: code for code, name in {**graphics.BG_ANSI, **graphics.BG_AIXTERM}.items()}


class Screen(pyte.Screen):
    """pyte's screen with the alternate screen: entered, the main one is kept and comes back
    when it is left, as a real terminal does (pyte alone draws both on one buffer)."""

    def __init__(self, columns: int, lines: int) -> None:
        super().__init__(columns, lines)
        self.saved_main: tuple[Any, Any] | None = None

    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private") and self.saved_main is None and set(modes) & {*ALT_SCREEN_MODES}:
            self.saved_main = (copy.deepcopy(self.buffer), copy.copy(self.cursor))
            super().set_mode(*modes, **kwargs)
            self.erase_in_display(2)
            return
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        super().reset_mode(*modes, **kwargs)
        if (
            kwargs.get("private")
            and self.saved_main is not None
            and set(modes) & {*ALT_SCREEN_MODES}
        ):
            self.buffer, self.cursor = self.saved_main
            self.saved_main = None
            self.dirty.update(range(self.lines))

    def has_mode(self, mode: int) -> bool:
        """True while private mode `mode` is set (pyte keeps private modes shifted by 5)."""
        return mode << 5 in self.mode


PUBLIC_ONLY = (
    "insert_characters",
    "cursor_up",
    "cursor_down",
    "cursor_forward",
    "cursor_back",
    "cursor_down1",
    "cursor_up1",
    "cursor_to_column",
    "cursor_position",
    "insert_lines",
    "delete_lines",
    "delete_characters",
    "erase_characters",
    "cursor_to_line",
    "clear_tab_stop",
    "select_graphic_rendition",
    "report_device_status",
    "set_margins",
)
"""pyte's handlers that take no `CSI ?` form: pyte passes them `private=True` and fails (Gemini
CLI sends `CSI ? 4 m` as it starts); a terminal skips a private sequence it does not know."""


def _public_only(name: str) -> Any:
    handler = getattr(pyte.Screen, name)

    def skip_private(self: Screen, *args: Any, private: bool = False, **kwargs: Any) -> Any:
        return None if private else handler(self, *args, **kwargs)

    skip_private.__doc__ = handler.__doc__
    return skip_private


for _name in PUBLIC_ONLY:
    setattr(Screen, _name, _public_only(_name))


PREFIXED_CSI = re.compile(rb"\x1b\[[<=>][0-9;:]*[ -/]*[@-~]")
"""CSI sequences whose parameters start with `<`, `=` or `>`: kitty's keyboard protocol (Claude
Code pushes and pops it as it starts), xterm's modifyOtherKeys, the DA2 and XTVERSION queries.
None changes what a screen shows; pyte takes the prefix for the sequence's end and draws the
rest as text (a stray `u` in the corner), or reads `CSI > 4 ; 2 m` as underline and dim."""
PREFIXED_CSI_BEGUN = re.compile(rb"\x1b(\[([<=>][0-9;:]*[ -/]*)?)?\Z")
"""The start of a chunk's last escape sequence when it may still become a PREFIXED_CSI."""


class Feed:
    """Bytes into a Screen through pyte, chunk by chunk, without the sequences pyte misreads
    (PREFIXED_CSI), one split across two chunks included."""

    def __init__(self, screen: Screen) -> None:
        self.screen = screen
        self._stream = pyte.ByteStream(screen)
        self._held = b""

    def feed(self, data: bytes) -> None:
        data = PREFIXED_CSI.sub(b"", self._held + data)
        begun = PREFIXED_CSI_BEGUN.search(data)
        self._held = begun.group() if begun else b""
        self._stream.feed(data[: begun.start()] if begun else data)


def screen_of(data: bytes, rows: int, cols: int) -> Screen:
    """The screen a `rows` x `cols` terminal shows after `data`."""
    screen = Screen(cols, rows)
    Feed(screen).feed(data)
    return screen


def _color(value: str, names: dict[str, int], extended: int) -> str | None:
    """The SGR parameters of one of pyte's colours (a name, or rrggbb), None for the default."""
    if value == "default":
        return None
    if value in names:
        return str(names[value])
    if len(value) == 6:
        try:
            red, green, blue = (int(value[i : i + 2], 16) for i in (0, 2, 4))
        except ValueError:
            return None
        return f"{extended};2;{red};{green};{blue}"
    return None


def _sgr(char: Any) -> str:
    """The SGR sequence that draws `char` (from a reset)."""
    parts = ["0"]
    for flag, code in (
        (char.bold, "1"),
        (char.italics, "3"),
        (char.underscore, "4"),
        (char.blink, "5"),
        (char.reverse, "7"),
        (char.strikethrough, "9"),
    ):
        if flag:
            parts.append(code)
    colors = (_color(char.fg, _FG, 38), _color(char.bg, _BG, 48))
    parts.extend(color for color in colors if color is not None)
    return f"\x1b[{';'.join(parts)}m"


def draw(screen: Screen, rows: int, cols: int) -> bytes:
    """Bytes that draw `screen` on a `rows` x `cols` terminal (cut to it), cursor and the
    carried modes included."""
    out = ["\x1b[0m\x1b[H\x1b[2J"]
    for y in range(min(rows, screen.lines)):
        out.append(f"\x1b[{y + 1};1H")
        line = screen.buffer[y]
        last = ""
        width = 0
        for x in range(screen.columns):
            char = line[x]
            if char.data == "":  # the right half of a wide character
                continue
            width += max(1, wcswidth(char.data))
            if width > cols:
                break
            sgr = _sgr(char)
            if sgr != last:
                out.append(sgr)
                last = sgr
            out.append(char.data)
        out.append("\x1b[0m")
    cursor = screen.cursor
    out.append(f"\x1b[{min(cursor.y, rows - 1) + 1};{min(cursor.x, cols - 1) + 1}H")
    out.extend(f"\x1b[?{mode}h" for mode in CARRIED_MODES if screen.has_mode(mode))
    out.append("\x1b[?25h" if screen.has_mode(CURSOR_SHOWN) else "\x1b[?25l")
    return "".join(out).encode()
