"""A real herd daemon served in-process on a background thread, for tests that drive its clients."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from types import TracebackType

import anyio
import psutil

from agentherd.sessions.config import load_config
from agentherd.supervisor.client import Client
from agentherd.supervisor.context import Timings
from agentherd.supervisor.daemon import Daemon

START_TIMEOUT_S = 15.0
"""A daemon that does not answer within this long has failed to start."""

STOP_TIMEOUT_S = 60.0
"""`down` stops every agent gracefully; a loaded CI machine may need a while."""

TEST_TIMINGS = Timings(
    tail_poll_s=0.05, adopt_poll_s=0.1, stop_poll_s=0.02, kill_wait_s=5.0, drain_wait_s=0.5
)
"""Fast polls, so tests see output and exits without waiting real seconds."""


class DaemonThread:
    """`with DaemonThread(config_path, socket_path) as client:` serves, then downs and joins."""

    def __init__(self, config_path: Path, socket_path: Path) -> None:
        self.config = load_config(config_path)
        self.socket_path = socket_path
        self.daemon = Daemon(self.config, socket_path=socket_path, timings=TEST_TIMINGS)
        self.client = Client(socket_path)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="herd-daemon", daemon=True)

    def _serve(self) -> None:
        """The thread's body: serve until `down`, keeping any failure for the test to see."""
        try:
            anyio.run(self.daemon.serve)
        except BaseException as exc:  # reported by __enter__/__exit__, not lost in the thread
            self.error = exc

    def __enter__(self) -> Client:
        """Start serving and wait until the socket answers."""
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.client.ping():
            if self.error is not None or not self._thread.is_alive():
                raise RuntimeError(f"the daemon thread died: {self.error!r}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no daemon answered on {self.socket_path}")
            time.sleep(0.02)
        return self.client

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop every agent and the daemon, then wait for the thread."""
        if self.client.ping():
            self.client.call("down", socket_timeout_s=None)
        self._thread.join(STOP_TIMEOUT_S)
        if self._thread.is_alive():
            raise RuntimeError("the daemon thread did not stop after `down`")
        if self.error is not None:
            raise RuntimeError(f"the daemon failed: {self.error!r}")


def agent_processes(root: Path) -> list[psutil.Process]:
    """Live processes this test started: our children, and any run launched under `root`."""
    found = {p.pid: p for p in psutil.Process().children(recursive=True)}
    for process in psutil.process_iter(["pid"]):
        try:
            run_dir = process.environ().get("HERD_RUN_DIR", "")
        except (psutil.Error, OSError):
            continue
        if run_dir.startswith(str(root) + os.sep):
            found[process.pid] = process
    alive = []
    for process in found.values():
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.Error:
            continue
    return alive


def assert_no_agents_left(root: Path, timeout_s: float = 10.0) -> None:
    """Wait briefly for every agent of this test to be gone; kill and fail if one stays."""
    deadline = time.monotonic() + timeout_s
    while (left := agent_processes(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if left:
        described = [f"{p.pid} {p.cmdline()}" for p in left if p.is_running()]
        for process in left:
            try:
                process.kill()
            except psutil.Error:
                pass
        raise AssertionError(f"processes left running: {described}")
