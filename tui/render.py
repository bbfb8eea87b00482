"""Plain-text views of statuses and events for the command line."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentherd.sessions.durations import format_duration
from agentherd.sessions.sanitize import inert
from agentherd.sessions.times import parse_iso


def _since(moment: str | None) -> float | None:
    started = parse_iso(moment)
    if started is None:
        return None
    return max(0.0, (datetime.now(UTC) - started).total_seconds())


def uptime(status: dict[str, Any]) -> str:
    """How long the current run has been up, or "-" when none runs."""
    if status.get("pid") is None:
        return "-"
    seconds = _since(status.get("started_at"))
    return format_duration(seconds) if seconds is not None else "-"


def state_text(status: dict[str, Any]) -> str:
    """`running`, or `failed (crash-loop)` with the reason."""
    reason = status.get("reason")
    return f"{status['state']} ({reason})" if reason else str(status["state"])


def plan_text(status: dict[str, Any]) -> str:
    """`7/12` items passing, or "-"."""
    plan = status.get("plan")
    return f"{plan['passing']}/{plan['total']}" if plan else "-"


def table(statuses: list[dict[str, Any]], width: int = 120) -> str:
    """One line per session, columns aligned, the last output line cut to fit."""
    headers = ("SESSION", "STATE", "HANDLE", "PID", "RESTARTS", "UPTIME", "PLAN", "LAST OUTPUT")
    rows = [
        (
            s["session"],
            state_text(s),
            s.get("handle") or "-",
            str(s["pid"]) if s.get("pid") else "-",
            str(s.get("restarts", 0)),
            uptime(s),
            plan_text(s),
            inert(s.get("last_line") or ""),
        )
        for s in statuses
    ]
    if not rows:
        return "no sessions in herd.toml"
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers[:-1])]
    lines = []
    for row in (headers, *rows):
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        line = "  ".join(cells) + "  "
        room = max(10, width - len(line))
        lines.append(line + row[-1][:room])
    return "\n".join(line.rstrip() for line in lines)


def detail(status: dict[str, Any]) -> str:
    """Every field of one session's status, one per line, for people."""
    lines = [f"{status['session']}  {state_text(status)}  ({status.get('task_state')})"]
    if status.get("next_restart_at"):
        lines.append(f"  {'next restart:':<15}{status['next_restart_at']}")
    fields = [
        ("handle", status.get("handle")),
        ("run", status.get("run")),
        ("pid", status.get("pid")),
        ("restarts", status.get("restarts")),
        ("started", status.get("started_at")),
        ("ended", status.get("ended_at")),
        ("exit", _exit_text(status)),
        ("agent session", status.get("agent_session_id")),
        ("plan", plan_text(status) if status.get("plan") else None),
    ]
    checkpoint = status.get("checkpoint")
    if checkpoint:
        verified = {True: "verified", False: "FAILS verification", None: "unverified"}[
            checkpoint.get("verified")
        ]
        fields.append(
            ("checkpoint", f"{checkpoint['sha'][:10]} {inert(checkpoint['subject'])} ({verified})")
        )
        check = checkpoint.get("verification")
        if check and not check["passed"]:
            why = check.get("error") or (
                "timed out" if check.get("timed_out") else f"exit {check.get('exit_code')}"
            )
            last = (check.get("output_tail") or "").splitlines()[-1:] or [""]
            fields.append(("verify", f"{why} after {check['duration_s']}s: {inert(last[0])}"))
    usage = status.get("usage")
    if usage:
        cost = usage.get("cost_usd")
        cost_text = "cost unknown" if cost is None else f"${cost:.2f}"
        fields.append(
            (
                "usage",
                f"{usage.get('total_tokens', 0):,} tokens, {cost_text}, "
                f"{usage.get('turns', 0)} turns",
            )
        )
    logs = status.get("logs")
    if logs:
        fields.append(("logs", f"{logs['bytes']:,} of {logs['cap_bytes']:,} bytes"))
    if status.get("last_line"):
        fields.append(("last output", inert(status["last_line"])))
    for label, value in fields:
        if value not in (None, ""):
            lines.append(f"  {label + ':':<15}{value}")
    lines.extend(
        f"  warning:       {w['kind']}: {inert(w['message'])}" for w in status.get("warnings") or []
    )
    return "\n".join(lines)


def _exit_text(status: dict[str, Any]) -> str | None:
    if status.get("signal"):
        return f"signal {status['signal']}"
    if status.get("exit_code") is not None:
        return f"code {status['exit_code']}"
    return None


def event_line(event: dict[str, Any]) -> str:
    """`  42 2026-11-30T02:00:00Z api/3 run-exited: run 3 ended: exit 1`."""
    where = event.get("session") or "herd"
    if event.get("run") is not None:
        where += f"/{event['run']}"
    return f"{event['seq']:>5} {event['at']} {where} {event['kind']}: {inert(event['message'])}"
