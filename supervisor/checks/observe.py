"""Where a session really stands, from its own files: plan, progress, checkpoints, verification."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
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
    diff_plan,
    parse_plan,
    restore_plan,
)
from agentherd.sessions.progress import read_progress_tail
from agentherd.sessions.sanitize import inert
from agentherd.sessions.scope import outside
from agentherd.sessions.status import (
    CheckpointStatus,
    PlanStatus,
    ProgressStatus,
    VerificationStatus,
)
from agentherd.sessions.times import iso
from agentherd.supervisor.files import agentfiles
from agentherd.supervisor.files.store import StoreUnavailable, Verification
from agentherd.supervisor.git import gitfiles, gitops

if TYPE_CHECKING:
    from agentherd.sessions.records import Event
    from agentherd.supervisor.checks.port import SessionPort
    from agentherd.supervisor.checks.verify import VerifyResult

log = logging.getLogger("herd.observe")

MAX_NEW_CHECKPOINTS = 50
"""At most this many commits are recorded from one ref move (a rebase can bring hundreds)."""

PLAN_SETTLE_S = 0.15
"""A plan that fails to parse is re-read after this pause; only a settled problem is reported."""

VERIFY_TAIL_LINES = 5
"""`herd status` shows this many last lines of a verification's output (the report, 20)."""

PROGRESS_ENTRIES = 5
"""How many of the latest progress entries the status carries."""

Submit = Callable[
    [
        str,
        str,
        Callable[[], Awaitable["VerifyResult"]],
        Callable[["VerifyResult"], Awaitable[None]],
    ],
    object,
]


@dataclass(frozen=True)
class FileSignature:
    """Enough of a file's stat to know it did not change since the last read."""

    inode: int
    size: int
    mtime_ns: int


def _signature(path: Path) -> FileSignature | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return FileSignature(info.st_ino, info.st_size, info.st_mtime_ns)


def _read(path: Path) -> bytes:
    """The plan's bytes: a regular file within the size bound (an agent may plant a FIFO)."""
    return agentfiles.read_regular(path, DEFAULT_MAX_PLAN_BYTES)


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
        self._plan_sig: FileSignature | None = None
        self._reported_changes: tuple[Any, ...] = ()
        self.progress_latest: tuple[str, ...] = ()
        self.progress_updated_at: str | None = None
        self.progress_error: str | None = None
        self._progress_sig: FileSignature | None = None
        self.checkpoint: Checkpoint | None = None
        self.git_error: str | None = None
        self._git_paths: GitPaths | None = None
        self._git_missing = False
        """The last look found no repository (so finding one changes what is watched)."""
        self._head_log_sig: FileSignature | None = None
        self._git_look: anyio.Lock | None = None
        """Held by the look at git under way (made on first use, inside the event loop)."""
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
        self._plan_sig = self._progress_sig = self._head_log_sig = None

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
        signature = _signature(path)
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
            summary = ", ".join(f"{c['change']} [{c['index']}]" for c in changes[:5])
            self.session.commit_events(
                self.session.make_event(
                    "plan-tampered",
                    f"{self.config.plan} changed against its baseline: {summary}",
                    changed_items=list(changes),
                )
            )
        elif not changes:
            self._reported_changes = ()
            self.session.close_warning(
                "plan-tampered", f"{self.config.plan} matches its baseline again", "plan"
            )
        self.session.touch()

    async def _read_settled_plan(self, path: Path, signature: FileSignature | None) -> Plan | None:
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
                    data = await anyio.to_thread.run_sync(_read, path)
                    plan = parse_plan(data)
                    self.plan_raw = data
                except (OSError, PlanError) as exc:
                    problem = str(exc)
            if plan is not None:
                return plan
            await anyio.sleep(PLAN_SETTLE_S)
            now = _signature(path)
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
        await anyio.to_thread.run_sync(_write_atomically, path, data)
        # The caller reads the plan again once `plan-rejected` is written: that event, not
        # the re-read, is what closes `plan-tampered`.

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
        signature = _signature(path)
        if signature == self._progress_sig:
            return
        self._progress_sig = signature
        if signature is None:
            return
        try:
            if signature.size <= PROGRESS_LOOP_READ_BYTES:
                data = _read_tail(path)  # a small read: a worker's hand-off costs more
            else:
                data = await anyio.to_thread.run_sync(_read_tail, path)
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
        self.progress_error = None
        self.progress_latest = tuple(read.entries)
        self.progress_updated_at = iso(_mtime(signature))
        self.session.progress_written(signature.mtime_ns / 1e9)

    def _progress_invalid(self, message: str) -> None:
        if message == self.progress_error:
            return
        self.progress_error = message
        self.session.commit_events(self.session.make_event("progress-invalid", message))

    # ----- git ------------------------------------------------------------------------------

    @property
    def _git_limiter(self) -> anyio.CapacityLimiter:
        return self.session.ctx.git_reads

    @property
    def cached_git_paths(self) -> GitPaths | None:
        """The git folders found by the last look, without looking again."""
        return self._git_paths

    async def git_paths(self) -> GitPaths | None:
        """The session's git folders (cached), or None when cwd is not a git worktree."""
        if self._git_paths is None:
            try:
                self._git_paths = await anyio.to_thread.run_sync(
                    gitops.git_paths, self.config.cwd, limiter=self._git_limiter
                )
            except (gitops.NotAGitRepo, OSError):
                self._git_missing = True
                return None
            if self._git_missing:  # the folder became a repository (a moved session's host
                self.session.ctx.runs_changed()  # made it from the remote): watch its git too
        return self._git_paths

    async def refresh_git(self) -> None:
        """Record commits that appeared since the last look, and verify the newest.

        `logs/HEAD` is appended on every commit and reset, so an unchanged stat of it means
        nothing moved: the slow reconcile pass costs one stat per session. One look at a time:
        a second look that found the stat unchanged while the first was still reading HEAD
        returned with the older checkpoint (a clean end then waited for a superseded verdict).
        """
        if self._git_look is None:
            self._git_look = anyio.Lock()
        async with self._git_look:
            await self._refresh_git()

    async def _refresh_git(self) -> None:
        cwd = self.config.cwd
        paths = await self.git_paths()
        if paths is not None:
            signature = _signature(paths.head_log)
            if signature is not None and signature == self._head_log_sig:
                return
            self._head_log_sig = signature
        # HEAD from the files (a few small reads): the commits are then read in one git
        # process, not three; anything unusual (or no commit yet) is asked of git as before.
        head_sha = gitfiles.head_sha(paths) if paths is not None else None
        if head_sha is not None and head_sha != gitfiles.UNKNOWN:
            await self._record_new_head(head_sha, None, paths)
            return
        try:
            head = await anyio.to_thread.run_sync(
                gitops.head_checkpoint, cwd, limiter=self._git_limiter
            )
        except gitops.NotAGitRepo:
            self._git_problem(
                f"{cwd} is not a git repository: no checkpoints, verification, rescue or reset",
                kind="not-a-git-repo",
            )
            return
        except Exception as exc:  # git can fail in many ways; the session goes on
            self._git_problem(f"cannot read git in {cwd}: {exc}")
            return
        if head is None:
            self._git_problem(f"{cwd} has no commits yet: no checkpoint")
            return
        await self._record_new_head(head.sha, head, paths)

    async def _record_new_head(
        self, head_sha: str, head: Checkpoint | None, paths: GitPaths | None
    ) -> None:
        """Record the commits up to `head_sha` that are new since the last checkpoint."""
        cwd = self.config.cwd
        if head is not None:
            self.git_error = None
        previous = self.checkpoint.sha if self.checkpoint else None
        if head_sha == previous:
            self.git_error = None
            return
        store = self.session.ctx.store
        known = store.checkpoints(self.config.name, limit=1)
        since = known[-1].sha if known else None
        if since == head_sha:
            self.checkpoint = known[-1]
            self.session.touch()
            if self.checkpoint.verified is None:  # its verification died with a daemon
                self._submit_verification(head_sha)
            return
        try:
            new = await anyio.to_thread.run_sync(
                gitops.new_commits,
                cwd,
                since,
                head_sha,
                MAX_NEW_CHECKPOINTS,
                paths,
                limiter=self._git_limiter,
            )
        except Exception:
            if head is None:  # HEAD was read from the files: git says what it is, as before
                try:
                    head = await anyio.to_thread.run_sync(
                        gitops.head_checkpoint, cwd, limiter=self._git_limiter
                    )
                except Exception as exc:
                    self._git_problem(f"cannot read git in {cwd}: {exc}")
                    return
                if head is None:
                    self._git_problem(f"{cwd} has no commits yet: no checkpoint")
                    return
            new = [head]
        self.git_error = None
        for commit in new:
            event = self.session.make_event(
                "checkpoint",
                f"checkpoint {commit.short_sha} {inert(commit.subject)[:120]}",
                sha=commit.sha,
                subject=commit.subject,
                files=list(commit.files[:50]),
            )
            # History from before herd watched is not this session's drift.
            stray = self._scope_event(commit) if known else None
            try:
                self.session.record_checkpoint(commit, event, *([stray] if stray else []))
            except StoreUnavailable:
                self._head_log_sig = None  # the disk is full: read git again next time
                return
        # HEAD, not the newest recorded: a restart from an earlier checkpoint moved it back.
        newest = store.checkpoints(self.config.name, limit=1)[-1]
        self.checkpoint = store.checkpoint(self.config.name, head_sha) or newest
        self.session.note_progress()
        if self.checkpoint.sha == newest.sha or self.checkpoint.verified is None:
            self._submit_verification(self.checkpoint.sha)

    def _scope_event(self, commit: Checkpoint) -> Event | None:
        """A warning when a commit touches files outside `scope` (plan and progress file aside)."""
        if not self.config.scope or self._git_paths is None:
            return None
        top = self._git_paths.worktree
        own = [self.plan_path, self.progress_path]
        always = [str(p.resolve().relative_to(top)) for p in own if p and _under(p, top)]
        stray = outside(commit.files, self.config.scope, always)
        if not stray:
            return None
        shown = ", ".join(stray[:5]) + (f" and {len(stray) - 5} more" if len(stray) > 5 else "")
        return self.session.make_event(
            "out-of-scope",
            f"checkpoint {commit.short_sha} changes files outside scope: {inert(shown)}",
            sha=commit.sha,
            files=stray[:50],
        )

    def _git_problem(self, message: str, kind: str = "git-unavailable") -> None:
        if message == self.git_error:
            return
        self.git_error = message
        self.session.commit_events(self.session.make_event(kind, message))

    def _submit_verification(self, sha: str) -> None:
        if self.config.verify is None or self._verify_submit is None:
            return
        from agentherd.supervisor.checks.verify import run_verification

        folder = self.session.ctx.state_dir / "verify" / self.config.name

        async def job() -> VerifyResult:
            folder.mkdir(parents=True, exist_ok=True)
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

        self._verify_submit(self.config.name, sha, job, self._verified)

    async def _verified(self, result: VerifyResult) -> None:
        verdict = Verification(result.sha, result.passed, result.to_json())
        if self.checkpoint is not None and self.checkpoint.sha == result.sha:
            self.checkpoint = self.checkpoint.model_copy(update={"verified": result.passed})
        tail = result.output_tail.splitlines()[-VERIFY_TAIL_LINES:]
        self.verification = {
            "sha": result.sha,
            "passed": result.passed,
            "duration_s": round(result.duration_s, 2),
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "error": result.error,
            "output_tail": "\n".join(tail),
        }
        if result.passed:
            event = self.session.make_event(
                "verify-passed",
                f"checkpoint {result.sha[:7]} verified in {result.duration_s:.1f}s",
                sha=result.sha,
                duration_s=result.duration_s,
            )
            self.session.verdict_events(result.sha, True, "")
            self.session.record_verification(verdict, event)
            return
        why = result.error or ("timed out" if result.timed_out else f"exit {result.exit_code}")
        events = [
            self.session.make_event(
                "verify-failed",
                f"checkpoint {result.sha[:7]} fails verification ({why})",
                sha=result.sha,
                exit_code=result.exit_code,
                timed_out=result.timed_out,
                output_tail=result.output_tail[-2000:],
            )
        ]
        claimed, claim_error = await self._claimed_at(result.sha)
        if claim_error is not None:
            events.append(
                self.session.make_event(
                    "claim-unchecked",
                    f"checkpoint {result.sha[:7]} fails verification, but its plan claims "
                    f"could not be checked: {inert(claim_error)[:200]}",
                    sha=result.sha,
                    error=claim_error[:500],
                )
            )
        if claimed:
            events.append(
                self.session.make_event(
                    "claims-done-but-fails",
                    f"checkpoint {result.sha[:7]} marks "
                    f"{len(claimed)} item(s) passing but fails verification: "
                    + "; ".join(inert(c)[:80] for c in claimed[:3]),
                    sha=result.sha,
                    items=claimed,
                )
            )
        events += self.session.verdict_events(result.sha, False, result.output_tail)
        self.session.record_verification(verdict, *events)

    async def _claimed_at(self, sha: str) -> tuple[list[str], str | None]:
        """Plan items that the commit `sha` flipped to passing (against its parent), or why
        git could not tell (a git error is reported, never taken for "no claim")."""
        if not self.config.plan:
            return [], None
        plan_file = self.config.plan
        try:
            now_data = await anyio.to_thread.run_sync(
                gitops.read_at,
                self.config.cwd,
                sha,
                plan_file,
                DEFAULT_MAX_PLAN_BYTES,
                limiter=self._git_limiter,
            )
            before_data = await anyio.to_thread.run_sync(
                gitops.read_at,
                self.config.cwd,
                f"{sha}~1",
                plan_file,
                DEFAULT_MAX_PLAN_BYTES,
                limiter=self._git_limiter,
            )
        except Exception as exc:  # git fails in many ways: say so
            return [], f"git cannot show {plan_file} at {sha[:7]}: {exc}"
        if now_data is None:
            return [], None
        try:
            now = parse_plan(now_data)
            before = parse_plan(before_data) if before_data is not None else None
        except PlanError:
            return [], None  # no readable plan at that commit: it claims nothing
        passing_before = {i.key for i in before.items if i.passes} if before else set()
        claimed = [i.description for i in now.items if i.passes and i.key not in passing_before]
        return claimed, None

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


PROGRESS_LOOP_READ_BYTES = 64 * 1024
"""A progress file up to this size is read on the event loop (open_regular never blocks on a
FIFO); a larger one in a worker thread."""
PROGRESS_TAIL_BYTES = 256 * 1024
"""Only the end of a long progress file is read: the latest entries live there."""


def _under(path: Path, top: Path) -> bool:
    """True when `path` lies inside the folder `top`."""
    return path.resolve().is_relative_to(top)


def _write_atomically(path: Path, data: bytes) -> None:
    """Replace a file in one rename, so its reader never sees it half written."""
    temporary = path.with_name(f".{path.name}.herd-tmp")
    temporary.unlink(missing_ok=True)  # whatever the agent left there (a FIFO would block)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)


def _read_tail(path: Path) -> bytes:
    """The end of the progress file: a regular file, read from its tail."""
    return agentfiles.read_regular_tail(path, PROGRESS_TAIL_BYTES)


def _mtime(signature: FileSignature) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(signature.mtime_ns / 1e9, UTC)
