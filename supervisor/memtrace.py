"""Memory snapshots of the daemon for a soak: set HERD_TRACEMALLOC=DIR and every
HERD_TRACEMALLOC_EVERY_S seconds (default 60) a tracemalloc snapshot goes to DIR/snap-N.pickle.

Off unless asked (tracing every allocation costs the daemon CPU); bench/memdiff.py compares
two snapshots by the line that allocated, to find what grows with time.
"""

from __future__ import annotations

import os

import anyio

ENV_DIR = "HERD_TRACEMALLOC"
ENV_EVERY_S = "HERD_TRACEMALLOC_EVERY_S"
DEFAULT_EVERY_S = 60.0
FRAMES = 4
"""Frames kept per allocation: enough to tell which caller of a shared helper grows."""


def wanted() -> str | None:
    """The folder snapshots go to, or None when tracing is off."""
    return os.environ.get(ENV_DIR) or None


async def run(folder: str) -> None:
    """Trace allocations from now on and write a snapshot every period, until cancelled."""
    import tracemalloc  # here: a daemon not asked to trace never imports it

    every_s = float(os.environ.get(ENV_EVERY_S) or DEFAULT_EVERY_S)
    os.makedirs(folder, exist_ok=True)
    tracemalloc.start(FRAMES)
    try:
        count = 0
        while True:
            await anyio.sleep(every_s)
            snapshot = tracemalloc.take_snapshot()
            path = os.path.join(folder, f"snap-{count}.pickle")
            await anyio.to_thread.run_sync(snapshot.dump, path)
            count += 1
    finally:
        tracemalloc.stop()
