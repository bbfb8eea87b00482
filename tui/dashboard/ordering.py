"""How the fleet view orders and filters sessions: pure functions of statuses, cheap to test."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from difflib import SequenceMatcher

from agentherd.sessions.status import SessionStatus
from agentherd.tui.render import plan_text

SORTS: tuple[tuple[str, str], ...] = (
    ("attention", "needs a person"),
    ("config", "herd.toml order"),
    ("session", "name"),
    ("state", "state"),
    ("restarts", "restarts"),
    ("plan", "plan passing"),
    ("cost", "cost"),
)
"""Sort keys the fleet view cycles through with `o`, and how the header names each."""

ATTENTION_RANK = {"failed": 0, "waiting-approval": 1, "waiting-input": 1}
"""States that wait for a person come first; open warnings next; then the rest."""


def attention_rank(status: SessionStatus) -> int:
    """0 failed, 1 waiting for approval or for input, 2 open warnings, 3 everything else.

    Running and backoff rank alike: agents that restart often would otherwise reorder the
    table every few seconds, and herd handles a backoff without a person.
    """
    state = str(status.state)
    if state in ATTENTION_RANK:
        return ATTENTION_RANK[state]
    return 2 if status.warnings else 3


def needs_person(status: SessionStatus) -> bool:
    """True when the session waits for a decision: failed, waiting approval or input, or a
    warning open."""
    return attention_rank(status) <= 2


def _plan_fraction(status: SessionStatus) -> float:
    plan = status.plan
    return plan.passing / plan.total if plan and plan.total else -1.0


def _cost(status: SessionStatus) -> float:
    usage = status.usage
    return usage.cost_usd if usage and usage.cost_usd is not None else -1.0


_KEYS: dict[str, Callable[[SessionStatus], object]] = {
    "attention": lambda s: (attention_rank(s), s.session),
    "session": lambda s: s.session,
    "state": lambda s: (str(s.state), s.session),
    "restarts": lambda s: (-s.restarts, s.session),
    "plan": lambda s: (-_plan_fraction(s), s.session),
    "cost": lambda s: (-_cost(s), s.session),
}


def sort_statuses(statuses: list[SessionStatus], key: str) -> list[SessionStatus]:
    """The statuses in the order `key` names ("config" keeps herd.toml's order)."""
    function = _KEYS.get(key)
    if function is None:
        return list(statuses)
    return sorted(statuses, key=function)  # type: ignore[arg-type]


def matches(status: SessionStatus, text: str) -> bool:
    """True when every word of `text` is in the name, the state, a warning kind or the plan.

    `!` alone matches the sessions that need a person.
    """
    words = text.lower().split()
    if not words:
        return True
    haystack = " ".join(
        [
            status.session,
            str(status.state),
            status.reason or "",
            plan_text(status),
            *(f"⚠ {w.kind}" for w in status.warnings),
            "warning" if status.warnings else "",
        ]
    ).lower()
    return all((needs_person(status) if word == "!" else word in haystack) for word in words)


def shown(statuses: list[SessionStatus], sort: str, text: str) -> list[SessionStatus]:
    """The rows the fleet view shows: filtered by `text`, ordered by `sort`."""
    return sort_statuses([s for s in statuses if matches(s, text)], sort)


def moved_rows(before: Sequence[str], after: Sequence[str]) -> list[str]:
    """The sessions that changed place between two orders of the same rows, in the new order:
    those outside the longest runs kept in order (one row moving up moves one name, not every
    row it passed)."""
    kept: set[str] = set()
    matcher = SequenceMatcher(None, list(before), list(after), autojunk=False)
    for block in matcher.get_matching_blocks():
        kept.update(after[block.b : block.b + block.size])
    return [name for name in after if name not in kept]
