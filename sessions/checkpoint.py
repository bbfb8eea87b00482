"""Git checkpoints and the git paths of a worktree, as plain models (no git is run here)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator

from agentherd.sessions.times import iso_seconds

SHORT_SHA_CHARS = 7
"""Length of an abbreviated sha for display, as `git log --oneline` prints it in small repos."""


class Checkpoint(BaseModel):
    """A commit in a session's worktree: what the dashboard and the status JSON show."""

    model_config = ConfigDict(frozen=True)

    sha: str
    at: datetime
    subject: str
    files: tuple[str, ...] = ()
    insertions: int | None = None
    """Lines added by the commit (None: recorded before herd counted them)."""
    deletions: int | None = None
    """Lines removed by the commit (binary files count no lines)."""
    verified: bool | None = None

    @field_validator("at")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        """Keep times in UTC; a naive time is taken to be UTC already."""
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

    @property
    def short_sha(self) -> str:
        """The abbreviated sha for display."""
        return self.sha[:SHORT_SHA_CHARS]

    def to_status_json(self) -> dict[str, object]:
        """The `checkpoint` object of `herd status --json`."""
        return {
            "sha": self.sha,
            "at": iso_seconds(self.at),
            "subject": self.subject,
            "verified": self.verified,
        }


class GitPaths(BaseModel):
    """Where a worktree's git data lives; in a linked worktree `.git` is a file pointing away."""

    model_config = ConfigDict(frozen=True)

    worktree: Path
    git_dir: Path
    common_dir: Path

    @property
    def head_log(self) -> Path:
        """The HEAD reflog, appended in place on every commit, reset and checkout."""
        return self.git_dir / "logs" / "HEAD"

    @property
    def refs_dir(self) -> Path:
        """The shared refs folder (branch refs live here, also for linked worktrees)."""
        return self.common_dir / "refs"

    @property
    def watch_dirs(self) -> tuple[Path, ...]:
        """Folders to watch, NOT recursively, to see a commit or reset land in this worktree.

        `git_dir` (HEAD, ORIG_HEAD and index are replaced by rename there), `git_dir/logs`
        (logs/HEAD is appended; it and the folder appear with the first commit) and
        `common_dir/refs/heads` (branch refs are replaced by rename). A recursive watch of
        `git_dir` would also cover `objects/`: thousands of folders for nothing.
        """
        dirs = (self.git_dir, self.git_dir / "logs", self.common_dir / "refs" / "heads")
        return tuple(dict.fromkeys(dirs))
