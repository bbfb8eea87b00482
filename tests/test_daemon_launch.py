"""A daemon started by a long-lived caller (`herd mcp --start-daemon`, the dashboard) is reaped
by that caller when it ends: it never stays a zombie of it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import psutil
from conftest import wait_until

from agentherd.sessions.config import load_config
from agentherd.supervisor.api.launcher import ensure_daemon


def test_a_started_daemon_that_ends_is_reaped_by_the_process_that_started_it(
    tmp_path: Path,
) -> None:
    config_path = tmp_path / "herd.toml"
    config_path.write_text(
        textwrap.dedent("""
            [[session]]
            name = "idle"
            command = ["true"]
        """)
    )
    client, started = ensure_daemon(load_config(config_path))
    assert started
    pid = client.call("info")["pid"]
    daemon = psutil.Process(pid)
    assert daemon.ppid() == psutil.Process().pid  # our child, as for `herd mcp`
    client.call("shutdown")

    def gone() -> bool:
        try:
            return daemon.status() != psutil.STATUS_ZOMBIE and not daemon.is_running()
        except psutil.NoSuchProcess:
            return True

    wait_until(gone, timeout_s=15, what="the ended daemon to be reaped, not left a zombie")
