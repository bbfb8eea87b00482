"""The dashboard's Terminal tab and send key, driven by Textual's Pilot against a real daemon
and a real interactive run: a small program on the run's pseudo-terminal that draws once,
echoes each line it reads and says when ctrl+c reached it."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import PY, Herd
from textual.pilot import Pilot

from agentherd.supervisor.process.ptyholder import SOCKET_NAME, Frames, frame
from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.help import HelpScreen
from agentherd.tui.dashboard.output_view import OutputView
from agentherd.tui.dashboard.send_dialog import SendScreen
from agentherd.tui.dashboard.session_screen import SessionScreen
from agentherd.tui.dashboard.terminal_tab import TerminalView
from agentherd.tui.dashboard.widgets import SessionTable

WAIT_S = 30.0

AGENT = r"""
import signal, sys, termios
attrs = termios.tcgetattr(0)
attrs[3] &= ~termios.ECHO
termios.tcsetattr(0, termios.TCSANOW, attrs)
out = sys.stdout

def interrupted(*_):
    out.write("\x1b7\x1b[3;1HCTRL-C REACHED THE AGENT\x1b8")
    out.flush()

signal.signal(signal.SIGINT, interrupted)
out.write("\x1b[?1049h\x1b[2J\x1b[H\x1b[1;31mDRAWN ONCE\x1b[0m wide 中文 end\r\n")
out.flush()
for n, line in enumerate(sys.stdin, 1):
    out.write(f"\x1b[{4 + n};1HGOT {n}: {line.strip()}")
    out.flush()
"""


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


MOUSE_AGENT = r"""
import os, sys, tty
tty.setraw(0)
out = sys.stdout
out.write("\x1b[?1000h\x1b[?1006h\x1b[2J\x1b[HCLICK ME\r\n")  # mouse reports, SGR's
out.flush()
for n in range(1, 20):
    data = os.read(0, 1024)
    if not data:
        break
    out.write(f"\x1b[{2 + n};1HREAD {n}: " + data.decode().replace("\x1b", "ESC"))
    out.flush()
"""
"""An agent that asks for mouse reports and shows what it read."""


def start(herd: Herd, root: Path, agent: str = AGENT) -> HerdApp:
    """A daemon with one interactive session `t` running; the dashboard on it."""
    (root / "agent.py").write_text(agent)
    herd.write(f"""
        [[session]]
        name = "t"
        command = {json.dumps([PY, str(root / "agent.py")])}
        interactive = true
        restart = "never"
        stop_grace = "2s"
        """)
    herd.start().call("start", name="t")
    herd.wait_state("t", "running")
    assert herd.daemon is not None
    return HerdApp(herd.daemon.socket_path)


async def until(pilot: Pilot[Any], predicate: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def writer(folder: Path) -> socket.socket:
    """Another attach that took the terminal's writer's place (as `herd attach` does)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(WAIT_S)
    folder_fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    try:
        sock.connect(f"/proc/self/fd/{folder_fd}/{SOCKET_NAME}")
    finally:
        os.close(folder_fd)
    sock.sendall(frame(b"c"))
    frames, kinds = Frames(limit=1 << 30), []
    while b"w" not in kinds:
        kinds += [kind for kind, _ in frames.feed(sock.recv(65536))]
    return sock


def shown(view: TerminalView) -> str:
    return "\n".join(view.screen_lines())


@pytest.mark.anyio
async def test_the_terminal_tab_shows_the_screen_and_types_after_the_take_input_key(
    herd: Herd, tmp_path: Path
) -> None:
    app = start(herd, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.query_one(SessionTable).row_count == 1, "the row")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen), "the session screen")
        view = app.screen.query_one(TerminalView)
        output = app.screen.query_one(OutputView)  # its lines are the agent's redraws
        await until(pilot, lambda: "Terminal tab (9)" in output.terminal_note, "the pointer")
        await pilot.press("question_mark")  # the session screen's help names the key
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        help_lines = app.screen.screen_lines  # type: ignore[attr-defined]
        assert ("i", TerminalView.BINDINGS[0].tooltip) in help_lines  # type: ignore[union-attr]
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen), "the help closed")
        assert view._link is None, "no terminal read while the tab is hidden"
        await pilot.press("9")
        # The agent drew once, before the tab was opened: the first frame is the held screen.
        await until(pilot, lambda: "DRAWN ONCE wide 中文 end" in shown(view), "the screen")
        assert "i takes input (ctrl+q gives it back)" in view.note
        await pilot.press("h", "enter")  # not typing yet: the dashboard's keys
        assert "GOT" not in shown(view)
        # One writer at a time: while an attach types, the tab only views.
        other = writer(tmp_path / ".herd" / "runs" / "t" / "1")
        await pilot.press("i")
        await until(pilot, lambda: "only views" in view.note, "the tab told it only views")
        assert not view.typing
        other.shutdown(socket.SHUT_WR)  # detached: the holder frees the place, then closes
        while other.recv(65536):
            pass
        other.close()
        await pilot.press("i")
        await until(pilot, lambda: view.typing, "the writer's place")
        # The writer's window is the agent's: the tab's size, which the model takes too.
        size = (view.size.height - 1, view.size.width - 2)
        model = view.screen_model
        await until(pilot, lambda: model and (model.lines, model.columns) == size, "the size")
        await pilot.press("h", "e", "l", "l", "o", "enter")
        await until(pilot, lambda: "GOT 1: hello" in shown(view), "the typed line echoed")
        await pilot.press("ctrl+c")
        await until(pilot, lambda: "CTRL-C REACHED THE AGENT" in shown(view), "ctrl+c")
        assert app.is_running and isinstance(app.screen, SessionScreen)
        wrote = herd.events("t", "terminal-writer")
        assert wrote and wrote[0]["data"]["by"] == "a person" and wrote[0]["run"] == 1
        await pilot.press("ctrl+q")  # alone: input back to the dashboard, which runs on
        await until(pilot, lambda: not view.typing and view._link is not None, "input back")
        assert app.is_running
        await pilot.press("1")
        await until(pilot, lambda: view._link is None, "the tab hidden, its link closed")
        assert herd.wait_state("t", "running")["state"] == "running"


@pytest.mark.anyio
async def test_the_send_key_types_a_line_as_herd_send_does_and_says_the_reply(
    herd: Herd, tmp_path: Path
) -> None:
    app = start(herd, tmp_path)
    log = tmp_path / ".herd" / "runs" / "t" / "1" / "output.log"
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.query_one(SessionTable).row_count == 1, "the row")
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, SendScreen), "the send dialog")
        await pilot.press("enter")  # nothing typed: nothing sent, the dialog stays
        assert isinstance(app.screen, SendScreen)
        await pilot.press(*"steer left", "enter")
        await until(pilot, lambda: not isinstance(app.screen, SendScreen), "the dialog closed")
        await until(pilot, lambda: b"GOT 1: steer left" in log.read_bytes(), "the line typed")
        said = "t: typed into run 1's terminal"
        await until(pilot, lambda: any(n.message == said for n in app._notifications), "the reply")
        assert [e["data"]["origin"] for e in herd.events("t", "message-typed")] == ["person"]


@pytest.mark.anyio
async def test_a_click_on_the_terminal_reaches_an_agent_that_asked_for_the_mouse(
    herd: Herd, tmp_path: Path
) -> None:
    app = start(herd, tmp_path, MOUSE_AGENT)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.query_one(SessionTable).row_count == 1, "the row")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen), "the session screen")
        view = app.screen.query_one(TerminalView)
        await pilot.press("9")
        await until(pilot, lambda: "CLICK ME" in shown(view), "the screen")
        await pilot.click(TerminalView, offset=(5, 3))  # viewing: the dashboard's click
        await pilot.press("i")
        await until(pilot, lambda: view.typing, "the writer's place")
        assert "READ" not in shown(view)  # the viewing click was the dashboard's
        # The view's padding is one column and the note takes the first row: its (5, 3) is
        # the screen's column 5, row 3, counted from 1.
        await pilot.click(TerminalView, offset=(5, 3))
        await until(pilot, lambda: "READ 1: ESC[<0;5;3M" in shown(view), "the press")
        await until(pilot, lambda: "ESC[<0;5;3m" in shown(view), "the release")
