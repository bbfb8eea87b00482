"""The fleet across hosts, as seen from any machine that reaches PostgreSQL (partial)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from agentherd.sessions.clusterconfig import host_names
from agentherd.sessions.config import HerdConfig
from agentherd.sessions.records import Event
from agentherd.sessions.states import WAIT_EXIT_CODES, WAIT_TIMEOUT_EXIT, State
from agentherd.sessions.status import (
    ReportReply,
    SessionStatus,
    StartReply,
    TaskStatus,
    WaitReply,
)
from agentherd.supervisor.cluster import engine, leases
from agentherd.supervisor.cluster.placement import place
from agentherd.supervisor.protocol import ApiError

ACTIVE = ["PENDING", "ENQUEUED"]
ENDED_BADLY = ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


class NotBuilt(ApiError):
    """A verb the cluster does not offer yet: run it on the session's host instead."""

    def __init__(self, verb: str) -> None:
        super().__init__(
            "not-built",
            f"`herd {verb}` across hosts is not built yet; run it on the session's host, "
            "against its own daemon",
        )


class ClusterFleet:
    """Start and wait on sessions across hosts through the engine (the rest: see README)."""

    def __init__(self, config: HerdConfig, url: str) -> None:
        self.config = config
        self.url = url
        self.dbos = engine.client_for(url)

    def close(self) -> None:
        """Drop the engine's connections."""
        self.dbos.destroy()

    def hosts(self) -> list[leases.HostRow]:
        """Every registered host."""
        with leases.connect(self.url) as conn:
            return leases.hosts(conn)

    def _load(self) -> dict[str, int]:
        load: dict[str, int] = {}
        # Tasks placed but not yet begun count too: their host is their workflow's argument.
        for wf in self.dbos.list_workflows(
            name="herd.session_task", status=ACTIVE, load_output=False
        ):
            host = str(wf.input["args"][1]) if wf.input else ""
            load[host] = load.get(host, 0) + 1
        return load

    def _tasks(self, session: str) -> list[Any]:
        return list(
            self.dbos.list_workflows(
                workflow_id_prefix=f"herd:{session}:", name="herd.session_task", load_output=False
            )
        )

    def start(self, name: str) -> StartReply:
        """Place the session's next task on a host and enqueue it (already queued or running:
        that task's handle)."""
        session = self.config.session(name)
        if session is None:
            raise ApiError("unknown-session", f"no session named {name!r} in {self.config.path}")
        tasks = self._tasks(name)
        active = [t for t in tasks if t.status in ACTIVE]
        if active:
            number = int(active[-1].workflow_id.rsplit(":", 1)[1])
            return StartReply(handle=f"{name}/{number}", session=name, state="starting")
        allowed = host_names(session.host)
        host = place(name, allowed, self.hosts(), self._load())
        number = len(tasks) + 1
        engine.enqueue_task(self.dbos, name, number, host, allowed)
        return StartReply(handle=f"{name}/{number}", session=name, state="starting")

    def wait(self, target: str, timeout_s: float | None = None) -> WaitReply:
        """Block until the cluster task `NAME/N` ends (or `timeout_s` passes)."""
        name, _, number = target.partition("/")
        workflow_id = engine.task_id(name, int(number or len(self._tasks(name))))
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            found = self.dbos.list_workflows(workflow_ids=[workflow_id])
            status = found[0] if found else None
            if status is not None and status.status == "SUCCESS":
                out = status.output
                return WaitReply(
                    handle=target, state=out["state"], reason=out.get("reason"), exit=out["exit"]
                )
            if status is not None and status.status in (
                "ERROR",
                "CANCELLED",
                "MAX_RECOVERY_ATTEMPTS_EXCEEDED",
            ):
                return WaitReply(
                    handle=target,
                    state="failed",
                    reason="engine",
                    exit=WAIT_EXIT_CODES[State.FAILED],
                )
            if deadline is not None and time.monotonic() > deadline:
                return WaitReply(handle=target, state=State.STARTING, exit=WAIT_TIMEOUT_EXIT)
            time.sleep(engine.POLL_S)

    def task_host(self, target: str) -> str | None:
        """The host that ran (or runs) the task `NAME/N`, once it has one."""
        name, _, number = target.partition("/")
        found = self.dbos.list_workflows(
            workflow_id_prefix=engine.task_id(name, int(number)) + ":",
            name="herd.host_task",
            load_output=False,
            load_input=False,
        )
        attempts = sorted(found, key=lambda wf: wf.created_at or 0)
        return str(attempts[-1].queue_name).removeprefix("herd-host-") if attempts else None

    def stop(self, name: str, kill: bool = False, no_wait: bool = False) -> SessionStatus:
        """Not built: cancelling a task through the engine and stopping its run."""
        raise NotBuilt("stop")

    def restart(self, name: str, from_rev: str | None = None) -> StartReply:
        """Not built."""
        raise NotBuilt("restart")

    def status(self, target: str | None = None) -> list[SessionStatus] | SessionStatus | TaskStatus:
        """Not built: hosts do not publish their sessions' status to PostgreSQL yet."""
        raise NotBuilt("status")

    def list(self) -> list[SessionStatus]:
        """Not built (see `status`)."""
        raise NotBuilt("ls")

    def events(self, since: int = 0, session: str | None = None) -> Iterator[Event]:
        """Not built: each host's events stay in its own .herd/state.db."""
        raise NotBuilt("events")

    def follow(self, since: int = 0, session: str | None = None) -> Iterator[Event]:
        """Not built (see `events`)."""
        raise NotBuilt("events -f")

    def report(self, name: str) -> ReportReply:
        """Not built."""
        raise NotBuilt("report")
