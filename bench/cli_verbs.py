"""The CLI verbs a person reads and acts with, per herd build side by side: CPU and wall
milliseconds of the command (median of the repeats), at a fleet of N quiet sessions (issue 26
item 5: <= 60 ms CPU and <= 80 ms wall at 50).

    unshare --pid --fork --mount-proc python bench/cli_verbs.py --sessions 50 \
        --herd before=/tmp/before/.venv/bin/herd [--rounds 2]

Per round and build: `herd up --no-tui` of its own fleet (the first session prints a few lines
and exits, so `logs`, `events` and `report` have something to read; the rest are `sleep`),
every verb `--repeats` times, then `herd down`. Output is piped (not a terminal), as a script
reads it. Builds alternate round by round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite  # noqa: E402  (repos, verbs, the PID-1 reaper)

VERBS = (
    ("ls",),
    ("ls", "--json"),
    ("status",),
    ("status", "s1"),
    ("status", "s1", "--json"),
    ("events",),
    ("events", "-n", "20"),
    ("report", "s0"),
    ("logs", "s0"),
    ("logs", "s0", "-n", "5"),
    ("diff", "s0"),
    ("start", "s2"),  # already running: its handle
    ("ack", "s2"),
    ("wait", "s2", "--until", "running"),
)
"""Each repeated `--repeats` times: the ones that change something are safe to repeat."""


def fleet(folder: Path, repos: list[Path], sessions: int) -> Path:
    folder.mkdir(parents=True)
    printer = ["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do echo line $i; done"]
    blocks = [
        f'[[session]]\nname = "s{index}"\ncwd = "{repo}"\n'
        f"command = {json.dumps(printer if index == 0 else ['sleep', '1000000'])}\n"
        'restart = "never"\nstop_grace = "2s"\n'
        for index, repo in enumerate(repos[:sessions])
    ]
    config = folder / "herd.toml"
    config.write_text("\n".join(blocks))
    return config


def measure(exe: str, config: Path, sessions: int, repeats: int) -> dict[str, list[float]]:
    herd = [exe, "--config", str(config)]
    subprocess.run([*herd, "up", "--no-tui"], check=True, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            listed = subprocess.run([*herd, "ls", "--json"], capture_output=True, text=True)
            states = [s["state"] for s in json.loads(listed.stdout or "[]")]
            if states.count("running") == sessions - 1 and states[0] != "running":
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the fleet did not settle: {states[:3]}...")
            time.sleep(0.3)
        got: dict[str, list[float]] = {}
        for verb in VERBS:
            runs = [suite.run_verb([*herd, *verb]) for _ in range(repeats)]
            got[" ".join(verb)] = [
                statistics.median(r[1] for r in runs),
                statistics.median(r[0] for r in runs),
            ]
        return got
    finally:
        subprocess.run([*herd, "down"], check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--herd", action="append", default=[], help="NAME=PATH to a herd")
    args = parser.parse_args()
    builds = {"herd": str(Path(sys.executable).parent / "herd")}
    builds.update(h.split("=", 1) for h in args.herd)
    print(suite.machine(), flush=True)
    root = Path(tempfile.mkdtemp(prefix="herd-verbs-"))
    repos = suite.make_repos(root, args.sessions)
    results: dict[str, list[dict[str, list[float]]]] = {name: [] for name in builds}
    try:
        for round_index in range(args.rounds):
            order = list(builds.items())
            for name, exe in order if round_index % 2 == 0 else order[::-1]:
                config = fleet(root / f"{name}-{round_index}", repos, args.sessions)
                results[name].append(measure(exe, config, args.sessions, args.repeats))
                print(f"round {round_index + 1} {name}: {results[name][-1]}", flush=True)
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False)
    names = list(results)
    print(f"\n{args.sessions} sessions; ms CPU / ms wall, median (range) of {args.rounds} rounds")
    print("| verb | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for verb in VERBS:
        key = " ".join(verb)
        cells = [
            suite.spread([r[key][0] for r in results[n]], ".0f")
            + " / "
            + suite.spread([r[key][1] for r in results[n]], ".0f")
            for n in names
        ]
        print(f"| `herd {key}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    suite.as_init(main)
