"""A session's commits, recorded as checkpoints as they appear, the newest sent for verification."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import anyio

from agentherd.sessions.checkpoint import Checkpoint, GitPaths
from agentherd.sessions.config import SessionConfig
from agentherd.sessions.records import Event
from agentherd.sessions.sanitize import inert
from agentherd.sessions.scope import outside
from agentherd.supervisor.checks import watchedfile
from agentherd.supervisor.files.store import Store, StoreUnavailable
from agentherd.supervisor.git import gitfiles, gitops

GIT_WARNINGS = ("git-unavailable", "not-a-git-repo")
"""The warnings a successful read of git settles."""

MAX_NEW_CHECKPOINTS = 50
"""At most this many commits are recorded from one ref move (a rebase can bring hundreds)."""


class _Shared(Protocol):
    """What the watch uses of the daemon's shared context."""

    @property
    def store(self) -> Store: ...

    @property
    def git_reads(self) -> anyio.CapacityLimiter: ...

    def runs_changed(self) -> None: ...


class _Session(Protocol):
    """What the watch reads of its session, and how it posts facts to it."""

    @property
    def config(self) -> SessionConfig: ...

    @property
    def ctx(self) -> _Shared: ...

    def make_event(self, kind: str, message: str, run: int | None = None, **data: Any) -> Event: ...

    def commit_events(self, *events: Event) -> None: ...

    def record_checkpoint(self, commit: Checkpoint, *events: Event) -> bool: ...

    def touch(self) -> None: ...

    def close_warning(self, kind: str, why: str, by: str) -> None: ...

    def note_progress(self) -> None: ...

    @property
    def git_warned(self) -> bool:
        """True once a restart said the session's cwd is not a git repository."""
        ...


class CheckpointWatch:
    """Reads the session's git history when it moves; never raises, posts what it found."""

    def __init__(self, session: _Session, verify: Callable[[str], None]) -> None:
        self.session = session
        self._verify = verify
        """Sends a checkpoint (by sha) to verification."""
        self.checkpoint: Checkpoint | None = None
        self.git_error: str | None = None
        self._git_paths: GitPaths | None = None
        self._git_missing = False
        """The last look found no repository (so finding one changes what is watched)."""
        self._head_log_sig: watchedfile.FileSignature | None = None
        self._git_look: anyio.Lock | None = None
        """Held by the look at git under way (made on first use, inside the event loop)."""

    @property
    def config(self) -> SessionConfig:
        """The session's config as it is now (a reload may replace it)."""
        return self.session.config

    def reread(self) -> None:
        """Forget the last look, so the next refresh reads git again."""
        self._head_log_sig = None

    def verified(self, sha: str, passed: bool) -> None:
        """Note the verdict on the current checkpoint, when it is still the one at `sha`."""
        if self.checkpoint is not None and self.checkpoint.sha == sha:
            self.checkpoint = self.checkpoint.model_copy(update={"verified": passed})

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

    async def refresh(self) -> None:
        """Record commits that appeared since the last look, and verify the newest.

        `logs/HEAD` is appended on every commit and reset, so an unchanged stat of it means
        nothing moved: the slow reconcile pass costs one stat per session. One look at a time:
        a second look that found the stat unchanged while the first was still reading HEAD
        returned with the older checkpoint (a clean end then waited for a superseded verdict).
        """
        if self._git_look is None:
            self._git_look = anyio.Lock()
        async with self._git_look:
            await self._refresh()

    async def _refresh(self) -> None:
        cwd = self.config.cwd
        paths = await self.git_paths()
        if paths is not None:
            signature = watchedfile.signature(paths.head_log)
            if signature is not None and signature == self._head_log_sig:
                return
            self._head_log_sig = signature
        # HEAD from the files (a few small reads): the commits are then read in one git
        # process, not three; anything unusual (or no commit yet) is asked of git as before.
        head_sha = gitfiles.head_sha(paths) if paths is not None else None
        if head_sha is not None and head_sha != gitfiles.UNKNOWN:
            self._log_seen_if_settled(paths, head_sha)
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
        self._log_seen_if_settled(paths, head.sha)
        await self._record_new_head(head.sha, head, paths)

    def _log_seen_if_settled(self, paths: GitPaths | None, head_sha: str) -> None:
        """Forget the stat of `logs/HEAD` just taken unless its last entry names `head_sha`.

        git appends to `logs/HEAD` before it moves the ref: a look between the two read the new
        log and the old HEAD, and taking that log as seen missed the commit until the next one
        (an agent's last commit before it exited went unrecorded and unverified).
        """
        if paths is not None and gitfiles.logged_head(paths) != head_sha:
            self._head_log_sig = None

    async def _record_new_head(
        self, head_sha: str, head: Checkpoint | None, paths: GitPaths | None
    ) -> None:
        """Record the commits up to `head_sha` that are new since the last checkpoint."""
        cwd = self.config.cwd
        if head is not None:
            self._git_reads()
        previous = self.checkpoint.sha if self.checkpoint else None
        if head_sha == previous:
            self._git_reads()
            return
        store = self.session.ctx.store
        known = store.checkpoints(self.config.name, limit=1)
        since = known[-1].sha if known else None
        if since == head_sha:
            self.checkpoint = known[-1]
            self.session.touch()
            if self.checkpoint.verified is None:  # its verification died with a daemon
                self._verify(head_sha)
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
        self._git_reads()
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
            self._verify(self.checkpoint.sha)

    def _scope_event(self, commit: Checkpoint) -> Event | None:
        """A warning when a commit touches files outside `scope` (plan and progress file aside)."""
        if not self.config.scope or self._git_paths is None:
            return None
        top = self._git_paths.worktree
        config = self.config
        own = [config.cwd / name for name in (config.plan, config.progress) if name]
        always = [str(p.resolve().relative_to(top)) for p in own if _under(p, top)]
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

    def _git_reads(self) -> None:
        """git read the session's folder: a warning that it could not (or found no commit, or
        no repository) is settled."""
        self.git_error = None
        for kind in GIT_WARNINGS:
            self.session.close_warning(kind, f"git reads {self.config.cwd} again", "git")

    def _git_problem(self, message: str, kind: str = "git-unavailable") -> None:
        if message == self.git_error:
            return
        self.git_error = message
        if kind == "not-a-git-repo" and self.session.git_warned:
            return  # a crash's restart came before this first look, and said it already
        self.session.commit_events(self.session.make_event(kind, message))


def _under(path: Path, top: Path) -> bool:
    """True when `path` lies inside the folder `top`."""
    return path.resolve().is_relative_to(top)
