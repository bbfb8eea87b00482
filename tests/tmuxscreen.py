"""A real terminal for tests: one program in a tmux pane on a tmux server of the test's own.

The test types into the pane and reads its screen as a person would see it. Each Screen has
its own server socket (`tmux -L`), so it never touches a person's tmux or another test's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import HERD, wait_until

COLUMNS = 120
ROWS = 40
BOTTOM_LINES = 8
"""The screen's last lines with text that hold an interface's input box and its footer."""


def tmux_binary() -> str:
    """tmux, or a skip (a failure under CI=true) when it is not installed."""
    found = shutil.which("tmux")
    if found:
        return found
    message = "tmux is not installed (apt-get install tmux)"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: a missing tool fails the run)", pytrace=False)
    pytest.skip(message)


class Screen:
    """`argv` running in a COLUMNS x ROWS tmux pane with `env` added to this process's own."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.tmux = tmux_binary()
        self.socket = f"herd-test-{uuid.uuid4().hex[:12]}"
        full_env = {**os.environ, **env, "TERM": "xterm-256color"}
        full_env.pop("TMUX", None)  # a test run inside tmux still gets a server of its own
        # A person's terminal, not CI's: Gemini CLI (is-in-ci) runs non-interactive when `CI`,
        # `CONTINUOUS_INTEGRATION` or any `CI_*` variable is set, even with a terminal.
        ci_names = [n for n in full_env if n in ("CI", "CONTINUOUS_INTEGRATION") or n[:3] == "CI_"]
        for name in ci_names:
            del full_env[name]
        # The pane stays when its program exits: the test then reads what it last showed.
        conf = cwd.parent / f"{self.socket}.conf"
        conf.write_text("set -g remain-on-exit on\n")
        self._run(
            "-f", str(conf), "new-session", "-d", "-s", "main", "-x", str(COLUMNS), "-y", str(ROWS),
            "-c", str(cwd), "--", *argv, env=full_env,
        )  # fmt: skip
        self.pane_pid = int(self._run("display-message", "-p", "-t", "main", "#{pane_pid}"))
        self.server_pid = int(self._run("display-message", "-p", "-t", "main", "#{pid}"))

    def _run(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            [self.tmux, "-L", self.socket, *args],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=30,
        )
        return done.stdout.strip()

    def text(self) -> str:
        """The screen as it shows now, one line per row."""
        return self._run("capture-pane", "-p", "-t", "main")

    def shows(self, words: str, timeout_s: float) -> str:
        """Wait until `words` are on the screen; the screen then."""
        try:
            return wait_until(  # type: ignore[no-any-return]
                lambda: screen if words in (screen := self.text()) else None,
                timeout_s,
                f"{words!r} on the screen",
                poll_s=0.2,
            )
        except AssertionError as missing:
            raise AssertionError(f"{missing}; the screen:\n{self.text()}") from None

    def type_line(self, words: str, timeout_s: float) -> None:
        """Type `words`, wait until the interface echoed them, then press Enter.

        Pressing Enter only once the words show, after End, keeps an interface that tells a
        paste from typing by timing from taking the Enter as part of the text: Gemini CLI takes
        an Enter within 30 ms of a typed character for a new line (its FAST_RETURN_TIMEOUT),
        and End, a key that types nothing, ends that window.
        """
        self._run("send-keys", "-t", "main", "-l", words)
        self.shows(words, timeout_s)
        self._run("send-keys", "-t", "main", "End", "Enter")

    def ask(self, words: str, answer: str, timeout_s: float) -> str:
        """`type_line`, then wait for `answer` on the screen (the screen then).

        On a loaded machine Gemini CLI still took the Enter as a new line once (its input box
        held the words over an empty line for 90 s): if `answer` has not shown after a third of
        the time and the words are still near the bottom of the screen, where the input box
        is, Enter is pressed once more (on an empty input box no interface does anything).
        """
        self.type_line(words, timeout_s)
        try:
            return self.shows(answer, timeout_s / 3)
        except AssertionError:
            bottom = self.text().rstrip().splitlines()[-BOTTOM_LINES:]
            if any(words in line for line in bottom):
                self._run("send-keys", "-t", "main", "Enter")
        return self.shows(answer, timeout_s * 2 / 3)

    def close(self) -> None:
        """End the tmux server (the pane's program gets SIGHUP) and wait for every process of
        the pane to be gone; a survivor, provably the pane's own, gets SIGKILL."""
        try:
            family = [psutil.Process(self.pane_pid)]
            family += family[0].children(recursive=True)
        except psutil.NoSuchProcess:
            family = []
        try:
            family.append(psutil.Process(self.server_pid))
        except psutil.NoSuchProcess:
            pass
        subprocess.run([self.tmux, "-L", self.socket, "kill-server"], capture_output=True)
        _, alive = psutil.wait_procs(family, timeout=10)
        for proc in alive:
            proc.kill()
        psutil.wait_procs(alive, timeout=5)


class Tmux:
    """A private tmux server: the outer terminal a person would attach from."""

    def __init__(self, cwd: Path) -> None:
        self.name = f"herd-test-{uuid.uuid4().hex[:12]}"
        self.cwd = cwd

    def run(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.name, *args], capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def attach(
        self, window: str, *options: str, session: str = "t", cols: int = 100, rows: int = 30
    ) -> None:
        """`herd attach SESSION` in a new tmux session of `rows` x `cols`; the pane stays after
        it, saying how the attach exited."""
        command = " ".join([HERD, "attach", session, *options])
        self.run(
            "new-session",
            "-d",
            "-s",
            window,
            "-x",
            str(cols),
            "-y",
            str(rows),
            "-c",
            str(self.cwd),
            f"{command}; echo ATTACH-EXIT=$?; exec cat",
        )

    def screen(self, window: str) -> str:
        return self.run("capture-pane", "-p", "-t", window)

    def wait_for(self, window: str, text: str, timeout_s: float = 30.0) -> str:
        """Wait until `text` is on `window`'s screen; the screen then (in the failure, too)."""
        try:
            return wait_until(  # type: ignore[no-any-return]
                lambda: text in (shown := self.screen(window)) and shown,
                timeout_s,
                f"{text!r} on the tmux screen {window}",
            )
        except AssertionError as missing:
            raise AssertionError(f"{missing}; the screen:\n{self.screen(window)}") from None

    def keys(self, window: str, *keys: str, literal: bool = False) -> None:
        self.run("send-keys", "-t", window, *(["-l"] if literal else []), *keys)

    def detach(self, window: str) -> None:
        """ctrl+q until the attach is gone: keys sent just before may reach it in the same read
        as the ctrl+q, which then is typed (only a lone ctrl+q detaches)."""

        def gone() -> bool:
            if "ATTACH-EXIT=" in self.screen(window):
                return True
            self.keys(window, "C-q")
            return False

        wait_until(gone, what=f"the attach in {window} to detach", poll_s=0.5)
        assert "ATTACH-EXIT=0" in self.screen(window)

    def close(self) -> None:
        """Kill the server and wait until it and what ran in its panes are gone."""
        shown = subprocess.run(
            ["tmux", "-L", self.name, "display", "-p", "#{pid}"], capture_output=True, text=True
        )
        procs = []
        if shown.returncode == 0 and shown.stdout.strip().isdigit():
            server = psutil.Process(int(shown.stdout))
            procs = [server, *server.children(recursive=True)]
        subprocess.run(["tmux", "-L", self.name, "kill-server"], capture_output=True, timeout=30)
        _, alive = psutil.wait_procs(procs, timeout=10)
        for proc in alive:  # started by this test's tmux server: ours to end
            proc.kill()
        psutil.wait_procs(alive, timeout=5)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    """A private tmux server in the test's folder (a plugin of conftest: any test may ask)."""
    tmux_binary()  # skips, or fails under CI=true, without tmux
    server = Tmux(tmp_path)
    try:
        yield server
    finally:
        server.close()
