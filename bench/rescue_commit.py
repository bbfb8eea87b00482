"""Crash -> relaunch with the rescue commit written by `git commit-tree` or by hand, side by side.

    python bench/rescue_commit.py [--rounds 3] [--crashes 10] [--running 49] [--cycles 60]

Issue 21 asked whether writing the rescue's commit object in Python (`gitwrite.py`, retired
after this bench; its writer is kept here as the challenger) wins at least 20 % of crash ->
relaunch p95 over git's own `commit-tree` (`supervisor/git/rescue.py`). Both ways run in this
one process, alternating (round by round, cycle by cycle, the order swapped each time), so
load drifts hit both alike:

1. crash -> relaunch: `recovery.crash_gaps` (an agent that crashes with a dirty tree,
   restart_delay 0, beside busy sessions), the agent's last line to the next run's first.
2. rescue + reset alone: a dirty tree rescued and reset, CPU seconds of this process and its
   git children (user + system), wall time and git processes per cycle.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agentherd.sessions.checkpoint import GitPaths
from agentherd.supervisor.git import gitops, gitrun, rescue
from agentherd.supervisor.git.gitproc import GitDeadline

sys.path.insert(0, str(Path(__file__).parent))
from harness import make_repo  # noqa: E402
from recovery import crash_gaps  # noqa: E402

WAYS = ("commit-tree", "by hand")
WIN_NEEDED = 0.20
"""The issue's bar: the hand-written commit stays only if it cuts crash -> relaunch p95 by this."""


def _by_hand(
    paths: GitPaths, tree: str, head: str | None, message: str, deadline: GitDeadline | None
) -> str:
    """The rescue commit as `gitwrite` wrote it: a loose object, byte-identical to git's."""
    at_s = int(time.time())
    offset_min = (time.localtime(at_s).tm_gmtoff or 0) // 60
    sign = "-" if offset_min < 0 else "+"
    zone = f"{sign}{abs(offset_min) // 60:02d}{abs(offset_min) % 60:02d}"
    stamp = f"herd <herd@localhost> {at_s} {zone}"
    lines = [f"tree {tree}"] + ([f"parent {head}"] if head else [])
    body = "\n".join([*lines, f"author {stamp}", f"committer {stamp}", "", message]) + "\n"
    raw = b"commit %d\0" % len(body.encode()) + body.encode()
    sha = hashlib.sha1(raw, usedforsecurity=False).hexdigest()
    folder = paths.common_dir / "objects" / sha[:2]
    folder.mkdir(exist_ok=True)
    if (folder / sha[2:]).exists():
        return sha
    handle, temporary = tempfile.mkstemp(prefix="tmp_obj_", dir=folder)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(zlib.compress(raw, 1))
        os.chmod(temporary, 0o444)
        with contextlib.suppress(FileExistsError):
            os.link(temporary, folder / sha[2:])
    finally:
        os.unlink(temporary)
    return sha


@contextlib.contextmanager
def writing(way: str) -> Iterator[None]:
    """The rescue's commit written `way` for the block."""
    by_git = rescue.write_commit
    rescue.write_commit = _by_hand if way == "by hand" else by_git
    try:
        yield
    finally:
        rescue.write_commit = by_git


GIT_RUNS: list[str] = []
"""Every git subcommand this process ran, in order."""


def _count_git() -> None:
    """Note each git command's subcommand as the rescue and reset run it."""
    original = gitrun.run_bounded

    def counted(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        GIT_RUNS.append(next(a for a in argv[1:] if not a.startswith("-") and "=" not in a))
        return original(argv, *args, **kwargs)

    gitrun.run_bounded = counted  # type: ignore[assignment]


def _cpu_s() -> float:
    """CPU seconds of this process and its reaped children (the git commands), user + system."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def p(values: list[float], share: float) -> float:
    """The `share` percentile of `values` (nearest rank below, as bench/recovery.py does)."""
    ordered = sorted(values)
    return ordered[int(share * (len(ordered) - 1))]


def rescue_cycles(root: Path, cycles: int) -> dict[str, dict[str, list[float]]]:
    """Per way: CPU ms, wall ms and git processes of a dirty tree's rescue + reset, per cycle."""
    repo = make_repo(root / "repo", {f"f{i}.txt": f"{i}\n" * 50 for i in range(20)})
    head = gitops.head_sha(repo)
    assert head is not None
    found: dict[str, dict[str, list[float]]] = {
        way: {"cpu_ms": [], "wall_ms": [], "git": []} for way in WAYS
    }
    for cycle in range(cycles):
        for way in WAYS if cycle % 2 == 0 else reversed(WAYS):
            (repo / "f3.txt").write_text(f"changed {cycle} {way}\n")
            (repo / "new.txt").write_text(f"new {cycle} {way}\n")
            GIT_RUNS.clear()
            with writing(way):
                cpu, wall = _cpu_s(), time.perf_counter()
                ref = f"refs/herd/b{WAYS.index(way)}/rescue/{cycle}"
                saved = gitops.save_rescue(repo, ref, "herd: rescue")
                gitops.reset_worktree(repo, head)
                cpu, wall = _cpu_s() - cpu, time.perf_counter() - wall
            assert saved is not None and not (repo / "new.txt").exists()
            found[way]["cpu_ms"].append(cpu * 1000)
            found[way]["wall_ms"].append(wall * 1000)
            found[way]["git"].append(float(len(GIT_RUNS)))
    # Both ways wrote commits git reads back: the challenger is a fair one.
    subprocess.run(["git", "fsck", "--no-dangling", "--no-progress"], cwd=repo, check=True)
    return found


def crash_rounds(
    root: Path, rounds: int, crashes: int, running: int, say: Callable[[str], None]
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per way, over the rounds: ms from a crashing agent's last line to its relaunch's first,
    and ms from herd's `run-exited` to `run-started` (the rescue and reset are in there)."""
    gaps_ms: dict[str, list[float]] = {way: [] for way in WAYS}
    relaunch_ms: dict[str, list[float]] = {way: [] for way in WAYS}
    for index in range(rounds):
        for way in WAYS if index % 2 == 0 else reversed(WAYS):
            with writing(way):
                gaps, phases = crash_gaps(
                    root / f"{index}-{way.replace(' ', '-')}", crashes, running
                )
            round_ms = [gap * 1000 for gap in gaps]
            gaps_ms[way] += round_ms
            relaunch_ms[way] += [phase.relaunch_s * 1000 for phase in phases]
            say(
                f"round {index + 1} {way:11}: p50 {statistics.median(round_ms):4.0f} ms, "
                f"p95 {p(round_ms, 0.95):4.0f} ms; load {os.getloadavg()[0]:.1f}"
            )
    return gaps_ms, relaunch_ms


def _row(name: str, values: list[float]) -> str:
    return (
        f"  {name:12} p50 {statistics.median(values):7.1f}  p95 {p(values, 0.95):7.1f}  "
        f"max {max(values):7.1f}  (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="crash rounds per way")
    parser.add_argument("--crashes", type=int, default=10, help="crashes per round")
    parser.add_argument("--running", type=int, default=49, help="busy sessions beside the crash")
    parser.add_argument("--cycles", type=int, default=60, help="rescue + reset cycles per way")
    args = parser.parse_args()
    _count_git()
    # No config of this machine's user: the hand-written commit assumes git's defaults.
    home = tempfile.mkdtemp(prefix="herd-bench-home-")
    os.environ |= {"HOME": home, "XDG_CONFIG_HOME": home, "GIT_CONFIG_NOSYSTEM": "1"}
    print(f"git {subprocess.run(['git', '--version'], capture_output=True, text=True).stdout}")
    with tempfile.TemporaryDirectory(prefix="herd-bench-rescue-") as folder:
        root = Path(folder)
        load_before = os.getloadavg()
        cycles = rescue_cycles(root / "cycles", args.cycles)
        print(f"rescue + reset of a dirty tree, {args.cycles} cycles per way, interleaved")
        for way in WAYS:
            got = cycles[way]
            print(f" {way}: git processes per cycle {sorted({int(n) for n in got['git']})}")
            print(_row("CPU ms", got["cpu_ms"]))
            print(_row("wall ms", got["wall_ms"]))
        saved_cpu = statistics.median(cycles["commit-tree"]["cpu_ms"]) - statistics.median(
            cycles["by hand"]["cpu_ms"]
        )
        print(f" by hand saves {saved_cpu:.1f} ms of CPU per rescue at p50")
        gaps, relaunch = crash_rounds(
            root / "crash", args.rounds, args.crashes, args.running, print
        )
        load_after = os.getloadavg()
    print(
        f"crash -> relaunch, ms, {args.rounds} x {args.crashes} crashes per way beside "
        f"{args.running} busy sessions, interleaved"
    )
    for way in WAYS:
        print(_row(way, gaps[way]))
    print(" of which herd's run-exited -> run-started (rescue, reset, spawn), ms")
    for way in WAYS:
        print(_row(way, relaunch[way]))
    git_p95, hand_p95 = p(gaps["commit-tree"], 0.95), p(gaps["by hand"], 0.95)
    win = (git_p95 - hand_p95) / git_p95
    print(
        f" p95 by hand / commit-tree = {hand_p95 / git_p95:.2f}: by hand wins {win:.0%} of p95 "
        f"(needed {WIN_NEEDED:.0%}): {'keep it' if win >= WIN_NEEDED else 'git commit-tree'}"
    )
    print(f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")


if __name__ == "__main__":
    main()
