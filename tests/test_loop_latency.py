"""Nothing slow on the event loop: a busy fleet in asyncio debug mode, no callback over 100 ms."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import SIMAGENT, Herd, sim_repo, wait_until

SLOW_CALLBACK_S = 0.1
"""The issue's threshold: one callback (one step of one task) holding the loop this long freezes
every session and every client for as long."""

POLL_S = 0.2
"""The test looks at the fleet this often: a client, not a load generator."""

SESSIONS = 24
CRASHERS = range(0, SESSIONS, 4)
"""These agents crash once at their second feature and are resumed: a crash and a restart."""


@dataclass
class SlowCallbacks(logging.Handler):
    """Collects asyncio debug mode's "Executing <handle> took N seconds" warnings by phase."""

    phase: str = "start-up"
    found: list[tuple[str, float, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == "Executing %s took %.3f seconds" and record.args:
            handle, took_s = record.args  # type: ignore[misc]
            self.found.append((self.phase, float(took_s), str(handle)[:300]))

    def __hash__(self) -> int:
        return id(self)

    def worst(self) -> str:
        ranked = sorted(self.found, key=lambda f: -f[1])
        return "\n".join(f"  {phase}: {took_s * 1000:.0f} ms in {h}" for phase, took_s, h in ranked)


@dataclass
class EventCounts:
    """Events of each kind so far, read incrementally as a well-behaved client would."""

    since: int = 0
    counts: Counter[str] = field(default_factory=Counter)

    def read(self, herd: Herd) -> Counter[str]:
        for event in herd.client.call("events", since=self.since):
            self.counts[event["kind"]] += 1
            self.since = event["seq"]
        return self.counts


def debug_loop() -> asyncio.AbstractEventLoop:
    """A new loop that reports every callback over the threshold (debug mode turns it on)."""
    loop = asyncio.new_event_loop()
    loop.slow_callback_duration = SLOW_CALLBACK_S
    return loop


def fleet_config(root: Path) -> str:
    """Sessions of simulated agents that print, commit, crash once (some) and get verified."""
    blocks = []
    for index in range(SESSIONS):
        repo = sim_repo(root / f"s{index}", features=12)
        options = ["--delay", "0.4", "--jitter", "0.5", "--flood", "20"]
        if index in CRASHERS:
            options += ["--crash-at", "2", "--crash-once"]
        blocks.append(
            f'[[session]]\nname = "s{index}"\ncwd = "{repo}"\nagent = "claude"\n'
            f"command = {json.dumps([*SIMAGENT, *options])}\n"
            f"resume = {json.dumps([*SIMAGENT, *options, '--resume', '{session_id}'])}\n"
            'plan = "feature_list.json"\nprogress = "claude-progress.txt"\n'
            'restart_delay = 0\nstop_grace = "2s"\nverify = ["true"]\n'
        )
    return "\n".join(blocks)


@pytest.mark.slow  # a 24-agent stress run: `pytest -m slow`, like tests/test_fleet_stress.py
@pytest.mark.pidns
@pytest.mark.timeout(240)
def test_no_callback_holds_the_loop_over_100ms_under_a_busy_fleet(herd: Herd) -> None:
    slow = SlowCallbacks()
    asyncio_log = logging.getLogger("asyncio")
    asyncio_log.addHandler(slow)
    try:
        herd.write(fleet_config(herd.root))
        herd.backend_options = {"debug": True, "loop_factory": debug_loop}
        client = herd.start()
        events = EventCounts()
        client.call("up")
        wait_until(
            lambda: all(s["run"] for s in client.call("ls")),
            timeout_s=60,
            what="every agent started",
            poll_s=POLL_S,
        )
        slow.phase = "steady state (output, commits, verifications, a crash and restart)"
        crashers = {f"s{i}" for i in CRASHERS}
        wait_until(
            lambda: all(
                (s["run"] or 0) >= 2 for s in client.call("ls") if s["session"] in crashers
            ),
            timeout_s=90,
            what="every crashing agent restarted",
            poll_s=POLL_S,
        )
        wait_until(
            lambda: events.read(herd)["verify-passed"] >= SESSIONS,
            timeout_s=90,
            what="verified checkpoints",
            poll_s=POLL_S,
        )
        slow.phase = "daemon restart (adopting the fleet)"
        herd.stop_daemon()
        client = herd.start()
        wait_until(
            lambda: events.read(herd)["daemon-started"] == 2,
            timeout_s=60,
            what="the new daemon to adopt the fleet",
            poll_s=POLL_S,
        )
        slow.phase = "herd down"
        began = time.monotonic()
        herd.down()
        print(f"herd down of {SESSIONS} agents took {time.monotonic() - began:.1f}s")
    finally:
        asyncio_log.removeHandler(slow)
    print(f"{len(slow.found)} slow callback(s)\n{slow.worst()}")
    assert not slow.found, f"callbacks held the event loop over 100 ms:\n{slow.worst()}"
