"""An interactive run's terminal holder over its socket: viewers, one writer, the replay, the
exit; and the screen model that draws an attach's first screen."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pyte
import pytest
from conftest import HERD, PY, Herd, script, wait_until

from agentherd.sessions.agentsignals import read_signals
from agentherd.supervisor.process.ptyholder import SIZE, Frames, Replay, TerminalStates, frame
from agentherd.tui import screenmodel
from agentherd.tui.cli.attach import detach_byte

ECHO = script("""
import sys
print("ECHO READY", flush=True)
for line in sys.stdin:
    print("ECHO", line.strip(), flush=True)
    if line.strip() == "bye":
        sys.exit(3)
""")


class Viewer:
    """A raw client of the holder's socket."""

    def __init__(self, folder: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        fd = os.open(folder, os.O_PATH)
        try:
            self.sock.connect(f"/proc/self/fd/{fd}/term.sock")
        finally:
            os.close(fd)
        self.sock.settimeout(10)
        self.frames = Frames(limit=1 << 30)
        self.got: list[tuple[bytes, bytes]] = []

    def read_until(self, kind: bytes, text: bytes = b"") -> list[tuple[bytes, bytes]]:
        def found() -> bool:  # the terminal may hand a line over in pieces: joined
            joined = b"".join(p for k, p in self.got if k == kind)
            return any(k == kind for k, _ in self.got) and text in joined

        while not found():
            data = self.sock.recv(65536)
            assert data, f"closed before {kind!r} {text!r}; got {self.got}"
            self.got += self.frames.feed(data)
        return self.got

    def claimed(self) -> bool:
        """Claim the writer's place; True once the holder granted it (a `w` frame)."""
        self.sock.sendall(frame(b"c"))
        self.sock.settimeout(0.1)
        try:
            self.got += self.frames.feed(self.sock.recv(65536))
        except TimeoutError:
            pass
        finally:
            self.sock.settimeout(10)
        return any(kind == b"w" for kind, _ in self.got)

    def output(self) -> bytes:
        return b"".join(p for k, p in self.got if k in (b"r", b"o"))

    def type(self, text: bytes) -> None:
        self.sock.sendall(frame(b"i", text))


def start_echo(herd: Herd) -> Path:
    herd.write(f"""
        [[session]]
        name = "e"
        command = {ECHO}
        interactive = true
        restart = "never"
    """)
    client = herd.start()
    client.call("start", name="e")
    herd.wait_state("e", "running")
    folder = herd.root / ".herd/runs/e/1"
    wait_until(lambda: b"ECHO READY" in (folder / "output.log").read_bytes())
    return folder


def test_viewers_all_see_the_output_and_only_one_types(herd: Herd) -> None:
    folder = start_echo(herd)
    first, second = Viewer(folder), Viewer(folder)
    for viewer in (first, second):
        hello = json.loads(viewer.read_until(b"h")[0][1])
        assert (hello["rows"], hello["cols"]) == (24, 80)
        assert hello["pid"] == herd.status("e")["pid"]
        viewer.read_until(b"r", b"ECHO READY")  # the screen so far, first
    second.sock.sendall(frame(b"c"))  # claims the writer's place: no one had it
    second.read_until(b"w")
    first.sock.sendall(frame(b"c"))
    first.read_until(b"n")
    second.sock.close()  # the writer left: the place is free again, once the holder sees it
    wait_until(lambda: first.claimed(), what="the writer's place to be free")
    first.type(b"one\r")
    first.read_until(b"o", b"ECHO one")
    second = Viewer(folder)
    second.read_until(b"r", b"ECHO one")  # what a new viewer sees first: the screen so far
    second.type(b"two\r")
    note = json.loads(dict(second.read_until(b"n"))[b"n"])
    assert note["writer"] is False
    third = Viewer(folder)  # a one-off message goes in whoever is the writer
    third.read_until(b"r")
    third.sock.sendall(frame(b"s", b"sent\r"))
    first.read_until(b"o", b"ECHO sent")
    assert not any(kind in (b"w", b"n") for kind, _ in third.got), "nor does it claim"
    third.sock.close()
    first.sock.sendall(frame(b"z", SIZE.pack(40, 120)))
    first.type(b"three\r")
    first.read_until(b"o", b"ECHO three")
    assert b"ECHO two" not in first.output(), "a viewer's keys never reach the agent"
    third = Viewer(folder)  # the writer's window size is the terminal's now
    assert json.loads(third.read_until(b"h")[0][1])["rows"] == 40
    third.sock.close()
    first.sock.close()  # the writer left: the next to claim (or type) is the writer
    wait_until(lambda: second.claimed(), what="the writer's place to be free")
    second.type(b"bye\r")
    second.read_until(b"x")
    assert json.loads(dict(second.got)[b"x"]) == {"status": 3}
    herd.wait_state("e", "failed", "stopped", "done")
    ended = herd.events("e", "run-exited")[-1]
    assert ended["data"]["exit_code"] == 3
    log = (folder / "output.log").read_bytes()
    # The raw bytes, exactly (the terminal's echo of a line typed meanwhile may come between
    # a line and its end: the kernel hands the master a newline apart from the text before).
    assert b"ECHO one" in log and b"ECHO bye" in log
    assert not (folder / "term.sock").exists()


@pytest.mark.pidns
def test_a_killed_interactive_run_ends_with_its_signal(herd: Herd) -> None:
    folder = start_echo(herd)
    viewer = Viewer(folder)
    viewer.read_until(b"r")
    herd.client.call("stop", name="e", kill=True, socket_timeout_s=None)
    viewer.read_until(b"x")
    ended = herd.events("e", "run-exited")[-1]
    assert ended["data"]["signal"] == "SIGKILL"


def test_the_replay_keeps_the_screen_from_its_last_clear_and_the_modes_before() -> None:
    replay = Replay(keep_bytes=500)
    parts = [
        b"\x1b[?2004h\x1b[?1049h" + b"old line\r\n" * 100,
        b"\x1b[2J\x1b[Hnew screen\r\n" + b"x" * 300,
        b"y" * 200,
    ]
    for part in parts:
        replay.add(part)
    snapshot = replay.snapshot()
    assert b"old line" not in snapshot
    assert len(snapshot) < 600
    full = screenmodel.screen_of(b"".join(parts), 24, 80)
    cut = screenmodel.screen_of(snapshot, 24, 80)
    assert cut.display == full.display
    assert cut.has_mode(2004) and cut.has_mode(1049)
    replay.add(b"z\r\n" * 1000)  # no clear at all: about the newest keep bytes, whole lines
    assert 495 <= len(replay.buffer) <= 500 and replay.buffer.startswith(b"z\r\n")


def test_the_first_screen_is_drawn_again_exactly() -> None:
    data = (
        b"main screen\r\n\x1b[?1049h\x1b[2J\x1b[H\x1b[1;31mred\x1b[0m \xe4\xb8\xad\xe6\x96\x87 "
        b"\x1b[38;5;100mcolour\x1b[0m\x1b[?2004h\x1b[3;5H"
    )
    screen = screenmodel.screen_of(data, 10, 40)
    drawn = screenmodel.draw(screen, 10, 40)
    again = pyte.Screen(40, 10)
    pyte.ByteStream(again).feed(drawn)
    assert again.display == screen.display
    assert again.display[0].startswith("red 中文 colour")
    assert again.buffer[0][0].fg == "red" and again.buffer[0][0].bold
    assert (again.cursor.y, again.cursor.x) == (2, 4)
    assert b"\x1b[?2004h" in drawn  # bracketed paste goes on in the attached terminal
    left = screenmodel.screen_of(data + b"\x1b[?1049l", 10, 40)
    assert left.display[0].startswith("main screen"), "leaving the alternate screen restores"


def test_keyboard_protocol_sequences_leave_the_screen_as_a_terminal_does() -> None:
    """Claude Code's first bytes pop and push kitty's keyboard protocol and set xterm's
    modifyOtherKeys: a terminal draws nothing for them, wherever a read splits them."""
    data = b"\x1b[<u\x1b[>1u\x1b[>4;2m\x1b[=1;1u\x1b[>0q\x1b[1mWelcome\x1b[0m back"
    whole = screenmodel.screen_of(data, 4, 20)
    assert whole.display[0] == "Welcome back        "
    assert whole.buffer[0][0].bold and not whole.buffer[0][8].underscore
    for cut in range(1, len(data)):
        split = screenmodel.Screen(20, 4)
        feed = screenmodel.Feed(split)
        feed.feed(data[:cut])
        feed.feed(data[cut:])
        assert split.display == whole.display, f"split at byte {cut}"


def test_detach_keys_and_a_wrong_one(herd: Herd) -> None:
    assert detach_byte("ctrl+q") == b"\x11"
    assert detach_byte("Ctrl+]") == b"\x1d"
    assert detach_byte("q") is None
    herd.write("""
        [keys]
        detach = "alt+q"

        [[session]]
        name = "e"
        command = "true"
        interactive = true
    """)
    done = subprocess.run(
        [HERD, "attach", "e"], cwd=herd.root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip().endswith(
        "herd.toml: [keys] detach: 'alt+q' is not a control key; use ctrl+<letter>, like \"ctrl+q\""
    )
    assert len(done.stderr.strip().splitlines()) == 1


def test_attach_to_a_headless_session_says_how_to_make_it_interactive(herd: Herd) -> None:
    herd.write(f"""
        [[session]]
        name = "h"
        command = {json.dumps([PY, "-c", "pass"])}
    """)
    done = subprocess.run(
        [HERD, "attach", "h"], cwd=herd.root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "h is not interactive; set interactive = true" in done.stderr


def test_an_interactive_agent_that_exits_cleanly_succeeded_without_a_print_mode_result(
    herd: Herd,
) -> None:
    # Claude's full-screen interface prints no stream-json result line: its clean exit is the
    # end of the task, not a run that stopped before its answer.
    interface = script('print("\\x1b[2J\\x1b[H> the interface, drawn", flush=True)')
    herd.write(f"""
        [[session]]
        name = "c"
        agent = "claude"
        command = {interface}
        interactive = true
        restart = "on-failure"
        restart_delay = 0
    """)
    client = herd.start()
    client.call("start", name="c")
    wait_until(lambda: herd.events("c", "run-exited"))
    ended = herd.events("c", "run-exited")[0]
    assert ended["data"]["outcome"] == "success", ended
    assert herd.wait_state("c", "completed", "failed", "backoff")["state"] == "completed"


def test_a_viewer_that_stops_reading_never_holds_the_agent_back(herd: Herd) -> None:
    go = herd.root / "go"
    flood = script(f"""
        import os, sys, time
        while not os.path.exists({str(go)!r}):
            time.sleep(0.01)
        line = "x" * 1023 + "\\n"
        for _ in range(12 * 1024):  # 12 MiB: past what a viewer may fall behind
            sys.stdout.write(line)
        sys.stdout.flush()
        print("FLOOD DONE", flush=True)
    """)
    herd.write(f"""
        [[session]]
        name = "f"
        command = {flood}
        interactive = true
        restart = "never"
    """)
    client = herd.start()
    client.call("start", name="f")
    folder = herd.root / ".herd/runs/f/1"
    wait_until(lambda: (folder / "term.sock").exists())
    stuck = Viewer(folder)  # connected, never reads
    go.write_text("")
    herd.wait_state("f", "completed", timeout_s=60)
    assert b"FLOOD DONE" in (folder / "output.log").read_bytes()
    stuck.sock.close()


def test_a_private_sequence_the_model_does_not_know_is_skipped_as_a_terminal_does() -> None:
    # Gemini CLI's interface sends `CSI ? 4 m` (xterm's modifier-keys query) as it starts.
    screen = screenmodel.screen_of(b"\x1b[?4mbefore \x1b[?1Aafter", 4, 40)
    assert screen.display[0].rstrip() == "before after"


def test_the_agents_terminal_state_reports_become_signal_lines_once_each(tmp_path: Path) -> None:
    """Codex's OSC 7501 state reports, cut anywhere between reads, each change written once."""
    signals = tmp_path / "signals"
    states = TerminalStates(str(signals))
    stream = (
        b"\x1b]0;repo\x07\x1b]7501;state=working:app=codex\x1b\\hello"
        b"\x1b]7501;state=working:app=codex\x1b\\"  # the same again: no line
        b"\x1b]7501;state=blocked:app=codex:kind=question\x1b\\Question 1/1"
        b"\x1b]7501;state=working:app=codex\x07done"
    )
    for cut in (1, 3, 7, 11):
        signals.unlink(missing_ok=True)
        states = TerminalStates(str(signals))
        for at in range(0, len(stream), cut):
            states.feed(stream[at : at + cut])
        lines = [json.loads(line) for line in signals.read_text().splitlines()]
        assert [(s["state"], s.get("kind")) for s in lines] == [
            ("working", None),
            ("blocked", "question"),
            ("working", None),
        ], cut
        assert {s["hook_event_name"] for s in lines} == {"TerminalState"}
    assert [s.why for s in read_signals(signals.read_text())] == [
        "its terminal says it works",
        "a question waits for an answer",
        "its terminal says it works",
    ]
    TerminalStates(None).feed(stream)  # no signals file (a headless run): nothing written
