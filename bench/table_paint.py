"""The session table's paint cost, in CPU time, without a daemon or agents.

    python bench/table_paint.py [--sessions 200] [--rounds 100] [--changed 50]

The real dashboard (headless, 160x50) shows a synthetic fleet; each round posts a fleet update
in which `--changed` sessions have a new last output (a few change state), waits for the
screen, then presses j or k and waits for the cursor on screen. CPU time, not wall time: on a
shared machine wall time measures the neighbours, while the work a key or an update costs is
what a loaded machine multiplies. Run it with two checkouts' interpreters to compare them side
by side (bench/dashboard_load.py measures the same against a real daemon and 200 agents).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from textual import events

from agentherd.sessions.status import SessionStatus
from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.messages import Snapshot
from agentherd.tui.dashboard.widgets import SessionTable

NOW = datetime.now(UTC)
SETTLE_S = 0.15
"""After an update's first frame, the time its later frames take (a few rows a frame)."""
NEXT_STATE = {"running": "backoff", "backoff": "starting", "starting": "running"}


def status(index: int, step: int, state: str, restarts: int, pid: int) -> SessionStatus:
    """Session `index` at output line `step`."""
    return SessionStatus.model_validate(
        {
            "session": f"s{index:03d}",
            "state": state,
            "pid": pid if state == "running" else None,
            "restarts": restarts,
            "last_line": f"step {step} of the task",
            "started_at": (NOW - timedelta(seconds=index % 50)).isoformat(),
        }
    )


class FleetClient:
    """Streams one snapshot of `sessions` running sessions; the bench posts the rest."""

    read_only = False

    def __init__(self, sessions: int) -> None:
        self.sessions = sessions

    async def call(self, op: str, **args: Any) -> Any:
        """No commands in this bench."""
        raise RuntimeError(op)

    async def stream(self, op: str, **args: Any) -> Any:
        """The first snapshot, then nothing (the bench posts updates itself)."""
        found = [status(i, 0, "running", 0, 1000 + i).to_json() for i in range(self.sessions)]
        yield {"sessions": found, "at": NOW.isoformat()}
        await asyncio.sleep(3600)


def percentile(values: list[float], fraction: float) -> float:
    """The `fraction` percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def measure(sessions: int, rounds: int, changed_per_round: int) -> dict[str, float]:
    """CPU ms per fleet update (all its frames, SETTLE_S after the first), per key (to the
    cursor on screen), and per round (both)."""
    rng = random.Random(7)
    app = HerdApp(client=FleetClient(sessions))
    async with app.run_test(size=(160, 50)) as pilot:
        table = app.query_one(SessionTable)
        while table.row_count < sessions:
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        shown = asyncio.Event()
        original = app._display

        def display(screen: Any, renderable: Any) -> None:
            original(screen, renderable)
            if renderable is not None:
                shown.set()

        app._display = display  # type: ignore[method-assign]
        fleet = {i: [0, "running", 0, 1000 + i] for i in range(sessions)}
        update_ms: list[float] = []
        key_ms: list[float] = []
        down = True
        start = time.process_time()
        for _ in range(rounds):
            names = set()
            for index in rng.sample(range(sessions), changed_per_round):
                row = fleet[index]
                row[0] += 1
                if rng.random() < 0.05:
                    row[1] = NEXT_STATE[str(row[1])]
                    if row[1] == "running":
                        row[2], row[3] = int(row[2]) + 1, int(row[3]) + 1000
                names.add(f"s{index:03d}")
            statuses = [status(i, *fleet[i]) for i in range(sessions)]  # type: ignore[arg-type]
            cpu = time.process_time()
            shown.clear()
            app.post_message(Snapshot(statuses, names))
            try:
                await asyncio.wait_for(shown.wait(), 2)
            except TimeoutError:
                pass
            await asyncio.sleep(SETTLE_S)  # every frame of the update drawn before the key
            update_ms.append((time.process_time() - cpu) * 1000)
            row_before = table.cursor_row
            if row_before in (0, 40):
                down = row_before == 0
            key = "j" if down else "k"
            cpu = time.process_time()
            app.post_message(events.Key(key, key))
            while table.cursor_row == row_before:
                shown.clear()
                await asyncio.wait_for(shown.wait(), 2)
            key_ms.append((time.process_time() - cpu) * 1000)
            await asyncio.sleep(0.02)
        total = (time.process_time() - start) * 1000 / rounds
    return {
        "update_p50": statistics.median(update_ms),
        "update_p95": percentile(update_ms, 0.95),
        "key_p50": statistics.median(key_ms),
        "key_p95": percentile(key_ms, 0.95),
        "round": total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--changed", type=int, default=50)
    args = parser.parse_args()
    found = asyncio.run(measure(args.sessions, args.rounds, args.changed))
    print(
        f"{args.sessions} sessions, {args.changed} changed per update, {args.rounds} rounds: "
        f"CPU per fleet update p50 {found['update_p50']:.1f} ms, "
        f"p95 {found['update_p95']:.1f} ms; per key p50 {found['key_p50']:.1f} ms, "
        f"p95 {found['key_p95']:.1f} ms; per round {found['round']:.1f} ms"
    )


if __name__ == "__main__":
    main()
