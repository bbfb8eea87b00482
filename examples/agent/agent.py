#!/usr/bin/env python3
"""A complete, small agent for herd's `plain` adapter (docs/write-your-own-agent.md).

It works through feature_list.json one failing item at a time: does the work (here: writes a
file), marks the item passing, appends a progress entry, commits, and prints its usage as a
running total. At the end it prints the done line and exits 0. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

PRICE_PER_TOKEN_USD = 0.000002
"""What this pretend model costs; a real agent prints what its provider billed."""


def say(line: dict[str, object]) -> None:
    """One JSON line on stdout, flushed at once: herd reads the output as it is written."""
    print(json.dumps(line), flush=True)


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--plan", default="feature_list.json")
    parser.add_argument("--progress", default="progress.md")
    parser.add_argument("--resume", default=None, help="the session id of the run to continue")
    args = parser.parse_args()
    session_id = args.resume or f"example-{uuid.uuid4().hex[:12]}"
    plan_path, progress_path = Path(args.plan), Path(args.progress)
    items = json.loads(plan_path.read_text())
    tokens_in = tokens_out = turns = 0
    for number, item in enumerate(items, start=1):
        if item.get("passes"):
            continue
        turns += 1
        tokens_in += 1200
        tokens_out += 300
        # The work itself. Only `passes` (or `status`) of an item may change: herd compares the
        # plan with its first version and warns (plan-tampered) about any other edit.
        print(f"working on item {number}: {item['description']}", flush=True)
        Path("work").mkdir(exist_ok=True)
        Path("work", f"item-{number}.txt").write_text(item["description"] + "\n")
        item["passes"] = True
        plan_path.write_text(json.dumps(items, indent=2) + "\n")
        # A progress entry: a `## ` heading and the lines under it, appended.
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
        done = sum(1 for i in items if i.get("passes"))
        with progress_path.open("a") as progress:
            progress.write(
                f"\n## {stamp} item {number}\n- {item['description']}: done\n"
                f"- {done}/{len(items)} tests passing\n"
            )
        git("add", "-A")
        git("commit", "-q", "-m", f"item {number}: {item['description']}")  # a checkpoint
        # Running totals since the run began, never the increments: herd keeps the last one.
        say(
            {
                "session_id": session_id,
                "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
                "cost_usd": round((tokens_in + tokens_out) * PRICE_PER_TOKEN_USD, 6),
                "turns": turns,
            }
        )
    say({"herd": "done", "message": f"{len(items)} items pass"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
