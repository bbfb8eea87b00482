"""The `diff` reply: the checkpoints to pick from, the files a diff changes with their +/-,
and the texts asked for, each cut at a bound and saying so."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Reply(BaseModel):
    """Unknown fields from a newer daemon are ignored."""

    model_config = ConfigDict(extra="ignore", defer_build=True)


class DiffCheckpoint(_Reply):
    """A checkpoint as the picker lists it."""

    sha: str
    short: str
    at: str | None = None
    subject: str = ""
    verified: bool | None = None
    files: int = 0
    insertions: int | None = None
    deletions: int | None = None


class DiffFile(_Reply):
    """One changed file: a rename names its old path; a binary file counts no lines."""

    path: str
    old_path: str | None = None
    status: str = "modified"
    added: int | None = None
    removed: int | None = None
    binary: bool = False


class DiffText(_Reply):
    """One file's diff text, cut at the bound when `truncated`."""

    text: str
    truncated: bool = False


class DiffReply(_Reply):
    """`diff`: what a checkpoint (or, with `work`, the uncommitted work) changed against `base`."""

    session: str
    checkpoints: list[DiffCheckpoint] = Field(default_factory=list)
    """Newest first."""
    work: bool = False
    target: DiffCheckpoint | None = None
    against: str = "previous"
    base_label: str = ""
    base: str | None = None
    files: list[DiffFile] = Field(default_factory=list)
    files_truncated: bool = False
    texts: dict[str, DiffText] = Field(default_factory=dict)
    texts_truncated: bool = False
    """The reply's total bound was reached: the files after the last text have none."""
    error: str | None = None
    """Git could not read the diff (a checkpoint reset away and collected, no repository)."""

    @property
    def added(self) -> int:
        """Lines added over every listed file."""
        return sum(f.added or 0 for f in self.files)

    @property
    def removed(self) -> int:
        """Lines removed over every listed file."""
        return sum(f.removed or 0 for f in self.files)

    def to_json(self) -> dict[str, Any]:
        """The reply as the daemon sends it."""
        return self.model_dump(mode="json")
