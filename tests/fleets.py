"""Fleets for the seam tests: each implementation behind the same `open_world`."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Herd

from agentherd.supervisor.api.fleetapi import Fleet, LocalFleet

IMPLEMENTATIONS = [
    "local",
    pytest.param("cluster", marks=[pytest.mark.cluster, pytest.mark.timeout(180)]),
]
"""Every Fleet the seam tests run against: the local daemon, and one cluster host."""


@dataclass
class FleetWorld:
    """A running fleet of `sessions` and what the test may need besides its `Fleet`."""

    fleet: Fleet
    root: Path


@contextlib.contextmanager
def open_world(
    kind: str, root: Path, sessions: str, pg_url: str | None = None
) -> Iterator[FleetWorld]:
    """A fleet of this kind serving `sessions` (TOML), brought down afterwards."""
    if kind == "local":
        herd = Herd(root).write(sessions)
        try:
            yield FleetWorld(LocalFleet(herd.start()), root)
        finally:
            herd.down()
            shutil.rmtree(root / ".herd", ignore_errors=True)
        return
    if kind == "cluster":
        from clusterhosts import HostProc, cluster_toml

        from agentherd.sessions.config import load_config
        from agentherd.supervisor.cluster.fleet import ClusterFleet

        assert pg_url is not None
        host = HostProc(root, "h1", cluster_toml(sessions), pg_url).start()
        fleet = ClusterFleet(load_config(host.root / "herd.toml"), pg_url)
        try:
            yield FleetWorld(fleet, root)
        finally:
            fleet.close()
            host.down()
        return
    raise ValueError(f"unknown fleet implementation {kind!r}")
