"""Session chaining (`after`): herd.toml's chain problems, and what a queued link does next.

Pure: the supervisor passes the states of a link's `after` sessions in and commits the answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from agentherd.sessions.configschema import SessionConfig
from agentherd.sessions.problems import Problem
from agentherd.sessions.states import State

AFTER_PREFIX = "after:"
AFTER_FAILED_PREFIX = "after-failed:"
WORKTREE_PREFIX = "worktree:"

NOT_FAILED_STOP_REASONS = frozenset({"down"})
"""A session stopped for these reasons runs again at the next `herd up`: its links wait."""


@dataclass(frozen=True)
class Link:
    """Where one session of an `after` list stands: its state and reason."""

    state: State
    reason: str | None = None


class Step(StrEnum):
    """What a queued link does next."""

    GO = "go"
    WAIT = "wait"
    NEVER = "never"


@dataclass(frozen=True)
class Next:
    """The answer for a queued link: go, wait for `name`, or never run because of `name`."""

    step: Step
    name: str | None = None

    @property
    def reason(self) -> str | None:
        """The reason: `after:NAME` while it waits, `after-failed:NAME` when it never runs."""
        if self.step is Step.WAIT:
            return f"{AFTER_PREFIX}{self.name}"
        if self.step is Step.NEVER:
            return f"{AFTER_FAILED_PREFIX}{self.name}"
        return None


def is_after_failed(reason: str | None) -> bool:
    """The reason of a link that ended without running: an `after` session did not complete."""
    return (reason or "").startswith(AFTER_FAILED_PREFIX)


def broken(link: Link) -> bool:
    """The session's task ended without completing, and nothing will run it again by itself."""
    if link.state == State.FAILED:
        return True
    return link.state == State.STOPPED and link.reason not in NOT_FAILED_STOP_REASONS


def next_step(after: Sequence[str], links: Mapping[str, Link]) -> Next:
    """Go once every `after` session completed; never once one is broken; else wait for the
    first one not completed (a name no longer in the fleet is waited for, never run past)."""
    for name in after:
        link = links.get(name)
        if link is not None and broken(link):
            return Next(Step.NEVER, name)
    for name in after:
        link = links.get(name)
        if link is None or link.state != State.COMPLETED:
            return Next(Step.WAIT, name)
    return Next(Step.GO)


def after_problems(
    sessions: Sequence[SessionConfig], file: str, also_named: Sequence[str] = ()
) -> list[Problem]:
    """One line for each `after` naming no session, and for each cycle (a session waiting for
    itself, directly or through others), naming the sessions on it. `also_named`: sessions of
    the file that are wrong for another reason (reported there, not as unknown here)."""
    names = {s.name for s in sessions} | set(also_named)
    problems = [
        Problem(
            file,
            f'no session is named "{name}"; name a session of this file or remove it',
            session.name,
            "after",
        )
        for session in sessions
        for name in session.after
        if name not in names
    ]
    after_of = {s.name: [n for n in s.after if n in names] for s in sessions}
    reported: set[frozenset[str]] = set()
    for session in sessions:
        cycle = _cycle_from(session.name, after_of)
        if cycle is None or frozenset(cycle) in reported:
            continue
        reported.add(frozenset(cycle))
        path = " -> ".join(f'"{n}"' for n in (*cycle, cycle[0]))
        problems.append(
            Problem(
                file,
                f"{path} is a cycle: a session on it would wait for itself, so none could start; "
                "remove one of these `after` entries",
                session.name,
                "after",
            )
        )
    return problems


def _cycle_from(start: str, after_of: Mapping[str, Sequence[str]]) -> list[str] | None:
    """The sessions of a cycle through `start` (in waiting order), or None."""
    path: list[str] = []
    seen: set[str] = set()

    def walk(name: str) -> list[str] | None:
        if name == start and path:
            return list(path)
        if name in seen:
            return None
        seen.add(name)
        path.append(name)
        for waited in after_of.get(name, ()):
            found = walk(waited)
            if found is not None:
                return found
        path.pop()
        return None

    return walk(start)


def start_waves(names: Sequence[str], after_of: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """`names` in groups to start one after another: each session after the group of every
    session of its `after` that starts with it, so a link sees its chain's first links begun
    (and queues) instead of finding them idle. Order within a group is `names`' order."""
    chosen = set(names)
    depth: dict[str, int] = {}

    def depth_of(name: str, seen: frozenset[str]) -> int:
        if name in depth:
            return depth[name]
        before = [n for n in after_of.get(name, ()) if n in chosen and n not in seen]
        found = 1 + max((depth_of(n, seen | {name}) for n in before), default=-1)
        depth[name] = found
        return found

    waves: dict[int, list[str]] = {}
    for name in names:
        waves.setdefault(depth_of(name, frozenset()), []).append(name)
    return [waves[level] for level in sorted(waves)]
