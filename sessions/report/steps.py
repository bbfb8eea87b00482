"""The report's next steps: short imperative sentences, most urgent first, from its facts."""

from __future__ import annotations

from agentherd.sessions.report.models import CheckpointFacts, Report
from agentherd.sessions.sanitize import ELLIPSIS, inert

MAX_STEP_TEXT = 80
"""Agent text quoted inside a next step is cut to this many characters."""


def quote(value: object, max_chars: int = MAX_STEP_TEXT) -> str:
    """Agent text fit to sit inside a next step: inert, one line, no backticks, short."""
    text = " ".join(inert(str(value)).split()).replace("`", "'")
    return text if len(text) <= max_chars else text[: max_chars - 1] + ELLIPSIS


def short(sha: object) -> str:
    """An abbreviated sha for a sentence."""
    return quote(sha, 40)[:7]


def _state_steps(report: Report) -> list[str]:
    """Steps that follow from the state itself: approval, crash loop, failure, budget, pause."""
    name, state, reason = report.session, report.state, report.reason
    crashes = report.incidents.crashes
    last_run = crashes[-1].run if crashes else report.time.last_run
    logs = f"`herd logs {name} --run {last_run}`" if last_run else f"`herd logs {name}`"
    steps = []
    remains = report.remains
    tampered = any(warning.kind == "plan-tampered" for warning in remains.open_warnings)
    if state == "waiting-approval" or remains.plan_changes or tampered:
        steps.append(
            "the plan was changed against its baseline: review the changes below, then "
            f"`herd approve {name}` to accept them or `herd reject {name}` to restore the plan"
        )
    if state == "failed" and reason == "crash-loop":
        steps.append(f"crash loop: look at the last run's output with {logs}")
    elif state == "failed":
        why = f" ({quote(reason)})" if reason else ""
        steps.append(f"failed{why}: look at the last run's output with {logs}")
    if state == "stopped" and reason and reason.startswith("budget:"):
        dimension = quote(reason.removeprefix("budget:"), 30)
        steps.append(
            f"stopped by the {dimension} budget: raise `budget.{dimension}` in herd.toml, "
            f"then `herd start {name}` to continue"
        )
    if state == "paused":
        steps.append(f"paused: `herd resume {name}` to continue")
    if state == "idle" and not report.time.runs:
        steps.append(f"never started: `herd start {name}`")
    return steps


def _work_steps(report: Report) -> list[str]:
    """Steps about the work: the plan file, the last checkpoint, rescued work, failing items."""
    name = report.session
    remains, passed = report.remains, report.passed
    last = report.changed.current()  # the one the worktree stands on (a restart resets it)
    steps = []
    if remains.plan_error:
        steps.append(
            f"the plan file is invalid ({quote(remains.plan_error)}): fix it; "
            "the last good plan counts until then"
        )
    if last is not None and last.verified is False:
        exit_code = last.verification.exit_code if last.verification else None
        how = f" (exit {exit_code})" if isinstance(exit_code, int) else ""
        steps.append(
            f"checkpoint {short(last.sha)} fails verification{how}: read the verify output "
            f"in `herd report {name}` and the run's output with `herd logs {name}`"
        )
    rescued = report.incidents.rescued
    if rescued:
        ref = quote(rescued[-1].ref, 200)
        more = f" ({len(rescued) - 1} earlier rescues too)" if len(rescued) > 1 else ""
        steps.append(f"uncommitted work was rescued on {ref}{more}: inspect with `git show {ref}`")
    failing = remains.items_failing
    if failing:
        noun = "plan item still fails" if len(failing) == 1 else "plan items still fail"
        steps.append(f"{len(failing)} {noun}; next: {quote(failing[0])}")
    elif passed.plan_total:
        steps.append(_all_passing_step(report.state, last))
    return steps


def _all_passing_step(state: str, last: CheckpointFacts | None) -> str:
    """What to say when every plan item passes: done, or not yet proven by a checkpoint."""
    if last is None:
        return "every plan item passes, but no checkpoint was committed: commit the work"
    if last.verified is True:
        if state == "completed":
            return "completed: every plan item passes and the last checkpoint is verified"
        return f"every plan item passes and the last checkpoint is verified (still {state})"
    if last.verified is None:
        return f"every plan item passes, but checkpoint {short(last.sha)} is not verified"
    return "every plan item is marked passing, but the last checkpoint fails verification"


def _follow_steps(report: Report, covered: bool) -> list[str]:
    """Steps for open warnings and for a task that runs on or was stopped."""
    name, state, handle = report.session, report.state, report.handle
    steps = []
    handled = {"plan-tampered", "plan-invalid"}
    warnings = [w for w in report.remains.open_warnings if w.kind not in handled]
    if warnings:
        kinds = ", ".join(dict.fromkeys(quote(w.kind, 40) for w in warnings))
        steps.append(f"{len(warnings)} open warnings ({kinds}): see `herd events --session {name}`")
    if state in ("starting", "running", "backoff", "stopping"):
        target = handle or name
        steps.append(f"still {state}: follow with `herd logs {name} -f` or `herd wait {target}`")
    elif state == "stopped" and not covered:
        steps.append(f"stopped: `herd start {name}` continues from the last checkpoint")
    return steps


def next_steps(report: Report) -> list[str]:
    """Short imperative steps, most urgent first, derived from the rest of the report."""
    state_steps = _state_steps(report)
    steps = state_steps + _work_steps(report)
    steps += _follow_steps(report, covered=bool(state_steps))
    return steps
