"""Where one crash's relaunch goes, phase by phase: a timeline from the daemon's own calls.

    python bench/crash_timeline.py [--crashes 10] [--running 49]

Runs `recovery.crash_gaps` (an agent that crashes with a dirty tree, restart_delay 0, beside
busy sessions) with the daemon's steps wrapped to note when each began and ended (wall clock,
the clock the agent's own marks use). Prints, per step, the median and worst offset of its
start and its duration from the crashing agent's last moment, and the git commands run per
crash. A profiling aid: the wrappers add a few microseconds per call.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentherd.supervisor.git import gitops, gitrun
from agentherd.supervisor.process import execwait, runid, runleftovers, spawn
from agentherd.supervisor.session import agentusage
from agentherd.supervisor.session.supervisor import SessionSupervisor

sys.path.insert(0, str(Path(__file__).parent))
from recovery import crash_gaps  # noqa: E402

SPANS: list[tuple[str, float, float]] = []
"""(step, began, ended) in wall-clock seconds, as the wrapped calls happened."""


def _wrap_function(owner: Any, name: str, label: str | None = None) -> None:
    """Replace `owner.name` with a wrapper noting each call's span (async or not)."""
    original = getattr(owner, name)
    label = label or name

    if _is_async(original):

        @functools.wraps(original)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            began = time.time()
            try:
                return await original(*args, **kwargs)
            finally:
                SPANS.append((label, began, time.time()))

        setattr(owner, name, timed_async)
    else:

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.time()
            try:
                return original(*args, **kwargs)
            finally:
                SPANS.append((label, began, time.time()))

        setattr(owner, name, timed)


def _wrap_git() -> None:
    """Note each git command by its subcommand."""
    original = gitrun.run_bounded

    def timed(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        began = time.time()
        try:
            return original(argv, *args, **kwargs)
        finally:
            SPANS.append((f"git {procs_subcommand(argv)}", began, time.time()))

    gitrun.run_bounded = timed  # type: ignore[assignment]


def procs_subcommand(argv: list[str]) -> str:
    from agentherd.supervisor.git.gitproc import subcommand

    return subcommand(argv)


def _is_async(func: Callable[..., Any]) -> bool:
    import inspect

    return inspect.iscoroutinefunction(func)


def _wrap_session_method(name: str) -> None:
    """Wrap a SessionSupervisor method, noting only the crashing session's calls."""
    original = getattr(SessionSupervisor, name)
    is_async = _is_async(original)

    if is_async:

        async def timed_async(self: SessionSupervisor, *args: Any, **kwargs: Any) -> Any:
            began = time.time()
            try:
                return await original(self, *args, **kwargs)
            finally:
                if self.config.name == "crashy":
                    SPANS.append((name, began, time.time()))

        setattr(SessionSupervisor, name, timed_async)
    else:

        def timed(self: SessionSupervisor, *args: Any, **kwargs: Any) -> Any:
            began = time.time()
            try:
                return original(self, *args, **kwargs)
            finally:
                if self.config.name == "crashy":
                    SPANS.append((name, began, time.time()))

        setattr(SessionSupervisor, name, timed)


def install() -> None:
    """Wrap every step of a crash's relaunch."""
    for method in ("_record_exit", "_after_exit", "_prepare_restart", "_launch", "_commit"):
        _wrap_session_method(method)
    _wrap_function(runid, "decode_status", "exit seen (decode_status)")
    _wrap_function(spawn, "launch", "spawn.launch")
    _wrap_function(execwait, "wait_agent_exec", "wait agent exec")
    _wrap_function(spawn, "new_cgroup")
    _wrap_function(spawn, "remove_cgroup")
    _wrap_function(runleftovers, "maybe_left")
    _wrap_function(agentusage, "plan_read")
    for name in ("is_git_repo", "save_rescue", "head_sha", "reset_worktree", "keep_head"):
        _wrap_function(gitops, name)
    _wrap_git()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crashes", type=int, default=10)
    parser.add_argument("--running", type=int, default=49)
    args = parser.parse_args()
    install()
    with tempfile.TemporaryDirectory(prefix="herd-timeline-") as folder:
        root = Path(folder) / "crash"
        gaps, _ = crash_gaps(root, args.crashes, args.running)
        rows = [json.loads(line) for line in (root / "marks.jsonl").read_text().splitlines()]
    offsets: dict[str, list[float]] = defaultdict(list)
    durations: dict[str, list[float]] = defaultdict(list)
    git_counts = []
    herd_part: list[float] = []
    """Per crash, ms from the exit's detection to the spawn's start: herd's own part."""
    for a, b in zip(rows, rows[1:], strict=False):
        if a[0] != "exit" or b[0] != "start":
            continue
        inside = [s for s in SPANS if a[1] <= s[1] <= b[1]]
        git_counts.append(sum(1 for s in inside if s[0].startswith("git ")))
        seen: set[str] = set()
        for label, began, ended in inside:
            key = label if label not in seen else f"{label} (again)"
            seen.add(label)
            offsets[key].append((began - a[1]) * 1000)
            durations[key].append((ended - began) * 1000)
        offsets["next agent's first line"].append((b[1] - a[1]) * 1000)
        durations["next agent's first line"].append(0.0)
        seen_at = next((s[1] for s in inside if s[0] == "exit seen (decode_status)"), None)
        spawn_at = next((s[1] for s in inside if s[0] == "spawn.launch"), None)
        if seen_at is not None and spawn_at is not None:
            herd_part.append((spawn_at - seen_at) * 1000)
    print(f"{len(gaps)} crashes beside {args.running} busy sessions; ms from the agent's last line")
    print(f"{'step':38} {'start p50':>9} {'max':>7} {'took p50':>9} {'max':>7} {'n':>4}")
    for key in sorted(offsets, key=lambda k: statistics.median(offsets[k])):
        o, d = offsets[key], durations[key]
        print(
            f"{key:38} {statistics.median(o):9.1f} {max(o):7.1f} "
            f"{statistics.median(d):9.1f} {max(d):7.1f} {len(o):4d}"
        )
    print(f"git processes per crash: {sorted(set(git_counts))}")
    if herd_part:
        ordered = sorted(herd_part)
        p95 = ordered[int(0.95 * (len(ordered) - 1))]
        print(
            f"exit seen -> spawn begins (herd's own part): p50 {statistics.median(ordered):.1f} "
            f"ms, p95 {p95:.1f} ms, max {ordered[-1]:.1f} ms; gap p50 "
            f"{statistics.median(g * 1000 for g in gaps):.0f} ms; load {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
