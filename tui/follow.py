"""Print a log file, and follow it (across runs) like `tail -f`, inert on a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from agentherd.sessions.sanitize import inert

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


def print_file(path: Path, inert_output: bool) -> None:
    """Copy a file to stdout in chunks."""
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 16):
                _write(chunk, inert_output)
    except FileNotFoundError:
        sys.stderr.write(f"herd: {path} does not exist (yet)\n")


def follow_log(current: Callable[[], tuple[Path, bool]], inert_output: bool) -> None:
    """Print the current file and keep following; switch when `current()` names a newer one."""
    path, _ = current()
    offset = 0
    last_check = time.monotonic()
    while True:
        try:
            with open(path, "rb") as handle:
                handle.seek(0, 2)
                if handle.tell() < offset:
                    offset = 0
                handle.seek(offset)
                data = handle.read(1 << 20)
        except FileNotFoundError:
            data = b""
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
