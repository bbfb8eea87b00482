"""The typed contract: `herd status --json` and `ls --json` print the model, field by field."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from conftest import PY, SIMAGENT, Herd, sim_repo, wait_until
from pydantic import BaseModel

from agentherd.sessions.status import (
    CheckpointStatus,
    LogsStatus,
    PlanStatus,
    ProgressStatus,
    SessionStatus,
    UsageStatus,
    VerificationStatus,
    WarningStatus,
    parse_reply,
    parse_status,
)

CONTRACT_FIELDS = frozenset(
    {
        *("session", "handle", "run", "state", "task_state", "reason", "pid", "exit_code"),
        *("signal", "restarts", "started_at", "ended_at", "agent_session_id", "plan"),
        *("progress", "checkpoint", "usage", "budget", "logs", "warnings"),
    }
)
"""The top-level names CONTRACT.md shows for `herd status --json`."""


def assert_shaped(value: dict[str, Any], model: type[BaseModel], where: str) -> None:
    """Every field of `model` is in `value` (optional ones may be left out) and nothing else."""
    omitted = {name for name, field in model.model_fields.items() if field.exclude_if}
    fields = set(model.model_fields)
    assert set(value) <= fields, f"{where}: fields the model lacks: {set(value) - fields}"
    missing = fields - set(value) - omitted
    assert not missing, f"{where}: fields missing from the JSON: {missing}"


def assert_status_json(status: dict[str, Any]) -> None:
    """The whole status object, nested objects included, against the models (strict types)."""
    SessionStatus.model_validate_json(json.dumps(status), strict=True)
    assert_shaped(status, SessionStatus, "status")
    nested = {
        "plan": PlanStatus,
        "progress": ProgressStatus,
        "checkpoint": CheckpointStatus,
        "usage": UsageStatus,
        "logs": LogsStatus,
    }
    for key, model in nested.items():
        assert status[key] is not None, key
        assert_shaped(status[key], model, key)
    assert_shaped(status["checkpoint"]["verification"], VerificationStatus, "verification")
    assert status["warnings"]
    for warning in status["warnings"]:
        assert_shaped(warning, WarningStatus, "warning")


def test_status_json_is_the_model_with_every_field(herd: Herd) -> None:
    """`herd status --json`, `ls --json` and the daemon's reply are the same model-shaped JSON."""
    repo = sim_repo(herd.root / "repo", features=2)
    verify = json.dumps([PY, "-c", "import sys; sys.exit(1)"])
    agent = json.dumps([*SIMAGENT, "--delay", "0", "--one-per-run"])
    herd.write(f"""
        [[session]]
        name = "api"
        cwd = "{repo}"
        command = {agent}
        agent = "claude"
        restart = "never"
        plan = "feature_list.json"
        progress = "claude-progress.txt"
        verify = {verify}
    """)
    client = herd.start()
    client.call("start", name="api")

    def head() -> str:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True
        )
        return done.stdout.strip()

    # The run may end before its last commit is looked at and verified: wait for HEAD's verdict,
    # its warnings (claims-done-but-fails follows verify-failed) and the fleet's sum, so two
    # reads agree.
    wait_until(
        lambda: (
            (s := herd.status("api"))["state"] == "failed"  # plan-incomplete: 1 of 2 pass
            and (s["checkpoint"] or {}).get("sha") == head()
            and s["checkpoint"].get("verification")
            and {w["kind"] for w in s["warnings"]} >= {"verify-failed", "claims-done-but-fails"}
            # `fleet` is summed at most a second late: wait until it has this run's spend too
            and (s["fleet"] or {}).get("usage") == s["usage"]
        ),
        timeout_s=60,
        what="an ended run with its last checkpoint verified",
    )
    assert set(SessionStatus.model_fields) >= CONTRACT_FIELDS

    printed = herd.cli("status", "api", "--json")
    assert printed.returncode == 0, printed.stderr
    status = json.loads(printed.stdout)
    assert_status_json(status)
    wire = client.call("status", target="api")
    assert printed.stdout == json.dumps(wire, indent=2) + "\n"  # the CLI re-prints the wire

    listed = herd.cli("ls", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [status]
    assert parse_status(wire) == parse_reply("ls", [wire])[0]

    task = herd.cli("status", "api/1", "--json")
    assert json.loads(task.stdout)["handle"] == "api/1"


def test_every_operation_has_a_reply_model() -> None:
    """No reply goes untyped: each operation the daemon answers names the model of its reply."""
    from agentherd.sessions.status import REPLIES
    from agentherd.supervisor.api.opargs import ARGS

    assert set(ARGS) == set(REPLIES) | {"status"}  # status: parse_status picks one of three


def test_status_and_report_close_warnings_by_the_same_rule() -> None:
    """The warning records (status) and the report's open warnings use one closing table."""
    from agentherd.sessions.open_warnings import CLOSED_BY
    from agentherd.sessions.report.facts import RESOLVED_BY

    assert CLOSED_BY == RESOLVED_BY
