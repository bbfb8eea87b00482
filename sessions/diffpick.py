"""Which two trees a `herd diff` compares: a checkpoint (or the uncommitted work) and the
previous or last verified checkpoint before it. Pure: the caller reads git."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agentherd.sessions.checkpoint import Checkpoint

Against = Literal["previous", "verified"]
AGAINST: tuple[Against, ...] = ("previous", "verified")
MIN_PREFIX_CHARS = 4
"""The shortest sha prefix taken for a checkpoint, as git takes one."""


class PickError(ValueError):
    """The named checkpoint is unknown or ambiguous, or there is none to show."""


@dataclass(frozen=True)
class Pick:
    """What to compare. `head` None: the worktree. `base` None: the parent of `parent_of`
    (the first checkpoint's, when no earlier one applies)."""

    head: str | None
    base: str | None
    parent_of: str | None
    label: str
    """What the base is, in words: "the previous checkpoint abc1234", "HEAD"..."""
    target: Checkpoint | None


def find(checkpoints: Sequence[Checkpoint], name: str) -> Checkpoint:
    """The checkpoint whose sha starts with `name` (at least 4 characters); PickError if none
    or several."""
    wanted = name.strip().lower()
    found = [c for c in checkpoints if len(wanted) >= MIN_PREFIX_CHARS and c.sha.startswith(wanted)]
    if len(found) == 1:
        return found[0]
    if not checkpoints:
        raise PickError(f"no checkpoint {name!r}: this session has no checkpoints yet")
    if found:
        raise PickError(f"checkpoint {name!r} is ambiguous: give more of its sha")
    recent = ", ".join(c.short_sha for c in reversed(checkpoints[-5:]))
    raise PickError(f"no checkpoint {name!r} in this session (latest: {recent})")


def pick(checkpoints: Sequence[Checkpoint], name: str | None, against: Against, work: bool) -> Pick:
    """What to compare for a checkpoint (None: the latest) or, with `work`, the worktree's
    uncommitted work, against the previous or the last verified checkpoint before it.

    `checkpoints` are oldest first."""
    if work:
        before = list(checkpoints)
        target = None
    else:
        if not checkpoints:
            raise PickError("this session has no checkpoints yet (try --work)")
        target = find(checkpoints, name) if name else checkpoints[-1]
        before = list(checkpoints[: checkpoints.index(target)])
    head = None if target is None else target.sha
    if against == "previous":
        if target is None:
            return Pick(None, "HEAD", None, "HEAD", None)
        if before:
            previous = before[-1]
            return Pick(head, previous.sha, None, f"checkpoint {previous.short_sha}", target)
        return Pick(head, None, target.sha, f"the parent of {target.short_sha}", target)
    verified = [c for c in before if c.verified]
    if verified:
        last = verified[-1]
        return Pick(head, last.sha, None, f"verified checkpoint {last.short_sha}", target)
    first = before[0] if before else target
    if first is None:
        return Pick(None, "HEAD", None, "HEAD (no checkpoint is verified)", None)
    label = f"the parent of {first.short_sha} (no checkpoint before it is verified)"
    return Pick(head, None, first.sha, label, target)
