"""The session screen's Terminal tab: an interactive run's live screen, and the agent's keys
once the person takes input.

It connects to the run's terminal holder (supervisor/process/ptyholder.py) only while the tab
is shown, so the screen is modelled only while someone looks: the holder's replay rebuilds the
screen as it is (tui/screenmodel.py), then each new byte updates it. The take-input key makes
it the terminal's one writer, as `herd attach` is (another attach typing keeps it a viewer);
then every key goes to the agent, ctrl+c included, until the detach key pressed alone gives
input back. Who typed is in the event log (`terminal-writer`), as for an attach.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual import events, work
from textual.binding import Binding, BindingType
from textual.widget import Widget

from agentherd.sessions.keynames import DEFAULT_DETACH_KEY, detach_byte
from agentherd.sessions.status import parse_reply
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.process.ptyholder import SIZE, SOCKET_NAME, Frames, frame
from agentherd.tui import screenmodel
from agentherd.tui.dashboard.host import host
from agentherd.tui.dashboard.termdraw import (
    APP_CURSOR_MODE,
    BRACKETED_PASTE_MODE,
    MOUSE_MODES,
    SGR_MOUSE_MODE,
    key_bytes,
    mouse_bytes,
    paste_bytes,
    screen_text,
)

DRAW_EVERY_S = 0.05
"""The screen is drawn again at most this often while bytes arrive (20 frames a second)."""
RETRY_S = 1.0
"""With no terminal (no run yet, a headless run, a run that ended), look again this often
while the tab is shown."""
READ_BYTES = 65536


async def open_terminal(folder: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the terminal holder of run folder `folder`."""
    folder_fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    try:
        # Through the folder's descriptor: the path may pass sun_path's 107 bytes.
        return await asyncio.open_unix_connection(f"/proc/self/fd/{folder_fd}/{SOCKET_NAME}")
    finally:
        os.close(folder_fd)


class TerminalView(Widget, can_focus=True):
    """One session's terminal: the screen as the agent drew it, and the person's keys."""

    DEFAULT_CSS = """
    TerminalView { height: 1fr; padding: 0 1; }
    TerminalView:focus { background: $surface; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "i",
            "take_input",
            "Take input",
            id="take-input",
            tooltip="Terminal tab: keys go to the agent (ctrl+c too); the detach key alone "
            "gives input back",
        ),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.session = ""
        """The session whose terminal is shown (the screen's)."""
        self.screen_model: screenmodel.Screen | None = None
        self._stream: screenmodel.Feed | None = None
        self._link: asyncio.StreamWriter | None = None
        self.typing = False
        """True while the person's keys go to the agent (this view is the writer)."""
        self.note = "not shown yet"
        self._run = 0
        self._dirty = False
        self._text: Text = Text()

    # ----- following a session --------------------------------------------------------------

    def on_mount(self) -> None:
        self.set_interval(DRAW_EVERY_S, self._draw_if_dirty)

    def follow(self, session: str) -> None:
        """Show `session`'s terminal (connected only while shown)."""
        if session != self.session:
            self.session = session
            self._disconnect()
            if self.display and self.is_on_screen:
                self._connect()

    def on_show(self) -> None:
        """The tab is in front: connect, the replay draws the screen as it is."""
        self._connect()

    def on_hide(self) -> None:
        """The tab is hidden: nothing is modelled while no one looks."""
        self._disconnect()

    def on_unmount(self) -> None:
        self._disconnect()

    def _connect(self) -> None:
        if self.session:
            self._follow(self.session)

    def _disconnect(self) -> None:
        self.workers.cancel_group(self, "terminal")
        self._close_link()
        self.typing = False

    def _close_link(self) -> None:
        if self._link is not None:
            self._link.close()
            self._link = None

    @work(group="terminal", exclusive=True, exit_on_error=False)
    async def _follow(self, name: str) -> None:
        """Connect to the session's current run's terminal; again once it ends."""
        while True:
            await self._follow_once(name)
            self._close_link()
            self.typing = False
            self._mark()
            await asyncio.sleep(RETRY_S)

    async def _follow_once(self, name: str) -> None:
        """Show one run's terminal until it ends or the holder closes."""
        try:
            reply = await host(self.app).client.call("log_info", name=name)
        except ApiError as exc:
            self._say(f"{name}: {exc.message}")
            return
        info = parse_reply("log_info", reply)
        if info.path is None:
            self._say(f"{name} has no runs yet: no terminal to show")
            return
        try:
            reader, self._link = await open_terminal(Path(info.path).parent)
        except OSError:
            if info.live:
                self._say(
                    f"{name}: run {info.current_run} has no terminal; the Terminal tab shows "
                    "an interactive session's (interactive = true in herd.toml)"
                )
            else:
                self._say(f"{name} has no running terminal ({info.state})")
            return
        self._run = info.current_run or 0
        frames = Frames(limit=1 << 30)
        rows = cols = 0
        while data := await reader.read(READ_BYTES):
            for kind, payload in frames.feed(data):
                if kind == b"h":
                    hello = json.loads(payload)
                    rows, cols = int(hello["rows"]), int(hello["cols"])
                elif kind == b"r":
                    self.screen_model = screenmodel.screen_of(payload, rows, cols)
                    self._stream = screenmodel.Feed(self.screen_model)
                    self._say(self._viewing_note())
                elif kind == b"o" and self._stream is not None:
                    self._stream.feed(payload)
                    self._dirty = True
                elif kind == b"z" and self.screen_model is not None:
                    rows, cols = SIZE.unpack(payload)
                    self.screen_model.resize(rows, cols)
                    self._dirty = True
                elif kind == b"w":
                    self.typing = True
                    self._say(self._typing_note())
                    await self._tell_writer(name)
                elif kind == b"n":
                    self.typing = False
                    note = json.loads(payload).get("note", "another attach is typing")
                    self._say(f"{note}; {self._viewing_note()}")
                elif kind == b"x":
                    status = json.loads(payload).get("status")
                    self._say(f"{name}'s run {self._run} ended (exit {status})")
                    return
        self._say(f"{name}'s terminal closed")

    async def _tell_writer(self, name: str) -> None:
        """The event log says who types (never a message on the screen when it cannot)."""
        if host(self.app).read_only:
            return
        tty = None
        with contextlib.suppress(OSError):
            tty = os.ttyname(0)
        with contextlib.suppress(ApiError, OSError):
            await host(self.app).client.call(
                "terminal_writer", name=name, run=self._run, pid=os.getpid(), tty=tty
            )

    # ----- the person's keys ----------------------------------------------------------------

    @property
    def detach_key(self) -> str:
        """The key that gives input back: `[keys] detach`, else ctrl+q (as `herd attach`)."""
        keys: dict[str, str] = getattr(self.app, "keys", {}) or {}
        named = (keys.get("detach") or DEFAULT_DETACH_KEY).strip().lower()
        return named if detach_byte(named) is not None else DEFAULT_DETACH_KEY

    def action_take_input(self) -> None:
        """Become the terminal's writer: the agent's window takes this view's size."""
        if self._link is None or self.screen_model is None:
            self.notify(f"{self.session} has no terminal to type into", markup=False)
            return
        if host(self.app).read_only:
            self.notify("read-only: no daemon runs here to log who types", markup=False)
        rows, cols = max(1, self.size.height - 1), max(1, self.size.width - 2)
        self._write(frame(b"c") + frame(b"z", SIZE.pack(rows, cols)))

    def give_input_back(self) -> None:
        """The detach key: a viewer again (the holder frees the writer's place as this
        connection closes), the keys the dashboard's again."""
        self.typing = False
        self._disconnect()
        self._say("input given back")
        if self.session:
            self._follow(self.session)

    async def on_key(self, event: events.Key) -> None:
        """While typing, every key is the agent's, but the lone detach key."""
        if not self.typing:
            return
        event.stop()
        event.prevent_default()
        detach = detach_byte(self.detach_key)
        if event.key == self.detach_key or (
            detach is not None and event.character == detach.decode()
        ):
            self.give_input_back()
            return
        app_cursor = self.screen_model is not None and self.screen_model.has_mode(APP_CURSOR_MODE)
        data = key_bytes(event.key, event.character, app_cursor)
        if data:
            self._write(frame(b"i", data))

    def on_paste(self, event: events.Paste) -> None:
        """A paste is typed as one (marked when the agent asked for bracketed paste): a
        detach key inside it is text."""
        if not self.typing:
            return
        event.stop()
        bracketed = self.screen_model is not None and self.screen_model.has_mode(
            BRACKETED_PASTE_MODE
        )
        self._write(frame(b"i", paste_bytes(event.text, bracketed)))

    def on_mouse_down(self, event: events.MouseDown) -> None:
        self._mouse(event, event.button - 1, True)

    def on_mouse_up(self, event: events.MouseUp) -> None:
        self._mouse(event, event.button - 1, False)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._mouse(event, 64, True)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._mouse(event, 65, True)

    def _mouse(self, event: events.MouseEvent, button: int, pressed: bool) -> None:
        """While typing, a click or the wheel on the screen is the agent's when it asked for
        mouse reports (else the dashboard's, as in a terminal whose program did not ask)."""
        model = self.screen_model
        if not self.typing or model is None or not any(map(model.has_mode, MOUSE_MODES)):
            return
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:  # the note's line is no part of the screen
            return
        mods = (4 if event.shift else 0) | (8 if event.meta else 0) | (16 if event.ctrl else 0)
        sgr = model.has_mode(SGR_MOUSE_MODE)
        data = mouse_bytes(button | mods, offset.x + 1, offset.y, pressed, sgr)
        event.stop()
        if data:
            self._write(frame(b"i", data))

    def on_resize(self) -> None:
        """The writer's window size is the agent's (as for an attach)."""
        if self.typing:
            rows, cols = max(1, self.size.height - 1), max(1, self.size.width - 2)
            self._write(frame(b"z", SIZE.pack(rows, cols)))

    def _write(self, data: bytes) -> None:
        if self._link is not None and not self._link.is_closing():
            self._link.write(data)

    # ----- drawing --------------------------------------------------------------------------

    def _viewing_note(self) -> str:
        key = self.app.get_key_display(Binding(self._take_key(), ""))
        return (
            f"{self.session} run {self._run}: viewing · {key} takes input "
            f"({self.detach_key} gives it back)"
        )

    def _typing_note(self) -> str:
        return (
            f"{self.session} run {self._run}: TYPING: keys go to the agent (ctrl+c too) · "
            f"{self.detach_key} alone gives input back"
        )

    def _take_key(self) -> str:
        """The take-input key as bound now (`[keys] take-input`)."""
        keymap: dict[str, str] = getattr(self.app, "keymap_ids", {}) or {}
        return keymap.get("take-input", "i").split(",")[0].strip()

    def _say(self, note: str) -> None:
        self.note = note
        self._mark()

    def _mark(self) -> None:
        self._dirty = True

    def _draw_if_dirty(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        if self.screen_model is not None and self._link is not None:
            self._text = screen_text(self.screen_model, cursor=self.typing)
        self.refresh()

    def screen_lines(self) -> list[str]:
        """The screen's text, line by line (what a person reads)."""
        return self._text.plain.splitlines()

    def render(self) -> RenderableType:
        style = "bold reverse" if self.typing else "bold"
        return Group(Text(self.note, style=style, no_wrap=True, overflow="ellipsis"), self._text)
