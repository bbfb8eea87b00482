"""Every warning kind closes when its cause is gone, end to end under the real daemon.

One driver per kind: the cause is made (by the test or by a small agent that waits on gate
files), the warning opens on the session's badge, the cause is removed, and one
`warning-closed` names the kind and what settled it; the badge, the status and the report then
leave it out. The drift kinds are walked the same way in tests/test_drift_lifecycle.py; a
registry test holds both files to `WARNING_KINDS`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import FAST, PY, Herd, git, make_repo, wait_until
from test_agent_outcomes import FIXTURES, REPLAY
from test_drift_lifecycle import CASES as DRIFT_CASES

from agentherd.sessions.open_warnings import CLOSES_WHEN
from agentherd.sessions.records import WARNING_KINDS
from agentherd.supervisor.session.context import Timings

TIMINGS = Timings(
    **{
        **FAST.__dict__,
        "budget_check_s": 0.05,
        "tail_gap_s": 0.1,
        "rate_limit_wait_s": 0.2,
        "notify_timeout_s": 5.0,
    }
)


@dataclass
class Ctx:
    """What a case's steps act on: the daemon, the session's folder, the gates folder."""

    herd: Herd
    work: Path
    gates: Path

    def release(self, *names: str) -> None:
        """Create gate files: an agent waiting on one goes on."""
        for name in names:
            (self.gates / name).write_text("")

    def commit(self, name: str, text: str = "x\n") -> None:
        """A commit in the session's folder, made by the test (herd watches the worktree)."""
        (self.work / name).write_text(text)
        git(self.work, "add", name)
        git(self.work, "commit", "-qm", f"add {name}")


Step = Callable[[Ctx], None]


def nothing(ctx: Ctx) -> None:
    """The cause appears by itself."""


UNPRICED_GEMINI_RESULT = json.dumps(
    {
        "type": "result",
        "status": "success",
        "stats": {
            "total_tokens": 130,
            "input_tokens": 100,
            "output_tokens": 30,
            "models": {"gemini-9-unlisted": {"total_tokens": 130, "input_tokens": 100}},
        },
    }
)
"""A Gemini CLI result on a model herd has no price for."""


def waiting_agent(gates: Path, then: str = "raise SystemExit(0)", before: str = "working") -> str:
    """A TOML argv: prints `before`, waits until `gates/done` exists, then runs `then`."""
    code = (
        "import os, time\n"
        f"print({before!r}, flush=True)\n"
        f"while not os.path.exists({str(gates / 'done')!r}): time.sleep(0.02)\n"
        f"{then}\n"
    )
    return json.dumps([PY, "-c", code])


@dataclass
class Case:
    """One warning kind: its session, how its cause is made and removed, what closes it."""

    kind: str
    session: Callable[[Ctx], str]
    """The herd.toml text (top level keys first, then `[[session]]` named api)."""
    close: Step
    closed_by: str
    """`data.by` of its `warning-closed`."""
    open: Step = nothing
    repo: str = "commit"
    """`commit`: a repository with one commit; `empty`: `git init` only; `none`: no git."""
    timings: Timings = TIMINGS
    after: Step = nothing
    id: str = ""


def session_block(agent: str, extra: str = "", top: str = "") -> str:
    return f"""{top}
[[session]]
name = "api"
cwd = "work"
command = {agent}
stop_grace = "2s"
restart_delay = "0"
{extra}
"""


# ----- the cases ---------------------------------------------------------------------------------


def write(relative: str, data: bytes) -> Step:
    def step(ctx: Ctx) -> None:
        (ctx.work / relative).write_bytes(data)

    return step


PLAN_OK = json.dumps([{"description": "the one item", "passes": False}]).encode()


def git_init_and_commit(ctx: Ctx) -> None:
    git(ctx.work, "init", "-q", "-b", "main")
    ctx.commit("first.txt")


def fail_until(gate: Path) -> str:
    """A TOML argv that exits 1 until `gate` exists."""
    code = f"import os, sys; sys.exit(0 if os.path.exists({str(gate)!r}) else 1)"
    return json.dumps([PY, "-c", code])


def release_then_commit(gate: str, name: str) -> Step:
    def step(ctx: Ctx) -> None:
        ctx.release(gate)
        ctx.commit(name)

    return step


CRASHING = """
import os, sys, time
run = int(os.environ["HERD_RUN"])
gate = os.path.join({gates!r}, f"go-{{run}}")
print(f"run {{run}}", flush=True)
while not os.path.exists(gate): time.sleep(0.02)
if run < 3:
    with open("dirty.txt", "a") as out: out.write(f"run {{run}}\\n")
    sys.exit(3)
"""
"""Runs 1 and 2 leave a dirty file and crash when released; run 3 exits 0."""


def crashing(ctx: Ctx) -> str:
    return session_block(
        json.dumps([PY, "-c", CRASHING.format(gates=str(ctx.gates))]),
        'restart = "on-failure"\nmax_crashes = 10',
    )


def block_the_rescue_ref_then_crash(ctx: Ctx) -> None:
    """A ref where the rescue's folder of refs would go: git cannot create the rescue ref."""
    git(ctx.work, "update-ref", "refs/herd/api/rescue", "HEAD")
    ctx.release("go-1")


def unblock_then_crash_again(ctx: Ctx) -> None:
    ctx.herd.wait_state("api", "running")
    git(ctx.work, "update-ref", "-d", "refs/herd/api/rescue")
    ctx.release("go-2")


def replaying(plans: dict[str, list[str]]) -> Callable[[Ctx], str]:
    """A claude session whose runs replay captured output (tests/test_agent_outcomes.py)."""

    def toml(ctx: Ctx) -> str:
        argv = [sys.executable, "-c", REPLAY, str(FIXTURES), str(ctx.gates / "runs.count")]
        command = json.dumps([*argv, "command", json.dumps(plans)])
        resume = json.dumps([*argv, "--resume", "{session_id}", json.dumps(plans)])
        return session_block(
            command, f'agent = "claude"\nresume = {resume}\nrestart = "on-failure"'
        )

    return toml


WANDERING = """
import json, os, sys, time
run = int(os.environ["HERD_RUN"])
stored = sys.argv[sys.argv.index("--resume") + 1] if "--resume" in sys.argv else None
one, two = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
conversation = {{1: one, 2: two}}
said = conversation.get(run, stored)
print(json.dumps({{"type": "system", "subtype": "init", "session_id": said}}), flush=True)
gate = {gates!r} + "/crash-" + str(run)
while run < 3 and not os.path.exists(gate): time.sleep(0.02)
if run < 3: sys.exit(3)
while not os.path.exists({gates!r} + "/done"): time.sleep(0.02)
"""
"""A claude-like agent: run 1 names a conversation; resumed, run 2 names another (a
mismatch); run 3 continues the one it was told to resume. Runs 1 and 2 crash when released."""


def wandering(ctx: Ctx) -> str:
    code = WANDERING.format(gates=str(ctx.gates))
    command = json.dumps([PY, "-c", code])
    resume = json.dumps([PY, "-c", code, "--resume", "{session_id}"])
    return session_block(command, f'agent = "claude"\nresume = {resume}\nrestart = "on-failure"')


BACKWARDS = """
import json, os, sys, time
if os.environ["HERD_RUN"] == "1":
    for cost, turns in ((0.5, 5), (0.2, 2), (0.6, 6)):
        print(json.dumps({{"cost_usd": cost, "turns": turns}}), flush=True)
        time.sleep(0.3)
    while not os.path.exists({gate!r}): time.sleep(0.02)
    sys.exit(3)
print("run 2", flush=True)
while not os.path.exists({done!r}): time.sleep(0.02)
"""
"""Run 1 reports a cost that goes backwards, then crashes when released; run 2 waits."""


def backwards(ctx: Ctx) -> str:
    code = BACKWARDS.format(gate=str(ctx.gates / "crash"), done=str(ctx.gates / "done"))
    return session_block(
        json.dumps([PY, "-c", code]), 'restart = "on-failure"\nbudget = { cost_usd = 100 }'
    )


def raise_the_budget(ctx: Ctx) -> None:
    text = ctx.herd.config_path.read_text().replace('wall_time = "40s"', 'wall_time = "1h"')
    ctx.herd.config_path.write_text(text)
    ctx.herd.client.call("reload")


def loud_agent(gates: Path) -> str:
    code = (
        "import os, sys, time\n"
        "for _ in range(100): print('y' * 200, flush=True)\n"
        f"while not os.path.exists({str(gates / 'done')!r}): time.sleep(0.02)\n"
    )
    return json.dumps([PY, "-c", code])


def price_the_model(ctx: Ctx) -> None:
    """What the warning says to do: price the model in herd.toml; the next task is priced."""
    table = "[prices.gemini-9-unlisted]\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 2.0\n"
    ctx.herd.config_path.write_text(table + ctx.herd.config_path.read_text())
    next_task(ctx)
    wait_until(lambda: (ctx.herd.status("api")["usage"] or {}).get("cost_usd"), timeout_s=30)
    usage = ctx.herd.status("api")["usage"]
    assert usage["cost_unpriced_model"] is None and usage["cost_estimated"] is True


def next_task(ctx: Ctx) -> None:
    """What a person does: raise log_max_bytes (so the old log need not go), let the task end,
    start the next one. A new task starts with a clean slate."""
    text = ctx.herd.config_path.read_text().replace(
        "log_max_bytes = 4096", "log_max_bytes = 1048576"
    )
    ctx.herd.config_path.write_text(text)
    ctx.herd.client.call("reload")
    ctx.release("done")
    ctx.herd.wait_state("api", "completed", "failed", timeout_s=30)
    (ctx.gates / "done").unlink()
    assert ctx.herd.client.call("start", name="api")


CASES = [
    Case(
        kind="git-unavailable",
        repo="empty",
        session=lambda ctx: session_block(waiting_agent(ctx.gates), 'restart = "never"'),
        close=lambda ctx: ctx.commit("first.txt"),
        closed_by="git",
    ),
    Case(
        kind="not-a-git-repo",
        repo="none",
        session=lambda ctx: session_block(waiting_agent(ctx.gates), 'restart = "never"'),
        close=git_init_and_commit,
        closed_by="git",
    ),
    Case(
        kind="plan-invalid",
        session=lambda ctx: session_block(
            waiting_agent(ctx.gates), 'restart = "never"\nplan = "plan.json"'
        ),
        open=write("plan.json", b"{ not json"),
        close=write("plan.json", PLAN_OK),
        closed_by="plan",
    ),
    Case(
        kind="progress-invalid",
        session=lambda ctx: session_block(
            waiting_agent(ctx.gates), 'restart = "never"\nprogress = "progress.txt"'
        ),
        open=write("progress.txt", b"\x00\x01\x02binary\x00" * 20),
        close=write("progress.txt", b"## step 1\nwrote the parser\n"),
        closed_by="progress",
    ),
    Case(
        kind="verify-failed",
        session=lambda ctx: session_block(
            waiting_agent(ctx.gates),
            f'restart = "never"\nverify = {fail_until(ctx.gates / "pass")}',
        ),
        open=lambda ctx: ctx.commit("one.txt"),
        close=release_then_commit("pass", "two.txt"),
        closed_by="verify-passed",
    ),
    Case(
        kind="notify-failed",
        session=lambda ctx: session_block(
            waiting_agent(ctx.gates),
            'restart = "never"',
            top=f'notify = {fail_until(ctx.gates / "notify-ok")}\nnotify_on = ["checkpoint"]',
        ),
        open=lambda ctx: ctx.commit("one.txt"),
        close=release_then_commit("notify-ok", "two.txt"),
        closed_by="notify",
    ),
    Case(
        kind="rescue-failed",
        session=crashing,
        open=block_the_rescue_ref_then_crash,
        close=unblock_then_crash_again,
        closed_by="rescue",
        after=lambda ctx: ctx.release("go-3"),
    ),
    Case(
        kind="rate-limited",
        session=replaying({"command:1": ["claude-limit"], "resume:2": ["claude-stream"]}),
        close=nothing,  # the session waits out the limit; its next run starts
        closed_by="run-started",
    ),
    Case(
        kind="resume-refused",
        session=replaying(
            {
                "command:1": ["claude-limit"],
                "resume:2": ["claude-resume-wrongcwd"],
                "command:3": ["claude-limit"],
                "resume:4": ["claude-stream"],
            }
        ),
        close=nothing,  # run 3 learns a new session id; run 4 resumes it
        closed_by="run-started",
    ),
    Case(
        kind="resume-mismatch",
        session=wandering,
        open=lambda ctx: ctx.release("crash-1"),
        close=lambda ctx: ctx.release("crash-2"),  # run 3 continues its stored conversation
        closed_by="resume-checked",
    ),
    Case(
        kind="usage-backwards",
        session=backwards,
        close=lambda ctx: ctx.release("crash"),
        closed_by="run-started",
    ),
    Case(
        kind="cost-unpriced",
        session=lambda ctx: session_block(
            waiting_agent(ctx.gates, before=UNPRICED_GEMINI_RESULT),
            'agent = "gemini"\nrestart = "never"',
        ),
        close=price_the_model,
        closed_by="task-started",
    ),
    Case(
        kind="budget-warning",
        session=lambda ctx: session_block(
            waiting_agent(ctx.gates),
            'restart = "never"\nbudget = { wall_time = "40s", warn_at = 0.02 }',
        ),
        close=raise_the_budget,
        closed_by="budget",
    ),
    Case(
        kind="log-capped",
        session=lambda ctx: session_block(
            loud_agent(ctx.gates), 'restart = "never"\nlog_max_bytes = 4096'
        ),
        close=next_task,
        closed_by="task-started",
    ),
]


# ----- the driver --------------------------------------------------------------------------------


def on_badge(herd: Herd, kind: str) -> dict[str, Any] | None:
    found = [w for w in herd.status("api")["warnings"] if w["kind"] == kind]
    return found[0] if found else None


def closings(herd: Herd, kind: str, after_seq: int) -> list[dict[str, Any]]:
    return [
        e
        for e in herd.events("api", "warning-closed")
        if e["data"].get("kind") == kind and e["seq"] > after_seq
    ]


def report_open(herd: Herd) -> list[str]:
    report = herd.client.call("report", name="api")["report"]
    return [w["kind"] for w in report["remains"]["open_warnings"]]


@pytest.mark.parametrize("case", CASES, ids=[c.id or c.kind for c in CASES])
def test_a_warning_closes_once_its_cause_is_gone(tmp_path: Path, case: Case) -> None:
    herd = Herd(tmp_path, case.timings)
    gates = tmp_path / "gates"
    gates.mkdir()
    work = tmp_path / "work"
    if case.repo == "commit":
        make_repo(work)
    else:
        work.mkdir()
        if case.repo == "empty":
            git(work, "init", "-q", "-b", "main")
    ctx = Ctx(herd, work, gates)
    herd.write(case.session(ctx))
    try:
        client = herd.start()
        client.call("start", name="api")
        case.open(ctx)
        opened = wait_until(
            lambda: on_badge(herd, case.kind), timeout_s=30, what=f"{case.kind} to open"
        )
        case.close(ctx)
        closing = wait_until(
            lambda: closings(herd, case.kind, opened["opened_seq"]),
            timeout_s=30,
            what=f"{case.kind} to close",
        )[0]
        assert closing["data"]["by"] == case.closed_by, closing
        assert on_badge(herd, case.kind) is None
        assert case.kind not in report_open(herd)
        case.after(ctx)
        ctx.release("done")
    finally:
        herd.down()


def test_every_warning_kind_has_a_closing_rule_and_a_test_that_closes_it() -> None:
    tested = {case.kind for case in CASES} | {case.kind for case in DRIFT_CASES}
    assert set(CLOSES_WHEN) == set(WARNING_KINDS), "say what closes each kind in CLOSES_WHEN"
    assert tested == set(WARNING_KINDS), f"untested closings: {set(WARNING_KINDS) - tested}"


def test_the_reference_says_what_closes_each_warning() -> None:
    reference = (Path(__file__).parent.parent / "docs" / "reference.md").read_text()
    section = reference.split("### When a warning closes", 1)[1].split("\n## ", 1)[0]
    rows = {
        line.split("|")[1].strip().strip("`"): line.split("|")[2].strip()
        for line in section.splitlines()
        if line.startswith("| `")
    }
    assert rows == CLOSES_WHEN
