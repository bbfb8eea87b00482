"""The dashboard's producers: one session's output file (the fleet's feed is fleetfeed.py).

They run as workers and only post messages; batching and pacing happen here, so the app
handles at most a few messages per frame whatever the agents print.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from textual.message import Message

from agentherd.sessions.adapters.summary import summarize
from agentherd.sessions.sanitize import inert_line
from agentherd.sessions.status import parse_reply
from agentherd.supervisor.client import AsyncClient
from agentherd.supervisor.tailer import LogTailer
from agentherd.tui.messages import LogLines

Post = Callable[[Message], bool]

LOG_POLL_S = 0.1
"""The output view reads the file at most ten times a second: smooth, and cheap when idle."""

LOG_INFO_EVERY_S = 1.0
"""How often the output view asks the daemon whether a newer run has started."""

LOG_READ_MAX_BYTES = 256 << 10
"""One read's worth; a flood is shown in slices rather than in one frame-stalling batch."""

LOG_BACKLOG_BYTES = 64 << 10
"""Opening the view shows the end of the run's output, not a multi-megabyte history."""

LOG_BATCH_MAX_LINES = 200
"""More new lines than this in one read is a flood: the view shows the newest and a count
(ten times what the pane shows, read ten times a second; a 50,000 lines/s flood summarised
500 at a time kept the dashboard's loop busy past 100 ms)."""

LOG_LINE_CHARS = 1000
"""A longer line is cut; the full text stays in the file for `herd logs`."""


def _is_cancelled_wakeup(context: dict[str, Any]) -> bool:
    """A socket became readable for a read that was cancelled a moment before (anyio's race).

    anyio's raw UNIX socket streams wait with `loop.add_reader(sock, future.set_result)` and
    remove the reader in a done-callback; data arriving between a cancel and that callback
    calls `set_result` on the cancelled future. Nothing is lost: the read was abandoned.
    """
    callback = getattr(context.get("handle"), "_callback", None)
    future = getattr(callback, "__self__", None)
    return (
        isinstance(context.get("exception"), asyncio.InvalidStateError)
        and getattr(callback, "__name__", "") == "set_result"
        and isinstance(future, asyncio.Future)
        and future.cancelled()
    )


def quiet_cancelled_wakeups(loop: asyncio.AbstractEventLoop) -> None:
    """Drop the harmless error of `_is_cancelled_wakeup`; hand every other one on unchanged."""
    previous = loop.get_exception_handler()
    if getattr(previous, "herd_quiet", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Drop the known harmless race; pass anything else to the handler before us."""
        if _is_cancelled_wakeup(context):
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.herd_quiet = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


def _file_size(path: Path) -> int:
    """The file's size, 0 when it does not exist yet."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _display(line: bytes) -> str:
    """One output line as the view shows it: summarised, inert, cut."""
    return summarize(line, LOG_LINE_CHARS)


def _raw(line: bytes) -> str:
    """One output line as the agent wrote it, every control made visible text, cut."""
    return inert_line(line, LOG_LINE_CHARS)


class OutputTail:
    """Splits one run's output file into lines as it grows (`feed` is pure: no I/O, no loop)."""

    def __init__(
        self, path: Path, run: int, skip_first_line: bool, offset: int = 0, raw: bool = False
    ) -> None:
        self.path = path
        self.run = run
        self.render = _raw if raw else _display
        self.tailer = LogTailer(path, offset, log_refusal=False)
        """Reads the file by offset (in a worker thread: it does file I/O)."""
        self._pending = b""
        self._skip_first_line = skip_first_line

    def drop_partial_line(self) -> None:
        """Forget the unfinished line held: the bytes it continued are gone."""
        self._pending = b""

    def feed(self, data: bytes) -> list[str]:
        """Complete lines from the new bytes; a partial last line waits for its end."""
        buffer = self._pending + data
        *lines, self._pending = buffer.split(b"\n")
        if len(self._pending) > LOG_READ_MAX_BYTES:
            lines.append(self._pending)
            self._pending = b""
        if self._skip_first_line and lines:
            lines = lines[1:]
            self._skip_first_line = False
        shown = [self.render(line) for line in lines[-LOG_BATCH_MAX_LINES:]]
        skipped = len(lines) - len(shown)
        if skipped:
            shown.insert(0, f"… {skipped:,} lines not shown (`herd logs` has every line)")
        return shown


async def _current_run(
    client: AsyncClient, session: str, run: int | None = None
) -> tuple[Path, int] | None:
    """The output file of the session's latest run (or of `run`), or None before its first run."""
    info = parse_reply("log_info", await client.call("log_info", name=session, run=run))
    if info.path is None or info.run is None:  # no runs yet
        return None
    return Path(info.path), info.run


def _read_chunk(tail: OutputTail) -> bytes:
    """New bytes of the run's output; a truncated file, or a range the log cap cut out, also
    drops the partial line held (a FIFO or device in the log's place reads as empty)."""
    tailer = tail.tailer
    truncations, skipped = tailer.truncations, tailer.skipped_bytes
    data = tailer.read_new(LOG_READ_MAX_BYTES)
    if tailer.truncations != truncations or tailer.skipped_bytes != skipped:
        tail.drop_partial_line()
    return data


async def follow_output(
    client: AsyncClient,
    session: str,
    post: Post,
    run: int | None = None,
    raw: bool = False,
    backlog_bytes: int = LOG_BACKLOG_BYTES,
) -> None:
    """Post new output lines of the session's latest run (or of `run`) in batches, switching
    runs as they come; `raw` shows the lines as written instead of summarised."""
    tail: OutputTail | None = None
    next_check = 0.0
    post(LogLines(session, [], f"{session}: waiting for output", reset=True))
    try:
        while True:
            if time.monotonic() >= next_check and (run is None or tail is None):
                next_check = time.monotonic() + LOG_INFO_EVERY_S
                current = await _current_run(client, session, run)
                if current is not None and (tail is None or current[0] != tail.path):
                    path = current[0]
                    first = tail is None
                    start = (
                        max(0, await anyio.to_thread.run_sync(_file_size, path) - backlog_bytes)
                        if first
                        else 0
                    )
                    if tail is not None:
                        tail.tailer.close()
                    number = current[1]
                    tail = OutputTail(
                        path, number, skip_first_line=start > 0, offset=start, raw=raw
                    )
                    header = [] if first else [f"── run {number} ──"]
                    post(LogLines(session, header, f"{session}: run {number}", reset=first))
            if tail is not None:
                data = await anyio.to_thread.run_sync(_read_chunk, tail)
                if data:
                    lines = tail.feed(data)
                    if lines:
                        post(LogLines(session, lines, f"{session}: run {tail.run}"))
            await anyio.sleep(LOG_POLL_S)
    finally:
        if tail is not None:
            tail.tailer.close()
