"""Start a background daemon for a herd.toml if none answers, and wait until it does."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from agentherd.sessions.config import HerdConfig
from agentherd.supervisor.api.client import Client
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.files.paths import open_daemon_log, prepare_state_dir, socket_path_for

DAEMON_START_TIMEOUT_S = 15.0
"""A daemon that does not answer within this long has failed to start; its log says why."""


def client_for(config: HerdConfig) -> Client:
    """A client of the daemon that owns this config's state folder."""
    return Client(socket_path_for(config.state_dir))


def ensure_daemon(config: HerdConfig) -> tuple[Client, bool]:
    """Return a client of the running daemon, starting one first if needed (and say if we did)."""
    client = client_for(config)
    if client.answers():
        return client, False
    prepare_state_dir(config.state_dir)  # StateDirUnwritable: one line for the person
    log_path = config.state_dir / "daemon.log"
    log_fd = open_daemon_log(config.state_dir)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "agentherd.supervisor.main", str(config.path)],
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            start_new_session=True,
            cwd=config.path.parent,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    finally:
        os.close(log_fd)
    # A long-lived caller (`herd mcp --start-daemon`, the dashboard) outlives the daemon it
    # started: reap it when it ends, or it stays a zombie of the caller.
    threading.Thread(target=process.wait, name="herd-daemon-reaper", daemon=True).start()
    deadline = time.monotonic() + DAEMON_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if client.ping():
            return client, True
        code = process.poll()
        if code not in (None, 0):
            break
        time.sleep(0.05)
    raise ApiError("internal", f"the daemon did not start; see {log_path}")


def wait_for_exit(pid: int, timeout_s: float) -> bool:
    """Wait until process `pid` is gone (or a zombie); False after `timeout_s`."""
    import psutil

    try:
        psutil.Process(pid).wait(timeout_s)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return False
    return True
