"""`[fleet] budget` across hosts: every host sums every host's spend (a dead host's kept), so
the fleet stops near its limit, not at the limit times the number of hosts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clusterhosts import HostProc, cluster_toml, fleet_of
from conftest import SIMAGENT, sim_repo
from pgcluster import require_cluster_extra

from agentherd.sessions.adapters.usage import Usage
from agentherd.sessions.budget import Spend
from agentherd.sessions.spending import FleetMember

require_cluster_extra()

pytestmark = [pytest.mark.cluster, pytest.mark.pidns, pytest.mark.timeout(300)]
LIMIT_USD = 1.5
SESSIONS = {"a1": "h1", "a2": "h1", "b1": "h2", "b2": "h2"}


def sim_session(name: str, host: str | None = None) -> str:
    """A simulated Claude spending $0.02 a second, pinned to `host` when one is named."""
    options = ["--delay", "1.0", "--cost-per-feature", "0.02"]
    pin = f'host = "{host}"' if host else ""
    return f"""
        [[session]]
        name = "{name}"
        {pin}
        cwd = "{name}"
        agent = "claude"
        command = {json.dumps([*SIMAGENT, *options])}
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        restart = "never"
        stop_grace = "2s"
        autostart = false
    """


def spent_usd(host: HostProc, name: str) -> float:
    status = host.client.call("status", target=name)
    return float((status.get("usage_total") or {}).get("cost_usd") or 0.0)


def test_the_fleet_budget_stops_every_host_near_the_fleet_wide_limit(
    tmp_path: Path, hosts: list[HostProc], pg_url: str
) -> None:
    toml = (
        cluster_toml("".join(sim_session(n, h) for n, h in SESSIONS.items()))
        + f"\n[fleet]\nbudget = {{ cost_usd = {LIMIT_USD} }}\n"
    )
    for name in ("h1", "h2"):
        host = HostProc(tmp_path, name, toml, pg_url)
        for session, where in SESSIONS.items():
            if where == name:
                sim_repo(host.root / session, features=400)
            else:  # named in the same herd.toml: its folder exists on every host
                (host.root / session).mkdir()
        hosts.append(host)
    for host in hosts:
        host.start()
    fleet = fleet_of(hosts[0], pg_url)
    on = {h.name: h for h in hosts}
    try:
        handles = [fleet.start(name).handle for name in SESSIONS]
        for handle in handles:
            waited = fleet.wait(handle, timeout_s=120)
            assert (waited.state, waited.reason) == ("stopped", "budget:cost_usd"), waited
    finally:
        fleet.close()
    spent = {name: spent_usd(on[host], name) for name, host in SESSIONS.items()}
    total = sum(spent.values())
    assert LIMIT_USD <= total <= 1.3 * LIMIT_USD, f"fleet spent ${total:.2f}: {spent}"
    for host in hosts:
        fleet_stops = [
            e
            for e in host.client.call("events")
            if e["session"] is None and e["kind"] == "budget-stop"
        ]
        assert len(fleet_stops) == 1, fleet_stops


def test_a_dead_hosts_spend_still_counts(pg_url: str) -> None:
    """Rows are kept when their host dies: its lives count, and its tasks while they go on
    elsewhere (the task moved, what it spent before stays spent)."""
    from agentherd.supervisor.cluster import fleetspend, leases

    def member(usd: float, active: bool) -> FleetMember:
        return FleetMember(Spend(Usage(cost_usd=usd)), Spend(Usage(cost_usd=2 * usd)), active)

    with leases.connect(pg_url) as conn:
        leases.ensure_schema(conn)
        fleetspend.ensure_schema(conn)
        # "gone" never renews (no lease row at all): it is dead.
        fleetspend.write(conn, "gone", {"moved": member(1.0, True), "ended": member(3.0, True)})
        found = fleetspend.others(conn, "here", active_here={"moved"})
    by_life = {m.life.usage.cost_usd: m for m in found}
    assert set(by_life) == {2.0, 6.0}
    assert by_life[2.0].active and not by_life[6.0].active
