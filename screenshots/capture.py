"""Regenerate the README's screenshots: the dashboard on a live demo fleet, as SVG and PNG.

    python screenshots/capture.py          # needs rsvg-convert (Debian: librsvg2-bin) for PNG

Runs the real daemon in this process on the demo workspace, lets the fleet work for a while
(a crash, a plan tamper, a failing verification happen on their own), then saves what the
dashboard shows at 120x34.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import anyio

from agentherd.sessions.config import load_config
from agentherd.supervisor.client import Client
from agentherd.supervisor.daemon import Daemon
from agentherd.supervisor.sim.demo import create_demo
from agentherd.tui.app import HerdApp

HERE = Path(__file__).parent
WORK_S = 45.0
"""Long enough for the demo's crash, tamper and failing verification to have happened."""


async def capture(socket_path: Path) -> None:
    """Drive the dashboard and save two pictures: the fleet, and one session's output."""
    app = HerdApp(socket_path, config_label="demo")
    async with app.run_test(size=(120, 34)) as pilot:
        await asyncio.sleep(WORK_S)
        for _ in range(5):  # mobile-sync: the one that tampered with its plan
            await pilot.press("down")
        await pilot.pause(0.5)
        app.save_screenshot("dashboard.svg", str(HERE))
        for _ in range(2):
            await pilot.press("up")
        await pilot.press("l")
        await asyncio.sleep(2.0)
        app.save_screenshot("dashboard-output.svg", str(HERE))


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="herd-shots-"))
    config = load_config(create_demo(root))
    daemon = Daemon(config)
    thread = threading.Thread(target=anyio.run, args=(daemon.serve,), daemon=True)
    thread.start()
    client = Client(daemon.socket_path)
    while not client.ping():
        time.sleep(0.05)
    try:
        client.call("up")
        asyncio.run(capture(daemon.socket_path))
    finally:
        client.call("down", socket_timeout_s=None)
        thread.join(60)
        shutil.rmtree(root, ignore_errors=True)
    for name in ("dashboard", "dashboard-output"):
        svg = HERE / f"{name}.svg"
        subprocess.run(["rsvg-convert", "-o", str(HERE / f"{name}.png"), str(svg)], check=True)
        print(f"wrote {svg} and {name}.png")


if __name__ == "__main__":
    main()
