"""What the benchmarks share: a fleet of busy repos, and the real daemon served in-process."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio

from agentherd.sessions.config import load_config
from agentherd.supervisor.api.client import Client
from agentherd.supervisor.daemon import Daemon
from agentherd.supervisor.session.context import Timings

GIT = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]

BUSY_AGENT = (
    "import time\n"
    "i = 0\n"
    "while True:\n"
    "    print('working on it', i, flush=True); i += 1; time.sleep(0.05)\n"
)
"""One Python process per agent, paced with sleep (no fork per line): 20 lines a second."""


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A git repo with one commit."""
    path.mkdir(parents=True)
    subprocess.run([*GIT, "init", "-q", "-b", "main"], cwd=path, check=True)
    for name, text in (files or {"README.md": "x\n"}).items():
        (path / name).write_text(text)
    subprocess.run([*GIT, "add", "-A"], cwd=path, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "initial"], cwd=path, check=True)
    return path


def make_fleet(root: Path, sessions: int) -> Path:
    """`sessions` repos with a progress file, and a herd.toml running a busy agent in each."""
    blocks = []
    for index in range(sessions):
        repo = make_repo(root / f"s{index}", {"progress.txt": "## Session 1\n- started\n"})
        blocks.append(
            f'[[session]]\nname = "s{index}"\ncwd = "{repo}"\n'
            f"command = {json.dumps([sys.executable, '-c', BUSY_AGENT])}\n"
            f'progress = "progress.txt"\nstop_grace = "2s"\n'
        )
    path = root / "herd.toml"
    path.write_text("\n".join(blocks))
    return path


class Served:
    """The real daemon for a herd.toml, on a thread of this process, on its real socket."""

    def __init__(self, config_path: Path, timings: Timings | None = None) -> None:
        self.daemon = Daemon(load_config(config_path), timings=timings)
        self.thread = threading.Thread(target=anyio.run, args=(self.daemon.serve,), daemon=True)
        self.thread.start()
        self.client = Client(self.daemon.socket_path)
        while not self.client.ping():
            time.sleep(0.005)

    def stop(self, down: bool = True) -> None:
        """`down` stops the agents too; otherwise they keep running, as after a kill -9."""
        self.client.call("down" if down else "shutdown", socket_timeout_s=None)
        self.thread.join(60)
