"""Print a log file, and follow it (across runs) like `tail -f`, inert on a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from agentherd.sessions.sanitize import inert
from agentherd.supervisor.tailer import LogTailer

FOLLOW_POLL_S = 0.2
"""How often `-f` looks for new bytes; a person does not notice 200 ms."""
RUN_CHECK_S = 1.0
"""How often `-f` asks the daemon whether a newer run has started."""
PRINT_CHUNK_BYTES = 64 << 10
"""`herd logs` copies a log in chunks this size: memory stays flat for any log."""
FOLLOW_CHUNK_BYTES = 1 << 20
"""`-f` reads up to this much per wake-up, so a burst prints at once."""


def _write(data: bytes, inert_output: bool) -> None:
    if inert_output:
        sys.stdout.write(inert(data.decode("utf-8", errors="replace")))
        sys.stdout.flush()
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _note_gap(dropped_bytes: int) -> None:
    sys.stderr.write(f"-- herd: {dropped_bytes} bytes dropped here (log_max_bytes) --\n")


def _read(tailer: LogTailer, max_bytes: int) -> bytes:
    """The tailer's next bytes, after a note on stderr where the log cap cut output out."""
    skipped = tailer.skipped_bytes
    data = tailer.read_new(max_bytes)
    if tailer.skipped_bytes > skipped:
        _note_gap(tailer.skipped_bytes - skipped)
    return data


def print_file(path: Path, inert_output: bool) -> None:
    """Copy a file to stdout in chunks, saying where the log cap cut output out."""
    tailer = LogTailer(path, log_refusal=False)
    try:
        while chunk := _read(tailer, PRINT_CHUNK_BYTES):
            _write(chunk, inert_output)
        if tailer.refused is not None:
            sys.stderr.write(f"herd: not reading {path}: {tailer.refused}\n")
        elif not tailer.opened:
            sys.stderr.write(f"herd: {path} does not exist (yet)\n")
    finally:
        tailer.close()


def follow_log(current: Callable[[], tuple[Path, bool]], inert_output: bool) -> None:
    """Print the current file and keep following; switch when `current()` names a newer one."""
    path, _ = current()
    tailer = LogTailer(path, log_refusal=False)
    last_check = time.monotonic()
    try:
        while True:
            data = _read(tailer, FOLLOW_CHUNK_BYTES)
            if tailer.refused is not None:
                sys.stderr.write(f"herd: not reading {path}: {tailer.refused}\n")
                return
            if data:
                _write(data, inert_output)
                continue
            if time.monotonic() - last_check >= RUN_CHECK_S:
                last_check = time.monotonic()
                newest, _ = current()
                if newest != path:
                    sys.stderr.write(f"-- herd: now following {newest} --\n")
                    tailer.close()
                    path, tailer = newest, LogTailer(newest, log_refusal=False)
                    continue
            time.sleep(FOLLOW_POLL_S)
    finally:
        tailer.close()
