"""The dashboard's client across hosts: the cluster fleet behind the daemon's async API.

The dashboard asks a client for ops and a `subscribe` stream; this one answers them from
`ClusterFleet` in worker threads (PostgreSQL, not a socket), polling the published rows for
the stream. Actions go through the engine and the hosts' commands. A run's output stays on
its host: the output pane and `log_info` say where to read it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio

from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.cluster.fleet import ClusterFleet

SNAPSHOT_POLL_S = 1.0
"""How often the dashboard across hosts reads the fleet's rows."""
CONTROL_VERBS = ("pause", "resume", "approve", "reject", "ack")


def _json(value: Any) -> Any:
    if isinstance(value, list):
        return [item.to_json() for item in value]
    return value.to_json()


class AsyncClusterClient:
    """A stand-in for `AsyncClient` that reads and acts on the fleet across hosts."""

    read_only = False
    across_hosts = True
    daemon_version: str | None = None

    def __init__(self, fleet: ClusterFleet, poll_s: float = SNAPSHOT_POLL_S) -> None:
        self.fleet = fleet
        self.poll_s = poll_s

    def _answer(self, op: str, args: dict[str, Any]) -> Any:
        fleet, name = self.fleet, args.get("name")
        ops: dict[str, Callable[[], Any]] = {
            "info": lambda: {"version": "", "pid": 0},
            "ls": lambda: _json(fleet.list()),
            "status": lambda: _json(fleet.status(args.get("target"))),
            "events": lambda: [
                e.to_json() for e in fleet.events(int(args.get("since") or 0), args.get("session"))
            ][: int(args.get("limit") or 1000)],
            "report": lambda: fleet.report(str(name)).to_json(),
            "start": lambda: fleet.start(str(name)).to_json(),
            "stop": lambda: fleet.stop(str(name), bool(args.get("kill")), True).to_json(),
            "restart": lambda: fleet.restart(str(name), args.get("from")).to_json(),
        }
        if op in CONTROL_VERBS:
            extra = {"kind": args["kind"]} if args.get("kind") else {}
            return fleet.control(op, str(name), **extra).to_json()
        if op in ops:
            return ops[op]()
        raise ApiError(
            "not-across-hosts",
            f"`{op}` is not offered across hosts: a run's output and files stay on its host; "
            "run `herd logs NAME` there",
        )

    async def call(self, op: str, **args: Any) -> Any:
        """One op, answered in a worker thread (the engine's client blocks)."""
        return await anyio.to_thread.run_sync(lambda: self._answer(op, args))

    async def stream(self, op: str, **args: Any) -> AsyncIterator[Any]:
        """`subscribe`: the fleet now and whenever a host publishes a change."""
        if op != "subscribe":
            raise ApiError("not-across-hosts", f"following `{op}` is not offered across hosts")
        last: list[Any] | None = None
        while True:
            sessions = await self.call("ls")
            if sessions != last:
                last = sessions
                yield {"sessions": sessions, "at": iso(utc_now())}
            await anyio.sleep(self.poll_s)
