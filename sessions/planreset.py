"""The plan through a restart's worktree reset: herd's own reset never takes it off its baseline.

A person's answer at the approval gate lives in the worktree, uncommitted: `herd approve`
adopts the agent's edited plan as the baseline, `herd reject` writes the baseline back. When
the run then crashes, the restart resets the worktree to the last checkpoint, whose copy of the
plan predates the answer; without this the session was judged `plan-tampered` again and held
at the gate a second time for a change the person had already settled (issue 12).
"""

from __future__ import annotations

from agentherd.sessions.plan import Plan, PlanError, diff_plan, parse_plan, restore_plan


def plan_after_reset(
    baseline_raw: str | None, before: bytes | None, after: bytes | None
) -> bytes | None:
    """The plan file to write after a reset, or None to leave the reset's copy as it is.

    `before`/`after`: the plan file's bytes just before and after the reset (None: absent).
    Only a plan that matched its baseline before the reset and no longer does after it is
    written back: the baseline's items, each passing where the checkpoint's copy says so (work
    the reset discarded does not stay marked done). A plan already off its baseline before the
    reset is the agent's doing and stays a warning.
    """
    if baseline_raw is None or before is None:
        return None
    try:
        baseline = parse_plan(baseline_raw.encode())
        if diff_plan(baseline, parse_plan(before)).changed_items:
            return None
        reset_copy = parse_plan(after) if after is not None else Plan(())
    except PlanError:
        return None
    if after is not None and not diff_plan(baseline, reset_copy).changed_items:
        return None
    return restore_plan(baseline_raw.encode(), reset_copy, regress=True)
