"""`herd up` for a fleet: sessions in different worktrees start side by side."""

from __future__ import annotations

from pathlib import Path

import anyio

from agentherd.sessions.status import UpStarted
from agentherd.supervisor import worktree
from agentherd.supervisor.session import SessionError, SessionSupervisor

STARTS_AT_ONCE = 4
"""Sessions starting at the same time: each start waits milliseconds for its wrapper to exec
the agent, so 200 one after another took seconds. Measured on 50 sessions (loaded 2 cores):
1 at once 13-16 s and the socket answered within 190 ms; 4: 8-9 s and 235 ms; 16: 8-10 s
but 580 ms (every start's forks and transactions queue ahead of a client's request)."""


async def start_all(
    named: list[tuple[str, SessionSupervisor]],
) -> tuple[list[dict[str, object]], list[str]]:
    """Start every session; return the started handles and the refusals, both in `named` order.

    Sessions sharing a worktree start one after another, so the check that refuses a second
    agent in a busy worktree sees the first one's start.
    """
    lanes: dict[Path, list[int]] = {}
    for index, (_, supervisor) in enumerate(named):
        lanes.setdefault(worktree.tree_of(supervisor.config.cwd), []).append(index)
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
                    started[index] = UpStarted(session=name, handle=handle).to_json()

    async with anyio.create_task_group() as tg:
        for indexes in lanes.values():
            tg.start_soon(start_lane, indexes)
    return [started[i] for i in sorted(started)], [refused[i] for i in sorted(refused)]
