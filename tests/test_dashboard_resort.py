"""Keys act on the session the person sees: the fleet's order holds still while keys are typed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from snapshot_fleet import ReplayClient, statuses, write_logs
from test_dashboard import cell, select, until
from textual.widgets import Footer

from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.messages import Snapshot
from agentherd.tui.dashboard.widgets import ConfirmScreen, SessionTable

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def rows(app: HerdApp) -> list[str]:
    """Session names in the table's order, top to bottom."""
    return list(app.query_one(SessionTable).order)


def notices(app: HerdApp) -> str:
    """Every notice shown so far, titles included, one per line."""
    return "\n".join(f"{n.title or ''} {n.message}" for n in app._notifications)


def failing(name: str) -> Snapshot:
    """The fleet's snapshot in which session `name` has just failed (so it sorts to the top)."""
    return Snapshot(
        [
            s.model_copy(update={"state": "failed", "pid": None}) if s.session == name else s
            for s in statuses()
        ],
        changed={name},
    )


async def test_a_session_changing_state_while_keys_are_typed_moves_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen in the demo: in the "needs a person" order `j j j p` paused the wrong session. A
    session between the cursor and its target failed after the first `j` and sorted to the
    top, so the next two `j`s went past the row the person was counting to. Now the order
    holds still while keys are typed: `p` pauses the fourth row as the person saw it, and the
    notice names it."""
    monkeypatch.setattr("agentherd.tui.dashboard.fleet.ORDER_HOLD_S", 60.0, raising=False)
    client = ReplayClient(write_logs(tmp_path))
    app = HerdApp(client=client)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6, "rows")
        seen = rows(app)
        await select(pilot, app, seen[0])
        await pilot.press("j")
        app.post_message(failing(seen[2]))  # the row below the cursor fails: it sorts up
        await until(pilot, lambda: cell(app, seen[2], "state").startswith("failed"), "failed")
        assert rows(app) == seen, "the order held still while keys are typed"
        await pilot.press("j", "j", "p")
        await until(pilot, lambda: any(op == "pause" for op, _ in client.calls), "the pause")
        paused = [args["name"] for op, args in client.calls if op == "pause"]
        assert paused == [seen[3]], f"the person counted to {seen[3]}"
        await until(pilot, lambda: f"pause {seen[3]}" in notices(app), "a notice naming it")


async def test_a_row_that_moves_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once no key has been typed for the hold, the rows take their new order and a notice
    says which session moved where and why."""
    monkeypatch.setattr("agentherd.tui.dashboard.fleet.ORDER_HOLD_S", 0.2, raising=False)
    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6, "rows")
        seen = rows(app)
        await pilot.press("j")
        app.post_message(failing(seen[2]))
        await until(pilot, lambda: rows(app)[1] == seen[2], "the new order")
        assert app.query_one(SessionTable).selected_session == seen[1], "the cursor followed"
        await until(pilot, lambda: f"{seen[2]} moved" in notices(app), "the notice")
        assert "failed" in notices(app)


def footer_words(app: HerdApp) -> tuple[str, list[str]]:
    """The footer's session name and its keys as `key description`, left to right."""
    footer = app.screen.query_one(Footer)
    name = next((str(w.render()) for w in footer.query("#footer-session")), "")
    keys = [
        f"{w.key_display} {w.description}"  # type: ignore[attr-defined]
        for w in footer.children
        if hasattr(w, "key_display")
    ]
    return name, keys


def footer_width(app: HerdApp) -> int:
    """The columns the footer's keys take (more than the screen's: the rest is cut off)."""
    footer = app.screen.query_one(Footer)
    return sum(w.outer_size.width + w.styles.margin.right for w in footer.children)


async def test_a_session_waiting_for_approval_shows_A_and_X_and_what_is_judged(
    tmp_path: Path,
) -> None:
    """Seen in the demo: with the selected session in `waiting-approval` neither footer showed
    `A`/`X` (and the 120-column footer was cut), and the approve dialog did not say what was
    being approved. Now the footer names the session and shows the keys that apply to its
    state, within 120 columns, and the dialog lists the plan change, the failing check and the
    spend."""
    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6, "rows")
        held = [
            s.model_copy(update={"state": "waiting-approval", "reason": "plan-tampered"})
            if s.session == "mobile-sync"
            else s
            for s in statuses()
        ]
        app.post_message(Snapshot(held, changed={"mobile-sync"}))
        await until(pilot, lambda: "waiting" in cell(app, "mobile-sync", "state"), "held")
        await select(pilot, app, "mobile-sync")
        await until(
            pilot,
            lambda: {"A Approve", "X Reject"} <= set(footer_words(app)[1]),
            f"A and X in the footer (it shows {footer_words(app)[1]})",
        )
        name, keys = footer_words(app)
        assert name == "mobile-sync", "the footer names whom its keys act on"
        assert "a Ack" in keys, keys
        assert "p Pause" not in " ".join(keys), "pausing a held run does nothing"
        assert footer_width(app) <= 120, keys
        await select(pilot, app, "docs-site")  # completed: start or restart it, nothing else
        await until(pilot, lambda: footer_words(app)[0] == "docs-site", "the footer follows")
        assert not {"A Approve", "X Reject", "K Kill"} & set(footer_words(app)[1])
        assert "s Start" in footer_words(app)[1]
        await select(pilot, app, "mobile-sync")
        await pilot.press("A")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        assert isinstance(app.screen, ConfirmScreen)
        said = app.screen.consequence
        assert 'removed item 3 "Progress in status bar"' in said, said
        assert "Spent so far: not reported" in said, "its agent reports no cost, never $0"


async def test_the_failing_check_is_in_the_approve_dialog(tmp_path: Path) -> None:
    """billing-export's checkpoint fails verification: approving its plan says so."""
    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6, "rows")
        held = [
            s.model_copy(update={"state": "waiting-approval", "reason": "plan-tampered"})
            if s.session == "billing-export"
            else s
            for s in statuses()
        ]
        app.post_message(Snapshot(held, changed={"billing-export"}))
        await until(pilot, lambda: "waiting" in cell(app, "billing-export", "state"), "held")
        await select(pilot, app, "billing-export")
        await pilot.press("X")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        assert isinstance(app.screen, ConfirmScreen)
        said = app.screen.consequence
        assert "fails verification: exit 1: 3 failed: tax lines missing" in said, said
        assert "Spent so far: $0.88" in said, said


class AckingClient(ReplayClient):
    """The replayed fleet, answering `ack` as the daemon does: the status, warnings gone."""

    async def call(self, op: str, **args: Any) -> Any:
        if op == "ack":
            self.calls.append((op, args))
            status = next(s for s in statuses() if s.session == args["name"])
            return status.model_copy(update={"warnings": []}).to_json()
        return await super().call(op, **args)


async def test_the_ack_notice_says_what_was_acknowledged(tmp_path: Path) -> None:
    """Seen in the demo: `a` on mobile-sync said "mobile-sync: waiting-approval
    (plan-tampered)", its state; now it names the warning acknowledged and whose."""
    app = HerdApp(client=AckingClient(write_logs(tmp_path)))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6, "rows")
        await select(pilot, app, "mobile-sync")
        await pilot.press("a")
        await until(pilot, lambda: "mobile-sync" in notices(app), "the notice")
        said = notices(app)
        assert "acknowledged plan-tampered of mobile-sync" in said, said


async def test_read_only_the_footer_offers_no_key_that_changes_a_session(tmp_path: Path) -> None:
    """With no daemon (the dashboard reads the state on disk) `s`, `r`, `K`, `p`, `a` can only
    say "read-only": the footer no longer offers them."""
    client = ReplayClient(write_logs(tmp_path))
    client.read_only = True  # type: ignore[misc]
    app = HerdApp(client=client)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6, "rows")
        await select(pilot, app, "api-migration")
        await until(pilot, lambda: any(k.startswith("q ") for k in footer_words(app)[1]), "keys")
        keys = " ".join(footer_words(app)[1])
        for word in ("Start", "Stop", "Restart", "Kill", "Pause", "Ack"):
            assert word not in keys, keys
        assert "⏎ Open" in keys and "l Output" in keys
