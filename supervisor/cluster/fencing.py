"""What a host does when it loses its lease: stop its own agents, at once and for certain."""

from __future__ import annotations

import logging
from collections.abc import Callable

from agentherd.sessions.states import ACTIVE_STATES
from agentherd.supervisor.api.client import Client
from agentherd.supervisor.api.protocol import ApiError

log = logging.getLogger(__name__)


def _kill_active(
    client: Client, spare: Callable[[str], bool], why: str, kill: bool = True
) -> list[str]:
    """SIGKILL (reason `fenced`) every active run of this host's daemon whose session is not
    spared, or with `kill=False` stop it within its stop_grace (reason `host-lost`); the
    sessions stopped. The daemon still owns the processes; this only asks it."""
    stopped: list[str] = []
    for status in client.call("ls"):
        if status["state"] not in ACTIVE_STATES or spare(status["session"]):
            continue
        try:
            client.call(
                "stop",
                name=status["session"],
                kill=kill,
                reason="fenced" if kill else "host-lost",
                socket_timeout_s=None,
            )
            stopped.append(status["session"])
        except ApiError as exc:
            log.error("%s: could not stop %s: %s", why, status["session"], exc.message)
    return stopped


def stop_every_agent(client: Client) -> list[str]:
    """SIGKILL every active run of this host's daemon (no grace: the lease is running out)."""
    stopped = _kill_active(client, lambda _name: False, "fencing")
    log.warning("fenced: lease not renewed; stopped %s", ", ".join(stopped) or "nothing")
    return stopped


def stop_not_owned(client: Client, owns: Callable[[str], bool]) -> list[str]:
    """SIGKILL every active run of a session this host no longer owns (it moved elsewhere
    while this host was away); the sessions stopped."""
    stopped = _kill_active(client, owns, "owned elsewhere")
    if stopped:
        log.warning("stopped %s: the cluster gave them to another host", ", ".join(stopped))
    return stopped


def stop_for_shutdown(client: Client) -> list[str]:
    """Stop every active run of this host's daemon within its stop_grace (reason
    `host-lost`): the host is shutting down and its tasks go on elsewhere."""
    stopped = _kill_active(client, lambda _name: False, "shutdown", kill=False)
    log.warning("shutting down: stopped %s", ", ".join(stopped) or "nothing")
    return stopped
