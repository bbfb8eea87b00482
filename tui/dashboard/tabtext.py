"""The session screen's texts that need no widget: the plan, the progress file's entries,
times and line counts, shared by the dashboard and the web view (tui/web/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentherd.sessions.records import Event
from agentherd.sessions.sanitize import inert
from agentherd.sessions.status import SessionStatus

PROGRESS_READ_BYTES = 256 << 10
"""The progress tab reads the end of the file: its newest entries live there."""


def read_progress(path: str | None) -> str:
    """The end of the progress file as text (in a worker thread), or why there is none."""
    if not path:
        return 'no progress file (set progress = "..." in herd.toml)'
    try:
        with Path(path).open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - PROGRESS_READ_BYTES))
            return handle.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"


def short_time(at: str | None) -> str:
    """`12-01 16:58:06` of an ISO time: the year and milliseconds cost 80 columns a third."""
    return at[5:19].replace("T", " ") if at and len(at) >= 19 else (at or "")


def line_counts(checkpoint: dict[str, Any]) -> str:
    """ " +12 -3" for a checkpoint whose line counts were recorded, else nothing."""
    added, removed = checkpoint.get("insertions"), checkpoint.get("deletions")
    return "" if added is None or removed is None else f" +{added} -{removed}"


def progress_entries(text: str) -> list[str]:
    """The progress file split into entries at its `#` headings, oldest first."""
    entries: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("#") or not entries:
            entries.append([])
        entries[-1].append(line)
    return ["\n".join(entry).strip() for entry in entries if "".join(entry).strip()]


def plan_lines(report: dict[str, Any], status: SessionStatus | None) -> str:
    """Every plan item with ✓ or ✗, and the changes against the baseline marked ⚠."""
    passed, remains = report.get("passed", {}), report.get("remains", {})
    lines = [f"✓ {inert(item)}" for item in passed.get("items_passing", [])]
    lines += [f"✗ {inert(item)}" for item in remains.get("items_failing", [])]
    total = passed.get("plan_total")
    head = f"{passed.get('plan_passing')}/{total} passing" if total is not None else "no plan"
    changes = status.plan.changed_items if status and status.plan else []
    if changes:
        head += f"  ·  ⚠ {len(changes)} change(s) against the baseline (A approves, X rejects)"
        lines += ["", "changed since the baseline:"]
        lines += [f"⚠ item {c.index + 1} {c.change}: {inert(c.description)}" for c in changes]
    if remains.get("plan_error"):
        lines.append(f"plan error: {inert(remains['plan_error'])}")
    return "\n".join([head, "", *lines])


def checkpoint_detail(checkpoint: dict[str, Any]) -> str:
    """Below the checkpoint table: the highlighted checkpoint's files and, when it fails, why."""
    files = checkpoint.get("files", [])
    counts = line_counts(checkpoint)
    lines = [f"{checkpoint['sha'][:10]}  {len(files)} file(s){counts}: {', '.join(files[:12])}"]
    check = checkpoint.get("verification") or {}
    if check and not check.get("passed"):
        why = check.get("error") or (
            "timed out" if check.get("timed_out") else f"exit {check.get('exit_code')}"
        )
        lines.append(f"verification fails: {why}")
        lines += [f"  {line}" for line in (check.get("output_tail") or "").splitlines()[-6:]]
    lines.append("F restarts the session from this checkpoint (asks first)")
    return inert("\n".join(lines))


def event_line(event: Event) -> str:
    """One event as the Events tab lists it."""
    run = event.run or "-"
    return f"{short_time(event.at)}  run {run:>3}  {event.kind}: {inert(event.message)}"


def open_warnings(status: SessionStatus | None) -> str:
    """Above the events: the session's open warnings."""
    lines = [
        f"⚠ open: {w.kind} ×{w.count} since {w.opened_at or w.at}: {inert(w.message)}"
        for w in (status.warnings if status else [])
    ]
    return "\n".join(lines) or "no open warnings (closed and acknowledged ones are events below)"
