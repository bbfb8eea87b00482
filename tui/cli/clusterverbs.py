"""The command line's cluster side, kept apart so the single-machine CLI imports no engine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentherd.sessions.clusterconfig import HOST_NAME
from agentherd.sessions.config import HerdConfig

if TYPE_CHECKING:
    from agentherd.supervisor.api.fleetapi import Fleet


class ClusterUsageError(Exception):
    """A person's mistake about the cluster: one line, exit 2."""


def run_cluster_host(config: HerdConfig, host: str) -> None:
    """`herd daemon --host NAME`: this host's daemon in the cluster herd.toml names."""
    if config.cluster is None:
        raise ClusterUsageError(
            f"{config.path.name}: --host needs a [cluster] table (see docs/cluster.md)"
        )
    if not HOST_NAME.match(host):
        raise ClusterUsageError(f"--host: {host!r} is not a host name (letters, digits, . - _)")
    from agentherd.supervisor.cluster.host import run_host
    from agentherd.supervisor.cluster.leases import HostNameTaken

    try:
        run_host(config, host)
    except HostNameTaken as exc:
        raise ClusterUsageError(str(exc)) from None


def cluster_fleet(config: HerdConfig) -> Fleet:
    """The fleet across hosts (checked config: its URL is set, the extra installed)."""
    from agentherd.supervisor.cluster.fleet import ClusterFleet

    url = config.cluster.database_url() if config.cluster else None
    assert url is not None
    return ClusterFleet(config, url)


def cluster_up(config: HerdConfig, names: list[str]) -> list[str]:
    """`herd up` with [cluster]: each autostart (or named) session that has no task yet, or
    whose task still runs, is placed through the engine; the handles. No local daemon."""
    from agentherd.supervisor.cluster.fleet import ClusterFleet

    fleet = cluster_fleet(config)
    assert isinstance(fleet, ClusterFleet)
    try:
        wanted = names or [s.name for s in config.sessions if s.autostart]
        return [fleet.start(name).handle for name in wanted if fleet.may_autostart(name)]
    finally:
        fleet.close()


def cluster_dashboard_client(config: HerdConfig) -> object:
    """The dashboard's client across hosts (supervisor/cluster/dashclient.py)."""
    from agentherd.supervisor.cluster.dashclient import AsyncClusterClient
    from agentherd.supervisor.cluster.fleet import ClusterFleet

    fleet = cluster_fleet(config)
    assert isinstance(fleet, ClusterFleet)
    return AsyncClusterClient(fleet)
