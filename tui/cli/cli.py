"""The `herd` command line: a thin client of the daemon's control API."""

from __future__ import annotations

import functools
import json
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from agentherd.sessions.adapters import AGENTS
from agentherd.sessions.config import (
    ConfigError,
    HerdConfig,
    environment_problems,
    find_config,
    load_config,
)
from agentherd.sessions.states import ACTIVE_STATES, WAIT_TIMEOUT_EXIT
from agentherd.sessions.status import (
    DownReply,
    LeftRunning,
    LogInfoReply,
    ReloadReply,
    SessionStatus,
    UpStarted,
    Wire,
    parse_reply,
)
from agentherd.supervisor.api.client import Client
from agentherd.supervisor.api.fleetapi import Fleet, LocalFleet
from agentherd.supervisor.api.launcher import client_for, ensure_daemon, wait_for_exit
from agentherd.supervisor.api.ondisk import DiskClient
from agentherd.supervisor.api.protocol import HERD_VERSION, ApiError
from agentherd.tui import render
from agentherd.tui.cli.follow import Printer, follow_log, follow_run, print_file, print_run
from agentherd.tui.cli.templates import init_text, session_block

EXIT_PERSON = 2
EXIT_INTERNAL = 70
DAEMON_EXIT_TIMEOUT_S = 15.0
"""`herd down` waits this long for the daemon process to exit after its sessions stopped."""

F = TypeVar("F", bound=Callable[..., Any])


class Failure(Exception):
    """Ends the command with one line on stderr and an exit code."""

    def __init__(self, message: str, code: int = EXIT_PERSON) -> None:
        super().__init__(message)
        self.code = code


def _debug() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.find_root().params.get("debug"))


def guarded(func: F) -> F:
    """Turn every error into one line and an exit code; tracebacks only with --debug."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ConfigError as exc:
            for problem in exc.problems:
                click.echo(str(problem), err=True)
            sys.exit(EXIT_PERSON)
        except ApiError as exc:
            if _debug():
                raise
            click.echo(f"herd: {exc.message}", err=True)
            sys.exit(EXIT_PERSON if exc.person_error else EXIT_INTERNAL)
        except Failure as exc:
            click.echo(f"herd: {exc}", err=True)
            sys.exit(exc.code)
        except KeyboardInterrupt:
            sys.exit(130)
        except BrokenPipeError:
            sys.exit(0)
        except click.exceptions.Exit:
            raise
        except Exception as exc:
            if _debug():
                raise
            click.echo(
                f"herd: internal error: {type(exc).__name__}: {exc} (run with --debug "
                "for the traceback; the daemon log is .herd/daemon.log)",
                err=True,
            )
            sys.exit(EXIT_INTERNAL)

    return wrapper  # type: ignore[return-value]


def _config() -> HerdConfig:
    ctx = click.get_current_context()
    explicit = ctx.find_root().params.get("config")
    return load_config(find_config(explicit))


def _client() -> Client:
    client = client_for(_config())
    _warn_version(client)
    return client


def _reader() -> Client | DiskClient:
    """The daemon, or with none running the state in .herd/ (read-only: never starts one)."""
    config = _config()
    client = client_for(config)
    if client.ping():
        _warn_version(client)
        return client
    if not (config.state_dir / "state.db").is_file():
        raise ApiError("no-daemon", "no herd daemon is running here; start one with `herd up`")
    click.echo("herd: no daemon is running; this is the state saved in .herd/", err=True)
    return DiskClient(config)


def _fleet(read: bool = False, across: bool = False) -> Fleet:
    """The fleet the verbs act on (the seam, supervisor/api/fleetapi.py): the local daemon, or
    with `read` and none running, its state on disk; with `across` and a [cluster], the engine."""
    if across and _config().cluster is not None:
        from agentherd.tui.cli.clusterverbs import cluster_fleet

        return cluster_fleet(_viewer_config())
    return LocalFleet(_reader() if read else _client())


def _warn_version(client: Client) -> None:
    if client.daemon_version is None:
        try:
            client.call("info")
        except ApiError:
            return
    if client.daemon_version and client.daemon_version != HERD_VERSION:
        click.echo(
            f"herd: warning: this herd is {HERD_VERSION} but the daemon runs "
            f"{client.daemon_version}; restart it with `herd down && herd up`",
            err=True,
        )


def _print_json(value: Any) -> None:
    """Print a reply (a model, a list of models, or plain JSON) as indented JSON."""
    if isinstance(value, Wire):
        value = value.to_json()
    elif isinstance(value, list):
        value = [item.to_json() if isinstance(item, Wire) else item for item in value]
    click.echo(json.dumps(value, indent=2))


def _ask(client: Client | DiskClient, op: str, **args: Any) -> Any:
    """Call `op` and return its reply as the contract's model (sessions/status.py)."""
    return parse_reply(op, client.call(op, **args))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-c",
    "--config",
    type=click.Path(dir_okay=False),
    envvar=None,
    help="herd.toml to use (default: $HERD_CONFIG, else the nearest upward).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.version_option(HERD_VERSION, prog_name="herd")
def main(config: str | None, debug: bool) -> None:
    """herd: supervise long-running AI coding agents."""


@main.command()
@click.option(
    "--agent",
    default=None,
    help=f"Agent preset: {', '.join(AGENTS)}.",
)
@guarded
def init(agent: str | None) -> None:
    """Write a commented herd.toml here."""
    path = Path.cwd() / "herd.toml"
    if path.exists() and not agent:
        raise Failure(
            f"{path} already exists; edit it, or run `herd init --agent NAME` to "
            "print a session block to add"
        )
    try:
        text = session_block(agent) if agent and path.exists() else init_text(agent or "claude")
    except KeyError as exc:  # an unknown preset: the message names the known ones
        raise Failure(f"--agent: {exc.args[0]}") from None
    if path.exists():
        click.echo(text)
        return
    path.write_text(text)
    click.echo(f"wrote {path}; edit it, then `herd check` and `herd up`")


@main.command()
@guarded
def check() -> None:
    """Validate herd.toml."""
    config = _config()
    problems = environment_problems(config)
    for problem in problems:
        click.echo(str(problem), err=True)
    if any(not p.warning for p in problems):
        sys.exit(EXIT_PERSON)
    click.echo(f"{config.path}: ok ({len(config.sessions)} sessions)")


@main.command()
@click.option("--host", "host", default=None, metavar="NAME", help="Join the [cluster] as NAME.")
@guarded
def daemon(host: str | None) -> None:
    """Run the supervisor in the foreground (for systemd, tmux, containers)."""
    from agentherd.supervisor.daemon import DaemonAlreadyRunning, run_foreground
    from agentherd.supervisor.main import configure_logging

    config = _checked_config() if host else _config()
    configure_logging(config.state_dir, to_stderr=True)
    try:
        if host:
            from agentherd.tui.cli.clusterverbs import ClusterUsageError, run_cluster_host

            try:
                run_cluster_host(config, host)
            except ClusterUsageError as exc:
                raise Failure(str(exc)) from None
        else:
            run_foreground(config)
    except DaemonAlreadyRunning as exc:
        raise Failure(f"{exc}; `herd down` stops it") from None


def _viewer_config() -> HerdConfig:
    """herd.toml checked for a viewer of the cluster: the URL and the extra, not this
    machine's folders and programs (the hosts run the sessions)."""
    from agentherd.sessions.configchecks import cluster_problems

    config = _config()
    problems = cluster_problems(config)
    for problem in problems:
        click.echo(str(problem), err=True)
    if any(not p.warning for p in problems):
        sys.exit(EXIT_PERSON)
    return config


def _checked_config() -> HerdConfig:
    config = _config()
    problems = environment_problems(config)
    for problem in problems:
        click.echo(str(problem), err=True)
    if any(not p.warning for p in problems):
        sys.exit(EXIT_PERSON)
    return config


@main.command()
@click.option("--no-tui", is_flag=True, help="Do not open the dashboard.")
@click.argument("names", nargs=-1)
@guarded
def up(no_tui: bool, names: tuple[str, ...]) -> None:
    """Start the daemon if none runs, start autostart (or named) sessions, open the dashboard."""
    config = _viewer_config() if _config().cluster is not None else _checked_config()
    unknown = [n for n in names if config.session(n) is None]
    if unknown:
        raise Failure(f"no session named {unknown[0]!r} in {config.path}")
    if config.cluster is not None:  # across hosts: the engine places them, no local daemon
        from agentherd.tui.cli.clusterverbs import cluster_up

        handles = cluster_up(config, list(names))
        click.echo(f"herd: {len(handles)} session(s) placed through the cluster")
        for handle in handles:
            click.echo(f"  {handle}")
        if not no_tui and sys.stdout.isatty():
            _open_cluster_tui(config)
        return
    client, started = ensure_daemon(config)
    _warn_version(client)
    if not started:
        changes: ReloadReply = _ask(client, "reload")
        for what, names_changed in changes.model_dump().items():
            if names_changed:
                click.echo(f"herd.toml: {what.replace('_', ' ')}: {', '.join(names_changed)}")
    # No socket timeout: `up` first finishes the stops of a `herd down` that was cut short.
    result: list[UpStarted] = _ask(client, "up", names=list(names) or None, socket_timeout_s=None)
    if no_tui or not sys.stdout.isatty():
        statuses: list[SessionStatus] = _ask(client, "ls")
        active = sum(1 for s in statuses if s.state in ACTIVE_STATES)
        word = "started the daemon; " if started else ""
        click.echo(f"herd: {word}{active} of {len(statuses)} session(s) active")
        for item in result:
            click.echo(f"  {item.handle}")
        return
    _open_tui(config)


def _open_tui(config: HerdConfig, client: Any = None, notes: dict[str, str] | None = None) -> None:
    from agentherd.tui.dashboard.app import run_dashboard

    run_dashboard(config, client=client, notes=notes)


def _open_cluster_tui(config: HerdConfig) -> None:
    from agentherd.tui.cli.clusterverbs import cluster_dashboard_client

    _open_tui(config, client=cluster_dashboard_client(config))


@main.command()
@guarded
def tui() -> None:
    """Open the dashboard on the running daemon; with none, read-only on the state on disk."""
    config = _config()
    if config.cluster is not None:
        _open_cluster_tui(_viewer_config())
        return
    if client_for(config).ping():
        _open_tui(config)
        return
    if not (config.state_dir / "state.db").is_file():
        raise ApiError("no-daemon", "no herd daemon is running here; start one with `herd up`")
    from agentherd.supervisor.api.ondisk import AsyncDiskClient

    _open_tui(config, client=AsyncDiskClient(config))


@main.command()
@guarded
def down() -> None:
    """Stop every session gracefully, then the daemon."""
    client = _client()
    daemon_pid = _ask(client, "info").pid
    result: DownReply = _ask(client, "down", socket_timeout_s=None)
    for status in result.stopped:
        click.echo(f"{status.session}: {status.state}")
    if not wait_for_exit(daemon_pid, DAEMON_EXIT_TIMEOUT_S):
        raise Failure(
            f"the daemon (pid {daemon_pid}) is still running after "
            f"{DAEMON_EXIT_TIMEOUT_S:g}s; see .herd/daemon.log",
            EXIT_INTERNAL,
        )
    if result.left:
        raise Failure(left_running_line(result.left, result.waited_s), EXIT_INTERNAL)
    click.echo("herd: daemon stopped")


def left_running_line(left: list[LeftRunning], waited_s: float | None) -> str:
    """One line naming every session and pid `herd down` could not stop."""
    runs = "; ".join(f"{e.session} (pids {', '.join(map(str, e.pids))})" for e in left)
    after = f" after {waited_s:g}s" if waited_s is not None else ""
    return (
        f"the daemon stopped, but{after} these still run: {runs}; "
        "end them with `kill PID`, see .herd/daemon.log"
    )


@main.command(name="ls")
@click.option("--json", "as_json", is_flag=True)
@guarded
def ls_(as_json: bool) -> None:
    """Every session."""
    statuses = _fleet(read=True, across=True).list()
    if as_json:
        _print_json(statuses)
    else:
        click.echo(render.table(statuses, shutil.get_terminal_size().columns))


@main.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@guarded
def start(name: str, as_json: bool) -> None:
    """Begin a task; prints its handle at once."""
    result = _fleet(across=True).start(name)
    if as_json:
        _print_json(result)
    else:
        click.echo(result.handle)


def _stop(name: str, kill: bool, no_wait: bool) -> None:
    status = _fleet(across=True).stop(name, kill=kill, no_wait=no_wait)
    reason = f" ({status.reason})" if status.reason else ""
    click.echo(f"{name}: {status.state}{reason}")
    if status.state == "failed" and status.reason == "unkillable":
        sys.exit(EXIT_INTERNAL)


@main.command()
@click.argument("name")
@click.option("--no-wait", is_flag=True, help="Return at once instead of waiting for the exit.")
@guarded
def stop(name: str, no_wait: bool) -> None:
    """End the task: stop signal, grace period, then SIGKILL."""
    _stop(name, kill=False, no_wait=no_wait)


@main.command()
@click.argument("name")
@click.option("--no-wait", is_flag=True, help="Return at once instead of waiting for the exit.")
@guarded
def kill(name: str, no_wait: bool) -> None:
    """End the task with SIGKILL to every process of the run."""
    _stop(name, kill=True, no_wait=no_wait)


@main.command()
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
    result = _fleet(across=True).restart(name, from_rev)
    if as_json:
        _print_json(result)
    else:
        click.echo(result.handle)


@main.command()
@click.argument("name")
@guarded
def pause(name: str) -> None:
    """SIGSTOP the whole run."""
    status = _fleet(across=True).control("pause", name)
    click.echo(f"{name}: {status.state}")


@main.command()
@click.argument("name")
@guarded
def resume(name: str) -> None:
    """SIGCONT the whole run."""
    status = _fleet(across=True).control("resume", name)
    click.echo(f"{name}: {status.state}")


@main.command()
@click.argument("name")
@guarded
def approve(name: str) -> None:
    """Adopt the session's changed plan as its new baseline."""
    status = _fleet(across=True).control("approve", name)
    click.echo(f"{name}: plan approved ({_passing(status)} passing); {_state(status)}")
    if status.state in TASK_ENDED:
        click.echo(f"herd start {name} runs a new task against the approved plan")


@main.command()
@click.argument("name")
@guarded
def reject(name: str) -> None:
    """Write the session's baseline plan back (items passing now stay passing)."""
    status = _fleet(across=True).control("reject", name)
    click.echo(f"{name}: plan restored ({_passing(status)} passing); {_state(status)}")
    if status.state in TASK_ENDED:
        click.echo(f"herd start {name} runs the agent again on the restored items")


@main.command()
@click.argument("name")
@click.argument("kind", required=False)
@guarded
def ack(name: str, kind: str | None) -> None:
    """Acknowledge an open warning (KIND, or every one): it leaves the badge, stays in history."""
    status = _fleet(across=True).control("ack", name, kind=kind)
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


@main.command()
@click.argument("target", required=False)
@click.option("--json", "as_json", is_flag=True)
@guarded
def status(target: str | None, as_json: bool) -> None:
    """One session or task (NAME or NAME/N); with none, every session."""
    result = _fleet(read=True, across=True).status(target)
    if as_json:
        _print_json(result)
    elif isinstance(result, list):
        click.echo(render.table(result, shutil.get_terminal_size().columns))
    else:
        click.echo(render.detail(result))


@main.command()
@click.argument("target")
@click.option("--timeout", "timeout_s", type=float, default=None, help="Give up after S seconds.")
@guarded
def wait(target: str, timeout_s: float | None) -> None:
    """Block until the task ends: exit 0 completed, 1 failed, 3 stopped, 124 timeout."""
    result = _fleet(across=True).wait(target, timeout_s)
    reason = f" ({result.reason})" if result.reason else ""
    if result.exit == WAIT_TIMEOUT_EXIT:
        click.echo(f"{result.handle}: still {result.state} after {timeout_s:g}s", err=True)
    else:
        click.echo(f"{result.handle}: {result.state}{reason}")
    sys.exit(result.exit)


@main.command()
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
    client = _reader()
    info: LogInfoReply = _ask(client, "log_info", name=name, run=run_number)
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
        latest: LogInfoReply = _ask(client, "log_info", name=name, run=run_number)
        return Path(latest.path or info.path or ""), latest.live or run_number is None

    try:
        follow_run(current, printer, tail_lines)
    finally:
        printer.finish(terminal)


@main.command()
@click.option("--since", type=int, default=0, help="Only events after this seq.")
@click.option("--session", default=None, help="Only this session's events.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events.")
@click.option("--json", "as_json", is_flag=True)
@guarded
def events(since: int, session: str | None, follow: bool, as_json: bool) -> None:
    """The event log."""
    fleet = _fleet(read=True, across=True)
    for event in (fleet.follow if follow else fleet.events)(since, session):
        click.echo(json.dumps(event.to_json()) if as_json else render.event_line(event))
        if follow:
            sys.stdout.flush()


@main.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@guarded
def report(name: str, as_json: bool) -> None:
    """The session's report: what changed, what passed, what remains, what it cost."""
    result = _fleet(read=True, across=True).report(name)
    if as_json:
        _print_json(result.report)
    else:
        click.echo(result.markdown)


@main.command()
@click.option(
    "--sessions",
    "count",
    type=click.IntRange(1, 200),
    default=6,
    show_default=True,
    help="How many simulated agents.",
)
@click.option("--keep", is_flag=True, help="Leave the fleet running after the dashboard quits.")
@guarded
def demo(count: int, keep: bool) -> None:
    """A throw-away fleet of simulated agents, with the dashboard."""
    from agentherd.supervisor.sim.demo import create_demo, demo_notes

    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    if not interactive and not keep:
        raise Failure(
            "herd demo opens the dashboard and needs a terminal; with --keep it only "
            "starts the fleet and prints how to look at it"
        )
    root = Path(tempfile.mkdtemp(prefix="herd-demo-"))
    config = load_config(create_demo(root, count))
    client, _ = ensure_daemon(config)
    client.call("up")
    where = f"herd -c {config.path}"
    if not interactive:
        click.echo(f"demo fleet of {count} running in {root}")
        for name, shows in demo_notes(count).items():
            click.echo(f"  {name}: {shows}")
        for verb in ("ls", "tui", "down"):
            click.echo(f"  {where} {verb}")
        return
    # Closing the terminal ends the demo like `q` does: the fleet must not outlive it.
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(129))
    try:
        _open_tui(config, notes=demo_notes(count))
    finally:
        if keep:
            click.echo(
                f"the demo fleet keeps running in {root}: `{where} tui` to look again, "
                f"`{where} down` to stop it"
            )
        else:
            if client.ping():  # `Q` in the dashboard may have stopped it already
                client.call("down", socket_timeout_s=None)
            click.echo(f"demo fleet stopped; its files stay in {root}")
            click.echo(f"  look back at it: {where} report api-migration (no daemon needed)")
            click.echo(f"  clean up:        rm -rf {root}")
        click.echo("next: in your own git repo, `herd init` writes a herd.toml, then `herd up`")
