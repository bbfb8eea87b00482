"""Where a session really stands, from its own files: plan, progress, checkpoints, verification."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from agentherd.sessions.checkpoint import Checkpoint, GitPaths
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.plan import (
    DEFAULT_MAX_PLAN_BYTES,
    Plan,
    PlanDiff,
    PlanError,
    change_text,
    diff_plan,
    parse_plan,
    restore_plan,
)
from agentherd.sessions.progress import read_progress_tail
from agentherd.sessions.status import (
    CheckpointStatus,
    PlanStatus,
    ProgressStatus,
    VerificationStatus,
)
from agentherd.sessions.times import iso
from agentherd.supervisor.checks import verdicts, watchedfile
from agentherd.supervisor.checks.checkpoints import CheckpointWatch
from agentherd.supervisor.files import private
from agentherd.supervisor.files.store import Verification

if TYPE_CHECKING:
    from agentherd.supervisor.checks.port import SessionPort
    from agentherd.supervisor.checks.verify import VerifyResult

log = logging.getLogger("herd.observe")

PLAN_SETTLE_S = 0.15
"""A plan that fails to parse is re-read after this pause; only a settled problem is reported."""

PROGRESS_ENTRIES = 5
"""How many of the latest progress entries the status carries."""

PROGRESS_LOOP_READ_BYTES = 64 * 1024
"""A progress file up to this size is read on the event loop (open_regular never blocks on a
FIFO); a larger one in a worker thread."""

Submit = Callable[
    [
        str,
        str,
        Callable[[], Awaitable["VerifyResult"]],
        Callable[["VerifyResult"], Awaitable[None]],
    ],
    object,
]


class Observer:
    """Reads a session's plan, progress file and git history when they change; never raises.

    It keeps what it read; it posts what changed to its session, which alone writes.
    """

    def __init__(self, session: SessionPort) -> None:
        self.session = session
        self.plan_current: Plan | None = None
        self.plan_diff: PlanDiff | None = None
        self.plan_error: str | None = None
        self.plan_raw = b""
        """The bytes of the last plan file that parsed (what approve adopts as the baseline)."""
        self._plan_sig: watchedfile.FileSignature | None = None
        self._reported_changes: tuple[Any, ...] = ()
        self.restoring = False
        """A rejection is writing the baseline back: its `plan-rejected`, not a read of the
        plan meanwhile, closes `plan-tampered` (the person closed it; seen under load)."""
        self.progress_latest: tuple[str, ...] = ()
        self.progress_updated_at: str | None = None
        self.progress_error: str | None = None
        self._progress_sig: watchedfile.FileSignature | None = None
        self.git = CheckpointWatch(session, self._submit_verification)
        """The session's commits: its checkpoints and their verification."""
        self._plan_read: anyio.Lock | None = None
        """Held by the read of the plan under way (made on first use)."""
        self._verify_submit: Submit | None = None
        self.verification: dict[str, Any] | None = None
        """The newest verification result, shown with the checkpoint it belongs to."""
        self._status_cache: dict[str, Any] = {}
        """What the status read from the store once: the last checkpoint, a verification."""
        baseline = session.record.plan_baseline
        self.plan_baseline = Plan.from_json(baseline) if baseline else None

    @property
    def config(self) -> SessionConfig:
        """The session's config as it is now (a reload may replace it)."""
        return self.session.config

    @property
    def plan_path(self) -> Path | None:
        """The plan file, relative to the session's cwd."""
        return self.config.cwd / self.config.plan if self.config.plan else None

    @property
    def progress_path(self) -> Path | None:
        """The progress file, relative to the session's cwd."""
        return self.config.cwd / self.config.progress if self.config.progress else None

    def reread(self) -> None:
        """Forget what was read, so the next refresh reads every file and git again."""
        self._plan_sig = self._progress_sig = None
        self.git.reread()

    def use_verifier(self, submit: Submit) -> None:
        """Where to send new checkpoints for verification (the daemon's fleet-wide queue)."""
        self._verify_submit = submit

    # ----- plan -----------------------------------------------------------------------------

    async def refresh_plan(self) -> None:
        """Parse the plan if it changed; keep the last good one when it is broken.

        One read at a time: a second caller (a run's clean end) that found the signature the
        first had already taken returned with the plan before it, so a run that passed an
        item was judged against the older count (early exits missed or invented).
        """
        async with self.plan_reads():
            await self._refresh_plan()

    def plan_reads(self) -> anyio.Lock:
        """The lock every read of the plan holds; a restart's reset holds it too, so no read
        sees the checkpoint's older copy before herd writes the answered plan back."""
        if self._plan_read is None:
            self._plan_read = anyio.Lock()
        return self._plan_read

    async def _refresh_plan(self) -> None:
        path = self.plan_path
        if path is None:
            return
        signature = watchedfile.signature(path)
        if signature is not None and signature == self._plan_sig:
            return
        self._plan_sig = signature
        plan = await self._read_settled_plan(path, signature)
        if plan is None:
            return
        # Whether or not this daemon saw it break: one opened before a restart closes too.
        self.session.close_warning("plan-invalid", f"{self.config.plan} reads again", "plan")
        self.plan_error = None
        self.plan_current = plan
        self.session.ctx.spend_changed(self.session)  # the spend samples show what passes
        self.session.note_plan_progress()
        if self.plan_baseline is None:
            self.plan_baseline = plan
            self.session.adopt_plan_baseline(
                plan.to_json(),
                self.plan_raw.decode("utf-8-sig"),
                self.session.make_event(
                    "plan-baseline",
                    f"plan baseline: {plan.passing}/{plan.total} items pass",
                    passing=plan.passing,
                    total=plan.total,
                ),
            )
        self.plan_diff = diff_plan(self.plan_baseline, plan)
        changes = tuple(c.to_json() for c in self.plan_diff.changed_items)
        if changes and changes != self._reported_changes:
            self._reported_changes = changes
            summary = ", ".join(
                change_text(c["index"], c["change"], c["description"]) for c in changes[:5]
            )
            self.session.commit_events(
                self.session.make_event(
                    "plan-tampered",
                    f"{self.config.plan} changed against its baseline: {summary}",
                    changed_items=list(changes),
                )
            )
        elif not changes:
            self._reported_changes = ()
            if not self.restoring:
                self.session.close_warning(
                    "plan-tampered", f"{self.config.plan} matches its baseline again", "plan"
                )
        self.session.touch()

    async def _read_settled_plan(
        self, path: Path, signature: watchedfile.FileSignature | None
    ) -> Plan | None:
        """Parse the plan; report a problem only once the file stopped changing.

        An agent's write is often truncate-then-write: the half-written moment is not news.
        """
        while True:
            problem = None
            plan = None
            if signature is None and self.plan_current is None and self.plan_baseline is None:
                return None  # the agent has not written its plan yet: nothing is wrong
            if signature is None:
                problem = "deleted or unreadable"
            elif signature.size > DEFAULT_MAX_PLAN_BYTES:
                problem = f"too large: over the {DEFAULT_MAX_PLAN_BYTES} byte limit"
            else:
                try:
                    data = await anyio.to_thread.run_sync(watchedfile.read_plan, path)
                    plan = parse_plan(data)
                    self.plan_raw = data
                except (OSError, PlanError) as exc:
                    problem = str(exc)
            if plan is not None:
                return plan
            await anyio.sleep(PLAN_SETTLE_S)
            now = watchedfile.signature(path)
            if now == signature:
                self._plan_invalid(f"{self.config.plan}: {problem}; keeping the last good plan")
                return None
            signature = self._plan_sig = now

    def _plan_invalid(self, message: str) -> None:
        if message == self.plan_error:
            return
        self.plan_error = message
        self.session.commit_events(self.session.make_event("plan-invalid", message))

    async def restore_baseline(self) -> None:
        """Write the baseline plan back, keeping today's progress (a person rejected a change)."""
        raw = self.session.record.plan_baseline_raw
        path = self.plan_path
        if raw is None or path is None or self.plan_current is None:
            raise ValueError("no baseline plan to restore")
        data = restore_plan(raw.encode(), self.plan_current)
        self.restoring = True  # until the caller's `plan-rejected`, which closes the warning
        try:
            await anyio.to_thread.run_sync(watchedfile.write_atomically, path, data)
        except BaseException:
            self.restoring = False
            raise

    def accept_plan(self) -> tuple[str, str] | None:
        """Take the current plan as the new baseline; return its JSON and text to record."""
        if self.plan_current is None:
            return None
        self.plan_baseline = self.plan_current
        self.plan_diff = diff_plan(self.plan_baseline, self.plan_current)
        self._reported_changes = ()
        return self.plan_current.to_json(), self.plan_raw.decode("utf-8-sig")

    # ----- progress -------------------------------------------------------------------------

    async def refresh_progress(self) -> None:
        """Re-read the tail of the progress file if it changed."""
        path = self.progress_path
        if path is None:
            return
        signature = watchedfile.signature(path)
        if signature == self._progress_sig:
            return
        self._progress_sig = signature
        if signature is None:
            return
        try:
            if signature.size <= PROGRESS_LOOP_READ_BYTES:
                data = watchedfile.read_progress_tail(
                    path
                )  # a small read: a worker's hand-off costs more
            else:
                data = await anyio.to_thread.run_sync(watchedfile.read_progress_tail, path)
        except OSError as exc:
            self._progress_invalid(f"{self.config.progress}: {exc}; keeping the last entries")
            return
        read = read_progress_tail(data, max_entries=PROGRESS_ENTRIES)
        if read.binary:
            self._progress_invalid(
                f"{self.config.progress}: looks binary, not a progress "
                "file; keeping the last entries"
            )
            return
        self.session.close_warning(
            "progress-invalid", f"{self.config.progress} reads again", "progress"
        )
        self.progress_error = None
        self.progress_latest = tuple(read.entries)
        self.progress_updated_at = iso(watchedfile.modified_at(signature))
        self.session.progress_written(signature.mtime_ns / 1e9)

    def _progress_invalid(self, message: str) -> None:
        if message == self.progress_error:
            return
        self.progress_error = message
        self.session.commit_events(self.session.make_event("progress-invalid", message))

    # ----- git ------------------------------------------------------------------------------

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The commit HEAD points at, as last recorded."""
        return self.git.checkpoint

    @property
    def git_error(self) -> str | None:
        """Why git could not be read at the last look, or None."""
        return self.git.git_error

    @property
    def cached_git_paths(self) -> GitPaths | None:
        """The git folders found by the last look, without looking again."""
        return self.git.cached_git_paths

    async def git_paths(self) -> GitPaths | None:
        """The session's git folders (cached), or None when cwd is not a git worktree."""
        return await self.git.git_paths()

    async def refresh_git(self) -> None:
        """Record commits that appeared since the last look, and verify the newest."""
        await self.git.refresh()

    # ----- verification ---------------------------------------------------------------------

    def _submit_verification(self, sha: str) -> None:
        if self.config.verify is None or self._verify_submit is None:
            return
        from agentherd.supervisor.checks import verifyroom
        from agentherd.supervisor.checks.verify import run_verification

        folder = self.session.ctx.state_dir / "verify" / self.config.name

        async def once() -> VerifyResult:
            with contextlib.suppress(OSError):  # a full disk: the log says so, then a retry
                private.make_folder(folder)
            return await run_verification(
                self.config.cwd,
                sha,
                self.config.verify or "",
                self.config.verify_setup,
                self.config.verify_timeout,
                folder,
                env=self.config.env,
                log_path=folder / f"{sha}.log",
            )

        async def job() -> VerifyResult:
            disk = self.session.ctx.state_dir
            return await verifyroom.verify_when_room(once, disk, self.config.verify_timeout)

        self._verify_submit(self.config.name, sha, job, self._verified)

    async def _verified(self, result: VerifyResult) -> None:
        verdict = Verification(result.sha, result.passed, result.to_json())
        self.git.verified(result.sha, result.passed)
        self.verification = verdicts.shown(result)
        if result.passed:
            event = verdicts.passed_event(self.session.make_event, result)
            self.session.verdict_events(result.sha, True, "")
            self.session.record_verification(verdict, event)
            return
        events = [verdicts.failed_event(self.session.make_event, result)]
        claimed, claim_error = await verdicts.claimed_at(
            self.config, result.sha, self.session.ctx.git_reads
        )
        events += verdicts.claim_events(self.session.make_event, result.sha, claimed, claim_error)
        events += self.session.verdict_events(result.sha, False, result.output_tail)
        self.session.record_verification(verdict, *events)

    # ----- status ---------------------------------------------------------------------------

    def status_fields(self) -> dict[str, Any]:
        """The `plan`, `progress`, `checkpoint` and `git_note` fields of `herd status --json`.

        Before git is read again (a new daemon), the checkpoint and its verification come from
        the store, as the report's do.
        """
        plan: PlanStatus | None = None
        if self.plan_diff is not None:
            plan = PlanStatus.model_validate({**self.plan_diff.to_json(), "error": self.plan_error})
        elif self.plan_error:
            plan = PlanStatus(passing=0, total=0, error=self.plan_error)
        progress = None
        if self.progress_path is not None:
            progress = ProgressStatus(
                updated_at=self.progress_updated_at,
                latest=list(self.progress_latest),
                error=self.progress_error,
            )
        checkpoint = self.checkpoint or self._stored_checkpoint()
        shown = None
        if checkpoint is not None:
            shown = CheckpointStatus.model_validate(
                {
                    **checkpoint.to_status_json(),
                    "verification": self._verification_of(checkpoint.sha),
                }
            )
        return {
            "plan": plan,
            "progress": progress,
            "checkpoint": shown,
            "git_note": self.git_error,
        }

    def _stored_checkpoint(self) -> Checkpoint | None:
        """The newest checkpoint the store knows (looked up once, until git is read)."""
        if "checkpoint" not in self._status_cache:
            found = self.session.ctx.store.checkpoints(self.config.name, limit=1)
            self._status_cache["checkpoint"] = found[-1] if found else None
        cached: Checkpoint | None = self._status_cache["checkpoint"]
        return cached

    def _verification_of(self, sha: str) -> VerificationStatus | None:
        """The verification of checkpoint `sha`: this daemon's last one, else the stored one."""
        if self.verification is not None and self.verification["sha"] == sha:
            return VerificationStatus.model_validate(self.verification)
        cached = self._status_cache.get("verification")
        if cached is None or cached[0] != sha:
            result = self.session.ctx.store.verification(self.config.name, sha)
            cached = (sha, VerificationStatus.from_result(result) if result else None)
            self._status_cache["verification"] = cached
        found: VerificationStatus | None = cached[1]
        return found
