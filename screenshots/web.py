"""Regenerate docs/web.md's pictures of `herd web` from the fixed fleet the snapshot tests use.

    python screenshots/web.py              # needs Debian's chromium (apt-get install chromium)

The fleet (tests/snapshot_fleet.py) is replayed to the real web app, served by uvicorn on a
free loopback port, and headless Chromium photographs the pages at a phone's width and at a
laptop's. The pages are rendered on the server, so the picture taken at load is the page.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import uvicorn

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "tests"))
from snapshot_fleet import ReplayClient, write_logs  # noqa: E402

from agentherd.tui.web.app import build  # noqa: E402
from agentherd.tui.web.bind import listen, plan_bind  # noqa: E402
from agentherd.tui.web.layout import Writer  # noqa: E402

PICTURES = (
    ("web-fleet-phone", "/", "390,1400"),
    ("web-session-phone", "/session/search-index", "390,2400"),
    ("web-spend-phone", "/session/api-migration", "390,2600"),
    ("web-fleet", "/", "1280,560"),
    ("web-confirm", "/session/api-migration/restart", "390,700"),
)
"""Picture name, page, and window size (a phone is 390 CSS pixels wide)."""

STARTUP_S = 10.0
"""How long the server may take to start listening."""


def chromium() -> str:
    """Debian's Chromium itself (its /usr/bin launcher adds flags that headless refuses)."""
    direct = Path("/usr/lib/chromium/chromium")
    found = str(direct) if direct.is_file() else shutil.which("chromium")
    if found is None:
        sys.exit("screenshots/web.py: no chromium; `apt-get install chromium`")
    return found


def main() -> None:
    browser = chromium()
    with tempfile.TemporaryDirectory(prefix="herd-web-shots-") as folder:
        client = ReplayClient(write_logs(Path(folder)), budgets=True)
        bind = plan_bind("127.0.0.1", 0, None, allow_actions=True)
        sock = listen(bind)
        port = sock.getsockname()[1]
        app = build(client, bind, Writer())
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + STARTUP_S
        while not server.started:
            if time.monotonic() > deadline:
                sys.exit("screenshots/web.py: the server did not start")
            time.sleep(0.05)
        try:
            for name, path, size in PICTURES:
                target = HERE / f"{name}.png"
                subprocess.run(
                    [
                        browser,
                        "--headless",
                        "--no-sandbox",
                        "--disable-gpu",
                        "--no-proxy-server",
                        "--hide-scrollbars",
                        f"--user-data-dir={folder}/profile",
                        f"--window-size={size}",
                        f"--screenshot={target}",
                        f"http://127.0.0.1:{port}{path}",
                    ],
                    check=True,
                    capture_output=True,
                    timeout=120,
                )
                print(f"wrote {target}")
        finally:
            server.should_exit = True
            thread.join(10)
            sock.close()


if __name__ == "__main__":
    main()
