"""Long variants (marker `slow`, run with `pytest -m slow`): a big fleet under the real daemon."""

from __future__ import annotations

import json

import psutil
import pytest
from conftest import SIMAGENT, Herd, sim_repo, wait_until


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_fleet_of_thirty_agents_finishes_its_plans_and_leaves_nothing(herd: Herd) -> None:
    blocks = []
    for index in range(30):
        repo = sim_repo(herd.root / f"s{index}", features=5)
        options = ["--delay", "0.3", "--flood", "20"]
        if index % 3 == 0:
            options += ["--crash-at", "3", "--crash-once"]
        command = json.dumps([*SIMAGENT, *options])
        resume = json.dumps([*SIMAGENT, *options, "--resume", "{session_id}"])
        blocks.append(
            f'[[session]]\nname = "s{index}"\ncwd = "{repo}"\nagent = "claude"\n'
            f'command = {command}\nresume = {resume}\nplan = "feature_list.json"\n'
            f'progress = "claude-progress.txt"\nrestart_delay = 0\n'
            f'verify = ["python3", "-m", "compileall", "-q", "."]\n'
        )
    herd.write("\n".join(blocks))
    client = herd.start()
    client.call("up")
    wait_until(
        lambda: all(s["state"] == "completed" for s in client.call("ls")),
        timeout_s=300,
        what="every session to complete",
    )
    statuses = client.call("ls")
    plans = {s["session"]: (s["plan"], s["checkpoint"]) for s in statuses}
    assert all(p[0]["passing"] == p[0]["total"] == 5 for p in plans.values()), plans
    crashed = [s for s in statuses if s["run"] == 2]
    assert len(crashed) == 10, "every third agent crashed once and was resumed"
    children = [
        p
        for p in psutil.Process().children(recursive=True)
        if p.status() != psutil.STATUS_ZOMBIE and p.name() == "git"
    ]
    wait_until(
        lambda: not [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE],
        what="no git left",
    )
