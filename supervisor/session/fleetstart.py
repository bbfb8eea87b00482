"""`herd up` for a fleet: sessions in different worktrees start side by side."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import anyio

from agentherd.sessions import chain
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.records import SessionRecord
from agentherd.sessions.states import State
from agentherd.sessions.status import UpStarted
from agentherd.supervisor.git import worktree
from agentherd.supervisor.session.errors import SessionError


class Startable(Protocol):
    """A session as a fleet start sees it: where it works, and how it starts."""

    @property
    def config(self) -> SessionConfig: ...

    @property
    def record(self) -> SessionRecord:
        """Where the session stands (after its start: started, or queued)."""
        ...

    async def start(self, now: bool = False) -> str:
        """Begin a task (or return the running one's handle); SessionError when refused."""
        ...


STARTS_AT_ONCE = 16
"""Sessions starting at the same time: each start waits milliseconds for its wrapper to exec
the agent and hops to worker threads, so starts one after another take seconds on a loaded
machine. Measured on 200 quiet sessions (load average 10-12 on 2 cores), once a start no
longer did work for every other session: 4 at once 18 s and the socket's worst answer 714 ms,
16: 15 s and 428 ms, 48: 11 s but 900 ms (starts queue ahead of a client's request)."""


async def start_all(
    named: list[tuple[str, Startable]],
) -> tuple[list[dict[str, object]], list[str]]:
    """Start every session; return the started handles and the refusals, both in `named` order.

    Sessions sharing a worktree start one after another, so the check that refuses a second
    agent in a busy worktree sees the first one's start.
    """
    lanes: dict[Path, list[int]] = {}
    cwds = [supervisor.config.cwd for _, supervisor in named]
    # A fleet's worth of realpath walks held the loop 0.3 s on a loaded machine.
    trees = await anyio.to_thread.run_sync(lambda: [worktree.tree_of(cwd) for cwd in cwds])
    for index, tree in enumerate(trees):
        lanes.setdefault(tree, []).append(index)
    started: dict[int, dict[str, object]] = {}
    refused: dict[int, str] = {}
    limiter = anyio.CapacityLimiter(STARTS_AT_ONCE)

    async def start_lane(indexes: list[int]) -> None:
        async with limiter:
            for index in indexes:
                name, supervisor = named[index]
                try:
                    handle = await supervisor.start()
                except SessionError as exc:  # the others still start; the refusal is reported
                    refused[index] = str(exc)
                else:
                    started[index] = _up_started(name, handle, supervisor.record)

    async with anyio.create_task_group() as tg:
        for indexes in lanes.values():
            tg.start_soon(start_lane, indexes)
    return [started[i] for i in sorted(started)], [refused[i] for i in sorted(refused)]


def _up_started(name: str, handle: str, record: SessionRecord) -> dict[str, object]:
    """One entry of `up`'s reply: a chained link also says it is queued, or why it never ran."""
    chained = record.state == State.QUEUED or chain.is_after_failed(record.reason)
    if not chained:
        return UpStarted(session=name, handle=handle).to_json()
    queued = UpStarted(session=name, handle=handle, state=record.state, reason=record.reason)
    return queued.to_json()


class InFlight:
    """The fleet starts (`herd up`) under way, so work that can wait lets them go first."""

    def __init__(self) -> None:
        self.count = 0
        self._idle = anyio.Event()
        self._idle.set()

    @contextlib.contextmanager
    def one(self) -> Iterator[None]:
        """Count one fleet start for as long as the block runs."""
        self.count += 1
        if self._idle.is_set():
            self._idle = anyio.Event()
        try:
            yield
        finally:
            self.count -= 1
            if self.count == 0:
                self._idle.set()

    async def idle(self) -> None:
        """Return once no fleet start is under way."""
        while self.count:
            await self._idle.wait()
