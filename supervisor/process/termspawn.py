"""Starting an interactive run: its terminal holder, which starts the wrapper on a new pty."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import Process

from agentherd.supervisor.process import ptyholder
from agentherd.supervisor.process.runid import TAG_VAR

HOLDER_SCRIPT = Path(ptyholder.__file__)
TERMINAL_ROWS = 24
TERMINAL_COLS = 80
"""The terminal's size until someone attaches (then it follows the attached terminal)."""
TERM_NAME = "xterm-256color"
"""What an interactive run's terminal says it is: what an attach's own terminal and the screen
model both understand."""
READY_LINE_MAX_BYTES = 32


class HolderFailed(OSError):
    """The terminal holder ended before it started the run."""


async def open_holder(
    wrapper: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    folder: Path,
    lock_fd: int,
    log_fd: int,
) -> tuple[Process, int]:
    """Start the holder of the run's terminal (our child, in its own session); return it and
    the PID of the run's leader, its child, once the holder's socket listens."""
    holder_env = dict(env)
    holder_env[ptyholder.HOLDER_TAG_VAR] = holder_env.pop(TAG_VAR, "")
    holder_env["TERM"] = TERM_NAME
    read_fd, write_fd = os.pipe()
    try:
        try:
            process = await anyio.open_process(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    str(HOLDER_SCRIPT),
                    str(folder),
                    str(TERMINAL_ROWS),
                    str(TERMINAL_COLS),
                    str(lock_fd),
                    str(write_fd),
                    *wrapper,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log_fd,
                cwd=cwd,
                env=holder_env,
                start_new_session=True,
                pass_fds=(lock_fd, write_fd),
            )
        finally:
            os.close(write_fd)
        line = await anyio.to_thread.run_sync(_read_line, read_fd)
    finally:
        os.close(read_fd)
    if not line.strip().isdigit():
        await process.wait()
        raise HolderFailed(f"the terminal of the run in {folder} did not start (see its log)")
    return process, int(line)


def _read_line(fd: int) -> str:
    """The holder's one line, or what it wrote before it ended (EOF)."""
    got = b""
    while not got.endswith(b"\n") and len(got) < READY_LINE_MAX_BYTES:
        chunk = os.read(fd, READY_LINE_MAX_BYTES)
        if not chunk:
            break
        got += chunk
    return got.decode(errors="replace")
