"""Budgets looked at on change and on time, not by a pass over every session: a wall-time
limit fires at its crossing, and a quiet session's spend samples keep their pace."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest
from conftest import FAST, Herd, script, wait_until

NO_POLL = replace(FAST, budget_check_s=3600.0, spend_sample_s=0.2)
"""A budget pass would come once an hour: what happens sooner comes from a change or a timer."""


def session(name: str, command: str, budget: str = "") -> str:
    line = f"budget = {{ {budget} }}\n" if budget else ""
    return (
        f'[[session]]\nname = "{name}"\ncommand = {command}\nrestart = "never"\n'
        f'stop_grace = "3s"\n{line}\n'
    )


@pytest.fixture
def herd(tmp_path: Path) -> Herd:
    herd = Herd(tmp_path, NO_POLL)
    yield herd  # type: ignore[misc]
    herd.down()


def test_a_wall_time_limit_warns_and_stops_at_its_time_without_a_pass(herd: Herd) -> None:
    silent = script("import time; time.sleep(120)")
    herd.write(session("quiet", silent, 'wall_time = "2s", warn_at = 0.5'))
    herd.start()
    herd.client.call("start", name="quiet")
    status = herd.wait_state("quiet", "stopped", timeout_s=15)
    assert status["reason"] == "budget:wall_time"
    assert status["budget"]["wall_time"]["fraction"] >= 1.0
    kinds = [e["kind"] for e in herd.events("quiet") if e["kind"].startswith("budget-")]
    assert kinds == ["budget-warning", "budget-stop"]
    warning = herd.events("quiet", "budget-warning")[0]["data"]
    assert warning["dimension"] == "wall_time" and warning["fraction"] >= 0.5


def test_a_quiet_session_has_a_spend_sample_every_period(herd: Herd) -> None:
    silent = script("import time; time.sleep(120)")
    herd.write(session("quiet", silent))
    herd.start()
    herd.client.call("start", name="quiet")
    herd.wait_state("quiet", "running")
    samples = wait_until(
        lambda: len(got := herd.client.call("spend", name="quiet")["samples"]) >= 6 and got,
        timeout_s=20,
        what="six spend samples of a quiet session",
    )
    times = [point[0] for point in samples]
    assert all(later - earlier >= 0.1 for earlier, later in pairwise(times))  # 0.2 apart
    assert {point[1] for point in samples} == {0}  # nothing spent, every time


def test_a_step_after_a_quiet_stretch_shows_in_the_samples(herd: Herd, tmp_path: Path) -> None:
    go = tmp_path / "go"
    agent = script(f"""
        import json, os, time
        print(json.dumps({{"usage": {{"input_tokens": 100}}, "turns": 1}}), flush=True)
        while not os.path.exists({str(go)!r}):
            time.sleep(0.05)
        print(json.dumps({{"usage": {{"input_tokens": 300}}, "turns": 2}}), flush=True)
        time.sleep(120)
    """)
    herd.write(session("api", agent))
    herd.start()
    herd.client.call("start", name="api")
    wait_until(
        lambda: (herd.status("api")["usage"] or {}).get("total_tokens") == 100,
        timeout_s=15,
        what="the first step read",
    )
    wait_until(
        lambda: [p[1] for p in herd.client.call("spend", name="api")["samples"]].count(100) >= 4,
        timeout_s=20,
        what="a quiet stretch of samples",
    )
    go.touch()
    samples = wait_until(
        lambda: (got := herd.client.call("spend", name="api")["samples"])[-1][1] == 300 and got,
        timeout_s=20,
        what="a sample of the second step",
    )
    tokens = [point[1] for point in samples]
    assert tokens == sorted(tokens)
    assert tokens.count(100) >= 4 and tokens[-1] == 300
