"""What a checkpoint's verification result shows in the status and records as events."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from agentherd.sessions.config import SessionConfig
from agentherd.sessions.plan import DEFAULT_MAX_PLAN_BYTES, PlanError, parse_plan
from agentherd.sessions.records import Event
from agentherd.sessions.sanitize import inert
from agentherd.supervisor.git import gitops

if TYPE_CHECKING:
    from agentherd.supervisor.checks.verify import VerifyResult

VERIFY_TAIL_LINES = 5
"""`herd status` shows this many last lines of a verification's output (the report, 20)."""

MakeEvent = Callable[..., Event]
"""The session's `make_event(kind, message, **data)`."""


def shown(result: VerifyResult) -> dict[str, Any]:
    """The result as `herd status` shows it with its checkpoint."""
    tail = result.output_tail.splitlines()[-VERIFY_TAIL_LINES:]
    return {
        "sha": result.sha,
        "passed": result.passed,
        "duration_s": round(result.duration_s, 2),
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "error": result.error,
        "output_tail": "\n".join(tail),
    }


def passed_event(make_event: MakeEvent, result: VerifyResult) -> Event:
    """`verify-passed` for a checkpoint that passed."""
    return make_event(
        "verify-passed",
        f"checkpoint {result.sha[:7]} verified in {result.duration_s:.1f}s",
        sha=result.sha,
        duration_s=result.duration_s,
    )


def failed_event(make_event: MakeEvent, result: VerifyResult) -> Event:
    """`verify-failed` for a checkpoint that failed, saying why."""
    why = result.error or ("timed out" if result.timed_out else f"exit {result.exit_code}")
    return make_event(
        "verify-failed",
        f"checkpoint {result.sha[:7]} fails verification ({why})",
        sha=result.sha,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        output_tail=result.output_tail[-2000:],
    )


def claim_events(
    make_event: MakeEvent, sha: str, claimed: list[str], claim_error: str | None
) -> list[Event]:
    """What a failing checkpoint's plan claims add: items it marked passing, or why git could
    not tell."""
    events = []
    if claim_error is not None:
        events.append(
            make_event(
                "claim-unchecked",
                f"checkpoint {sha[:7]} fails verification, but its plan claims "
                f"could not be checked: {inert(claim_error)[:200]}",
                sha=sha,
                error=claim_error[:500],
            )
        )
    if claimed:
        events.append(
            make_event(
                "claims-done-but-fails",
                f"checkpoint {sha[:7]} marks "
                f"{len(claimed)} item(s) passing but fails verification: "
                + "; ".join(inert(c)[:80] for c in claimed[:3]),
                sha=sha,
                items=claimed,
            )
        )
    return events


async def claimed_at(
    config: SessionConfig, sha: str, limiter: anyio.CapacityLimiter
) -> tuple[list[str], str | None]:
    """Plan items that the commit `sha` flipped to passing (against its parent), or why
    git could not tell (a git error is reported, never taken for "no claim")."""
    if not config.plan:
        return [], None
    plan_file = config.plan
    try:
        now_data = await anyio.to_thread.run_sync(
            gitops.read_at,
            config.cwd,
            sha,
            plan_file,
            DEFAULT_MAX_PLAN_BYTES,
            limiter=limiter,
        )
        before_data = await anyio.to_thread.run_sync(
            gitops.read_at,
            config.cwd,
            f"{sha}~1",
            plan_file,
            DEFAULT_MAX_PLAN_BYTES,
            limiter=limiter,
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
