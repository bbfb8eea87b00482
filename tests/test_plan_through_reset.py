"""A person's answer at the approval gate survives the crash after it (issue 12, item 4).

The answer lives in the worktree, uncommitted; a crash's restart resets the worktree to the
last checkpoint, whose copy of the plan predates it. Without `plan-kept` the restarted session
was judged `plan-tampered` again and held at the gate a second time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Herd, git, make_repo, script, wait_until

from agentherd.sessions.planreset import plan_after_reset
from agentherd.supervisor.checks import watchedfile

PLAN = [
    {"id": "greet", "description": "write hello.txt", "passes": False},
    {"id": "docs", "description": "document the greeting", "passes": False},
]


def _raw(items: list[dict[str, object]]) -> bytes:
    return json.dumps(items).encode()


def test_a_reset_that_took_a_matching_plan_off_its_baseline_writes_the_baseline_back() -> None:
    approved = [PLAN[0]]
    at_checkpoint = [{**PLAN[0], "passes": True}, PLAN[1]]
    written = plan_after_reset(_raw(approved).decode(), _raw(approved), _raw(at_checkpoint))
    assert written is not None
    assert json.loads(written) == [{**PLAN[0], "passes": True}], "the checkpoint's pass stays"


def test_an_item_approved_as_passing_whose_work_the_reset_discarded_is_failing_again() -> None:
    approved = [{**PLAN[0], "passes": True}]  # marked done, uncommitted, when approved
    written = plan_after_reset(_raw(approved).decode(), _raw(approved), _raw(PLAN))
    assert written is not None and json.loads(written) == [PLAN[0]]


def test_a_plan_the_reset_leaves_alone_or_that_was_already_off_stays_as_it_is() -> None:
    baseline = _raw(PLAN).decode()
    tampered = _raw([PLAN[0]])
    assert plan_after_reset(baseline, _raw(PLAN), _raw(PLAN)) is None
    assert plan_after_reset(baseline, tampered, _raw(PLAN)) is None, "the agent's, not the reset's"
    assert plan_after_reset(baseline, None, tampered) is None
    assert plan_after_reset(None, _raw(PLAN), tampered) is None
    assert plan_after_reset(baseline, b"[{ half", tampered) is None
    assert plan_after_reset(baseline, _raw(PLAN), b"[{ half") is None


def test_a_plan_the_reset_removed_is_written_back() -> None:
    written = plan_after_reset(_raw(PLAN).decode(), _raw(PLAN), None)
    assert written is not None and json.loads(written) == PLAN


AGENT = """
    import json, pathlib, subprocess, sys, time
    plan = pathlib.Path("feature_list.json")
    once = pathlib.Path({once!r})
    def git(*args, stdin=None):
        return subprocess.run(["git", *args], input=stdin, capture_output=True, text=True,
                              check=True).stdout.strip()
    def commit(message):
        git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", message)
    if not once.exists():
        once.write_text("")
        shorter = json.dumps(json.loads(plan.read_text())[:1], indent=1)  # drops "docs"
        if {commit_tamper!r} == "first":  # committed before the worktree shows the edit,
            blob = git("hash-object", "-w", "--stdin", stdin=shorter)  # so the gate, which
            git("update-index", "--cacheinfo", f"100644,{{blob}},{{plan}}")  # stops the run
            commit("agent: a shorter plan")                        # on seeing it, comes after
        plan.write_text(shorter)                                   # plan-tampered
        if {commit_tamper!r} == "after-answer":  # the gate stopped it before its commit,
            while len(json.loads(plan.read_text())) < 2:           # which then holds the
                time.sleep(0.02)                                   # person's answer
            git("add", "-A")
            commit("agent: a shorter plan")
        print("waiting", flush=True)
        go = pathlib.Path({go!r})
        while not go.exists():                             # stopped at the gate meanwhile
            time.sleep(0.02)
        print("the API is gone", flush=True)
        sys.exit(1)                                        # a crash after the person answered
    items = json.loads(plan.read_text())
    for item in items:
        item["passes"] = True
    plan.write_text(json.dumps(items, indent=1))
    pathlib.Path("hello.txt").write_text("hello")
    git("add", "-A")
    commit("agent: greet")
"""


@pytest.mark.parametrize(
    ("answer", "commit_tamper", "items_after", "kept"),
    [
        ("approve", "never", 1, True),
        ("reject", "first", 2, True),
        # The agent's commit after the gate holds the answer: the reset brings it back as it is.
        ("reject", "after-answer", 2, False),
    ],
    ids=["approve-uncommitted-edit", "reject-committed-edit", "reject-edit-committed-after"],
)
def test_a_crash_after_the_gate_restarts_on_the_answered_plan_without_a_second_gate(
    herd: Herd, answer: str, commit_tamper: str, items_after: int, kept: bool
) -> None:
    repo = make_repo(herd.root / "repo", {"feature_list.json": json.dumps(PLAN, indent=1)})
    go = herd.root / "go"
    code = AGENT.format(once=str(herd.root / "once"), go=str(go), commit_tamper=commit_tamper)
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {script(code)}
        restart = "on-failure"
        restart_delay = "0s"
        plan = "feature_list.json"
        on_drift = {{ plan-tampered = "pause" }}
        stop_grace = "2s"
    """)
    client = herd.start()
    client.call("start", name="api")
    herd.wait_state("api", "waiting-approval", timeout_s=30)
    answered = herd.cli(answer, "api")
    assert answered.returncode == 0, answered.stderr
    go.write_text("")

    ended = herd.wait_state("api", "completed", "failed", "waiting-approval", timeout_s=30)
    events = herd.events("api")
    kinds = [e["kind"] for e in events]
    for event in events:  # shown when an assertion below fails (its message is cut short)
        print(event["seq"], event["kind"], event["message"])
    assert ended["state"] == "completed", (ended["state"], ended["reason"], kinds)
    assert kinds.count("waiting-approval") == 1, "the person answered once"
    assert kinds.count("plan-tampered") == 1
    assert "worktree-reset" in kinds and ("plan-kept" in kinds) == kept, kinds
    if kept:
        assert kinds.index("worktree-reset") < kinds.index("plan-kept")
    assert ended["plan"] == {"passing": items_after, "total": items_after, "changed_items": []}
    committed = json.loads(git(repo, "show", "HEAD:feature_list.json"))
    assert [item["id"] for item in committed] == ["greet", "docs"][:items_after]
    if commit_tamper != "never":  # the commit the crash's reset went back to
        at_reset = json.loads(git(repo, "show", "HEAD~1:feature_list.json"))
        assert len(at_reset) == (1 if kept else 2), at_reset
    assert git(repo, "status", "--porcelain") == ""
    wait_until(lambda: not herd.status("api")["warnings"], what="no warning left open")


GATED_AGENT = """
    import json, pathlib, time
    plan = pathlib.Path("feature_list.json")
    plan.write_text(json.dumps(json.loads(plan.read_text())[:1], indent=1))  # plan-tampered
    print("waiting", flush=True)
    while not pathlib.Path({go!r}).exists():
        time.sleep(0.02)
"""


def test_a_rejection_closes_the_warning_though_the_plan_is_read_while_it_is_written(
    herd: Herd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen under load: the plan watcher read the restored plan while the rejection was still
    writing it, and closed `plan-tampered` as 'matches its baseline again': the person's answer
    was not what the record said closed it. The daemon runs in this process, so the write is
    held here until the watcher has read the file back."""
    repo = make_repo(herd.root / "repo", {"feature_list.json": json.dumps(PLAN, indent=1)})
    go = herd.root / "go"
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {script(GATED_AGENT.format(go=str(go)))}
        restart = "never"
        plan = "feature_list.json"
        on_drift = {{ plan-tampered = "pause" }}
        stop_grace = "2s"
    """)
    herd.start().call("start", name="api")
    herd.wait_state("api", "waiting-approval", timeout_s=30)
    write = watchedfile.write_atomically

    def write_then_let_the_watcher_read(path: Path, data: bytes) -> None:
        write(path, data)
        wait_until(lambda: herd.status("api")["plan"]["total"] == 2, what="the watcher's read")

    monkeypatch.setattr(watchedfile, "write_atomically", write_then_let_the_watcher_read)
    rejected = herd.cli("reject", "api")
    go.write_text("")
    assert rejected.returncode == 0, rejected.stderr
    closed = [
        e["data"]["by"]
        for e in herd.events("api")
        if e["kind"] == "warning-closed" and e["data"]["kind"] == "plan-tampered"
    ]
    assert closed == ["plan-rejected"], closed
