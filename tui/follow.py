"""Print a log file, and follow it (across runs) like `tail -f`, inert on a terminal."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from agentherd.sessions.sanitize import inert
from agentherd.supervisor.agentfiles import open_regular, read_data

FOLLOW_POLL_S = 0.2
"""How often `-f` looks for new bytes; a person does not notice 200 ms."""
RUN_CHECK_S = 1.0
"""How often `-f` asks the daemon whether a newer run has started."""


def _write(data: bytes, inert_output: bool) -> None:
    if inert_output:
        sys.stdout.write(inert(data.decode("utf-8", errors="replace")))
        sys.stdout.flush()
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _read_at(path: Path, offset: int, max_bytes: int) -> tuple[bytes, int, int]:
    """Bytes from `offset` (past any range the log cap cut out), where they start, the size."""
    fd = open_regular(path)  # a FIFO or device in its place must not hang or flood `herd logs`
    try:
        size = os.fstat(fd).st_size
        if size < offset:
            offset = 0  # truncated
        data, start = read_data(fd, offset, max_bytes, size)
        return data, start, size
    finally:
        os.close(fd)


def _note_gap(dropped_bytes: int) -> None:
    sys.stderr.write(f"-- herd: {dropped_bytes} bytes dropped here (log_max_bytes) --\n")


def print_file(path: Path, inert_output: bool) -> None:
    """Copy a file to stdout in chunks, saying where the log cap cut output out."""
    offset = 0
    try:
        while True:
            chunk, start, _ = _read_at(path, offset, 1 << 16)
            if start > offset:
                _note_gap(start - offset)
            if not chunk:
                return
            _write(chunk, inert_output)
            offset = start + len(chunk)
    except FileNotFoundError:
        sys.stderr.write(f"herd: {path} does not exist (yet)\n")
    except OSError as exc:
        sys.stderr.write(f"herd: not reading {path}: {exc}\n")


def follow_log(current: Callable[[], tuple[Path, bool]], inert_output: bool) -> None:
    """Print the current file and keep following; switch when `current()` names a newer one."""
    path, _ = current()
    offset = 0
    last_check = time.monotonic()
    while True:
        try:
            data, start, _ = _read_at(path, offset, 1 << 20)
            if start > offset:
                _note_gap(start - offset)
            offset = start
        except FileNotFoundError:
            data = b""
        except OSError as exc:
            sys.stderr.write(f"herd: not reading {path}: {exc}\n")
            return
        if data:
            offset += len(data)
            _write(data, inert_output)
            continue
        if time.monotonic() - last_check >= RUN_CHECK_S:
            last_check = time.monotonic()
            newest, _ = current()
            if newest != path:
                sys.stderr.write(f"-- herd: now following {newest} --\n")
                path, offset = newest, 0
                continue
        time.sleep(FOLLOW_POLL_S)
