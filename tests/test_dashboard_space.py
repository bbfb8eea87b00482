"""The fleet view uses the screen it has: at 80x24, 120x40 and 200x60 a person sees the rows,
the selected session's details and (where there is room) its output, a header and a footer
that are never cut, and the keys that apply to the selected session."""

from __future__ import annotations

from pathlib import Path

import pytest
from snapshot_fleet import ReplayClient, statuses, write_logs
from test_dashboard import cell, select, until
from test_dashboard_resort import footer_words, rows
from textual.widgets import Footer, Static

from agentherd.tui.dashboard.app import HerdApp
from agentherd.tui.dashboard.messages import Snapshot
from agentherd.tui.dashboard.output_view import FleetOutput
from agentherd.tui.dashboard.session_screen import SessionScreen
from agentherd.tui.dashboard.widgets import SessionTable

pytestmark = pytest.mark.anyio

SIZES = [(80, 24), (120, 40), (200, 60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def held(name: str) -> Snapshot:
    """The fleet's snapshot in which `name` waits for its plan change to be approved."""
    return Snapshot(
        [
            s.model_copy(update={"state": "waiting-approval", "reason": "plan-tampered"})
            if s.session == name
            else s
            for s in statuses()
        ],
        changed={name},
    )


def footer_spans(app: HerdApp) -> list[tuple[str, int, int]]:
    """Each thing the footer shows (its text, first and last column on screen + 1)."""
    footer = app.screen.query_one(Footer)
    return [
        (str(w.render()), w.region.x, w.region.right)
        for w in footer.query("*")
        if w.region.width and (hasattr(w, "key_display") or w.id == "footer-session")
    ]


def assert_fits(spans: list[tuple[str, int, int]], width: int) -> None:
    """Every key ends within the width and before the palette's key (docked on the right)."""
    assert spans, "the footer shows something"
    palette = next((x for text, x, _ in spans if "palette" in text), width)
    for text, _, right in spans:
        end = width if "palette" in text else palette
        assert right <= end, f"{text!r} ends at column {right}, past {end}: {spans}"


def pane_shown(app: HerdApp) -> bool:
    """The output pane is on screen."""
    return (
        bool(app.query_one("#output-pane").display)
        and app.query_one("#output-pane").size.height > 0
    )


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_the_fleet_uses_the_screen_it_has(tmp_path: Path, size: tuple[int, int]) -> None:
    """Seen in the demo: at 120x40 and 200x60 most of the screen was empty unless `l` was
    pressed, a horizontal scrollbar crossed the middle, the header was cut and STATE grew to
    36 characters. Now, where there is room, the selected session's output shows under its
    details without a key; the rows fit the width (no sideways scrolling), STATE cuts a long
    reason with an ellipsis (the details say it whole) and the header fits. At 80x24 the
    output waits for `l` as before."""
    width, height = size
    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6, "rows")
        app.post_message(held("mobile-sync"))
        await until(pilot, lambda: "waiting" in cell(app, "mobile-sync", "state"), "held")
        await select(pilot, app, "mobile-sync")
        table = app.query_one(SessionTable)
        details = str(app.query_one("#details", Static).render())
        await until(
            pilot,
            lambda: "waiting-approval (plan-tampered)" in str(app.query_one("#details").render()),
            f"the reason whole in the details (they say {details!r})",
        )
        state = cell(app, "mobile-sync", "state")
        if width >= 160:  # room for the reason whole
            assert state == "waiting-approval (plan-tampered) ⚠1", state
        else:
            assert len(state) <= 24, f"STATE is {len(state)} characters: {state!r}"
        await until(pilot, lambda: table.max_scroll_x == 0, "rows that fit the width")
        assert table.virtual_size.width <= table.size.width
        summary = str(app.query_one("#summary", Static).render())
        assert len(summary.rstrip()) <= width, f"the header is cut: {summary!r}"
        assert "need a person" in summary
        if width >= 120:
            await until(pilot, lambda: pane_shown(app), "the output pane without a key")
            pane = app.query_one(FleetOutput)
            await until(pilot, lambda: pane.session == "mobile-sync", "mobile-sync's output")
            await until(pilot, lambda: pane.lines.line_count >= 1, "its lines")
            assert app.query_one("#details").size.height >= 3, "the details are there too"
            await pilot.press("l")  # the person may still hide it, and bring it back
            await until(pilot, lambda: not pane_shown(app), "l hides it")
            await pilot.press("l")
            await until(pilot, lambda: pane_shown(app), "l shows it again")
        else:
            assert not pane_shown(app), "80x24 keeps its rows: the output waits for `l`"
            await pilot.press("l")
            await until(pilot, lambda: pane_shown(app), "l shows it")


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_the_footer_fits_and_offers_approve_and_reject(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """Seen in the demo: the footer was cut at 120 columns (`l Ou`) and at 80 mid-word. Now
    with a session waiting for approval selected it names it, shows A Approve and X Reject
    first, and shows only whole keys that fit the width, Help among them."""
    width, _ = size
    app = HerdApp(client=ReplayClient(write_logs(tmp_path)))
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6, "rows")
        app.post_message(held("mobile-sync"))
        await until(pilot, lambda: "waiting" in cell(app, "mobile-sync", "state"), "held")
        await select(pilot, app, "mobile-sync")
        await until(
            pilot,
            lambda: {"A Approve", "X Reject"} <= set(footer_words(app)[1]),
            f"A and X in the footer (it shows {footer_words(app)[1]})",
        )
        await pilot.pause(0.1)
        name, keys = footer_words(app)
        assert name == "mobile-sync"
        assert "? Help" in keys, keys
        assert_fits(footer_spans(app), width)
        await select(pilot, app, "api-migration")  # running: stop it, pause it; no A or X
        await until(pilot, lambda: footer_words(app)[0] == "api-migration", "it follows")
        await pilot.pause(0.1)
        keys = footer_words(app)[1]
        assert "p Pause" in keys and "A Approve" not in keys, keys
        assert_fits(footer_spans(app), width)


async def test_read_only_the_session_screen_offers_no_restart_from(tmp_path: Path) -> None:
    """With no daemon `F` (restart from a checkpoint) can only say "read-only": neither the
    fleet's footer nor the session screen's offers a key that changes a session."""
    client = ReplayClient(write_logs(tmp_path))
    client.read_only = True  # type: ignore[misc]
    app = HerdApp(client=client)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: len(rows(app)) == 6, "rows")
        await select(pilot, app, "api-migration")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionScreen), "the session screen")
        await until(pilot, lambda: any(k.endswith(" Back") for k in footer_words(app)[1]), "keys")
        keys = " ".join(footer_words(app)[1])
        for word in ("Restart", "Stop", "Kill", "Pause", "Ack", "Approve"):
            assert word not in keys, keys
