"""A run's folder: its alive lock, its exit status and output files, and who still holds it."""

from __future__ import annotations

import fcntl
import logging
import os
import time
from pathlib import Path

import psutil

from agentherd.supervisor.files import agentfiles
from agentherd.supervisor.process import proctable
from agentherd.supervisor.process.runid import ExitInfo, decode_status

log = logging.getLogger("herd.procs")

EXIT_FILE = "exit_status"
EXIT_FILE_MAX_BYTES = 64
"""The wrapper writes one number; anything longer is not its file."""
LOCK_FILE = "alive.lock"


def read_exit_file(folder: Path) -> ExitInfo | None:
    """The exit status the wrapper wrote for a run, or None when it never wrote one."""
    try:
        # The run folder is reachable by the agent: never block on a FIFO planted there.
        text = agentfiles.read_regular(folder / EXIT_FILE, EXIT_FILE_MAX_BYTES)
        return decode_status(int(text.strip()))
    except (OSError, ValueError):
        return None


def set_aside_forgotten(folder: Path) -> None:
    """Rename a run folder no state remembers (state.db was lost), so its log is kept apart.

    A folder whose lock is held is left where it is: its run lives, and `launch` refuses it.
    """
    if folder.exists() and not lock_held(folder):
        aside = folder.with_name(f"{folder.name}.forgotten-{time.time_ns()}")
        try:
            folder.rename(aside)
        except OSError as exc:  # the run still starts, appending to the old log
            log.warning("cannot set aside %s: %s", folder, exc)


def lock_held(folder: Path) -> bool:
    """True while any process of the run still holds its inherited `alive.lock`."""
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def held_run_folders(session_runs: Path) -> list[Path]:
    """The run folders of a session whose `alive.lock` some live process still holds."""
    try:
        folders = sorted(p for p in session_runs.iterdir() if p.name.isdigit())
    except OSError:
        return []
    return [folder for folder in folders if lock_held(folder)]


def folder_users(folder: Path) -> list[psutil.Process]:
    """Live processes started for the run folder `folder` (they carry it in HERD_RUN_DIR)."""
    return [e.proc for e in proctable.SHARED.table().entries if e.run_dir == str(folder)]


def describe_users(folder: Path) -> str:
    """`pid 123 (sleep), pid 124 (python3)`, or a note that none can be seen, for a message."""
    described = []
    for proc in folder_users(folder)[:5]:
        try:
            described.append(f"pid {proc.pid} ({proc.name()})")
        except psutil.Error:
            continue
    return ", ".join(described) or "no process of it is visible; one holds its alive.lock"
