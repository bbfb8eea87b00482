"""Reading a fleet from `.herd/` when no daemon runs: SQLite opened read-only, files as they are.

`DiskClient` answers the read ops of the control API (ls, status, events, log_info, report,
subscribe) the way the daemon would, so the CLI and the dashboard read a stopped fleet through
the same code; every op that would change something is refused. Nothing here starts a process
or writes a byte.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from agentherd.sessions import status_builder
from agentherd.sessions.config import HerdConfig, SessionConfig
from agentherd.sessions.plan import Plan, PlanError, diff_plan, parse_plan
from agentherd.sessions.progress import read_progress_tail
from agentherd.sessions.records import SessionRecord
from agentherd.sessions.report import ReportInput, build, render_markdown
from agentherd.sessions.spending import SpendFacts, fleet_member, spends
from agentherd.sessions.states import ACTIVE_STATES
from agentherd.sessions.status import (
    CheckpointStatus,
    LogInfoReply,
    LogsStatus,
    PlanStatus,
    ProgressStatus,
    SessionStatus,
    TaskStatus,
    VerificationStatus,
)
from agentherd.sessions.status_builder import StatusFacts
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.api import diffop
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.files import logcap
from agentherd.supervisor.files.paths import OUTPUT_FILE, run_dir
from agentherd.supervisor.files.store import Store

READ_OPS = frozenset({"ls", "status", "events", "log_info", "report", "info", "diff"})
"""The ops a fleet on disk can answer; every other op needs the daemon."""

DISK_POLL_S = 2.0
"""A read-only dashboard re-reads the state this often: a stopped fleet changes rarely."""

PLAN_READ_MAX_BYTES = 4 << 20
PROGRESS_TAIL_BYTES = 256 << 10


def open_read_only(state_dir: Path) -> Store:
    """A Store over `.herd/state.db` opened read-only (it never creates nor migrates it)."""
    path = state_dir / "state.db"
    if not path.is_file():
        raise ApiError(
            "no-daemon",
            f"no herd daemon is running here and {path} does not exist yet; start one with "
            "`herd up`",
        )
    store = Store.__new__(Store)
    store.path = path
    try:
        store._db = sqlite3.connect(
            path.resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None
        )
        store._db.execute("PRAGMA busy_timeout=5000")
        store._db.execute("SELECT 1 FROM sessions LIMIT 1").fetchall()
    except sqlite3.Error as exc:
        raise ApiError("no-daemon", f"{path} cannot be read without the daemon: {exc}") from None
    store._pending = []
    store.outage = None
    store.recovered = None
    return store


def _read_bytes(path: Path, max_bytes: int) -> bytes | None:
    """The file's bytes (at most `max_bytes` from its end), or None when it is not there."""
    try:
        with path.open("rb") as handle:
            size = path.stat().st_size
            handle.seek(max(0, size - max_bytes))
            return handle.read(max_bytes)
    except OSError:
        return None


def _plan(config: SessionConfig, record: SessionRecord) -> tuple[Plan | None, Plan | None, str]:
    """(baseline, current, error) of the session's plan as it is on disk now."""
    if not config.plan:
        return None, None, ""
    baseline = None
    if record.plan_baseline:
        try:
            baseline = Plan.from_json(record.plan_baseline)
        except PlanError:
            baseline = None
    data = _read_bytes(config.cwd / config.plan, PLAN_READ_MAX_BYTES)
    if data is None:
        return baseline, None, f"{config.plan} is missing"
    try:
        return baseline, parse_plan(data), ""
    except PlanError as exc:
        return baseline, None, str(exc)


def _plan_status(baseline: Plan | None, current: Plan | None, error: str) -> PlanStatus | None:
    """The `plan` field, judged against the stored baseline as the daemon judges it."""
    if current is None:
        return PlanStatus(passing=0, total=0, error=error) if error else None
    diff = diff_plan(baseline or current, current)
    return PlanStatus.model_validate(diff.to_json())


def _progress(config: SessionConfig) -> ProgressStatus | None:
    """The `progress` field: the newest entries of the progress file."""
    if not config.progress:
        return None
    path = config.cwd / config.progress
    data = _read_bytes(path, PROGRESS_TAIL_BYTES)
    if data is None:
        return ProgressStatus(error=f"{config.progress} is missing")
    read = read_progress_tail(data)
    updated = iso(utc_from_mtime(path))
    return ProgressStatus(updated_at=updated, latest=list(read.entries))


def utc_from_mtime(path: Path) -> datetime | None:
    """The file's modification time as an aware datetime (None when it is gone)."""
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return None


class DiskFleet:
    """The fleet of one herd.toml as its `.herd/` holds it, for reading only."""

    def __init__(self, config: HerdConfig) -> None:
        self.config = config
        self.store = open_read_only(config.state_dir)

    def close(self) -> None:
        """Close the database."""
        self.store.close()

    def _session(self, name: Any) -> SessionConfig:
        found = self.config.session(str(name)) if name else None
        if found is None:
            raise ApiError("unknown-session", f"no session named {name!r} in {self.config.path}")
        return found

    def _record(self, name: str) -> SessionRecord:
        return self.store.sessions().get(name) or SessionRecord(name=name)

    def spend_facts(self, config: SessionConfig, record: SessionRecord, now: float) -> SpendFacts:
        """What the session spent, as its stored runs say (no run is watched)."""
        ended_at = None
        if record.handle and record.state not in ACTIVE_STATES:
            task = self.store.task(record.handle)
            ended_at = task.ended_at if task is not None else None
        runs = self.store.runs(config.name)
        return SpendFacts.from_runs(config.budget, record, runs, ended_at, now)

    def status(
        self,
        config: SessionConfig,
        record: SessionRecord,
        spend: SpendFacts,
        fleet: dict[str, Any] | None,
    ) -> SessionStatus:
        """One session's status as the daemon would give it, with no run alive."""
        name = config.name
        last = self.store.run(name, record.run) if record.run else None
        baseline, current, plan_error = _plan(config, record)
        plan = _plan_status(baseline, current, plan_error)
        found = self.store.checkpoints(name, limit=1)
        checkpoint = None
        if found:
            verdict = self.store.verification(name, found[-1].sha)
            checkpoint = CheckpointStatus.model_validate(
                {
                    **found[-1].to_status_json(),
                    "verification": VerificationStatus.from_result(verdict) if verdict else None,
                }
            )
        logs = logcap.run_logs(self.config.state_dir / "runs" / name)
        return status_builder.build(
            StatusFacts(
                name=name,
                agent=config.agent,
                archived=config.archived,
                record=record,
                run=last,
                alive=False,
                spend=spend,
                warnings=self.store.open_warnings(name),
                plan=plan,
                plan_error=bool(plan_error),
                plan_tampered=bool(plan.changed_items) if plan is not None else None,
                progress=_progress(config),
                checkpoint=checkpoint,
                last_line=last.last_line if last else "",
                logs=LogsStatus(
                    bytes=sum(size for _, _, size in logs), cap_bytes=config.log_max_bytes
                ),
                fleet=fleet,
            )
        )

    def statuses(self, only: str | None = None) -> list[SessionStatus]:
        """Every session of herd.toml in its order (or only one), the fleet's spend summed
        over all of them as the daemon sums it."""
        records = self.store.sessions()
        now = time.time()
        found = []
        for config in self.config.sessions:
            record = records.get(config.name) or SessionRecord(name=config.name)
            found.append((config, record, self.spend_facts(config, record, now)))
        members = [fleet_member(r, *spends(r, facts)) for _, r, facts in found]
        fleet = status_builder.fleet_json(self.config.fleet.budget, members)
        return [
            self.status(config, record, facts, fleet)
            for config, record, facts in found
            if only is None or config.name == only
        ]

    def target_status(self, target: str) -> SessionStatus | TaskStatus:
        """A session's status, or a task's by its handle (`api/3`), as the daemon answers."""
        name, _, number = target.partition("/")
        config = self._session(name)
        record = self._record(config.name)
        if not number or record.handle == target:
            return self.statuses(only=config.name)[0]
        task = self.store.task(target)
        if task is None:
            raise ApiError(
                "unknown-handle", f"no task {target!r}; `herd status {name}` shows the current one"
            )
        return status_builder.task_status(name, target, task)

    def log_info(self, name: Any, run: Any = None) -> LogInfoReply:
        """Where a run's output is, as the daemon's `log_info` says (never live)."""
        config = self._session(name)
        record = self._record(config.name)
        number = int(run or record.run or 0)
        path = run_dir(self.config.state_dir, config.name, number) / OUTPUT_FILE
        return LogInfoReply(
            run=number or None,
            path=str(path) if number else None,
            current_run=record.run,
            live=False,
            progress=str(config.cwd / config.progress) if config.progress else None,
            state=record.state,
        )

    def report(self, name: Any) -> dict[str, Any]:
        """The session's report built from the store and the plan on disk (no git diffstat)."""
        config = self._session(name)
        record = self._record(config.name)
        baseline, current, plan_error = _plan(config, record)
        progress = _progress(config)
        runs = [r for r in self.store.runs(config.name) if r.handle == record.handle]
        spent = status_builder.spend_fields(record, self.spend_facts(config, record, time.time()))
        life = spent["usage_total"]
        data = ReportInput(
            session=config.name,
            state=str(record.state),
            reason=record.reason,
            handle=record.handle,
            generated_at=iso(utc_now()) or "",
            task_started_at=record.task_started_at,
            runs=runs,
            events=self.store.events(session=config.name, limit=100_000),
            checkpoints=self.store.checkpoints(config.name, limit=500),
            verifications=self.store.verifications(config.name),
            plan_baseline=baseline,
            plan_current=current,
            plan_error=plan_error or None,
            progress_latest=list(progress.latest) if progress else [],
            progress_updated_at=progress.updated_at if progress else None,
            agent=config.agent,
            cwd=str(config.cwd),
            usage_total=life.to_json() if life is not None else None,
            budget=spent["budget"],
        )
        report = build(data)
        return {"report": report.model_dump(mode="json"), "markdown": render_markdown(report)}

    def answer(self, op: str, args: dict[str, Any]) -> Any:
        """The JSON result the daemon would send for a read op; ApiError for any other op."""
        if op not in READ_OPS:
            raise ApiError(
                "no-daemon",
                f"no herd daemon is running here, and `{op}` needs one; start it with `herd up`",
            )
        if op == "info":
            return {"version": "", "pid": 0}
        if op == "ls" or (op == "status" and not args.get("target")):
            return [s.to_json() for s in self.statuses()]
        if op == "status":
            return self.target_status(str(args["target"])).to_json()
        if op == "events":
            session = args.get("session")
            if session is not None:
                self._session(session)
            found = self.store.events(
                int(args.get("since") or 0),
                session,
                args.get("kinds"),
                limit=int(args.get("limit") or 1000),
            )
            return [e.to_json() for e in found]
        if op == "log_info":
            return self.log_info(args.get("name"), args.get("run")).to_json()
        if op == "diff":
            config = self._session(args.get("name"))
            recorded = self.store.checkpoints(config.name, limit=diffop.CHECKPOINTS_LISTED)
            return diffop.answer(config.name, config.cwd, recorded, args)
        return self.report(args.get("name"))


class DiskClient:
    """A stand-in for `Client` that answers read ops from `.herd/` (the CLI without a daemon)."""

    read_only = True
    daemon_version: str | None = None

    def __init__(self, config: HerdConfig) -> None:
        self.config = config

    def call(self, op: str, socket_timeout_s: float | None = -1.0, **args: Any) -> Any:
        """Answer one read op from disk, opening the database for this call only."""
        fleet = DiskFleet(self.config)
        try:
            return fleet.answer(op, args)
        finally:
            fleet.close()

    def stream(self, op: str, **args: Any) -> Iterator[Any]:
        """Streams (`events -f`, `subscribe`) need a daemon to say what changes."""
        raise ApiError(
            "no-daemon", f"no herd daemon is running here, and following `{op}` needs one"
        )


class AsyncDiskClient:
    """A stand-in for `AsyncClient`: the dashboard reads a stopped fleet, changing nothing."""

    read_only = True
    daemon_version: str | None = None

    def __init__(self, config: HerdConfig, poll_s: float = DISK_POLL_S) -> None:
        self.sync = DiskClient(config)
        self.poll_s = poll_s

    async def call(self, op: str, **args: Any) -> Any:
        """Answer a read op in a worker thread (a report reads thousands of events)."""
        return await anyio.to_thread.run_sync(lambda: self.sync.call(op, **args))

    async def stream(self, op: str, **args: Any) -> AsyncIterator[Any]:
        """`subscribe`: a snapshot now and whenever the state on disk changes."""
        if op != "subscribe":
            raise ApiError("no-daemon", f"following `{op}` needs the daemon")
        last: list[Any] | None = None
        while True:
            sessions = await self.call("ls")
            if sessions != last:
                last = sessions
                yield {"sessions": sessions, "at": iso(utc_now())}
            await anyio.sleep(self.poll_s)
