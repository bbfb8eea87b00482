"""The session task as a DBOS workflow: DBOS decides where and whether a task runs, herd how.

Two queues carry each task. `herd-fleet` (global concurrency: `[cluster] max_sessions`) holds
the task's workflow, `session_task`, which any host may run: it only places the work and
waits, so it holds a fleet-wide slot while the session runs. It enqueues `host_task` on the
chosen host's own queue `herd-host-NAME` (worker concurrency: that host's
`max_sessions_per_host`), which only that host listens to. There, each attempt is a DBOS
step, `run_attempt`, that asks this host's own daemon to start the session and waits for the
task to end: the daemon still owns the processes, their output and their re-adoption.

Steps are at-least-once: a step run again after its host's daemon restarted asks `start`
again, and the daemon answers with the task already running (no second run).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from dbos import DBOS, SetWorkflowID

from agentherd.supervisor.api.client import Client
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.cluster import leases
from agentherd.supervisor.cluster.placement import NoHost, place

log = logging.getLogger(__name__)

FLEET_QUEUE = "herd-fleet"
APP_NAME = "herd"
POLL_S = 0.2
MAX_ATTEMPTS = 10
"""Hosts a task may be moved across before it fails (reason no-host)."""
HOST_WAIT_S = 2.0
"""With no live host for a moved task, wait this long before looking again."""
"""How often a waiting workflow and the queues poll PostgreSQL (DBOS's default is 1 s)."""


HOST_QUEUE_PREFIX = "herd-host-"


def host_queue(host: str) -> str:
    """The queue only `host` dequeues from."""
    return f"{HOST_QUEUE_PREFIX}{host}"


def task_id(session: str, number: int) -> str:
    """The workflow id of a session's n-th cluster task (unique: enqueueing it twice is one)."""
    return f"herd:{session}:{number}"


class _Local:
    """This process's own daemon, set by `launch` (steps run in DBOS's threads)."""

    client: Client | None = None
    host: str | None = None
    url: str | None = None
    before_start: Callable[[str], None] | None = None
    """Brings the session's work from the checkpoint remote (set with `checkpoint_remote`)."""
    publisher: Any = None
    """This host's `publish.Publisher`, flushed before a step returns."""


STOPPED_BY_VIEWER = {"state": "stopped", "reason": "user", "exit": 3}
"""The outcome of an attempt a person stopped (`herd stop` across hosts) before it ran."""


def _url() -> str:
    if _Local.url is None:
        raise RuntimeError("the cluster engine runs only inside `herd daemon --host NAME`")
    return _Local.url


def _client() -> Client:
    if _Local.client is None:
        raise RuntimeError("the cluster engine runs only inside `herd daemon --host NAME`")
    return _Local.client


@DBOS.step(name="herd.run_attempt")
def run_attempt(session: str) -> dict[str, Any]:
    """Start the session on this host's daemon and wait for its task to end; its outcome."""
    client = _client()
    own = DBOS.get_workflow_status(DBOS.workflow_id) if DBOS.workflow_id else None
    if own is not None and own.status == "CANCELLED":  # stopped while it was dequeued
        return {"host": _Local.host, "handle": None, **STOPPED_BY_VIEWER}
    if _Local.before_start is not None:
        _Local.before_start(session)
    try:
        started = client.call("start", name=session)
        waited = client.call("wait", target=started["handle"], socket_timeout_s=None)
    except ApiError as exc:  # DBOS pickles a step's error: ApiError would not come back
        raise RuntimeError(f"{_Local.host}: {exc.code}: {exc.message}") from None
    if _Local.publisher is not None:  # whoever sees the task end sees its events too
        _Local.publisher.flush()
    return {
        "host": _Local.host,
        "handle": started["handle"],
        "state": waited["state"],
        "reason": waited.get("reason"),
        "exit": waited["exit"],
    }


@DBOS.workflow(name="herd.host_task")
def host_task(session: str) -> dict[str, Any]:
    """The part of a task that runs on its host: one attempt (a step)."""
    return run_attempt(session)


@DBOS.step(name="herd.choose_host")
def choose_host(session: str, allowed: list[str] | None) -> str | None:
    """A live host for the session's next attempt, the least loaded (None: no host now)."""
    with leases.connect(_url()) as conn:
        live = leases.hosts(conn)
    try:
        return place(session, allowed, live, {})
    except NoHost:
        return None


@DBOS.step(name="herd.await_attempt")
def await_attempt(attempt_id: str, host: str) -> dict[str, Any] | None:
    """Wait for an attempt on `host` to end: its outcome; None when the host's lease expired
    first (the attempt is then cancelled: the host has fenced itself, its agent is gone)."""
    while True:
        status = DBOS.get_workflow_status(attempt_id)
        if status is not None and status.status == "SUCCESS":
            outcome: dict[str, Any] = dict(status.output or {})
            return outcome
        if status is not None and status.status in ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
            return {"host": host, "state": "failed", "reason": "engine", "exit": 1}
        if status is not None and status.status == "CANCELLED":  # `herd stop` before it ran
            return {"host": host, **STOPPED_BY_VIEWER}
        with leases.connect(_url()) as conn:
            alive = any(h.alive for h in leases.hosts(conn) if h.name == host)
        if not alive:
            DBOS.cancel_workflow(attempt_id)
            return None
        time.sleep(POLL_S)


@DBOS.workflow(name="herd.session_task")
def session_task(session: str, host: str, allowed: list[str] | None = None) -> dict[str, Any]:
    """A session's task: holds a fleet-wide slot and runs attempts on hosts' own queues until
    one ends; an attempt whose host died is cancelled and the next placed on a live host."""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        if attempt > 1:
            chosen = choose_host(session, allowed)
            if chosen is None:
                DBOS.sleep(HOST_WAIT_S)
                continue
            host = chosen
        queue = DBOS.retrieve_queue(host_queue(host))
        if queue is None:
            raise RuntimeError(f"host {host!r} has no queue: it never joined the cluster")
        attempt_id = f"{DBOS.workflow_id}:{attempt}:on:{host}"
        with SetWorkflowID(attempt_id):
            queue.enqueue(host_task, session)
        outcome = await_attempt(attempt_id, host)
        if outcome is not None:
            return outcome
    return {"host": None, "state": "failed", "reason": "no-host", "exit": 1}


def launch(
    url: str,
    host: str,
    client: Client,
    max_sessions: int | None,
    max_sessions_per_host: int | None,
    before_start: Callable[[str], None] | None = None,
) -> None:
    """Start DBOS in this process as executor `host`, listening to the fleet's queue and its own."""
    _Local.client, _Local.host, _Local.url = client, host, url
    _Local.before_start = before_start
    DBOS(
        config={
            "name": APP_NAME,
            "system_database_url": url,
            "executor_id": host,
            "application_version": "herd-1",
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": POLL_S,
        }
    )
    DBOS.listen_queues([FLEET_QUEUE, host_queue(host)])
    DBOS.launch()
    DBOS.register_queue(
        FLEET_QUEUE,
        global_concurrency=max_sessions,
        polling_interval_sec=POLL_S,
        on_conflict="always_update",
    )
    DBOS.register_queue(
        host_queue(host),
        worker_concurrency=max_sessions_per_host,
        polling_interval_sec=POLL_S,
        on_conflict="always_update",
    )


def shutdown() -> None:
    """Stop DBOS in this process (its pending workflows stay pending for recovery)."""
    DBOS.destroy()
    _Local.client = _Local.host = _Local.url = None
    _Local.before_start = None


def recover(hosts: list[str]) -> int:
    """Re-enqueue the pending workflows of dead hosts (DBOS 3.4's private call: pinned)."""
    handles = DBOS._recover_pending_workflows(hosts)
    return len(handles)


def client_for(url: str) -> Any:
    """A DBOS client of the fleet's system database (any machine, no worker)."""
    from dbos import DBOSClient

    return DBOSClient(system_database_url=url, application_name=APP_NAME)


def enqueue_task(
    dbos_client: Any, session: str, number: int, host: str, allowed: list[str] | None
) -> str:
    """Put a session's task on the fleet queue for `host`; its workflow id."""
    handle = dbos_client.enqueue(
        {
            "workflow_name": "herd.session_task",
            "queue_name": FLEET_QUEUE,
            "workflow_id": task_id(session, number),
            "app_version": "herd-1",
        },
        session,
        host,
        allowed,
    )
    return str(handle.get_workflow_id())
