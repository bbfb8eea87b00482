"""Print a log file, and follow it (across runs) like `tail -f`, readable on a terminal.

On a terminal each line is shown as the dashboard shows it (stream-json summarised, escapes
inert) and the output ends with a newline; piped, or with `--raw`, the bytes go out unchanged.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from agentherd.sessions.sanitize import inert
from agentherd.supervisor.files.tailer import LogTailer

FOLLOW_POLL_S = 0.2
"""How often `-f` looks for new bytes; a person does not notice 200 ms."""
RUN_CHECK_S = 1.0
"""How often `-f` asks the daemon whether a newer run has started."""
PRINT_CHUNK_BYTES = 64 << 10
"""`herd logs` copies a log in chunks this size: memory stays flat for any log."""
FOLLOW_CHUNK_BYTES = 1 << 20
"""`-f` reads up to this much per wake-up, so a burst prints at once."""
LINE_CHARS = 4000
"""A readable line is cut here; `--raw` has every byte."""
TAIL_BLOCK_BYTES = 64 << 10
"""`-n` looks for line ends backwards from the end of the file in blocks this size."""


def _summarize() -> Callable[[bytes, int], str]:
    """The parsers' one-line summary, imported only for readable output: they load the price
    table's pydantic models, which raw output (piped, `--raw`) never needs."""
    from agentherd.sessions.adapters.summary import summarize

    return summarize


class Printer:
    """Writes output to stdout: raw bytes, or complete lines made readable (summarised, inert).

    It remembers whether the last byte written ended a line, so the output can end cleanly.
    """

    def __init__(self, readable: bool) -> None:
        self.readable = readable
        self._pending = b""
        self.at_line_start = True

    def write(self, data: bytes) -> None:
        """Write new bytes; readable output waits for a line's end before showing it."""
        if not data:
            return
        if not self.readable:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            self.at_line_start = data.endswith(b"\n")
            return
        *lines, self._pending = (self._pending + data).split(b"\n")
        if lines:
            summarize = _summarize()
            sys.stdout.write("".join(summarize(line, LINE_CHARS) + "\n" for line in lines))
            sys.stdout.flush()
            self.at_line_start = True

    def finish(self, terminal: bool) -> None:
        """Show a last unfinished line, and on a terminal end with a newline (no glued prompt)."""
        if self.readable and self._pending:
            sys.stdout.write(_summarize()(self._pending, LINE_CHARS))
            self._pending = b""
            self.at_line_start = False
        if terminal and not self.at_line_start:
            sys.stdout.write("\n")
            self.at_line_start = True
        sys.stdout.flush()


def tail_offset(path: Path, lines: int | None) -> int:
    """Where the last `lines` lines of the file begin (0 for the whole file, or None)."""
    if lines is None:
        return 0
    try:
        if lines <= 0:
            return path.stat().st_size
        with path.open("rb") as handle:
            end = handle.seek(0, 2)
            position, found = end, 0
            # A final newline ends the last line; it does not start an empty one.
            handle.seek(max(0, end - 1))
            if end and handle.read(1) == b"\n":
                position -= 1
            scan_end = position
            while scan_end > 0:
                start = max(0, scan_end - TAIL_BLOCK_BYTES)
                handle.seek(start)
                block = handle.read(scan_end - start)
                index = len(block)
                while (index := block.rfind(b"\n", 0, index)) >= 0:
                    found += 1
                    if found == lines:
                        return start + index + 1
                scan_end = start
            return 0
    except OSError:
        return 0


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
        if inert_output:
            sys.stdout.write("\n" if tailer.offset and not _ends_line(path) else "")
        if tailer.refused is not None:
            sys.stderr.write(f"herd: not reading {path}: {tailer.refused}\n")
        elif not tailer.opened:
            sys.stderr.write(f"herd: {path} does not exist (yet)\n")
    finally:
        tailer.close()


def _ends_line(path: Path) -> bool:
    """True when the file is empty or its last byte is a newline."""
    try:
        with path.open("rb") as handle:
            end = handle.seek(0, 2)
            if not end:
                return True
            handle.seek(end - 1)
            return handle.read(1) == b"\n"
    except OSError:
        return True


def print_run(path: Path, printer: Printer, lines: int | None, terminal: bool) -> None:
    """Print a run's output (its last `lines` lines), saying where the log cap cut output out."""
    tailer = LogTailer(path, tail_offset(path, lines), log_refusal=False)
    try:
        while chunk := _read(tailer, PRINT_CHUNK_BYTES):
            printer.write(chunk)
        printer.finish(terminal)
        if tailer.refused is not None:
            sys.stderr.write(f"herd: not reading {path}: {tailer.refused}\n")
        elif not tailer.opened:
            sys.stderr.write(f"herd: {path} does not exist (yet)\n")
    finally:
        tailer.close()


def follow_run(
    current: Callable[[], tuple[Path, bool]], printer: Printer, lines: int | None
) -> None:
    """Print the current run's output from its last `lines` lines and keep following."""
    path, _ = current()
    # A run's log is replaced only by its compact copy once the run ended: already printed.
    tailer = LogTailer(path, tail_offset(path, lines), log_refusal=False, reopen_replaced=False)
    last_check = time.monotonic()
    try:
        while True:
            data = _read(tailer, FOLLOW_CHUNK_BYTES)
            if tailer.refused is not None:
                sys.stderr.write(f"herd: not reading {path}: {tailer.refused}\n")
                return
            if data:
                printer.write(data)
                continue
            if time.monotonic() - last_check >= RUN_CHECK_S:
                last_check = time.monotonic()
                newest, _ = current()
                if newest != path:
                    printer.finish(terminal=True)
                    sys.stderr.write(f"-- herd: now following {newest} --\n")
                    tailer.close()
                    tailer = LogTailer(newest, log_refusal=False, reopen_replaced=False)
                    path = newest
                    continue
            time.sleep(FOLLOW_POLL_S)
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
