"""The verbs around the daemon and the dashboard: init, check, daemon, up, tui, down, demo."""

from __future__ import annotations

import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from agentherd.sessions.adapters import AGENTS
from agentherd.sessions.config import (
    ConfigError,
    HerdConfig,
    environment_problems,
    load_config,
)
from agentherd.sessions.states import ACTIVE_STATES
from agentherd.sessions.status import (
    DownReply,
    LeftRunning,
    ReloadReply,
    SessionStatus,
    UpStarted,
)
from agentherd.supervisor.api.launcher import client_for, ensure_daemon, wait_for_exit
from agentherd.supervisor.api.protocol import ApiError
from agentherd.tui.cli.common import (
    DAEMON_EXIT_TIMEOUT_S,
    EXIT_INTERNAL,
    EXIT_PERSON,
    Failure,
    ask,
    checked_config,
    daemon_client,
    guarded,
    herd_config,
    viewer_config,
    warn_version,
)
from agentherd.tui.cli.templates import init_text, session_block


@click.command()
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


@click.command()
@guarded
def check() -> None:
    """Validate herd.toml."""
    try:
        config = herd_config()
        problems = environment_problems(config)
    except ConfigError as exc:
        if not isinstance(exc.partial, HerdConfig):
            raise
        # Every problem in one run: the sessions that were right are checked on this machine.
        problems = exc.problems + environment_problems(exc.partial)
        for problem in problems:
            click.echo(str(problem), err=True)
        sys.exit(EXIT_PERSON)
    for problem in problems:
        click.echo(str(problem), err=True)
    if any(not p.warning for p in problems):
        sys.exit(EXIT_PERSON)
    click.echo(f"{config.path}: ok ({len(config.sessions)} sessions)")


@click.command()
@click.option("--host", "host", default=None, metavar="NAME", help="Join the [cluster] as NAME.")
@guarded
def daemon(host: str | None) -> None:
    """Run the supervisor in the foreground (for systemd, tmux, containers)."""
    from agentherd.supervisor.daemon import DaemonAlreadyRunning, run_foreground
    from agentherd.supervisor.main import configure_logging

    config = checked_config() if host else herd_config()
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


@click.command()
@click.option("--no-tui", is_flag=True, help="Do not open the dashboard.")
@click.argument("names", nargs=-1)
@guarded
def up(no_tui: bool, names: tuple[str, ...]) -> None:
    """Start the daemon if none runs, start autostart (or named) sessions, open the dashboard."""
    config = viewer_config() if herd_config().cluster is not None else checked_config()
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
    warn_version(client)
    if not started:
        changes: ReloadReply = ask(client, "reload")
        for what, names_changed in changes.model_dump().items():
            if names_changed:
                click.echo(f"herd.toml: {what.replace('_', ' ')}: {', '.join(names_changed)}")
    # No socket timeout: `up` first finishes the stops of a `herd down` that was cut short.
    result: list[UpStarted] = ask(client, "up", names=list(names) or None, socket_timeout_s=None)
    if no_tui or not sys.stdout.isatty():
        statuses: list[SessionStatus] = ask(client, "ls")
        active = sum(1 for s in statuses if s.state in ACTIVE_STATES)
        word = "started the daemon; " if started else ""
        click.echo(f"herd: {word}{active} of {len(statuses)} session(s) active")
        for item in result:
            queued = f"  {item.state} ({item.reason})" if item.reason else ""
            click.echo(f"  {item.handle}{queued}")
        return
    _open_tui(config)


def _open_tui(config: HerdConfig, client: Any = None, notes: dict[str, str] | None = None) -> None:
    from agentherd.tui.dashboard.app import run_dashboard

    run_dashboard(config, client=client, notes=notes)


def _open_cluster_tui(config: HerdConfig) -> None:
    from agentherd.tui.cli.clusterverbs import cluster_dashboard_client

    _open_tui(config, client=cluster_dashboard_client(config))


@click.command()
@guarded
def tui() -> None:
    """Open the dashboard on the running daemon; with none, read-only on the state on disk."""
    config = herd_config()
    if config.cluster is not None:
        _open_cluster_tui(viewer_config())
        return
    if client_for(config).answers():
        _open_tui(config)
        return
    if not (config.state_dir / "state.db").is_file():
        raise ApiError("no-daemon", "no herd daemon is running here; start one with `herd up`")
    from agentherd.supervisor.api.ondisk import AsyncDiskClient

    _open_tui(config, client=AsyncDiskClient(config))


@click.command()
@guarded
def down() -> None:
    """Stop every session gracefully, then the daemon."""
    client = daemon_client()
    daemon_pid = ask(client, "info").pid
    result: DownReply = ask(client, "down", socket_timeout_s=None)
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


@click.command()
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
        running = client.ping()  # `Q` in the dashboard may have stopped it already
        if running and not keep:
            client.call("down", socket_timeout_s=None)
        click.echo("\n".join(demo_farewell(root, where, keep=keep, running=running)))


def demo_farewell(root: Path, where: str, keep: bool, running: bool) -> list[str]:
    """What `herd demo` says as the dashboard closes: whether the fleet still runs (`--keep`,
    and no `Q` stopped it) and how to look again or clean up."""
    if keep and running:
        lines = [
            f"the demo fleet keeps running in {root}: `{where} tui` to look again, "
            f"`{where} down` to stop it"
        ]
    else:
        lines = [
            f"demo fleet stopped; its files stay in {root}",
            f"  look back at it: {where} report api-migration (no daemon needed)",
            f"  clean up:        rm -rf {root}",
        ]
    return [*lines, "next: in your own git repo, `herd init` writes a herd.toml, then `herd up`"]
