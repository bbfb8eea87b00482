"""`herd attach NAME`: an interactive session's terminal, full screen, until the detach key."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import click

from agentherd.sessions.keynames import DEFAULT_DETACH_KEY, detach_byte
from agentherd.sessions.status import LogInfoReply
from agentherd.supervisor.api.launcher import client_for
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.process.ptyholder import SOCKET_NAME
from agentherd.tui.cli.attachloop import attach as attach_terminal
from agentherd.tui.cli.common import Failure, ask, guarded, herd_config, reader


def _detach_key(option: str | None) -> tuple[str, bytes]:
    """The detach key: --detach-key, else `[keys] detach`, else ctrl+q; one line if wrong."""
    config = herd_config()
    named = option or config.keys.get("detach") or DEFAULT_DETACH_KEY
    found = detach_byte(named)
    if found is None:
        where = "--detach-key" if option else f"{config.path}: [keys] detach"
        raise Failure(f'{where}: {named!r} is not a control key; use ctrl+<letter>, like "ctrl+q"')
    return named.strip().lower(), found


def _connect(folder: Path) -> socket.socket:
    """A connection to the terminal holder in the run folder `folder`."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    folder_fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    try:
        # Through the folder's descriptor: the path may pass sun_path's 107 bytes.
        sock.connect(f"/proc/self/fd/{folder_fd}/{SOCKET_NAME}")
    except OSError:
        sock.close()
        raise
    finally:
        os.close(folder_fd)
    return sock


@click.command()
@click.argument("name")
@click.option(
    "--detach-key",
    metavar="KEY",
    default=None,
    help="The key that detaches, pressed alone (default: [keys] detach, else ctrl+q).",
)
@guarded
def attach(name: str, detach_key: str | None) -> None:
    """An interactive session's terminal: its screen now, then live; the detach key leaves it."""
    key_name, key = _detach_key(detach_key)
    session = herd_config().session(name)
    if session is not None and not session.interactive:
        raise Failure(
            f"{name} is not interactive; set interactive = true in its [[session]] in herd.toml "
            "and start it again"
        )
    info: LogInfoReply = ask(reader(), "log_info", name=name)
    if info.path is None:
        raise Failure(f"{name} has no runs yet; `herd start {name}` begins one")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise Failure("herd attach needs a terminal (its input and output are not one)")
    try:
        # Straight to the run's holder: with no daemon (the state on disk) it still answers.
        sock = _connect(Path(info.path).parent)
    except OSError as exc:
        if info.live:
            raise Failure(
                f"{name}: run {info.current_run} has no terminal to attach to "
                f"({exc.strerror}); was it started before interactive = true?"
            ) from None
        raise Failure(
            f"{name} has no running terminal ({info.state}); `herd start {name}`"
        ) from None
    click.echo(f"herd: attached to {name}; {key_name} detaches", err=True)
    run = info.current_run

    def tell_daemon() -> None:
        """Who types goes in the event log, when a daemon runs to keep it (never a message:
        the terminal is raw now)."""
        try:
            client = client_for(herd_config())
            if client.answers():
                tty = os.ttyname(0)
                client.call("terminal_writer", name=name, run=run, pid=os.getpid(), tty=tty)
        except (ApiError, OSError):
            pass

    with sock:
        ended = attach_terminal(sock, key, f"herd: {name} ({key_name} detaches)", tell_daemon)
    if ended.detached:
        click.echo(f"herd: detached from {name}; it runs on (`herd attach {name}`)", err=True)
    else:
        status = "" if ended.status is None else f" (exit {ended.status})"
        click.echo(f"herd: {name}'s run ended{status}", err=True)
