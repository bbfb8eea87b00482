"""Tests of the session report: its JSON object, its markdown and its next steps."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, ClassVar

from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.plan import Plan, PlanItem
from agentherd.sessions.records import Event, RunRecord
from agentherd.sessions.report import ReportInput, build_report, render_markdown

ITEMS = ("login form", "logout button", "password reset", "profile page")


def plan(passing: tuple[int, ...], items: tuple[str, ...] = ITEMS) -> Plan:
    """A plan whose items at the given positions pass."""
    return Plan(
        tuple(
            PlanItem(key=text, description=text, text=json.dumps({"d": text}), passes=i in passing)
            for i, text in enumerate(items)
        )
    )


def at(hour: int, minute: int = 0) -> str:
    """An ISO time on the test day."""
    return f"2026-11-30T{hour:02d}:{minute:02d}:00Z"


def checkpoint(sha: str, hour: int, subject: str, verified: bool | None) -> Checkpoint:
    """A checkpoint at the given hour."""
    when = datetime(2026, 11, 30, hour, 30, tzinfo=UTC)
    return Checkpoint(sha=sha, at=when, subject=subject, files=("src/a.py",), verified=verified)


def run(number: int, start: str, end: str | None, usage: dict[str, Any], **kw: Any) -> RunRecord:
    """A run of the task api/1."""
    return RunRecord(
        session="api",
        run=number,
        handle="api/1",
        argv=["agent"],
        started_at=start,
        ended_at=end,
        usage=usage,
        **kw,
    )


def event(kind: str, when: str, run_number: int | None = None, **data: Any) -> Event:
    """An event of session api."""
    return Event(
        at=when, session="api", run=run_number, kind=kind, message=f"{kind} msg", data=data
    )


SHA_GOOD, SHA_BAD, SHA_NEW = "a" * 40, "b" * 40, "c" * 40


def busy_input(**changes: Any) -> ReportInput:
    """A session mid-way: 2 of 4 items pass, one crash, one rescue, the plan tampered."""
    fields: dict[str, Any] = {
        "session": "api",
        "state": "running",
        "reason": None,
        "handle": "api/1",
        "generated_at": at(5),
        "task_started_at": at(2),
        "runs": [
            run(
                1,
                at(2),
                at(3),
                {"input_tokens": 1000, "output_tokens": 200, "turns": 5},
                exit_code=1,
                outcome="exit 1",
            ),
            run(2, at(3, 1), None, {"input_tokens": 500, "cost_usd": 0.5, "turns": 3}),
        ],
        "events": [
            event("plan-tampered", at(1), None),  # before the task: not counted
            event("task-started", at(2)),
            event("run-started", at(2), 1),
            event("run-exited", at(3), 1, exit_code=1, signal=None, outcome="exit 1"),
            event("rescue-saved", at(3), 1, ref="refs/herd/api/rescue/1", sha="d" * 40),
            event("worktree-reset", at(3), 1, sha=SHA_BAD),
            event("run-started", at(3, 1), 2),
            event("plan-tampered", at(4), 2),
        ],
        "checkpoints": [
            checkpoint(SHA_GOOD, 2, "feat: login form", True),
            checkpoint(SHA_BAD, 3, "feat: logout", False),
            checkpoint(SHA_NEW, 4, "wip: reset", None),
        ],
        "verifications": {
            SHA_BAD: {
                "passed": False,
                "exit_code": 1,
                "timed_out": False,
                "duration_s": 4.2,
                "output_tail": "FAILED tests/test_logout.py::test_it\n1 failed",
                "started_at": at(3, 40),
                "error": None,
            }
        },
        "plan_baseline": plan(()),
        "plan_current": plan((0, 2), ITEMS[:3] + ("profile page v2",)),
        "progress_latest": ["did the login form"],
        "progress_updated_at": at(4),
        "diffstat": (5, 120, 7),
        "files_touched": ["src/a.py", "src/b.py"],
        "agent": "claude",
        "cwd": "/repo",
    }
    fields.update(changes)
    return ReportInput(**fields)


def test_json_keys_and_values() -> None:
    report = build_report(busy_input())
    assert set(report) >= {
        "session", "state", "reason", "handle", "generated_at", "time", "changed", "passed",
        "remains", "incidents", "usage", "next_steps",
    }  # fmt: skip
    assert report["time"] == {
        "started_at": at(2),
        "wall_s": 3 * 3600.0,
        "runs": 2,
        "last_run": 2,
        "run_s": 3600.0 + 2 * 3600.0 - 60.0,
    }
    checkpoints = report["changed"]["checkpoints"]
    assert [cp["verified"] for cp in checkpoints] == [True, False, None]
    assert checkpoints[1]["verification"]["exit_code"] == 1
    assert set(checkpoints[0]) >= {"sha", "at", "subject", "verified", "files"}
    assert report["changed"]["diffstat"] == {"files": 5, "insertions": 120, "deletions": 7}
    passed = report["passed"]
    assert (passed["plan_passing"], passed["plan_total"]) == (2, 4)
    assert passed["items_passing"] == ["login form", "password reset"]
    assert passed["verifications"] == {"passed": 1, "failed": 1, "pending": 1}
    remains = report["remains"]
    assert remains["items_failing"] == ["logout button", "profile page v2"]
    assert [w["kind"] for w in remains["open_warnings"]] == ["plan-tampered"]
    assert remains["open_warnings"][0]["count"] == 1
    assert {c["change"] for c in remains["plan_changes"]} == {"reworded"}
    incidents = report["incidents"]
    assert incidents["crashes"] == [
        {"run": 1, "exit": 1, "signal": None, "outcome": "exit 1", "at": at(3)}
    ]
    assert incidents["restarts"] == 1
    assert incidents["rescued"] == [{"ref": "refs/herd/api/rescue/1", "sha": "d" * 40, "run": 1}]
    assert incidents["resets"] == [{"sha": SHA_BAD, "run": 1, "at": at(3)}]
    usage = report["usage"]
    assert usage["cost_usd"] == 0.5
    assert usage["total_tokens"] == 1700
    assert usage["turns"] == 8
    json.dumps(report)  # serialisable as is


def test_next_steps_follow_the_data() -> None:
    steps = build_report(busy_input())["next_steps"]
    text = "\n".join(steps)
    assert steps[0].startswith("the plan was changed against its baseline")
    assert "`herd approve api`" in text
    assert "2 plan items still fail; next: logout button" in steps
    assert "uncommitted work was rescued on refs/herd/api/rescue/1" in text
    assert "`git show refs/herd/api/rescue/1`" in text
    assert not any("fails verification" in step for step in steps)  # only the last one counts
    assert any(step.startswith("still running") for step in steps)


def test_markdown_has_every_section_and_the_facts() -> None:
    md = render_markdown(build_report(busy_input()))
    assert md.startswith("# herd report: api — running")
    for section in (
        "## What changed",
        "## What passed",
        "## What remains",
        "## Incidents",
        "## Usage and time",
        "## Next steps",
    ):
        assert f"\n{section}\n" in md
    assert md.index("- [ ] logout button") < md.index("- [ ] profile page v2")
    assert "refs/herd/api/rescue/1" in md
    assert "$0.50" in md
    assert "2/4 plan items pass" in md
    assert "1 crash" in md
    assert "```\nFAILED tests/test_logout.py::test\\_it" not in md  # code block: not escaped
    assert "```\nFAILED tests/test_logout.py::test_it\n1 failed\n```" in md
    assert "1. the plan was changed against its baseline" in md
    assert "- reworded item 4: profile page → profile page v2" in md, (
        "items counted from 1, as the Plan tab does"
    )


def test_failing_last_checkpoint_and_crash_loop() -> None:
    data = busy_input(
        state="failed",
        reason="crash-loop",
        checkpoints=busy_input().checkpoints[:2],
        plan_current=None,
        plan_baseline=plan((0,)),
        events=[e for e in busy_input().events if e.kind != "plan-tampered"],
    )
    steps = build_report(data)["next_steps"]
    assert "crash loop: look at the last run's output with `herd logs api --run 1`" in steps
    assert any(step.startswith("checkpoint bbbbbbb fails verification (exit 1)") for step in steps)
    assert not any("plan was changed" in step for step in steps)


def test_completed_session_says_so() -> None:
    data = busy_input(
        state="completed",
        events=[event("task-started", at(2)), event("run-started", at(2), 1)],
        runs=[run(1, at(2), at(4), {"cost_usd": 1.25}, exit_code=0, outcome="success")],
        checkpoints=[checkpoint(SHA_GOOD, 3, "feat: all", True)],
        verifications={},
        plan_baseline=plan((0, 1, 2, 3)),
        plan_current=plan((0, 1, 2, 3)),
    )
    report = build_report(data)
    assert report["next_steps"] == [
        "completed: every plan item passes and the last checkpoint is verified"
    ]
    assert report["time"]["wall_s"] == 2 * 3600.0  # ends with the last run, not now
    assert report["remains"]["items_failing"] == []
    assert report["incidents"]["crashes"] == []
    md = render_markdown(report)
    assert "4/4 plan items pass" in md
    assert "Every plan item passes." in md
    assert "$1.25 spent over 2h00m in 1 run; no crashes." in md


def test_empty_session_renders() -> None:
    data = ReportInput(session="fresh", state="idle", generated_at=at(1))
    report = build_report(data)
    assert report["usage"]["cost_usd"] is None
    assert report["passed"]["plan_total"] is None
    assert report["time"]["wall_s"] is None
    assert report["next_steps"] == ["never started: `herd start fresh`"]
    md = render_markdown(report)
    assert "no plan; no checkpoint yet; never ran; no crashes." in md
    assert "cost unknown" in md
    assert "1. never started: `herd start fresh`" in md


def test_cost_unknown_when_no_run_reports_one() -> None:
    runs = [run(1, at(2), at(3), {"input_tokens": 10}), run(2, at(3), None, {})]
    report = build_report(busy_input(runs=runs))
    assert report["usage"]["cost_usd"] is None
    assert "cost unknown over" in render_markdown(report)


def test_agent_text_is_inert_and_escaped() -> None:
    nasty = "feat: \x1b[31mred\x07\n# heading <b>x</b>"
    tail = "ok\x1b[0m\n```\nend\x9b"
    data = busy_input(
        checkpoints=[checkpoint(SHA_GOOD, 3, nasty, False)],
        plan_current=plan((), ("- not a list", "1. not ordered", "`tick`")),
        plan_baseline=None,
        verifications={SHA_GOOD: {"passed": False, "output_tail": tail}},
    )
    report = build_report(data)
    assert report["changed"]["checkpoints"][0]["subject"] == nasty  # JSON keeps it as it was
    md = render_markdown(report)
    assert [ch for ch in md if ord(ch) < 0x20 and ch != "\n"] == []
    assert [ch for ch in md if 0x7F <= ord(ch) < 0xA0] == []
    assert "feat: ^\\[\\[31mred^G \\# heading \\<b\\>x\\</b\\>" in md
    assert "\n# heading" not in md
    assert "- [ ] \\- not a list" in md
    assert "- [ ] 1\\. not ordered" in md
    assert "- [ ] \\`tick\\`" in md
    assert "````\nok^[[0m\n```\nend\\x9b\n````" in md  # a fence longer than the output's
    assert "3 plan items still fail; next: - not a list" in report["next_steps"]
    assert "plan items still fail; next: - not a list\n" in md  # mid-line: no escape needed
    assert report["next_steps"][0].startswith("the plan was changed")  # the open warning says so


def test_resolved_and_old_warnings_are_not_open() -> None:
    events = [
        event("verify-failed", at(3), 1),
        event("verify-passed", at(3, 30), 1),
        event("stalled", at(4), 2),
        event("stalled", at(4, 30), 2),
        event("plan-invalid", at(4), 2),
    ]
    report = build_report(busy_input(events=events, plan_current=plan((0, 2))))
    warnings = report["remains"]["open_warnings"]
    assert [(w["kind"], w["count"]) for w in warnings] == [("stalled", 2)]
    assert any("1 open warnings (stalled)" in step for step in report["next_steps"])


def test_budget_stop_and_user_stop() -> None:
    budget = build_report(busy_input(state="stopped", reason="budget:cost_usd"))["next_steps"]
    assert any("raise `budget.cost_usd`" in step for step in budget)
    user = build_report(busy_input(state="stopped", reason="user", plan_current=plan((0,))))
    assert "stopped: `herd start api` continues from the last checkpoint" in user["next_steps"]


def test_a_requested_stop_is_no_crash() -> None:
    runs = [run(1, at(2), at(3), {}, signal="SIGTERM", outcome="signal SIGTERM",
                stop_requested=True)]  # fmt: skip
    events = [event("run-exited", at(3), 1, exit_code=None, signal="SIGTERM", outcome="x")]
    report = build_report(busy_input(state="stopped", reason="user", runs=runs, events=events))
    assert report["incidents"]["crashes"] == []
    assert report["incidents"]["restarts"] == 0


class CountedEvent(Event):
    """An event that counts how often the report reads its kind: the report's work per event."""

    kind_reads: ClassVar[list[int]] = [0]

    def __getattribute__(self, name: str) -> Any:
        if name == "kind":
            CountedEvent.kind_reads[0] += 1
        return super().__getattribute__(name)


def kind_reads_for(count: int) -> int:
    """How many times building a report reads an event's kind, over `count` mixed events."""
    kinds = (
        "verify-failed",
        "stalled",
        "checkpoint",
        "run-started",
        "verify-passed",
        "plan-invalid",
    )
    events = [
        CountedEvent(at=at(3), session="api", run=1, kind=kinds[i % len(kinds)], message="m")
        for i in range(count)
    ]
    data = busy_input(events=events, plan_error="bad")
    CountedEvent.kind_reads[0] = 0
    report = build_report(data)
    assert report["remains"]["open_warnings"]  # the open warnings were really worked out
    return CountedEvent.kind_reads[0]


def test_the_report_reads_its_events_in_linear_time() -> None:
    """Four times the events cost four times the reads, not sixteen (no rescan per warning).

    Counted, not timed: 8,000 events once took 1.5 s on the daemon's loop.
    """
    small, large = kind_reads_for(2_000), kind_reads_for(8_000)
    assert large <= 4 * small + 100, (small, large)
    assert small <= 3 * 2_000, small  # a few reads per event, whatever the warnings
