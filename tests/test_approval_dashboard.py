"""The approval gate answered from the dashboard: A then y approves, X then y rejects.

The simulated agent tampers with its plan; `on_drift` holds it at the gate. The dashboard,
against the real in-process daemon, answers; the run continues to its end.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from conftest import Herd
from test_dashboard import cell, select, until, until_daemon
from test_person_in_the_loop import gated

from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.widgets import ConfirmScreen, SessionTable


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


def closed_tampering(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e
        for e in events
        if e["kind"] == "warning-closed" and e["data"].get("kind") == "plan-tampered"
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(("key", "answer"), [("A", "approved"), ("X", "rejected")])
async def test_the_dashboard_answers_the_approval_gate(herd: Herd, key: str, answer: str) -> None:
    # The agent waits after its tampering until `go` exists: a loaded CI saw the run end
    # before the daemon read the tampered plan (then the task fails, with no gate to answer).
    go = herd.root / "go"
    repo = gated(herd, delay_s=0.2, held_until=go)
    client = herd.start()
    client.call("start", name="api")
    plan = repo / "feature_list.json"
    total = len(json.loads(plan.read_text()))
    assert herd.daemon is not None
    app = HerdApp(herd.daemon.socket_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_daemon(
            pilot, client, "api", lambda s: s["state"] == "waiting-approval", "the gate"
        )
        table = app.query_one(SessionTable)
        await until(pilot, lambda: table.row_count == 1, "the row")
        await until(
            pilot, lambda: cell(app, "api", "state").startswith("waiting"), "the row: waiting"
        )
        await select(pilot, app, "api")
        await pilot.press(key)
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        go.touch()
        await pilot.press("y")
        status = await until_daemon(
            pilot, client, "api", lambda s: s["state"] != "waiting-approval", "the answer"
        )
        assert status["task_state"] != "input_required"
        await until(
            pilot, lambda: not cell(app, "api", "state").startswith("waiting"), "the row moves on"
        )
    events = await anyio.to_thread.run_sync(lambda: client.call("events", session="api"))
    kinds = [e["kind"] for e in events]
    assert f"plan-{answer}" in kinds and answer in kinds, kinds
    [closing] = closed_tampering(events)
    # A reject writes the baseline back: the plan's re-read may settle the warning first.
    settled_by = {f"plan-{answer}", "plan"} if answer == "rejected" else {f"plan-{answer}"}
    assert closing["data"]["by"] in settled_by
    if answer == "rejected":
        assert len(json.loads(plan.read_text())) == total, "the dropped item is back"
    ended = await anyio.to_thread.run_sync(
        lambda: herd.wait_state("api", "completed", "failed", timeout_s=60)
    )
    assert ended["state"] == "completed", ended["reason"]
    assert ended["plan"]["changed_items"] == []
