"""Plain-text views of statuses and events for the command line.

A status here is the model or its JSON read by attribute (tui/cli/fastview.py): the fast path
prints tables and details without importing pydantic, so nothing here needs the models to run.
"""

from __future__ import annotations

from datetime import UTC, datetime

from agentherd.sessions.durations import format_duration
from agentherd.sessions.sanitize import inert
from agentherd.sessions.times import parse_iso
from agentherd.tui.spend import budget_cell, spend_fields, usage_money

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing and the models cost a fast verb tens of ms: neither runs here
    from agentherd.sessions.records import Event
    from agentherd.sessions.status import SendReply, SessionStatus, TaskStatus


def _since(moment: str | None) -> float | None:
    started = parse_iso(moment)
    if started is None:
        return None
    return max(0.0, (datetime.now(UTC) - started).total_seconds())


def run_seconds(status: SessionStatus) -> float | None:
    """Seconds the current run has been up, or None when none runs."""
    return None if status.pid is None else _since(status.started_at)


def uptime(status: SessionStatus) -> str:
    """How long the current run has been up, or "-" when none runs."""
    seconds = run_seconds(status)
    return format_duration(seconds) if seconds is not None else "-"


def state_text(status: SessionStatus | TaskStatus) -> str:
    """`running`, or `failed (crash-loop)` with the reason."""
    state = str(status.state)
    return f"{state} ({status.reason})" if status.reason else state


def chain_note(session: str, state: str, reason: str | None) -> str | None:
    """What a chained task waits for (or why it never runs), for `herd start` and `herd up`."""
    waited = (reason or "").partition(":")[2]
    if state == "queued" and (reason or "").startswith("after:"):
        return (
            f"queued ({reason}): it starts once {waited} has completed; "
            f"`herd start {session} --now` starts it at once"
        )
    if state == "queued" and (reason or "").startswith("worktree:"):
        return f"queued ({reason}): it starts once {waited}'s task in its worktree ends"
    if state == "stopped" and (reason or "").startswith("after-failed:"):
        return (
            f"stopped ({reason}): {waited} did not complete, so it cannot run; start "
            f"{waited} again, or `herd start {session} --now`"
        )
    return None


def plan_text(status: SessionStatus) -> str:
    """`7/12` items passing, or "-"."""
    plan = status.plan
    return f"{plan.passing}/{plan.total}" if plan else "-"


def table(statuses: list[SessionStatus], width: int = 120) -> str:
    """One line per session, columns aligned, the last output line cut to fit."""
    headers: tuple[str, ...] = (
        "SESSION",
        "STATE",
        "HANDLE",
        "PID",
        "RESTARTS",
        "UPTIME",
        "PLAN",
        "COST",
        "BUDGET",
        "LAST OUTPUT",
    )
    rows: list[tuple[str, ...]] = [
        (
            s.session,
            state_text(s),
            s.handle or "-",
            str(s.pid) if s.pid else "-",
            str(s.restarts),
            uptime(s),
            plan_text(s),
            usage_money(s.usage),
            budget_cell(s)[0],
            inert(s.last_line or ""),
        )
        for s in statuses
    ]
    if not rows:
        return "no sessions in herd.toml"
    if any(s.host for s in statuses):  # across hosts: where each session runs
        headers = (headers[0], "HOST", *headers[1:])
        rows = [(r[0], s.host or "-", *r[1:]) for r, s in zip(rows, statuses, strict=True)]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers[:-1])]
    lines = []
    for row in (headers, *rows):
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        line = "  ".join(cells) + "  "
        room = max(10, width - len(line))
        lines.append(line + row[-1][:room])
    return "\n".join(line.rstrip() for line in lines)


def detail(status: SessionStatus | TaskStatus) -> str:
    """Every field of one session's status (or a past task's), one per line, for people."""
    lines = [f"{status.session}  {state_text(status)}  ({status.task_state})"]
    if getattr(status, "restarts", None) is None:  # a past task's status (TaskStatus) has none
        task_fields = [
            ("handle", status.handle),
            ("run", status.run),
            ("started", status.started_at),
            ("ended", status.ended_at),
        ]
        lines += [f"  {label + ':':<15}{value}" for label, value in task_fields if value]
        return "\n".join(lines)
    if TYPE_CHECKING:
        assert isinstance(status, SessionStatus)
    if status.next_restart_at:
        lines.append(f"  {'next restart:':<15}{status.next_restart_at}")
    waiting = status.message_waiting
    if waiting:
        said = f"{waiting['chars']} characters from {waiting['origin']} wait for the next run"
        lines.append(f"  {'message:':<15}{said}")
    fields: list[tuple[str, object]] = [
        ("handle", status.handle),
        ("run", status.run),
        ("pid", status.pid),
        ("restarts", status.restarts),
        ("started", status.started_at),
        ("ended", status.ended_at),
        ("exit", _exit_text(status)),
        ("agent session", status.agent_session_id),
        ("plan", plan_text(status) if status.plan else None),
    ]
    checkpoint = status.checkpoint
    if checkpoint:
        verified = {True: "verified", False: "FAILS verification", None: "unverified"}[
            checkpoint.verified
        ]
        fields.append(
            ("checkpoint", f"{checkpoint.sha[:10]} {inert(checkpoint.subject)} ({verified})")
        )
        check = checkpoint.verification
        if check and not check.passed:
            why = check.error or ("timed out" if check.timed_out else f"exit {check.exit_code}")
            last = (check.output_tail or "").splitlines()[-1:] or [""]
            fields.append(("verify", f"{why} after {check.duration_s}s: {inert(last[0])}"))
    fields.extend(spend_fields(status))
    logs = status.logs
    if logs:
        fields.append(("logs", f"{logs.bytes:,} of {logs.cap_bytes:,} bytes"))
    if status.last_line:
        fields.append(("last output", inert(status.last_line)))
    for label, value in fields:
        if value not in (None, ""):
            lines.append(f"  {label + ':':<15}{value}")
    lines.extend(f"  warning:       {w.kind}: {inert(w.message)}" for w in status.warnings)
    return "\n".join(lines)


def _exit_text(status: SessionStatus) -> str | None:
    if status.signal:
        return f"signal {status.signal}"
    if status.exit_code is not None:
        return f"code {status.exit_code}"
    return None


def event_line(event: Event) -> str:
    """`  42 2026-11-30T02:00:00Z api/3 run-exited: run 3 ended: exit 1`."""
    where = event.session or "herd"
    if event.run is not None:
        where += f"/{event.run}"
    if event.host:  # across hosts: which host's daemon logged it
        where += f"@{event.host}"
    return f"{event.seq:>5} {event.at} {where} {event.kind}: {inert(event.message)}"


def send_said(name: str, reply: SendReply, wait: bool, timeout_s: float | None) -> str:
    """What `herd send` (and the dashboard's send key) did with a text, in one line."""
    if reply.outcome == "typed":
        said = f"{name}: typed into run {reply.run}'s terminal"
        if wait and reply.run_outcome == "turn-ended":
            said += f"; the agent's turn ended, {name} is {reply.state}"
        elif wait and reply.run_outcome == "timeout":
            said += f"; still {reply.state} after {timeout_s or 0:g}s"
        elif wait:
            said += f"; run {reply.run} ended ({reply.run_outcome}), {name} is {reply.state}"
        return said
    if reply.outcome == "queued":
        said = f"{name}: queued for the next run, which starts when the current one ends"
    else:
        said = f"{name}: started run {reply.run} ({reply.handle}) with the message"
    if wait and reply.run_outcome == "dropped":
        said += f"; not delivered (`herd events --session {name}` says why)"
    elif wait:
        said += f"; run {reply.run} ended ({reply.run_outcome}), {name} is {reply.state}"
    return said
