"""Fleets for the seam tests: each implementation behind the same `open_world`."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from conftest import Herd

from agentherd.supervisor.fleetapi import Fleet, LocalFleet

IMPLEMENTATIONS = ["local"]
"""Every Fleet the seam tests run against."""


@dataclass
class FleetWorld:
    """A running fleet of `sessions` and what the test may need besides its `Fleet`."""

    fleet: Fleet
    root: Path


@contextlib.contextmanager
def open_world(kind: str, root: Path, sessions: str) -> Iterator[FleetWorld]:
    """A fleet of this kind serving `sessions` (TOML), brought down afterwards."""
    if kind == "local":
        herd = Herd(root).write(sessions)
        try:
            yield FleetWorld(LocalFleet(herd.start()), root)
        finally:
            herd.down()
            shutil.rmtree(root / ".herd", ignore_errors=True)
        return
    raise ValueError(f"unknown fleet implementation {kind!r}")
