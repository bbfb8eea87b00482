"""What every `herd` verb shares: the config it reads, the client it asks, errors as one line."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from agentherd.sessions.config import (
    ConfigError,
    HerdConfig,
    environment_problems,
    find_config,
    load_config,
)
from agentherd.sessions.status import (
    Wire,
    parse_reply,
)
from agentherd.supervisor.api.client import Client
from agentherd.supervisor.api.fleetapi import Fleet, LocalFleet
from agentherd.supervisor.api.launcher import client_for
from agentherd.supervisor.api.ondisk import DiskClient
from agentherd.supervisor.api.protocol import HERD_VERSION, ApiError

EXIT_PERSON = 2
EXIT_INTERNAL = 70
EXIT_FORBIDDEN = 77
"""Asked from inside a session for what needs a person or another session (sysexits' NOPERM)."""
DAEMON_EXIT_TIMEOUT_S = 15.0
"""`herd down` waits this long for the daemon process to exit after its sessions stopped."""

F = TypeVar("F", bound=Callable[..., Any])


class Failure(Exception):
    """Ends the command with one line on stderr and an exit code."""

    def __init__(self, message: str, code: int = EXIT_PERSON) -> None:
        super().__init__(message)
        self.code = code


def debug_asked() -> bool:
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
            if debug_asked():
                raise
            click.echo(f"herd: {exc.message}", err=True)
            if exc.forbidden:
                sys.exit(EXIT_FORBIDDEN)
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
            if debug_asked():
                raise
            click.echo(
                f"herd: internal error: {type(exc).__name__}: {exc} (run with --debug "
                "for the traceback; the daemon log is .herd/daemon.log)",
                err=True,
            )
            sys.exit(EXIT_INTERNAL)

    return wrapper  # type: ignore[return-value]


def herd_config() -> HerdConfig:
    ctx = click.get_current_context()
    explicit = ctx.find_root().params.get("config")
    return load_config(find_config(explicit))


def daemon_client() -> Client:
    client = client_for(herd_config())
    warn_version(client)
    return client


def reader() -> Client | DiskClient:
    """The daemon, or with none running the state in .herd/ (read-only: never starts one)."""
    config = herd_config()
    client = client_for(config)
    if client.ping():
        warn_version(client)
        return client
    if not (config.state_dir / "state.db").is_file():
        raise ApiError("no-daemon", "no herd daemon is running here; start one with `herd up`")
    click.echo("herd: no daemon is running; this is the state saved in .herd/", err=True)
    return DiskClient(config)


def fleet_of(read: bool = False, across: bool = False) -> Fleet:
    """The fleet the verbs act on (the seam, supervisor/api/fleetapi.py): the local daemon, or
    with `read` and none running, its state on disk; with `across` and a [cluster], the engine."""
    if across and herd_config().cluster is not None:
        from agentherd.tui.cli.clusterverbs import cluster_fleet

        return cluster_fleet(viewer_config())
    return LocalFleet(reader() if read else daemon_client())


def warn_version(client: Client) -> None:
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


def print_json(value: Any) -> None:
    """Print a reply (a model, a list of models, or plain JSON) as indented JSON."""
    if isinstance(value, Wire):
        value = value.to_json()
    elif isinstance(value, list):
        value = [item.to_json() if isinstance(item, Wire) else item for item in value]
    click.echo(json.dumps(value, indent=2))


def ask(client: Client | DiskClient, op: str, **args: Any) -> Any:
    """Call `op` and return its reply as the contract's model (sessions/status.py)."""
    return parse_reply(op, client.call(op, **args))


def viewer_config() -> HerdConfig:
    """herd.toml checked for a viewer of the cluster: the URL and the extra, not this
    machine's folders and programs (the hosts run the sessions)."""
    from agentherd.sessions.configchecks import cluster_problems

    config = herd_config()
    problems = cluster_problems(config)
    for problem in problems:
        click.echo(str(problem), err=True)
    if any(not p.warning for p in problems):
        sys.exit(EXIT_PERSON)
    return config


def checked_config() -> HerdConfig:
    config = herd_config()
    problems = environment_problems(config)
    for problem in problems:
        click.echo(str(problem), err=True)
    if any(not p.warning for p in problems):
        sys.exit(EXIT_PERSON)
    return config
