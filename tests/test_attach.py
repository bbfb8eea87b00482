"""Interactive sessions: a terminal per run held outside the daemon, and `herd attach` to it
through a real outer terminal (tmux), across a kill -9 of the daemon and its re-adoption."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import HERD, PY, pid_gone, wait_until
from tmuxscreen import Tmux

DRAW = r"""
import os, signal, sys, termios
attrs = termios.tcgetattr(0)
attrs[3] &= ~termios.ECHO
termios.tcsetattr(0, termios.TCSANOW, attrs)
out = sys.stdout

def size(*_):
    cols, rows = os.get_terminal_size(0)
    out.write(f"\x1b7\x1b[2;1H\x1b[2KSIZE {rows}x{cols}\x1b8")
    out.flush()

def interrupted(*_):
    out.write("\x1b7\x1b[3;1HCTRL-C REACHED THE AGENT\x1b8")
    out.flush()

out.write("\x1b[?2004h\x1b[?1049h\x1b[2J\x1b[H\x1b[1;31mDRAW READY\x1b[0m wide 中文 end\r\n")
out.flush()
signal.signal(signal.SIGWINCH, size)
signal.signal(signal.SIGINT, interrupted)
for n, line in enumerate(sys.stdin, 1):
    line = line.strip().replace("\x1b[200~", "<paste>").replace("\x1b[201~", "</paste>")
    out.write(f"\x1b[{4 + n};1HGOT {n}: {line}")
    out.flush()
"""


def herd_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HERD, *args], cwd=cwd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def write_config(root: Path, extra: str = "") -> None:
    (root / "draw.py").write_text(DRAW)
    (root / "herd.toml").write_text(
        f"""
[[session]]
name = "t"
command = {json.dumps([PY, str(root / "draw.py")])}
interactive = true
restart = "never"
stop_grace = "2s"
{extra}"""
    )


def events_of(root: Path, kind: str) -> list[dict[str, Any]]:
    listed = herd_cli(root, "events", "--json").stdout.splitlines()
    return [event for line in listed if (event := json.loads(line))["kind"] == kind]


def status_of(root: Path) -> dict[str, object]:
    return json.loads(herd_cli(root, "status", "t", "--json").stdout)  # type: ignore[no-any-return]


@pytest.mark.pidns
@pytest.mark.timeout(180)
def test_attach_types_detaches_and_sees_the_same_screen_after_the_daemon_is_killed(
    tmp_path: Path, tmux: Tmux
) -> None:
    write_config(tmp_path)
    assert herd_cli(tmp_path, "up", "--no-tui").returncode == 0
    try:
        status = wait_until(lambda: (s := status_of(tmp_path))["state"] == "running" and s)
        leader = psutil.Process(int(status["pid"]))  # type: ignore[call-overload]
        assert leader.cmdline()[:2] == ["/bin/sh", "-c"], "the pid is the run's own leader"
        assert not leader.parent().environ().get("HERD_RUN_TAG"), "the holder is no run process"
        assert leader.parent().pid != int((tmp_path / ".herd/daemon.lock").read_text())

        tmux.attach("one")
        shown = tmux.wait_for("one", "SIZE 30x100")  # the window's size reached the agent
        assert "DRAW READY wide 中文 end" in shown
        title = tmux.run("display", "-p", "-t", "one", "#{pane_title}")
        assert "ctrl+q detaches" in title
        tmux.keys("one", "hello there", literal=True)
        tmux.keys("one", "Enter")
        tmux.wait_for("one", "GOT 1: hello there")
        wrote = wait_until(lambda: events_of(tmp_path, "terminal-writer"))
        assert wrote[0]["data"]["by"] == "a person" and wrote[0]["run"] == 1
        assert wrote[0]["data"]["tty"].startswith("/dev/pts/")
        # A second attach only views: its title says so and its keys never reach the agent.
        tmux.attach("peek")
        tmux.wait_for("peek", "GOT 1: hello there")
        wait_until(lambda: "view only" in tmux.run("display", "-p", "-t", "peek", "#{pane_title}"))
        tmux.keys("peek", "from the viewer", literal=True)
        tmux.keys("peek", "Enter")
        tmux.detach("peek")
        assert len(events_of(tmp_path, "terminal-writer")) == 1
        tmux.keys("one", "C-c")
        tmux.wait_for("one", "CTRL-C REACHED THE AGENT")
        # A paste holding the detach key is typed, not a detach: only the lone key detaches.
        # Bracketed paste, as the agent asked for it (the screen's modes reach the outer
        # terminal on attach): the agent gets the paste marked.
        tmux.run("set-buffer", "pasted\x11text")
        tmux.run("paste-buffer", "-p", "-t", "one")
        tmux.keys("one", "Enter")
        shown = tmux.wait_for("one", "GOT 2: <paste>pastedtext</paste>")
        assert "from the viewer" not in shown
        tmux.run("resize-window", "-t", "one", "-x", "120", "-y", "40")
        tmux.wait_for("one", "SIZE 40x120")
        tmux.keys("one", "C-q")
        detached = tmux.wait_for("one", "ATTACH-EXIT=0")
        assert "detached from t; it runs on" in detached
        assert status_of(tmp_path)["state"] == "running"
        log = (tmp_path / ".herd/runs/t/1/output.log").read_bytes()
        assert b"\x1b[1;31mDRAW READY\x1b[0m" in log and b"GOT 1: hello there" in log

        daemon_pid = int((tmp_path / ".herd/daemon.lock").read_text())
        os.kill(daemon_pid, signal.SIGKILL)
        wait_until(lambda: pid_gone(daemon_pid))
        assert leader.is_running()
        # The terminal is the run's, not the daemon's: attached with no daemon at all.
        tmux.attach("mid")
        shown = tmux.wait_for("mid", "GOT 2: <paste>pasted")
        assert "GOT 1: hello there" in shown
        tmux.keys("mid", "C-q")
        tmux.wait_for("mid", "ATTACH-EXIT=0")
        assert herd_cli(tmp_path, "up", "--no-tui").returncode == 0
        events = wait_until(lambda: events_of(tmp_path, "adopted"))
        assert events[0]["session"] == "t"
        assert status_of(tmp_path)["pid"] == leader.pid

        # The agent never redraws: what the new attach shows first is the held screen.
        tmux.attach("two", cols=120, rows=40)
        again = tmux.wait_for("two", "GOT 2: <paste>pasted")
        for text in ("DRAW READY wide 中文 end", "GOT 1: hello there", "CTRL-C REACHED"):
            assert text in again
        tmux.keys("two", "after the kill", literal=True)
        tmux.keys("two", "Enter")
        tmux.wait_for("two", "GOT 3: after the kill")
        assert herd_cli(tmp_path, "stop", "t").returncode == 0
        ended = tmux.wait_for("two", "ATTACH-EXIT=0")
        assert "t's run ended" in ended
        assert not (tmp_path / ".herd/runs/t/1/term.sock").exists()
    finally:
        herd_cli(tmp_path, "down")
