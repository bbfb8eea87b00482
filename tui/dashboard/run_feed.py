"""The session screen's producer for one run's output: which file, and where its lines start.

It only indexes; the view reads the lines it shows. It posts messages and never touches a
widget, so a flood of output costs the app one message per poll, whatever its size.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import anyio
from textual.message import Message

from agentherd.sessions.status import parse_reply
from agentherd.supervisor.api.client import AsyncClient
from agentherd.tui.dashboard.logfile import INDEX_STEP_BYTES, IndexStep, LineIndex

Post = Callable[[Message], bool]

RUN_POLL_S = 0.1
"""The file is looked at ten times a second: smooth to watch, cheap when nothing is written."""

RUN_INFO_EVERY_S = 1.0
"""How often the daemon is asked whether a newer run began (when following the newest)."""


class RunOpened(Message):
    """The view now shows run `run` of `session`, from `path` (None: no run yet)."""

    def __init__(self, session: str, run: int | None, path: Path | None, newest: int) -> None:
        super().__init__()
        self.session = session
        self.run = run
        self.path = path
        self.newest = newest


class RunGrew(Message):
    """More of the shown run's file is indexed: its new checkpoints and line count."""

    def __init__(self, session: str, path: Path, step: IndexStep) -> None:
        super().__init__()
        self.session = session
        self.path = path
        self.step = step
        """What the indexer found (`step.restart`: the file was truncated, start over)."""


async def follow_run(client: AsyncClient, session: str, post: Post, run: int | None) -> None:
    """Index the session's newest run (or run `run`) as it grows, switching to newer runs."""
    index: LineIndex | None = None
    next_check = 0.0
    while True:
        if time.monotonic() >= next_check and (run is None or index is None):
            next_check = time.monotonic() + RUN_INFO_EVERY_S
            info = parse_reply("log_info", await client.call("log_info", name=session, run=run))
            path = Path(info.path) if info.path else None
            if index is None or (path is not None and path != index.path):
                newest = info.current_run or info.run or 0
                post(RunOpened(session, info.run, path, newest))
                index = LineIndex(path) if path is not None else None
        if index is not None:
            before = index.indexed_bytes
            step = await anyio.to_thread.run_sync(index.step)
            if step.restart or index.indexed_bytes != before:
                post(RunGrew(session, index.path, step))
                if index.indexed_bytes - before >= INDEX_STEP_BYTES:
                    continue  # a big file: index the rest before sleeping
        await anyio.sleep(RUN_POLL_S)
