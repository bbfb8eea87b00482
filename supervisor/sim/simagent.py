"""A simulated long-running coding agent that speaks Claude stream-json, for tests and demos.

Run it in a git worktree: ``python -m agentherd.supervisor.sim.simagent [options]``. It works the
feature list one failing item at a time the way the long-running harness does: write code and a
test, flip ``passes``, append to the progress file, commit. Options inject the failures a
supervisor must survive (crash mid-edit, stall, plan tampering, API-error results, floods).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentherd.supervisor.sim import simfaults, simwork
from agentherd.supervisor.sim.simfiles import SimError, first_failing, git, load_plan, title
from agentherd.supervisor.sim.simstream import MODEL, TOOLS, Agent

EXIT_USAGE = 2  # exit code of an error the person running simagent can fix
EXIT_INTERRUPT = 130  # exit code after Ctrl-C, as shells report SIGINT


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(prog="simagent", description=__doc__.splitlines()[0])
    p.add_argument("--plan", default="feature_list.json", help="feature list (JSON array)")
    p.add_argument("--progress", default="claude-progress.txt", help="progress file")
    p.add_argument("--init", type=int, metavar="N", help="create a plan of N features if absent")
    p.add_argument("--delay", type=float, default=0.2, help="seconds of work per feature")
    p.add_argument("--jitter", type=float, default=0.0, help="random +- fraction of --delay")
    p.add_argument("--crash-at", type=int, metavar="N", help="crash mid-edit at feature N")
    p.add_argument("--crash-once", action="store_true", help="crash only on the first try")
    p.add_argument("--fail-at", type=int, metavar="N", help="API-error result at feature N")
    p.add_argument("--fail-once", action="store_true", help="fail only on the first try")
    p.add_argument(
        "--limit-at",
        metavar="N:SECONDS",
        help="at feature N, hit a rate limit that resets SECONDS later (once per worktree)",
    )
    p.add_argument("--stall-at", type=int, metavar="N", help="hang silently at feature N")
    p.add_argument("--stall-once", action="store_true", help="stall only on the first try")
    p.add_argument("--tamper-at", type=int, metavar="N", help="edit the plan at feature N")
    p.add_argument(
        "--wait-at",
        action="append",
        default=[],
        metavar="N:PATH",
        help="before feature N, hang silently until PATH exists (repeatable)",
    )
    p.add_argument("--quit-at", type=int, metavar="N", help="at feature N, exit 0 claiming done")
    p.add_argument("--quit-times", type=int, default=1, metavar="K", help="quit the first K times")
    p.add_argument("--flood", type=int, default=0, metavar="N", help="noise lines per feature")
    p.add_argument("--resume", metavar="ID", help="continue session ID (keeps the id)")
    p.add_argument(
        "--prompt", metavar="TEXT", help="the prompt it was given (echoed as a user line)"
    )
    p.add_argument("--session-id", metavar="ID", help="pin the id of a new session")
    p.add_argument("--one-per-run", action="store_true", help="at most one feature, then exit")
    p.add_argument("--ignore-sigterm", action="store_true", help="ignore SIGTERM")
    p.add_argument("--cost-per-feature", type=float, default=0.05, metavar="USD")
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> int:
    """Do the work the options ask for and return the exit code."""
    git("rev-parse", "--is-inside-work-tree")
    plan_path = Path(args.plan)
    if not plan_path.exists() and args.init is None:
        raise SimError(f"{plan_path}: no feature list; create it or pass --init N")
    if args.init is not None and args.init < 1:
        raise SimError(f"--init {args.init}: the number of features must be at least 1")
    waits = simfaults.gates(args.wait_at)
    agent = Agent(args, args.resume or args.session_id or str(uuid.uuid4()))
    rescue = os.environ.get("HERD_RESCUE_REF", "")
    init: dict[str, Any] = {
        "type": "system",
        "subtype": "init",
        "cwd": os.getcwd(),
        "session_id": agent.session_id,
        "tools": TOOLS,
        "mcp_servers": [],
        "model": MODEL,
        "permissionMode": "bypassPermissions",
        "apiKeySource": "none",
        "uuid": str(uuid.uuid4()),
    }
    if rescue:
        init["rescue_ref"] = rescue
        agent.notes.append(f"- Previous edits were rolled back; saved at {rescue}.")
    if args.resume:
        agent.notes.insert(0, f"- Resumed session {args.resume}.")
    agent.emit(init)
    if args.prompt is not None:
        agent.emit({"type": "user", "message": {"role": "user", "content": args.prompt}})
    if not plan_path.exists():
        simwork.initialize(agent, args.init)
        if args.one_per_run:
            agent.result(f"Initialized the project with {args.init} features.")
            return 0
    done = 0
    while True:
        plan = load_plan(plan_path)
        n = first_failing(plan)
        if n is None:
            if done == 0:
                agent.assistant(0, [{"type": "text", "text": "All features pass already."}])
                agent.result(f"Nothing left to do: all {len(plan)} features pass.")
            else:
                agent.result(f"All {len(plan)} features pass.")
            return 0
        if simfaults.fires(n, args.fail_at, args.fail_once, "failed"):
            simfaults.fail(agent, n)
            return 0
        if simfaults.fires(n, args.crash_at, args.crash_once, "crashed"):
            simfaults.crash(agent, n)
        if simfaults.fires(n, args.stall_at, args.stall_once, "stalled"):
            simfaults.stall(agent, n)
        if simfaults.quits(n, args.quit_at, args.quit_times):
            # An early exit: success reported while this item (and maybe others) still fails.
            agent.result(f"All done: feature {n} is good enough as it is.")
            return 0
        if n in waits:
            simfaults.wait_for(waits.pop(n))
        if simfaults.limit_fires(n, args.limit_at):
            return 1
        agent.flood(n)
        if n == args.tamper_at:
            args.tamper_at = None
            simfaults.tamper(agent, n)
        simwork.implement(agent, n)
        done += 1
        if args.one_per_run:
            agent.result(f"Implemented feature {n}: {title(load_plan(plan_path)[n - 1], n)}.")
            return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: set up signals, run, and turn errors into exit codes."""
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if args.ignore_sigterm else signal.SIG_DFL)
    try:
        return run(args)
    except SimError as exc:
        print(f"simagent: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPT


if __name__ == "__main__":
    sys.exit(main())
