"""Regenerate the README's screenshots from the fixed fleet the snapshot tests use.

    python screenshots/capture.py          # needs rsvg-convert (Debian: librsvg2-bin) for PNG

The fleet (tests/snapshot_fleet.py) is replayed to the real dashboard, so the pictures show
the same sessions as tests/__snapshots__/ and change only when the dashboard does.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "tests"))
from snapshot_fleet import ReplayClient, write_logs  # noqa: E402

from agentherd.tui.dashboard.app import HerdApp  # noqa: E402
from agentherd.tui.dashboard.widgets import SessionTable  # noqa: E402

SIZE = (120, 34)
NOTES = {"search-index": "stalls after feature 2: herd raises a stall warning (⚠)"}
PICTURES = ("dashboard", "dashboard-session", "dashboard-spend", "dashboard-help")


async def capture(logs: Path) -> None:
    """The fleet, one session's checkpoints, one session's spend, and the help."""
    client = ReplayClient(write_logs(logs))
    app = HerdApp(client=client, config_label="demo", notes=NOTES)
    async with app.run_test(size=SIZE) as pilot:
        while app.query_one(SessionTable).row_count < 6:
            await pilot.pause(0.05)
        await pilot.pause(1.0)
        app.refresh_bindings()
        await pilot.pause(0.5)
        app.save_screenshot("dashboard.svg", str(HERE))
        await pilot.press("enter", "4")
        while not any(op == "report" for op, _ in client.calls):
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        await pilot.wait_for_scheduled_animations()  # as the snapshot tests do: the tab's
        await pilot.pause()  # underline and the footer of the focus it moved settle
        app.save_screenshot("dashboard-session.svg", str(HERE))
        await pilot.press("escape")
        await pilot.pause(0.2)
    client = ReplayClient(write_logs(logs), budgets=True)
    app = HerdApp(client=client, config_label="demo", notes=NOTES)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.query_one(SessionTable)
        while table.row_count < 6:
            await pilot.pause(0.05)
        table.move_cursor(row=table.get_row_index("api-migration"))
        await pilot.press("enter", "6")
        while not any(op == "spend" for op, _ in client.calls):
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        await pilot.wait_for_scheduled_animations()  # as the snapshot tests do: the tab's
        await pilot.pause()  # underline and the footer of the focus it moved settle
        app.save_screenshot("dashboard-spend.svg", str(HERE))
    app = HerdApp(client=ReplayClient(write_logs(logs)), config_label="demo", notes=NOTES)
    async with app.run_test(size=(120, 50)) as pilot:
        while app.query_one(SessionTable).row_count < 6:
            await pilot.pause(0.05)
        await pilot.press("question_mark")
        await pilot.pause(0.5)
        app.save_screenshot("dashboard-help.svg", str(HERE))


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="herd-shots-") as folder:
        asyncio.run(capture(Path(folder)))
    for name in PICTURES:
        svg = HERE / f"{name}.svg"
        subprocess.run(["rsvg-convert", "-o", str(HERE / f"{name}.png"), str(svg)], check=True)
        print(f"wrote {svg} and {name}.png")


if __name__ == "__main__":
    main()
