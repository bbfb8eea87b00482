"""A session's report, gathered from the store, the observer and git, rendered by sessions."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from agentherd.sessions.checkpoint import Checkpoint
from agentherd.sessions.records import Event, RunRecord
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.files import private
from agentherd.supervisor.files.store import Store
from agentherd.supervisor.git import gitops

if TYPE_CHECKING:
    from agentherd.sessions.report import ReportInput
    from agentherd.supervisor.checks.port import SessionPort

log = logging.getLogger("herd.report")

REPORT_CHECKPOINTS = 500
"""A report lists at most this many checkpoints (the newest)."""

REPORT_EVENTS = 100_000
"""A report reads at most this many of the session's events (the oldest)."""


@dataclass(frozen=True)
class _Stored:
    """What the report reads from the store."""

    checkpoints: list[Checkpoint]
    runs: list[RunRecord]
    events: list[Event]
    verifications: dict[str, dict[str, Any]]


def _read_store(store: Store, name: str) -> _Stored:
    """Read the session's records through a connection of this worker thread's own."""
    reader = store.reader()
    try:
        return _Stored(
            checkpoints=reader.checkpoints(name, limit=REPORT_CHECKPOINTS),
            runs=reader.runs(name),
            events=reader.events(session=name, limit=REPORT_EVENTS),
            verifications=reader.verifications(name),
        )
    finally:
        reader.close()


Changes = tuple[tuple[int, int, int] | None, list[str]]


def _read_all(store: Store, name: str, cwd: Path) -> tuple[_Stored, Changes]:
    """The session's records, then what its checkpoints changed: in one worker call, since
    `herd down` writes a report per session and each hand-off waits for a turn of the loop."""
    stored = _read_store(store, name)
    checkpoints = stored.checkpoints
    if not checkpoints:
        return stored, (None, [])
    from agentherd.sessions.report.facts import standing_sha

    # What the worktree holds: a restart from an earlier checkpoint left the later ones out.
    first = checkpoints[0].sha
    last = standing_sha(stored.events, checkpoints) or checkpoints[-1].sha
    try:
        return stored, gitops.changes_from_before(cwd, first, last)
    except Exception:  # the repo may be gone or rewritten; the report goes on
        log.warning("no diffstat for %s", name, exc_info=True)
        return stored, (None, [])


async def _report_input(session: SessionPort) -> ReportInput:
    """What the session's report is built from: the store, git, and the session's own state."""
    name = session.config.name
    handle = session.record.handle
    # Thousands of events take a fifth of a second to read: a worker thread reads them.
    stored, (diffstat, touched) = await anyio.to_thread.run_sync(
        _read_all, session.ctx.store, name, session.config.cwd
    )
    observer = session.observer
    runs = [r for r in stored.runs if handle is None or r.handle == handle]
    running = session.running_usage()
    if running is not None:  # its usage so far, as status shows
        number, usage = running[0], running[1].to_json()
        runs = [r.model_copy(update={"usage": usage}) if r.run == number else r for r in runs]
    # Imported here: the report's models cost the daemon ~1 MB for a verb few sessions see.
    from agentherd.sessions.report import ReportInput

    return ReportInput(
        session=name,
        state=str(session.record.state),
        reason=session.record.reason,
        handle=handle,
        generated_at=iso(utc_now()) or "",
        task_started_at=session.record.task_started_at,
        runs=runs,
        events=stored.events,
        checkpoints=stored.checkpoints,
        verifications=stored.verifications,
        plan_baseline=observer.plan_baseline,
        plan_current=observer.plan_current,
        plan_error=observer.plan_error,
        progress_latest=list(observer.progress_latest),
        progress_updated_at=observer.progress_updated_at,
        diffstat=diffstat,
        files_touched=touched,
        agent=session.config.agent,
        cwd=str(session.config.cwd),
        **session.spend_json(),
    )


async def session_report(session: SessionPort) -> dict[str, Any]:
    """The session's report: `{"report": <json form>, "markdown": <text>}`."""
    data = await _report_input(session)
    # Building reads every event of the task (thousands): a worker thread keeps the loop free.
    return await anyio.to_thread.run_sync(_build, data)


def _build(data: ReportInput) -> dict[str, Any]:
    """The report's JSON form and its markdown (run in a worker thread)."""
    from agentherd.sessions.report import build, render_markdown

    report = build(data)
    return {"report": report.model_dump(mode="json"), "markdown": render_markdown(report)}


async def write_report(session: SessionPort) -> None:
    """Write `.herd/reports/<session>.md` and `.json` (done whenever a task ends)."""
    try:
        data = await _report_input(session)
        folder = session.ctx.state_dir / "reports"
        await anyio.to_thread.run_sync(_build_and_write, folder, session.config.name, data)
    except Exception:
        log.exception("writing the report of %s failed", session.config.name)


class PendingReports:
    """Reports being written: the daemon waits for them before it exits, because `herd down`
    ends every task at once and the reports of those tasks would otherwise be cancelled."""

    def __init__(self) -> None:
        self.count = 0
        self._idle = anyio.Event()
        self._idle.set()

    async def write(self, session: SessionPort) -> None:
        """Write the session's report, counted until it is on disk."""
        self.count += 1
        if self._idle.is_set():
            self._idle = anyio.Event()
        try:
            await write_report(session)
        finally:
            self.count -= 1
            if self.count == 0:
                self._idle.set()

    async def drain(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for the reports in flight; say how many were left unwritten."""
        if not self.count:
            return
        with anyio.move_on_after(timeout_s):
            await self._idle.wait()
        if self.count:
            log.warning("%d reports left unwritten at exit (after %.0f s)", self.count, timeout_s)


def _build_and_write(folder: Path, name: str, data: ReportInput) -> None:
    """Build the report and write its files, in one worker call (see `_read_all`)."""
    _write(folder, name, _build(data))


def _write(folder: Path, name: str, result: dict[str, Any]) -> None:
    """Write the report's markdown and JSON files (in a worker thread: a report can be large)."""
    private.make_folder(folder)
    private.write_file(folder / f"{name}.md", result["markdown"])
    private.write_file(folder / f"{name}.json", json.dumps(result["report"], indent=2))
