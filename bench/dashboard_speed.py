"""The dashboard at a big fleet: the session screen's open, every tab switch and the start to a
full fleet, per herd build side by side (issue 26 item 5: open and switch p95 <= 100 ms, start
<= 1 s at 200 sessions).

    unshare --pid --fork --mount-proc nice -n 19 python bench/dashboard_speed.py \
        --sessions 200 [--opens 10] [--rounds 2] [--herd before=/path/.venv/bin/herd]

Per round and build: the build's own daemon (`python -m agentherd.supervisor.main`, the python
beside its `herd`) over a fresh fleet of busy sessions (a line a second, restarted after 20-60
s: bench/dashboard_load.py's agent) with a progress file, settled; then the build's dashboard
(`HerdApp` under Textual's pilot, `App.run_test`, headless 160x50) in a child process of that
build's python (`--child`), so each build imports its own code. The child times the start
(the app built until every session is a row and drawn), then `--opens` times: a row further
down, Enter, the tab keys 2-9 and 1, Escape. A key is timed from posting it (as the terminal
driver does) to the first screen update that shows it (the session screen, the tab in front),
with the dashboard process's CPU milliseconds over the same span; the open's reads (every tab's
content: the report arrives last) and the Diff tab's file list are timed to their arrival.
Builds alternate round by round.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import suite  # noqa: E402  (repos, the PID-1 reaper, spread)
from dashboard_load import BUSY_AGENT, ScreenClock, percentile  # noqa: E402

SETTLE_S = 8.0
"""After every session started, the fleet settles this long before the dashboard starts."""

KEY_GAP_S = 0.3
"""Time between two keys: the reads a key started land before the next key is timed."""

KEY_TIMEOUT_S = 30.0
PROGRESS = "## Session 1\n- read the task\n- wrote the parser\n\n## Session 2\n- tests pass\n"
TAB_IDS = ("output", "progress", "plan", "checkpoints", "events", "spend", "report", "diff")
TAB_IDS += ("terminal",)
TAB_KEYS = ("2", "3", "4", "5", "6", "7", "8", "9", "1")


def fleet(folder: Path, repos: list[Path], sessions: int) -> Path:
    """A herd.toml of `sessions` busy agents, each in its own repo with a progress file."""
    folder.mkdir(parents=True)
    blocks = []
    for index, repo in enumerate(repos[:sessions]):
        (repo / "progress.txt").write_text(PROGRESS)
        blocks.append(
            f'[[session]]\nname = "s{index:03d}"\ncwd = "{repo}"\n'
            f"command = {json.dumps([sys.executable, '-c', BUSY_AGENT])}\n"
            'progress = "progress.txt"\nrestart = "always"\nrestart_delay = "1s"\n'
            'stop_grace = "2s"\n'
        )
    config = folder / "herd.toml"
    config.write_text("\n".join(blocks))
    return config


# ----- the child: one build's dashboard ------------------------------------------------------


async def child(config: Path, sessions: int, opens: int) -> dict[str, Any]:
    """The dashboard against the daemon of `config`: every sample, in milliseconds."""
    from textual import events
    from textual.widgets import TabbedContent

    from agentherd.sessions.config import load_config
    from agentherd.supervisor.files.paths import socket_path_for
    from agentherd.tui.dashboard.app import HerdApp
    from agentherd.tui.dashboard.diff_view import DiffView
    from agentherd.tui.dashboard.session_screen import SessionScreen
    from agentherd.tui.dashboard.widgets import SessionTable

    arrived: dict[str, float] = {}
    loaded = SessionScreen.on_loaded
    listed = DiffView.on_diff_listed

    def on_loaded(screen: Any, message: Any) -> None:
        loaded(screen, message)
        arrived.setdefault(message.what, time.monotonic())

    def on_diff_listed(view: Any, message: Any) -> None:
        listed(view, message)
        arrived.setdefault("diff", time.monotonic())

    SessionScreen.on_loaded = on_loaded  # type: ignore[method-assign]
    DiffView.on_diff_listed = on_diff_listed  # type: ignore[method-assign]

    out: dict[str, Any] = {"open": [], "open_cpu": [], "read": [], "diff_listed": []}
    out["first_open"], out["first_open_cpu"] = [], []
    out["missed"], out["switch_cpu"] = [], []
    out.update({f"tab{key}": [] for key in TAB_KEYS})
    out.update({f"tab{key}_cpu": [] for key in TAB_KEYS})
    cpu0, began = time.process_time(), time.monotonic()
    app = HerdApp(socket_path_for(load_config(config).state_dir))
    async with app.run_test(size=(160, 50)) as pilot:
        clock = ScreenClock(app)
        table = app.query_one(SessionTable)
        while table.row_count < sessions and time.monotonic() - began < 120:
            await pilot.pause(0.01)
        clock.changed.clear()
        await asyncio.wait_for(clock.changed.wait(), KEY_TIMEOUT_S)
        out["start"] = [(time.monotonic() - began) * 1000]
        out["start_cpu"] = [(time.process_time() - cpu0) * 1000]
        await asyncio.sleep(2.0)

        async def timed(key: str, shown: Any) -> tuple[float, float]:
            """ms and CPU ms from posting `key` to the first screen update once `shown()`."""
            cpu, start = time.process_time(), time.monotonic()
            app.post_message(events.Key(key, None if key == "escape" else key))
            while time.monotonic() - start < KEY_TIMEOUT_S:
                clock.changed.clear()
                await asyncio.wait_for(clock.changed.wait(), KEY_TIMEOUT_S)
                if shown():
                    break
            else:
                focused = type(app.screen.focused).__name__
                print(f"key {key} never showed: {app.screen!r}, focus {focused}", file=sys.stderr)
                out["missed"].append(key)
            return (time.monotonic() - start) * 1000, (time.process_time() - cpu) * 1000

        step = max(1, sessions // max(1, opens))
        for index in range(opens):
            table.move_cursor(row=(index * step + 3) % table.row_count)
            await asyncio.sleep(KEY_GAP_S)
            arrived.clear()
            began = time.monotonic()
            ms, cpu = await timed("enter", lambda: isinstance(app.screen, SessionScreen))
            first = "first_" if index == 0 else ""  # the app's first composes the screen
            out[f"{first}open"].append(ms)
            out[f"{first}open_cpu"].append(cpu)
            screen = app.screen
            deadline = time.monotonic() + 30
            while "report" not in arrived and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            out["read"].append((arrived.get("report", time.monotonic()) - began) * 1000)
            tabs = screen.query_one(TabbedContent)
            await asyncio.sleep(KEY_GAP_S)
            for key in TAB_KEYS:
                whole = time.process_time()
                wanted = TAB_IDS[int(key) - 1]
                arrived.pop("diff", None)
                began = time.monotonic()
                ms, cpu = await timed(key, lambda t=tabs, w=wanted: t.active == w)
                out[f"tab{key}"].append(ms)
                out[f"tab{key}_cpu"].append(cpu)
                if wanted == "diff":
                    deadline = time.monotonic() + 30
                    while "diff" not in arrived and time.monotonic() < deadline:
                        await asyncio.sleep(0.01)
                    out["diff_listed"].append(
                        (arrived.get("diff", time.monotonic()) - began) * 1000
                    )
                await asyncio.sleep(KEY_GAP_S)
                out["switch_cpu"].append((time.process_time() - whole) * 1000)
            await timed("escape", lambda: not isinstance(app.screen, SessionScreen))
    return out


# ----- the parent: daemons, fleets, builds side by side --------------------------------------


def cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_round(
    python: str, config: Path, sessions: int, opens: int, profile: Path | None = None
) -> dict[str, Any]:
    """A daemon of `python`'s build over `config`, its dashboard measured in a child."""
    herd = [str(Path(python).parent / "herd"), "--config", str(config)]
    try:
        subprocess.run([*herd, "up", "--no-tui"], check=True, stdout=subprocess.DEVNULL)
        daemon = int((config.parent / ".herd" / "daemon.lock").read_text().split()[0])
        deadline = time.monotonic() + 180
        while True:
            listed = subprocess.run([*herd, "ls", "--json"], capture_output=True, text=True)
            states = [s["state"] for s in json.loads(listed.stdout or "[]")]
            if states.count("running") >= sessions * 0.9:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the fleet did not start: {states[:5]}...")
            time.sleep(0.5)
        time.sleep(SETTLE_S)
        imports = [
            suite.run_verb([python, "-c", "import agentherd.tui.dashboard.app"]) for _ in range(3)
        ]
        daemon_cpu = cpu_s(daemon)
        got = subprocess.run(
            [python, str(Path(__file__).resolve()), "--child", str(config)]
            + ["--sessions", str(sessions), "--opens", str(opens)]
            + (["--profile", str(profile)] if profile else []),
            capture_output=True,
            text=True,
        )
        if got.returncode != 0:
            raise RuntimeError(f"the dashboard's child failed:\n{got.stderr[-3000:]}")
        sys.stderr.write(got.stderr[-3000:])
        found: dict[str, Any] = json.loads(got.stdout.splitlines()[-1])
        found["daemon_cpu_s"] = [cpu_s(daemon) - daemon_cpu]
        found["load"] = [os.getloadavg()[0]]
        found["imports"] = [statistics.median(wall for wall, _ in imports)]
        found["imports_cpu"] = [statistics.median(cpu for _, cpu in imports)]
        return found
    finally:
        subprocess.run([*herd, "down"], check=False, stdout=subprocess.DEVNULL)


ROWS = (
    ("start to a full fleet (the app built to every row drawn)", "start", "start_cpu"),
    ("a new python importing the dashboard (median of 3)", "imports", "imports_cpu"),
    ("session screen, the app's first open (Enter)", "first_open", "first_open_cpu"),
    ("session screen open (Enter), every later one", "open", "open_cpu"),
    *(
        (f"tab {k} ({t})", f"tab{k}", f"tab{k}_cpu")
        for k, t in zip(
            TAB_KEYS,
            (
                "Progress",
                "Plan",
                "Checkpoints",
                "Events",
                "Spend",
                "Report",
                "Diff",
                "Terminal",
                "Output",
            ),
            strict=True,
        )
    ),
    ("open: every tab read (report last)", "read", None),
    ("Diff: its file list arrived", "diff_listed", None),
    ("any tab switch: CPU ms to 0.3 s after it (deferred work too)", "switch_cpu", None),
)


def cell(samples: list[float]) -> str:
    """p50 / p95 / max (n)."""
    if not samples:
        return "-"
    return (
        f"{statistics.median(samples):.0f} / {percentile(samples, 0.95):.0f} / "
        f"{max(samples):.0f} (n={len(samples)})"
    )


def table(results: dict[str, dict[str, list[float]]]) -> str:
    """The builds side by side: ms wall p50 / p95 / max, and the dashboard's CPU ms."""
    names = list(results)
    lines = [
        "| figure | " + " | ".join(f"{n}: ms p50 / p95 / max | {n}: CPU ms" for n in names) + " |",
        "|---|" + "---|---|" * len(names),
    ]
    for label, key, cpu_key in ROWS:
        cells = []
        for name in names:
            cells.append(cell(results[name].get(key, [])))
            cpu = results[name].get(cpu_key, []) if cpu_key else []
            cells.append(
                f"{statistics.median(cpu):.0f} / {percentile(cpu, 0.95):.0f}" if cpu else "-"
            )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.extend(
        f"\n{name}: daemon CPU over the dashboard's run "
        + ", ".join(f"{v:.1f} s" for v in results[name]["daemon_cpu_s"])
        + "; load average "
        + ", ".join(f"{v:.1f}" for v in results[name]["load"])
        for name in names
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--opens", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--herd", action="append", default=[], help="NAME=PATH to a herd")
    parser.add_argument("--profile", type=Path, default=None, help="cProfile the dashboard here")
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        profiler = cProfile.Profile() if args.profile else None
        if profiler is not None:
            profiler.enable()
        found = asyncio.run(child(args.child, args.sessions, args.opens))
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        print(json.dumps(found))
        return
    builds = {"herd": sys.executable}
    builds.update(
        (name, str(Path(path).parent / "python"))
        for name, path in (h.split("=", 1) for h in args.herd)
    )
    print(suite.machine(), flush=True)
    root = Path(tempfile.mkdtemp(prefix="herd-dashspeed-"))
    results: dict[str, dict[str, list[float]]] = {name: {} for name in builds}
    try:
        repos = suite.make_repos(root, args.sessions)
        for round_index in range(args.rounds):
            order = list(builds.items())
            for name, python in order if round_index % 2 == 0 else order[::-1]:
                config = fleet(root / f"{name}-{round_index}", repos, args.sessions)
                profile = args.profile and args.profile.with_suffix(f".{name}.{round_index}.prof")
                found = one_round(python, config, args.sessions, args.opens, profile)
                for key, values in found.items():
                    results[name].setdefault(key, []).extend(values)
                print(f"round {round_index + 1} {name}: done", flush=True)
                print(table({name: found}), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{args.sessions} sessions, {args.rounds} round(s), {args.opens} opens a round")
    print(table(results))


if __name__ == "__main__":
    suite.as_init(main)
