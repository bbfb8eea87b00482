"""Where a task runs: among live hosts that hold the session and that its `host` allows."""

from __future__ import annotations

from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.cluster.leases import HostRow


class NoHost(ApiError):
    """No live host may run this session."""

    def __init__(self, message: str) -> None:
        super().__init__("bad-state", message)  # a person's to fix: start a host


def place(
    session: str, allowed: list[str] | None, live: list[HostRow], load: dict[str, int]
) -> str:
    """The host for a task: alive, holding the session, allowed by its `host`, least loaded.

    Ties go to the first name, so placement is reproducible.
    """
    fit = [
        h.name
        for h in live
        if h.alive and h.ready and session in h.sessions and (allowed is None or h.name in allowed)
    ]
    if not fit:
        where = f" among {', '.join(allowed)}" if allowed else ""
        raise NoHost(f"no live host{where} runs {session!r}; start `herd daemon --host NAME`")
    return min(fit, key=lambda name: (load.get(name, 0), name))
