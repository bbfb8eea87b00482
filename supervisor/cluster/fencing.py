"""What a host does when it loses its lease: stop its own agents, at once and for certain."""

from __future__ import annotations

import logging

from agentherd.sessions.states import ACTIVE_STATES
from agentherd.supervisor.api.client import Client
from agentherd.supervisor.api.protocol import ApiError

log = logging.getLogger(__name__)


def stop_every_agent(client: Client) -> list[str]:
    """SIGKILL every active run of this host's daemon (no grace: the lease is running out).

    Returns the sessions stopped. The daemon still owns the processes; this only asks it.
    """
    stopped: list[str] = []
    for status in client.call("ls"):
        if status["state"] not in ACTIVE_STATES:
            continue
        try:
            client.call(
                "stop", name=status["session"], kill=True, reason="fenced", socket_timeout_s=None
            )
            stopped.append(status["session"])
        except ApiError as exc:
            log.error("fencing: could not stop %s: %s", status["session"], exc.message)
    log.warning("fenced: lease not renewed; stopped %s", ", ".join(stopped) or "nothing")
    return stopped
