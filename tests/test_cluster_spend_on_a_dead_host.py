"""A host dies with its sessions' spend (issue 28): the fleet budget still holds.

Its own module, apart from the chaos run it once sat beside: pytest-xdist hands each worker a
run of tests in file order, and the two longest cluster tests in one run made `.ci/run`'s
cluster pass wait for both in a row (144 s of its 165).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clusterhosts import HostProc, cluster_toml, fleet_of
from conftest import sim_repo, wait_until
from pgcluster import require_cluster_extra
from test_cluster_budget import sim_session

require_cluster_extra()

pytestmark = [pytest.mark.cluster, pytest.mark.pidns]
HOSTS = ("h1", "h2", "h3")

BUDGET_USD = 3.0
BUDGET_SESSIONS = 6


@pytest.mark.timeout(420)
def test_the_fleet_budget_holds_when_a_host_dies_mid_way(
    tmp_path: Path, hosts: list[HostProc], pg_url: str
) -> None:
    """A host dies with its sessions' spend: that spend still counts, its sessions move, and
    the fleet stops within 1.3x its budget with every session `stopped (budget:cost_usd)`."""
    names = [f"b{i}" for i in range(BUDGET_SESSIONS)]
    toml = (
        cluster_toml("".join(sim_session(n) for n in names), lease="3s", grace="5s")
        + f"\n[fleet]\nbudget = {{ cost_usd = {BUDGET_USD} }}\n"
    )
    for host_name in HOSTS:
        host = HostProc(tmp_path, host_name, toml, pg_url)
        for name in names:
            sim_repo(host.root / name, features=400)
        hosts.append(host)
    for host in hosts:
        host.start()
    fleet = fleet_of(hosts[0], pg_url)
    try:
        handles = {name: fleet.start(name).handle for name in names}
        victim = hosts[2]
        wait_until(lambda: spent(victim, names) >= BUDGET_USD / 10, 60, f"{victim.name} to spend")
        on_victim = [n for n, h in handles.items() if fleet.task_host(h) == victim.name]
        victim.kill()  # its sessions move; what they spent there stays spent
        ended = {name: fleet.wait(handle, timeout_s=180) for name, handle in handles.items()}
        moved = {n: fleet.task_host(handles[n]) for n in on_victim}
        victim.start()  # back, to read what its runs spent before it died
    finally:
        fleet.close()
    assert {n: (w.state, w.reason) for n, w in ended.items()} == dict.fromkeys(
        names, ("stopped", "budget:cost_usd")
    )
    total = sum(spent(host, names) for host in hosts)
    print(
        f"fleet spent ${total:.2f} of ${BUDGET_USD:g} ({total / BUDGET_USD:.2f}x), "
        f"${spent(victim, names):.2f} of it on {victim.name}, whose sessions went to {moved}"
    )
    assert BUDGET_USD <= total <= 1.3 * BUDGET_USD, f"fleet spent ${total:.2f}"


def spent(host: HostProc, names: list[str]) -> float:
    """What the sessions' runs on this host spent, as its daemon counts it."""
    total = 0.0
    for name in names:
        status = host.client.call("status", target=name)
        total += float((status.get("usage_total") or {}).get("cost_usd") or 0.0)
    return total
