"""Each of the seven drift kinds opens once, repeats, is acknowledged and closes, end to end.

One driver walks every kind through the same steps under the real daemon with the simulated
agent: the kind's own event opens one warning; the cause seen again counts on that warning
(no second opening); `herd ack NAME KIND` takes it off the badge while history and the report
keep it; removing the cause writes `warning-closed`. The simulated agent waits on files the
test creates (`--wait-at N:PATH`), so each step happens when the test says, not by timing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import PY, SIMAGENT, Herd, sim_repo, wait_until

from agentherd.sessions.times import parse_iso

PASS_FILE = "pass"
"""Verification passes once the test creates this file in the gates folder."""


def verify_argv(gates: Path) -> str:
    """A TOML verify argv: fails the same way (one failing test) until `gates/pass` exists."""
    code = (
        "import os, sys\n"
        f"if os.path.exists({str(gates / PASS_FILE)!r}): sys.exit(0)\n"
        "print('FAILED tests/test_app.py::test_it - assert 0'); sys.exit(1)"
    )
    return json.dumps([PY, "-c", code])


@dataclass
class Ctx:
    """What a case's steps act on."""

    herd: Herd
    repo: Path
    gates: Path

    def release(self, *names: str) -> None:
        """Create gate files: the simulated agent waiting on one goes on."""
        for name in names:
            (self.gates / name).write_text("")


Step = Callable[[Ctx], None]


def nothing(ctx: Ctx) -> None:
    """A step with nothing to do."""


@dataclass
class Case:
    """One drift kind's scenario: how it opens, repeats and closes."""

    kind: str
    features: int
    flags: list[str]
    extra: str
    repeat: Step
    close: Step
    closed_by: str
    """What settles it (`data.by` of its `warning-closed`); `a|b`: either, whichever is first."""
    repeats: bool = True
    """False: the cause is one continuing condition; it writes no second event while it lasts."""
    after: Step = nothing
    delay_s: float = 0.05
    gated: list[int] = field(default_factory=list)
    """Features the agent waits at (`--wait-at N:gates/N`) until the test releases them."""

    command: Callable[[Ctx], str] | None = None
    """A TOML argv instead of the simulated agent (which then has no plan to work)."""
    id: str = ""

    def toml(self, ctx: Ctx) -> str:
        waits = [f"--wait-at={n}:{ctx.gates / str(n)}" for n in self.gated]
        agent = json.dumps([*SIMAGENT, "--delay", str(self.delay_s), *self.flags, *waits])
        sim = 'agent = "claude"\nplan = "feature_list.json"\nprogress = "claude-progress.txt"'
        if self.command is not None:
            agent, sim = self.command(ctx), ""
        extra = self.extra.replace("{verify}", verify_argv(ctx.gates))
        return f"""
[[session]]
name = "api"
cwd = "{ctx.repo}"
command = {agent}
{sim}
stop_grace = "2s"
restart_delay = "0"
{extra}
"""


# ----- reading what the daemon says ------------------------------------------------------------


def on_badge(herd: Herd, kind: str) -> dict[str, Any] | None:
    """The open, unacknowledged warning of `kind` as `herd status` shows it, or None."""
    found = [w for w in herd.status("api")["warnings"] if w["kind"] == kind]
    return found[0] if found else None


def naming(herd: Herd, event_kind: str, kind: str) -> list[dict[str, Any]]:
    """`warning-acked` / `warning-closed` events that name warning `kind`."""
    return [e for e in herd.events("api", event_kind) if e["data"].get("kind") == kind]


def closings_after(herd: Herd, kind: str, opening_seq: int) -> list[dict[str, Any]]:
    """The `warning-closed` events of `kind` written after the opening at `opening_seq`.

    Under load a warning can open and close before the test looks, then open again: an earlier
    closing belongs to that earlier opening, not to the one under test."""
    return [e for e in naming(herd, "warning-closed", kind) if e["seq"] > opening_seq]


def reopened_between(herd: Herd, kind: str, closings: list[dict[str, Any]]) -> bool:
    """Every closing after the first has an opening of `kind` before it (none closes twice)."""
    seqs = [e["seq"] for e in herd.events("api", kind)]
    return all(
        any(before["seq"] < seq < after["seq"] for seq in seqs)
        for before, after in zip(closings, closings[1:], strict=False)
    )


def report_open(herd: Herd) -> list[str]:
    report = herd.client.call("report", name="api")["report"]
    return [w["kind"] for w in report["remains"]["open_warnings"]]


def passes(ctx: Ctx, count: int) -> None:
    """Let `count` more reconcile passes go by (a continuing cause would be judged again)."""
    client = ctx.herd.client
    first = client.call("info")["reconcile_passes"]
    wait_until(lambda: client.call("info")["reconcile_passes"] >= first + count)


def ended(*states: str) -> Step:
    def step(ctx: Ctx) -> None:
        done = ctx.herd.wait_state("api", *states, timeout_s=60)
        assert done["state"] in states

    return step


# ----- the scenarios, one per kind -------------------------------------------------------------


def retitle_first_item(ctx: Ctx) -> None:
    """While the run is held at the gate, the plan changes again (a second tampering)."""
    herd = ctx.herd
    herd.wait_state("api", "waiting-approval", timeout_s=30)
    before = len(herd.events("api", "plan-tampered"))
    plan_path = ctx.repo / "feature_list.json"
    plan = json.loads(plan_path.read_text())
    plan[0]["description"] = str(plan[0]["description"]) + " (dropped)"
    plan_path.write_text(json.dumps(plan, indent=2) + "\n")
    wait_until(lambda: len(herd.events("api", "plan-tampered")) > before, what="re-tampering")
    assert herd.status("api")["state"] == "waiting-approval", "held at the gate still"


def cli_ok(ctx: Ctx, *args: str) -> None:
    done = ctx.herd.cli(*args)
    assert done.returncode == 0, done.stderr


def tampering(answer: str) -> Case:
    """The agent drops and rewords plan items; on_drift holds it until `herd <answer>`."""
    return Case(
        kind="plan-tampered",
        features=4,
        flags=["--tamper-at", "2"],
        extra='restart = "never"\non_drift = { plan-tampered = "pause" }',
        repeat=retitle_first_item,
        delay_s=0.3,
        close=lambda ctx: cli_ok(ctx, answer, "api"),
        closed_by={"approve": "plan-approved", "reject": "plan-rejected"}[answer],
        after=ended("completed"),
    )


CASES = [
    tampering("approve"),
    tampering("reject"),
    Case(
        # Every checkpoint flips an item but fails `verify` until the gates' pass file exists.
        kind="claims-done-but-fails",
        features=4,
        flags=[],
        extra='restart = "never"\nverify = {verify}',
        gated=[2, 3],
        repeat=lambda ctx: ctx.release("2"),
        close=lambda ctx: ctx.release(PASS_FILE, "3"),
        closed_by="verify-passed",
        after=ended("completed"),
    ),
    Case(
        # The same failing test at two checkpoints in a row (threshold 2: the starting commit,
        # which is verified too, and feature 1), then again at feature 2.
        kind="repeated-failure",
        features=4,
        flags=[],
        extra='restart = "never"\nverify = {verify}\ndrift = { repeated_failure = 2 }',
        gated=[2, 3],
        repeat=lambda ctx: ctx.release("2"),
        close=lambda ctx: ctx.release(PASS_FILE, "3"),
        closed_by="verify-passed",
        after=ended("completed"),
    ),
    Case(
        # The agent falls silent before feature 2 until released; then it writes again.
        kind="stalled",
        features=3,
        flags=[],
        extra='restart = "never"\nbudget = { stall = "1s" }',
        gated=[2],
        repeat=lambda ctx: passes(ctx, 8),
        repeats=False,
        close=lambda ctx: ctx.release("2"),
        closed_by="output|progress",  # its first line or its commit, whichever is seen first
        after=ended("completed"),
    ),
    Case(
        # Every checkpoint adds a test file while scope allows src/ only.
        kind="out-of-scope",
        features=3,
        flags=[],
        extra='restart = "never"\nscope = ["src/**"]',
        gated=[2, 3],
        repeat=lambda ctx: ctx.release("2"),
        close=lambda ctx: restart_task(ctx),
        closed_by="task-started",
    ),
    Case(
        # Wall time spent since the last flip: 0.0003 of an hour is about a second. The agent
        # waits before feature 1, so no flip closes a warning before the test has seen it open
        # (a loaded machine flipped feature 1 a second after the start: opened, closed, opened).
        kind="burn-without-progress",
        features=3,
        flags=[],
        extra='restart = "never"\nbudget = { wall_time = "1h" }\n'
        "drift = { burn_without_progress = 0.0003 }",
        gated=[1, 2, 3],
        repeat=lambda ctx: passes(ctx, 6),
        repeats=False,
        close=lambda ctx: ctx.release("1", "2", "3"),
        closed_by="plan-progress",
        after=ended("completed"),
    ),
    Case(
        # until-done: run 1 passes feature 1 and quits (a normal step); runs 2 and 3 quit
        # with nothing new passing (early exits); run 4 waits for the test, then works.
        kind="early-exit",
        features=3,
        flags=["--quit-at", "2", "--quit-times", "3"],
        extra='restart = "until-done"',
        gated=[2],
        repeat=nothing,
        close=lambda ctx: ctx.release("2"),
        closed_by="plan-progress",
        after=ended("completed"),
    ),
]


def crashing(ctx: Ctx) -> str:
    """A TOML argv: a run that crashes the same way until `gates/fixed` exists."""
    fixed = str(ctx.gates / "fixed")
    code = (
        "import os, sys\n"
        f"if os.path.exists({fixed!r}): print('all good', flush=True); sys.exit(0)\n"
        "print('boom: database is locked', flush=True); sys.exit(3)"
    )
    return json.dumps([PY, "-c", code])


CASES.append(
    Case(
        # The same crash tail three runs in a row (crash source), again, then a clean run.
        kind="repeated-failure",
        id="repeated-failure-crash",
        features=1,
        flags=[],
        command=crashing,
        extra='restart = "on-failure"\nmax_crashes = 100000\nrestart_delay_max = "0.1s"',
        repeat=nothing,
        close=lambda ctx: ctx.release("fixed"),
        closed_by="run-succeeded",
        after=ended("completed"),
    )
)


def restart_task(ctx: Ctx) -> None:
    """out-of-scope has no cause that goes away mid-task: the committed files stay in history.

    It stays open through the task's end (evidence in the report) and closes when the next
    task starts.
    """
    herd = ctx.herd
    ctx.release("3")
    done = herd.wait_state("api", "completed", "failed", timeout_s=60)
    assert done["state"] == "completed", done["reason"]
    assert naming(herd, "warning-closed", "out-of-scope") == [], "the task's end keeps it"
    assert "out-of-scope" in report_open(herd)
    herd.client.call("start", name="api")


@pytest.mark.parametrize(
    "case",
    CASES,
    ids=[
        c.id or (f"{c.kind}-by-{c.closed_by}" if c.kind == "plan-tampered" else c.kind)
        for c in CASES
    ],
)
def test_a_drift_warning_opens_repeats_is_acked_and_closes(herd: Herd, case: Case) -> None:
    kind = case.kind
    gates = herd.root / "gates"
    gates.mkdir()
    ctx = Ctx(herd, sim_repo(herd.root / "repo", features=case.features), gates)
    herd.write(case.toml(ctx))
    client = herd.start()
    client.call("start", name="api")

    # Opens once, with its own event.
    first = wait_until(lambda: on_badge(herd, kind), timeout_s=30, what=f"{kind} to open")
    [opening] = [e for e in herd.events("api", kind) if e["seq"] == first["opened_seq"]]
    assert first["count"] >= 1

    def since_opening() -> list[dict[str, Any]]:
        return [e for e in herd.events("api", kind) if e["seq"] >= opening["seq"]]

    # The cause again: the same warning counts (or, for a continuing condition, stays one).
    if case.repeats:
        if first["count"] < 2:
            case.repeat(ctx)
        again = wait_until(
            lambda: (w := on_badge(herd, kind)) and w["count"] >= 2 and w,
            timeout_s=30,
            what=f"{kind} seen again",
        )
        assert again["opened_seq"] == first["opened_seq"], "a repeat is no second opening"
        assert again["seq"] > opening["seq"] and again["at"] >= first["opened_at"]
        assert len(since_opening()) == again["count"]
    else:
        case.repeat(ctx)
        still = on_badge(herd, kind)
        assert still is not None and still["count"] == 1 and still["seq"] == opening["seq"]
        assert len(since_opening()) == 1, "a continuing cause writes one event"

    # Acknowledged through the real CLI: off the badge, still in history and the report.
    acked = herd.cli("ack", "api", kind)
    assert acked.returncode == 0, acked.stderr
    assert f"acknowledged {kind}" in acked.stdout
    assert len(naming(herd, "warning-acked", kind)) == 1
    assert on_badge(herd, kind) is None, "an acknowledged warning leaves the badge"
    assert kind in report_open(herd), "acknowledged is not closed: the report keeps it"
    assert herd.events("api", kind), "history keeps it"

    # The cause goes away: one `warning-closed` naming the kind and what settled it.
    case.close(ctx)
    closing = wait_until(
        lambda: closings_after(herd, kind, opening["seq"]), timeout_s=30, what=f"{kind} to close"
    )[0]
    assert closing["data"]["by"] in case.closed_by.split("|"), closing
    assert kind not in report_open(herd)
    case.after(ctx)
    closings = closings_after(herd, kind, opening["seq"])
    assert closings[0] == closing
    assert reopened_between(herd, kind, closings), f"closed twice without reopening: {closings}"
    client.call("stop", name="api", socket_timeout_s=None)


# ----- and none of them from a run that behaves --------------------------------------------------

CLEAN_STALL_S = 1.5
CLEAN_BURN_SHARE = 0.0008
"""Of a one-hour wall_time budget: 2.88 s without a plan item passing would be a burn."""


def test_a_clean_run_with_every_threshold_armed_raises_none_of_them(herd: Herd) -> None:
    """The thresholds of the scenarios above, all armed, and an agent that does its work:
    until-done runs that each pass one item (the normal step, not an early exit), checkpoints
    that pass verification, files inside scope, a plan only flipped, output all along; the run
    lasts longer than the stall and burn thresholds."""
    gates = herd.root / "gates"
    gates.mkdir()
    (gates / PASS_FILE).write_text("")
    repo = sim_repo(herd.root / "repo", features=6)
    agent = json.dumps([*SIMAGENT, "--delay", "0.5", "--one-per-run"])
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {agent}
        agent = "claude"
        restart = "until-done"
        restart_delay = "0"
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        scope = ["src/**", "tests/**"]
        verify = {verify_argv(gates)}
        budget = {{ wall_time = "1h", stall = "{CLEAN_STALL_S}s" }}
        drift = {{ repeated_failure = 2, burn_without_progress = {CLEAN_BURN_SHARE} }}
        on_drift = {{ plan-tampered = "pause", stalled = "stop" }}
        stop_grace = "2s"
    """)
    herd.start().call("start", name="api")
    done = herd.wait_state("api", "completed", "failed", timeout_s=90)
    assert done["state"] == "completed", done["reason"]
    events = herd.events("api")
    seen = [e["kind"] for e in events]
    assert not set(seen) & {c.kind for c in CASES}, seen
    assert "waiting-approval" not in seen and "warning-closed" not in seen
    assert seen.count("run-started") == 6, "one run per item: until-done's normal step"
    assert done["checkpoint"]["verified"] is True
    began, finished = parse_iso(events[0]["at"]), parse_iso(done["ended_at"] or events[-1]["at"])
    assert began is not None and finished is not None
    lasted_s = (finished - began).total_seconds()
    assert lasted_s > max(CLEAN_STALL_S, CLEAN_BURN_SHARE * 3600), f"too short to judge: {lasted_s}"


# ----- the burn baseline outlives the daemon -----------------------------------------------------

RESTART_BURN_SHARE = 0.003
"""Of a one-hour wall_time budget: 10.8 s since the last flip (at 5.4 s, the 2.7 s allowed after
the restart left a loaded machine 1.6 s for stopping and starting a daemon)."""


def test_a_new_daemon_measures_burn_from_the_same_flip(herd: Herd) -> None:
    """Most of the burn threshold passes under one daemon, the rest under the next: the warning
    comes when the threshold is reached since the flip, not a whole threshold after the restart."""
    threshold_s = RESTART_BURN_SHARE * 3600
    gates = herd.root / "gates"
    gates.mkdir()
    ctx = Ctx(herd, sim_repo(herd.root / "repo", features=2), gates)
    case = Case(
        kind="burn-without-progress",
        features=2,
        flags=[],
        extra='restart = "never"\nbudget = { wall_time = "1h" }\n'
        f"drift = {{ burn_without_progress = {RESTART_BURN_SHARE} }}",
        repeat=nothing,
        close=nothing,
        closed_by="",
        gated=[2],
    )
    herd.write(case.toml(ctx))
    herd.start().call("start", name="api")
    wait_until(lambda: (herd.status("api")["plan"] or {}).get("passing") == 1, timeout_s=30)
    flipped_at = time.monotonic()
    wait_until(lambda: time.monotonic() - flipped_at >= 0.8 * threshold_s, timeout_s=30)
    assert herd.events("api", "burn-without-progress") == []
    old_daemon = herd.thread
    herd.stop_daemon()
    assert old_daemon is not None
    wait_until(lambda: not old_daemon.is_alive(), timeout_s=30, what="the first daemon to exit")
    herd.start()
    restarted_at = time.monotonic()
    try:
        opened = wait_until(lambda: herd.events("api", "burn-without-progress"), timeout_s=30)
    except AssertionError as exc:
        status = herd.status("api")
        tail = [e["kind"] for e in herd.events("api")][-8:]
        raise AssertionError(f"{exc}; {status['state']} ({status['reason']}), {tail}") from None
    waited_s = time.monotonic() - restarted_at
    assert waited_s < 0.5 * threshold_s, (
        f"burn came {waited_s:.1f}s after the restart: measured from the restart, not the flip"
    )
    ctx.release("2")
    closing = wait_until(
        lambda: closings_after(herd, "burn-without-progress", opened[-1]["seq"]),
        what="burn to close",
    )
    assert closing[0]["data"]["by"] == "plan-progress"
    assert herd.wait_state("api", "completed", "failed", timeout_s=30)["state"] == "completed"
