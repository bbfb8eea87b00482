"""A real terminal for tests: one program in a tmux pane on a tmux server of the test's own.

The test types into the pane and reads its screen as a person would see it. Each Screen has
its own server socket (`tmux -L`), so it never touches a person's tmux or another test's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import psutil
import pytest
from conftest import wait_until

COLUMNS = 120
ROWS = 40


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

        Pressing Enter only once the words show keeps an interface that tells a paste from
        typing (by timing) from taking the Enter as part of the text.
        """
        self._run("send-keys", "-t", "main", "-l", words)
        self.shows(words, timeout_s)
        self._run("send-keys", "-t", "main", "Enter")

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
