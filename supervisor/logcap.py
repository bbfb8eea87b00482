"""Per-session disk cap on run output: the oldest runs' logs go first, the current one stays."""

from __future__ import annotations

import contextlib
from pathlib import Path

from agentherd.supervisor.procs import OUTPUT_FILE


def run_logs(session_runs: Path) -> list[tuple[int, Path, int]]:
    """(run number, path, size) of every run log of a session, oldest run first."""
    found = []
    for path in session_runs.glob(f"*/{OUTPUT_FILE}"):
        if not path.parent.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            found.append((int(path.parent.name), path, path.stat().st_size))
    return sorted(found)


def enforce_cap(session_runs: Path, cap_bytes: int, current_run: int) -> list[tuple[int, int]]:
    """Delete old runs' logs until the total fits `cap_bytes`; returns (run, bytes) deleted."""
    logs = run_logs(session_runs)
    total = sum(size for _, _, size in logs)
    deleted = []
    for number, path, size in logs:
        if total <= cap_bytes or number == current_run:
            break
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        total -= size
        deleted.append((number, size))
    return deleted


def bytes_before(session_runs: Path, current_run: int) -> int:
    """Bytes kept for the runs before `current_run` (the current one is counted live)."""
    return sum(size for number, _, size in run_logs(session_runs) if number != current_run)
