"""Whether a task that says it is done really is: its final checkpoint verified, its plan whole.

Pure: the supervisor gathers the facts when a run ends and asks `refusal` what they mean.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

UNVERIFIED = "unverified"
PLAN_INCOMPLETE = "plan-incomplete"
PLAN_TAMPERED = "plan-tampered"

REFUSALS = {
    PLAN_TAMPERED: "a baseline plan item was removed or reworded without approval",
    PLAN_INCOMPLETE: "plan items still fail",
    UNVERIFIED: "the final checkpoint did not pass verification",
}
"""Each reason a completion is refused, with what it means (the order is the order checked)."""

CHANGES_THAT_UNDO_ITEMS = frozenset({"removed", "reworded"})
"""Plan changes that make an item of the baseline disappear (an addition or a move does not)."""


@dataclass(frozen=True)
class CompletionFacts:
    """What is known when a run ends cleanly and the restart policy would complete the task."""

    verify: bool
    """`verify` is configured: completion waits for the final checkpoint's verdict."""
    verified: bool | None = None
    """The final checkpoint's verdict: None when there is none (no commit, no git, no verdict)."""
    plan_total: int | None = None
    """None when the session has no plan (or none was ever read)."""
    plan_passing: int = 0
    plan_changes: tuple[str, ...] = ()
    """The `change` of each forbidden plan change (removed, reworded, reordered, added)."""


def refusal(facts: CompletionFacts) -> str | None:
    """Why the task must not be called completed, or None when it may."""
    if facts.plan_total is not None:
        if CHANGES_THAT_UNDO_ITEMS & set(facts.plan_changes):
            return PLAN_TAMPERED
        if facts.plan_passing < facts.plan_total:
            return PLAN_INCOMPLETE
    if facts.verify and facts.verified is not True:
        return UNVERIFIED
    return None


def describe(reason: str, facts: CompletionFacts) -> str:
    """One line for the `failed` event and the report: what stood in the way."""
    if reason == PLAN_INCOMPLETE:
        return f"not completed: {facts.plan_passing} of {facts.plan_total} plan items pass"
    if reason == PLAN_TAMPERED:
        undone = sum(1 for change in facts.plan_changes if change in CHANGES_THAT_UNDO_ITEMS)
        return f"not completed: {undone} baseline plan item(s) removed or reworded without approval"
    verdict = "failed" if facts.verified is False else "is not known"
    return f"not completed: the final checkpoint's verification {verdict}"


def changes_of(changed_items: Iterable[object]) -> tuple[str, ...]:
    """The `change` names of a plan diff's changed items."""
    return tuple(str(getattr(item, "change", "")) for item in changed_items)
