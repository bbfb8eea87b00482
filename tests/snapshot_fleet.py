"""A fixed fleet of six sessions, replayed to the dashboard for snapshot tests and screenshots.

`ReplayClient` answers the dashboard's reads (subscribe, log_info, events, report) with the
same JSON the daemon sends; the report is built by herd's own report code from recorded
records. Every time is fixed except the uptimes, which are set relative to now so the
picture reads `1h02m` whenever it is taken.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.plan import parse_plan
from agentherd.sessions.records import Event, RunRecord
from agentherd.sessions.report import ReportInput, build, render_markdown
from agentherd.sessions.status import LogInfoReply, SessionStatus
from agentherd.supervisor.api.protocol import ApiError

AT = "2026-11-30T09:00:00Z"

FEATURES = {
    "api-migration": [
        "List endpoints paginate",
        "Create validates",
        "Errors use RFC 7807",
        "Old routes redirect",
        "Rate limit headers",
        "OpenAPI lists routes",
    ],
    "auth-refactor": [
        "argon2 hashes",
        "Idle sessions expire",
        "Login rate limit",
        "Reset tokens single use",
    ],
    "search-index": ["Index on save", "Prefix match", "Ranked results", "Deletes leave"],
    "billing-export": ["CSV export", "Tax lines", "Currency", "Date range"],
    "docs-site": ["Landing page", "Code highlighting", "Search titles"],
    "mobile-sync": ["Offline sync", "Newest edit wins", "Progress in status bar", "Wi-Fi only"],
}


def _ago(seconds: float) -> str:
    """An ISO time `seconds` before now (uptimes are the one relative thing shown)."""
    moment = datetime.now(UTC) - timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _plan(name: str, passing: int) -> list[dict[str, Any]]:
    return [
        {"category": "functional", "description": d, "steps": [], "passes": i < passing}
        for i, d in enumerate(FEATURES[name])
    ]


ROWS: list[dict[str, Any]] = [
    {
        "name": "api-migration",
        "state": "running",
        "pid": 4211,
        "restarts": 0,
        "passing": 4,
        "verified": True,
        "cost": 0.42,
        "warnings": [],
        "last": "→ 6 passed; [4c1d2e9] Implement Rate limit headers",
    },
    {
        "name": "auth-refactor",
        "state": "running",
        "pid": 4275,
        "restarts": 1,
        "passing": 2,
        "verified": True,
        "cost": 0.31,
        "warnings": [],
        "last": "Write src/feature_3.py",
    },
    {
        "name": "search-index",
        "state": "running",
        "pid": 4302,
        "restarts": 0,
        "passing": 1,
        "verified": None,
        "cost": 0.12,
        "warnings": [("stall", "no output, commit or progress for 31s")],
        "last": "Waiting for the test of feature 2...",
    },
    {
        "name": "billing-export",
        "state": "failed",
        "reason": "crash-loop",
        "pid": None,
        "restarts": 5,
        "passing": 1,
        "verified": False,
        "cost": 0.88,
        "warnings": [("verify-failed", "checkpoint 9f3a1c2 fails verification (exit 1)")],
        "last": "error: Traceback (most recent call last)",
    },
    {
        "name": "docs-site",
        "state": "completed",
        "pid": None,
        "restarts": 0,
        "passing": 3,
        "verified": True,
        "cost": 0.57,
        "warnings": [],
        "last": "result: all 3 features pass",
    },
    {
        "name": "mobile-sync",
        "state": "running",
        "pid": 4388,
        "restarts": 0,
        "passing": 2,
        "verified": True,
        "cost": None,
        "warnings": [("plan-tampered", "the plan changed: item 3 removed")],
        "last": "Edit feature_list.json",
    },
]


def _sha(name: str, n: int) -> str:
    """A made-up commit id, the same on every run."""
    return f"{sum(map(ord, name)) * 7919 + n * 104729:x}".rjust(40, "a")[::-1]


def statuses() -> list[SessionStatus]:
    """The six sessions' statuses."""
    found = []
    for row in ROWS:
        name, total = row["name"], len(FEATURES[row["name"]])
        running = row["pid"] is not None
        changed = (
            [{"index": 2, "change": "removed", "description": FEATURES[name][2]}]
            if name == "mobile-sync"
            else []
        )
        verification = None
        if row["verified"] is False:
            verification = {
                "sha": _sha(name, 2),
                "passed": False,
                "duration_s": 1.4,
                "exit_code": 1,
                "output_tail": "FAILED tests/test_tax.py::test_lines\n3 failed: tax lines missing",
            }
        found.append(
            SessionStatus.model_validate(
                {
                    "session": name,
                    "handle": f"{name}/1",
                    "run": row["restarts"] + 1,
                    "state": row["state"],
                    "task_state": "working" if running else "done",
                    "reason": row.get("reason"),
                    "pid": row["pid"],
                    "restarts": row["restarts"],
                    "started_at": _ago(3725) if running else AT,
                    "ended_at": None if running else "2026-11-30T09:40:00Z",
                    "plan": {"passing": row["passing"], "total": total, "changed_items": changed},
                    "checkpoint": {
                        "sha": _sha(name, 2),
                        "at": "2026-11-30T09:31:00Z",
                        "subject": f"Implement {FEATURES[name][2]}",
                        "verified": row["verified"],
                        "verification": verification,
                    },
                    "usage": {"total_tokens": 120_000, "cost_usd": row["cost"], "turns": 12},
                    "warnings": [
                        {
                            "seq": 10 + i,
                            "kind": kind,
                            "message": message,
                            "at": AT,
                            "count": 1,
                            "opened_seq": 10 + i,
                            "opened_at": AT,
                        }
                        for i, (kind, message) in enumerate(row["warnings"])
                    ],
                    "last_line": row["last"],
                    "agent": "claude",
                }
            )
        )
    return found


def events(name: str) -> list[Event]:
    """A short history for each session."""
    row = next(r for r in ROWS if r["name"] == name)
    found = [
        Event(seq=1, at=AT, session=name, kind="plan-baseline", message="plan baseline: 0 pass"),
        Event(
            seq=2,
            at="2026-11-30T09:00:01Z",
            session=name,
            run=1,
            kind="task-started",
            message=f"task {name}/1 started",
        ),
        Event(
            seq=3,
            at="2026-11-30T09:00:01Z",
            session=name,
            run=1,
            kind="run-started",
            message="run 1 started (command): pid 4211",
        ),
        Event(
            seq=4,
            at="2026-11-30T09:31:00Z",
            session=name,
            run=1,
            kind="checkpoint",
            message=f"checkpoint {_sha(name, 2)[:7]} Implement feature",
        ),
    ]
    for i, (kind, message) in enumerate(row["warnings"]):
        found.append(
            Event(
                seq=10 + i,
                at="2026-11-30T09:32:00Z",
                session=name,
                run=1,
                kind=kind,
                message=message,
            )
        )
    return found


def checkpoints(name: str) -> list[Checkpoint]:
    row = next(r for r in ROWS if r["name"] == name)
    return [
        Checkpoint(
            sha=_sha(name, n),
            at=datetime(2026, 11, 30, 9, 10 * n + 11, tzinfo=UTC),
            subject=f"Implement {FEATURES[name][n]}",
            files=("feature_list.json", f"src/feature_{n + 1}.py"),
            verified=row["verified"] if n == 2 else True,
        )
        for n in range(3)
    ]


def report(name: str) -> dict[str, Any]:
    """The session's report, built by herd's report code from the records above."""
    row = next(r for r in ROWS if r["name"] == name)
    failing = {
        "sha": _sha(name, 2),
        "passed": False,
        "exit_code": 1,
        "duration_s": 1.4,
        "output_tail": "3 failed: tax lines missing",
    }
    data = ReportInput(
        session=name,
        state=row["state"],
        reason=row.get("reason"),
        handle=f"{name}/1",
        generated_at="2026-11-30T09:45:00Z",
        task_started_at=AT,
        runs=[
            RunRecord(
                session=name,
                run=1,
                handle=f"{name}/1",
                argv=["agent"],
                started_at=AT,
                usage={"cost_usd": row["cost"], "turns": 12},
            )
        ],
        events=events(name),
        checkpoints=checkpoints(name),
        verifications={failing["sha"]: failing} if row["verified"] is False else {},
        plan_baseline=parse_plan(json.dumps(_plan(name, 0)).encode()),
        plan_current=parse_plan(json.dumps(_plan(name, row["passing"])).encode()),
        progress_latest=[f"## Session 2 (coding)\n- Status: {row['passing']} passing"],
        progress_updated_at="2026-11-30T09:31:00Z",
        diffstat=(4, 120, 8),
        agent="claude",
        cwd=f"/work/{name}",
    )
    built = build(data)
    return {"report": built.model_dump(mode="json"), "markdown": render_markdown(built)}


OUTPUT_LINES = [
    {"type": "system", "subtype": "init", "session_id": "s-1", "model": "sim-1"},
    {"type": "assistant", "message": {"content": [{"type": "text", "text": "Reading the plan."}]}},
    {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "tool_use", "name": "Write", "input": {"file_path": "src/feature_4.py"}}
            ]
        },
    },
    {
        "type": "user",
        "message": {"content": [{"type": "tool_result", "content": "File created successfully"}]},
    },
    {
        "type": "assistant",
        "message": {
            "content": [{"type": "tool_use", "name": "Bash", "input": {"command": "pytest -q"}}]
        },
    },
    {"type": "user", "message": {"content": [{"type": "tool_result", "content": "6 passed"}]}},
    {"type": "result", "subtype": "success", "result": "feature 4 done", "session_id": "s-1"},
]


def write_logs(folder: Path) -> dict[str, Path]:
    """A run log per session, in stream-json as Claude writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for row in ROWS:
        path = folder / f"{row['name']}.log"
        path.write_text("".join(json.dumps(line) + "\n" for line in OUTPUT_LINES))
        paths[row["name"]] = path
    return paths


BUDGET = {
    "cost_usd": {"spent": 0.42, "limit": 2.0, "fraction": 0.21, "estimated": False},
    "tokens": {"spent": 120_000, "limit": 300_000, "fraction": 0.4},
    "wall_time": {"spent": 3600, "limit": 21600, "fraction": 0.1667},
    "restarts": {"spent": 0, "limit": 20, "fraction": 0.0},
    "warn_at": 0.8,
    "projection": {
        "dimension": "tokens",
        "exhausted_at": "2026-11-30T10:51:00Z",
        "seconds_left": 3060.0,
        "items_passing_by_then": 5,
        "plan_total": 6,
        "runs_out_before_plan": True,
    },
}
"""api-migration's budget when the replay has budgets: tokens run out before the plan is done."""


def spend_samples() -> list[list[Any]]:
    """api-migration's spend over its hour, a sample every two minutes, faster lately."""
    start = datetime(2026, 11, 30, 9, 0, tzinfo=UTC).timestamp()
    found = []
    for n in range(31):
        share = (n / 30) ** 2
        found.append(
            [start + n * 120, int(120_000 * share), round(0.42 * share, 4), n // 3, n // 8]
        )
    return found


class ReplayClient:
    """Answers the dashboard's reads from the fixed fleet; every command is refused."""

    read_only = False

    def __init__(self, logs: dict[str, Path], budgets: bool = False) -> None:
        self.logs = logs
        self.budgets = budgets
        """api-migration has a budget and spend samples (other sessions have neither)."""
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call(self, op: str, **args: Any) -> Any:
        """One reply, as the daemon's JSON."""
        self.calls.append((op, args))
        name = args.get("name") or args.get("session")
        if op in ("ls", "status") and not args.get("target"):
            return [s.to_json() for s in self._statuses()]
        if op == "status":
            found = [s for s in self._statuses() if s.session == args["target"]]
            if not found:
                raise ApiError("unknown-session", f"no session named {args['target']!r}")
            return found[0].to_json()
        if op == "log_info":
            run = next(r["restarts"] + 1 for r in ROWS if r["name"] == name)
            return LogInfoReply(
                run=run, path=str(self.logs[name]), current_run=run, live=False, state="running"
            ).to_json()
        if op == "events":
            return [e.to_json() for e in events(name) if e.seq > int(args.get("since") or 0)]
        if op == "report":
            return report(name)
        if op == "spend":
            samples = spend_samples() if self.budgets and name == "api-migration" else []
            return {"session": name, "samples": samples}
        if op == "diff":
            return diff_reply(str(name), args)
        raise ApiError("bad-state", f"{op}: this is a replayed fleet")

    async def stream(self, op: str, **args: Any) -> Any:
        """`subscribe`: one snapshot, then nothing changes."""
        yield {"sessions": [s.to_json() for s in self._statuses()], "at": AT}
        await anyio.sleep_forever()

    def _statuses(self) -> list[SessionStatus]:
        """The fleet's statuses (api-migration with its budget when `budgets`)."""
        found = statuses()
        if self.budgets:
            found[0] = found[0].model_copy(update={"budget": BUDGET})
        return found


DIFF_TEXT = """diff --git a/billing/export.py b/billing/export.py
index 3b18e51..a4c2f0d 100644
--- a/billing/export.py
+++ b/billing/export.py
@@ -12,9 +12,14 @@ def export_csv(invoices, out):
     writer = csv.writer(out)
-    writer.writerow(["id", "amount"])
+    writer.writerow(["id", "amount", "currency"])
     for invoice in invoices:
-        writer.writerow([invoice.id, invoice.amount])
+        writer.writerow([invoice.id, invoice.amount, invoice.currency])
+
+
+def export_pdf(invoices, out):
+    raise NotImplementedError("PDF export")
"""


def diff_reply(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The `diff` op on the replayed fleet: the newest checkpoint's two files, one file's text."""
    checkpoints = [
        {"sha": "9f1c2ab" + "0" * 33, "short": "9f1c2ab", "at": "2025-11-30T09:40:00Z",
         "subject": "Add PDF export stub", "verified": False, "files": 2, "insertions": 9,
         "deletions": 2},
        {"sha": "41d07e3" + "0" * 33, "short": "41d07e3", "at": "2025-11-30T09:10:00Z",
         "subject": "CSV export with currency", "verified": True, "files": 1, "insertions": 30,
         "deletions": 0},
    ]  # fmt: skip
    files = [
        {"path": "billing/export.py", "status": "modified", "added": 7, "removed": 2},
        {"path": "tests/test_export.py", "status": "added", "added": 2, "removed": 0},
    ]
    wanted = args.get("file")
    texts = {wanted: {"text": DIFF_TEXT, "truncated": False}} if wanted else {}
    return {
        "session": name, "checkpoints": checkpoints, "work": False, "target": checkpoints[0],
        "against": "previous", "base_label": "checkpoint 41d07e3", "base": checkpoints[1]["sha"],
        "files": files, "texts": texts,
    }  # fmt: skip
