"""Interactive sessions under herd beside the same programs in one tmux server (issue 24 item 5:
herd's CPU, the daemon's and the terminal holders', no more than the tmux server's).

    unshare --pid --fork --mount-proc nice -n 19 python bench/interactive_vs_tmux.py \
        [--sessions 50] [--seconds 30] [--rounds 2]

Each side runs `--sessions` copies of one small program that redraws a full 80x24 screen five
times a second (the cursor home, 24 rows of 80 characters that change every frame), for the
same wall time, alternately round by round:

- herd: `interactive = true` sessions under a daemon of this build (`herd up --no-tui`): each
  run's pseudo-terminal is kept by its holder (supervisor/process/ptyholder.py), which logs every
  byte; the daemon follows the runs. Measured: the CPU seconds of the daemon and of every holder
  over the window, the holders' RSS and PSS (memory per session);
- tmux: one private server (`tmux -L NAME -f /dev/null`), one 80x24 window per program (each
  window one pane of the full size; panes split in one window would each be smaller than a
  screen). Measured: the server's CPU seconds over the window and its RSS.

Neither side has a viewer attached (tmux keeps each pane's screen, herd each run's raw log and
replay). The programs' own CPU is no part of either figure.
"""

from __future__ import annotations

import argparse
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

import psutil

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import suite  # noqa: E402  (repos, the PID-1 reaper, spread)

SCREEN = (
    "import sys, time\n"
    "w = sys.stdout.write; i = 0; t = time.monotonic()\n"
    "while True:\n"
    "    rows = [f'{i:7d} {r:2d} ' + 'abcdefghij'[(i + r) % 10] * 69 for r in range(24)]\n"
    "    w('\\x1b[H' + '\\r\\n'.join(rows)); sys.stdout.flush()\n"
    "    i += 1; t += 0.2; time.sleep(max(0.0, t - time.monotonic()))\n"
)
"""A full 80x24 screen redrawn five times a second (the last row without a newline: no scroll)."""

WARMUP_S = 5.0
START_TIMEOUT_S = 180.0


def screens(mark: str) -> list[psutil.Process]:
    """The live screen programs carrying `mark` (their argv's last word)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if len(cmd) == 4 and cmd[0] == sys.executable and cmd[1] == "-c" and cmd[3] == mark:
            found.append(proc)
    return found


def wait_screens(mark: str, wanted: int) -> None:
    """Until `wanted` screen programs of `mark` run."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while len(screens(mark)) < wanted:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(screens(mark))} of {wanted} screens started")
        time.sleep(0.5)


def cpu(procs: list[psutil.Process]) -> float:
    """User + system CPU seconds of `procs` so far (a gone one counts 0)."""
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def memory_mb(proc: psutil.Process) -> tuple[float, float]:
    """RSS and PSS in MB."""
    info = proc.memory_full_info()
    return info.rss / 2**20, info.pss / 2**20


def herd_side(
    root: Path, repos: list[Path], sessions: int, seconds: float, stacks: Path | None = None
) -> dict[str, Any]:
    """`sessions` interactive sessions under herd: daemon and holders' CPU over `seconds`."""
    mark = f"herd-{time.monotonic_ns()}"
    folder = root / mark
    folder.mkdir()
    blocks = [
        f'[[session]]\nname = "s{i}"\ncwd = "{repo}"\ninteractive = true\n'
        f"command = {json.dumps([sys.executable, '-c', SCREEN, mark])}\n"
        'restart = "never"\nstop_grace = "2s"\n'
        for i, repo in enumerate(repos[:sessions])
    ]
    config = folder / "herd.toml"
    config.write_text("\n".join(blocks))
    herd = [str(Path(sys.executable).parent / "herd"), "--config", str(config)]
    subprocess.run([*herd, "up", "--no-tui"], check=True, stdout=subprocess.DEVNULL)
    try:
        wait_screens(mark, sessions)
        daemon = psutil.Process(int((folder / ".herd" / "daemon.lock").read_text().split()[0]))
        holders = [
            p
            for p in psutil.process_iter(["cmdline"])
            if any("ptyholder.py" in part for part in p.info["cmdline"] or [])
            and str(folder) in " ".join(p.info["cmdline"] or [])
        ]
        if len(holders) != sessions:
            raise RuntimeError(f"{len(holders)} holders for {sessions} sessions")
        time.sleep(WARMUP_S)
        spy = None
        if stacks is not None:  # py-spy's samples of the daemon over the window
            spy = subprocess.Popen(
                ["py-spy", "record", "-p", str(daemon.pid), "-d", str(int(seconds)), "-r", "50"]
                + ["-f", "raw", "-o", str(stacks), "--nonblocking"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        d0, h0, began = cpu([daemon]), cpu(holders), time.monotonic()
        woke0 = daemon.num_ctx_switches().voluntary
        time.sleep(seconds)
        if spy is not None:
            spy.wait(60)
        d1, h1, wall = cpu([daemon]), cpu(holders), time.monotonic() - began
        woke = daemon.num_ctx_switches().voluntary - woke0
        memories = [memory_mb(h) for h in holders]
        return {
            "daemon_cpu_s": d1 - d0,
            "daemon_wakeups_per_s": round(woke / wall, 1),  # voluntary context switches
            "holders_cpu_s": h1 - h0,
            "cpu_s": (d1 - d0) + (h1 - h0),
            "wall_s": wall,
            "holder_rss_mb": statistics.median(m[0] for m in memories),
            "holder_pss_mb": statistics.median(m[1] for m in memories),
            "daemon_rss_mb": memory_mb(daemon)[0],
        }
    finally:
        subprocess.run([*herd, "down"], check=False, stdout=subprocess.DEVNULL)


def tmux_side(sessions: int, seconds: float) -> dict[str, Any]:
    """The same programs in one private tmux server, one 80x24 window each."""
    mark = f"tmux-{time.monotonic_ns()}"
    tmux = ["tmux", "-L", f"herdbench-{os.getpid()}-{mark}", "-f", "/dev/null"]
    argv = " ".join([sys.executable, "-c", "'" + SCREEN.replace("'", "'\\''") + "'", mark])
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "b", "-x", "80", "-y", "24", argv], check=True
    )
    try:
        for _ in range(sessions - 1):
            subprocess.run([*tmux, "new-window", "-d", "-t", "b:", argv], check=True)
        pid = subprocess.run(
            [*tmux, "display-message", "-p", "#{pid}"], capture_output=True, text=True, check=True
        ).stdout.strip()
        server = psutil.Process(int(pid))
        size = subprocess.run(
            [*tmux, "display-message", "-p", "-t", "b:0", "#{pane_width}x#{pane_height}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        wait_screens(mark, sessions)
        time.sleep(WARMUP_S)
        s0, began = cpu([server]), time.monotonic()
        time.sleep(seconds)
        s1, wall = cpu([server]), time.monotonic() - began
        rss, pss = memory_mb(server)
        return {
            "cpu_s": s1 - s0,
            "wall_s": wall,
            "server_rss_mb": rss,
            "server_pss_mb": pss,
            "pane": size,
        }
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--stacks", type=Path, default=None, help="py-spy the daemon into NAME.N.txt, round N"
    )
    args = parser.parse_args()
    print(suite.machine(), flush=True)
    root = Path(tempfile.mkdtemp(prefix="herd-vs-tmux-"))
    found: dict[str, list[dict[str, Any]]] = {"herd": [], "tmux": []}
    try:
        repos = suite.make_repos(root, args.sessions)
        for index in range(args.rounds):
            order = ("herd", "tmux") if index % 2 == 0 else ("tmux", "herd")
            for side in order:
                stacks = args.stacks and args.stacks.with_suffix(f".{index + 1}.txt")
                got = (
                    herd_side(root, repos, args.sessions, args.seconds, stacks)
                    if side == "herd"
                    else tmux_side(args.sessions, args.seconds)
                )
                got["load"] = os.getloadavg()[0]
                found[side].append(got)
                print(f"round {index + 1} {side}: {got}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(found, args.sessions, args.seconds)


def report(found: dict[str, list[dict[str, Any]]], sessions: int, seconds: float) -> None:
    """The two sides as figures and ratios."""

    def share(side: str) -> list[float]:
        return [100 * r["cpu_s"] / r["wall_s"] for r in found[side]]

    herd, tmux = share("herd"), share("tmux")
    ratios = [h / t for h, t in zip(herd, tmux, strict=True) if t > 0]
    print(f"\n{sessions} screens x 5 full redraws/s, {seconds:.0f} s a side and round")
    print(
        "herd (daemon + holders), % of a core: "
        + suite.spread(herd, ".1f")
        + " = daemon "
        + suite.spread([100 * r["daemon_cpu_s"] / r["wall_s"] for r in found["herd"]], ".1f")
        + " + holders "
        + suite.spread([100 * r["holders_cpu_s"] / r["wall_s"] for r in found["herd"]], ".1f")
    )
    print("tmux server, % of a core: " + suite.spread(tmux, ".1f"))
    print("herd / tmux, round by round: " + ", ".join(f"{r:.2f}" for r in ratios))
    print(
        "memory per session: herd's holder RSS "
        + suite.spread([r["holder_rss_mb"] for r in found["herd"]], ".1f")
        + " MB, PSS "
        + suite.spread([r["holder_pss_mb"] for r in found["herd"]], ".1f")
        + " MB (daemon RSS "
        + suite.spread([r["daemon_rss_mb"] for r in found["herd"]], ".0f")
        + " MB); tmux server RSS / sessions "
        + suite.spread([r["server_rss_mb"] / sessions for r in found["tmux"]], ".2f")
        + " MB (the server "
        + suite.spread([r["server_rss_mb"] for r in found["tmux"]], ".0f")
        + " MB)"
    )
    print("load average: " + ", ".join(f"{r['load']:.1f}" for s in found.values() for r in s))


if __name__ == "__main__":
    suite.as_init(main)
