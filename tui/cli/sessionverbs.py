"""The verbs on sessions: ls, start, stop, kill, restart, pause, resume, approve, reject, ack,
status, wait, send, logs, events, report."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from agentherd.sessions.states import WAIT_TIMEOUT_EXIT, WAIT_UNREACHABLE_EXIT, State
from agentherd.sessions.status import (
    LogInfoReply,
    SessionStatus,
)
from agentherd.tui import render
from agentherd.tui.cli.common import (
    EXIT_INTERNAL,
    Failure,
    ask,
    fleet_of,
    guarded,
    print_json,
    reader,
)
from agentherd.tui.cli.follow import Printer, follow_log, follow_run, print_file, print_run


@click.command(name="ls")
@click.option("--json", "as_json", is_flag=True)
@click.option("--all", "show_all", is_flag=True, help="Archived sessions too.")
@guarded
def ls_(as_json: bool, show_all: bool) -> None:
    """Every session (archived ones with --all)."""
    statuses = [s for s in fleet_of(read=True, across=True).list() if show_all or not s.archived]
    if as_json:
        print_json(statuses)
    else:
        click.echo(render.table(statuses, shutil.get_terminal_size().columns))


@click.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.option("--now", is_flag=True, help="Start at once, not after the sessions of its `after`.")
@guarded
def start(name: str, as_json: bool, now: bool) -> None:
    """Begin a task; prints its handle at once (and, on stderr, what a queued one waits for)."""
    result = fleet_of(across=True).start(name, now=now)
    if as_json:
        print_json(result)
        return
    click.echo(result.handle)
    note = render.chain_note(result.session, result.state, result.reason)
    if note:
        click.echo(f"herd: {result.handle} {note}", err=True)


def _stop(name: str, kill: bool, no_wait: bool) -> None:
    status = fleet_of(across=True).stop(name, kill=kill, no_wait=no_wait)
    reason = f" ({status.reason})" if status.reason else ""
    click.echo(f"{name}: {status.state}{reason}")
    if status.state == "failed" and status.reason == "unkillable":
        sys.exit(EXIT_INTERNAL)


@click.command()
@click.argument("name")
@click.option("--no-wait", is_flag=True, help="Return at once instead of waiting for the exit.")
@guarded
def stop(name: str, no_wait: bool) -> None:
    """End the task: stop signal, grace period, then SIGKILL."""
    _stop(name, kill=False, no_wait=no_wait)


@click.command()
@click.argument("name")
@click.option("--no-wait", is_flag=True, help="Return at once instead of waiting for the exit.")
@guarded
def kill(name: str, no_wait: bool) -> None:
    """End the task with SIGKILL to every process of the run."""
    _stop(name, kill=True, no_wait=no_wait)


@click.command()
@click.argument("name")
@click.option(
    "--from",
    "from_rev",
    default=None,
    metavar="last|verified|SHA",
    help="Rescue dirty work and reset the worktree to this checkpoint first.",
)
@click.option("--json", "as_json", is_flag=True)
@guarded
def restart(name: str, from_rev: str | None, as_json: bool) -> None:
    """Stop, then begin a new task."""
    result = fleet_of(across=True).restart(name, from_rev)
    if as_json:
        print_json(result)
    else:
        click.echo(result.handle)


@click.command()
@click.argument("name")
@guarded
def pause(name: str) -> None:
    """SIGSTOP the whole run."""
    status = fleet_of(across=True).control("pause", name)
    click.echo(f"{name}: {status.state}")


@click.command()
@click.argument("name")
@guarded
def resume(name: str) -> None:
    """SIGCONT the whole run."""
    status = fleet_of(across=True).control("resume", name)
    click.echo(f"{name}: {status.state}")


@click.command()
@click.argument("name")
@guarded
def approve(name: str) -> None:
    """Adopt the session's changed plan as its new baseline."""
    status = fleet_of(across=True).control("approve", name)
    click.echo(f"{name}: plan approved ({_passing(status)} passing); {_state(status)}")
    if status.state in TASK_ENDED:
        click.echo(f"herd start {name} runs a new task against the approved plan")


@click.command()
@click.argument("name")
@guarded
def reject(name: str) -> None:
    """Write the session's baseline plan back (items passing now stay passing)."""
    status = fleet_of(across=True).control("reject", name)
    click.echo(f"{name}: plan restored ({_passing(status)} passing); {_state(status)}")
    if status.state in TASK_ENDED:
        click.echo(f"herd start {name} runs the agent again on the restored items")


@click.command()
@click.argument("name")
@click.argument("kind", required=False)
@guarded
def ack(name: str, kind: str | None) -> None:
    """Acknowledge an open warning (KIND, or every one): it leaves the badge, stays in history."""
    status = fleet_of(across=True).control("ack", name, kind=kind)
    what = kind or "every open warning"
    click.echo(f"{name}: acknowledged {what}; {len(status.warnings)} warning(s) left on the badge")


TASK_ENDED = frozenset({"failed", "completed", "stopped"})
"""States in which an approval or a rejection does not continue a run: the task had ended."""


def _state(status: SessionStatus) -> str:
    """`running`, or `failed (plan-tampered)` with the reason."""
    return f"{status.state} ({status.reason})" if status.reason else str(status.state)


def _passing(status: SessionStatus) -> str:
    """`3/7`, or `None/None` when the session has no plan (as it always read)."""
    plan = status.plan
    return f"{plan.passing}/{plan.total}" if plan else "None/None"


@click.command()
@click.argument("target", required=False)
@click.option("--json", "as_json", is_flag=True)
@guarded
def status(target: str | None, as_json: bool) -> None:
    """One session or task (NAME or NAME/N); with none, every session."""
    result = fleet_of(read=True, across=True).status(target)
    if as_json:
        print_json(result)
    elif isinstance(result, list):
        click.echo(render.table(result, shutil.get_terminal_size().columns))
    else:
        click.echo(render.detail(result))


@click.command()
@click.argument("target")
@click.option("--timeout", "timeout_s", type=float, default=None, help="Give up after S seconds.")
@click.option(
    "--until",
    "until",
    default=None,
    metavar="STATE[,STATE]",
    help="Wait for the session (NAME) to be in one of these states instead.",
)
@guarded
def wait(target: str, timeout_s: float | None, until: str | None) -> None:
    """Block until the task ends: exit 0 completed, 1 failed, 3 stopped, 124 timeout.

    With --until: exit 0 once the session is in one of the states, 4 when it settled
    elsewhere (idle, stopped, completed, failed) and cannot get there without a start,
    124 timeout.
    """
    states = _states(until) if until is not None else None
    result = fleet_of(across=True).wait(target, timeout_s, states)
    reason = f" ({result.reason})" if result.reason else ""
    if result.exit == WAIT_TIMEOUT_EXIT:
        click.echo(f"{result.handle}: still {result.state} after {timeout_s:g}s", err=True)
    elif result.exit == WAIT_UNREACHABLE_EXIT and states is not None:
        click.echo(
            f"{result.handle}: {result.state}{reason}, and it will not be {' or '.join(states)} "
            f"without a start (`herd start {target}`)",
            err=True,
        )
    else:
        click.echo(f"{result.handle}: {result.state}{reason}")
    sys.exit(result.exit)


def _states(until: str) -> list[str]:
    """The states of `--until a,b`; a Failure naming the unknown one and every state."""
    states = [word.strip() for word in until.split(",") if word.strip()]
    known = [state.value for state in State]
    for state in states or [until]:
        if state not in known:
            raise Failure(f"wait --until: {state!r} is not a state; states: {', '.join(known)}")
    return states


@click.command()
@click.argument("name")
@click.argument("text")
@click.option(
    "--wait", "wait_end", is_flag=True, help="Return once the run it starts (or the turn) ended."
)
@click.option("--timeout", "timeout_s", type=float, default=None, help="Give up after S seconds.")
@click.option("--json", "as_json", is_flag=True)
@guarded
def send(name: str, text: str, wait_end: bool, timeout_s: float | None, as_json: bool) -> None:
    """Give a session TEXT: typed into an interactive run's terminal with Enter; for a
    headless session, its next prompt (the resume's {message}).

    Headless, a run under way: the next run, once it ends, resumes the conversation with TEXT.
    No run under way: one starts now.
    """
    if text == "-":
        text = sys.stdin.read()
    reply = fleet_of(across=True).send(name, text, wait_end, timeout_s)
    if as_json:
        print_json(reply)
        return
    click.echo(render.send_said(name, reply, wait_end, timeout_s))


@click.command()
@click.argument("name")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new output, across runs.")
@click.option(
    "--run", "run_number", type=int, default=None, help="A run's output (default: latest)."
)
@click.option(
    "-n",
    "--tail",
    "tail_lines",
    type=click.IntRange(0),
    default=None,
    metavar="N",
    help="Only the last N lines.",
)
@click.option("--raw", is_flag=True, help="The bytes as the agent wrote them, even on a terminal.")
@click.option("--progress", is_flag=True, help="The progress file instead of the run output.")
@guarded
def logs(
    name: str,
    follow: bool,
    run_number: int | None,
    tail_lines: int | None,
    raw: bool,
    progress: bool,
) -> None:
    """Run output (or the progress file); readable on a terminal, raw when piped or with --raw."""
    client = reader()
    info: LogInfoReply = ask(client, "log_info", name=name, run=run_number)
    terminal = sys.stdout.isatty()
    inert = terminal
    if progress:
        if not info.progress:
            raise Failure(f'{name} has no progress file; set progress = "..." in herd.toml')
        path = Path(info.progress)
        if follow:
            follow_log(lambda: (path, True), inert)
        else:
            print_file(path, inert)
        return
    if info.path is None:
        raise Failure(f"{name} has no runs yet; `herd start {name}` begins one")
    printer = Printer(readable=terminal and not raw)
    if not follow:
        print_run(Path(info.path), printer, tail_lines, terminal)
        return

    def current() -> tuple[Path, bool]:
        latest: LogInfoReply = ask(client, "log_info", name=name, run=run_number)
        return Path(latest.path or info.path or ""), latest.live or run_number is None

    try:
        follow_run(current, printer, tail_lines)
    finally:
        printer.finish(terminal)


@click.command()
@click.argument("name", required=False)
@click.option("--since", type=int, default=0, help="Only events after this seq.")
@click.option("--session", default=None, help="Only this session's events (or NAME).")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events.")
@click.option(
    "-n",
    "--lines",
    "last",
    type=click.IntRange(min=0),
    default=None,
    help="Only the last N events (then new ones, with -f).",
)
@click.option("--json", "as_json", is_flag=True)
@guarded
def events(
    name: str | None,
    since: int,
    session: str | None,
    follow: bool,
    last: int | None,
    as_json: bool,
) -> None:
    """The event log (NAME: only that session's)."""
    if name is not None and session is not None and name != session:
        raise Failure(f"events: two sessions given ({name} and --session {session}): give one")
    session = session or name
    fleet = fleet_of(read=True, across=True)

    def show(event: Any) -> None:
        click.echo(json.dumps(event.to_json()) if as_json else render.event_line(event))
        if follow:
            sys.stdout.flush()

    if last is not None:  # the newest N first, then (with -f) what comes after them
        newest = list(fleet.events(since, session))
        for event in newest[len(newest) - last :] if last else []:
            show(event)
        if not follow:
            return
        since = max([since, *(event.seq for event in newest)])
    for event in (fleet.follow if follow else fleet.events)(since, session):
        show(event)


@click.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@guarded
def report(name: str, as_json: bool) -> None:
    """The session's report: what changed, what passed, what remains, what it cost."""
    result = fleet_of(read=True, across=True).report(name)
    if as_json:
        print_json(result.report)
    else:
        click.echo(result.markdown)
