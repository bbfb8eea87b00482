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
import threading
import time
from collections.abc import Callable
from typing import Any

from dbos import DBOS, SetWorkflowID

from agentherd.supervisor.api.client import Client
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.cluster import leases, owners
from agentherd.supervisor.cluster.placement import NoHost, place

log = logging.getLogger(__name__)

FLEET_QUEUE = "herd-fleet"
APP_NAME = "herd"
APP_VERSION = "herd-1"
POLL_S = 0.2
"""How often a running task's workflow and step look at PostgreSQL for its end."""
QUEUE_POLL_S = 1.0
"""How often a host's queues and its notification listener poll PostgreSQL (DBOS's default):
what an idle host spends its CPU on (at 0.2 s, about twice what it spends at 1 s)."""
MAX_ATTEMPTS = 10
"""Hosts a task may be moved across before it fails (reason no-host)."""
HOST_WAIT_S = 2.0
"""With no live host for a moved task, wait this long before looking again."""


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
    closed = threading.Event()
    """Set once DBOS is shut down in this process: a waiting step then gives up at once."""
    publisher: Any = None
    """This host's `publish.Publisher`, flushed before a step returns."""
    ownership: owners.Ownership | None = None
    """What this host owns: an attempt whose token holds makes its session ours."""


STOPPED_BY_VIEWER = {"state": "stopped", "reason": "user", "exit": 3}
"""The outcome of an attempt a person stopped (`herd stop` across hosts) before it ran."""
FENCED = {"state": "stopped", "reason": "fenced", "exit": 3}
"""The outcome of an attempt whose token went stale before it began: it never ran."""
MOVE_ON = ("fenced", "host-lost")
"""An attempt that ended for one of these reasons lost its host, not its work: the task
places the next attempt (on a live host) instead of ending."""


def _url() -> str:
    if _Local.url is None:
        raise RuntimeError("the cluster engine runs only inside `herd daemon --host NAME`")
    return _Local.url


def _client() -> Client:
    if _Local.client is None:
        raise RuntimeError("the cluster engine runs only inside `herd daemon --host NAME`")
    return _Local.client


@DBOS.step(name="herd.run_attempt")
def run_attempt(session: str, token: int | None = None) -> dict[str, Any]:
    """Start the session on this host's daemon, if this host still holds the attempt's
    token, and wait for its task to end; its outcome."""
    client = _client()
    own = DBOS.get_workflow_status(DBOS.workflow_id) if DBOS.workflow_id else None
    if own is not None and own.status == "CANCELLED":  # stopped while it was dequeued
        return {"host": _Local.host, "handle": None, **STOPPED_BY_VIEWER}
    if token is not None:  # None: enqueued by a herd that handed out no tokens
        with leases.connect(_url()) as conn:
            if not owners.holds(conn, session, str(_Local.host), token):
                log.warning("%s: attempt not started: its token %d is stale", session, token)
                return {"host": _Local.host, "handle": None, **FENCED}
            owners.slot_taken(conn, session)  # it has its slot: no longer queued
        if _Local.ownership is not None:
            _Local.ownership.mine(session, token)
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
def host_task(session: str, token: int | None = None) -> dict[str, Any]:
    """The part of a task that runs on its host: one attempt (a step)."""
    return run_attempt(session, token)


@DBOS.step(name="herd.grant_attempt")
def grant_attempt(session: str, host: str, attempt_id: str) -> int:
    """Give the session to `host` for this attempt (a transaction): its fencing token. Until
    the attempt begins, the session is queued for its host's slot."""
    with leases.connect(_url()) as conn:
        return owners.grant_waiting(conn, session, host, attempt_id, _task_of(attempt_id))


def _task_of(attempt_id: str) -> str:
    """The task (workflow id `herd:SESSION:N`) of an attempt `herd:SESSION:N:K:on:HOST`."""
    return attempt_id.rsplit(":", 3)[0]


@DBOS.step(name="herd.choose_host")
def choose_host(session: str, allowed: list[str] | None) -> str | None:
    """A live host for the session's next attempt, the least loaded (None: no host now)."""
    with leases.connect(_url()) as conn:
        live = leases.hosts(conn)
    load: dict[str, int] = {}
    for attempt in DBOS.list_workflows(  # attempts running or waiting on each host's queue
        name="herd.host_task", status=["PENDING", "ENQUEUED"], load_input=False, load_output=False
    ):
        host = str(attempt.queue_name or "").removeprefix(HOST_QUEUE_PREFIX)
        load[host] = load.get(host, 0) + 1
    try:
        return place(session, allowed, live, load)
    except NoHost:
        return None


@DBOS.step(name="herd.await_attempt")
def await_attempt(attempt_id: str, host: str) -> dict[str, Any] | None:
    """Wait for an attempt on `host` to end: its outcome; None when its host was proven dead
    first (lease and grace run out: the attempt is cancelled, the host has fenced itself) or
    the engine cancelled it so. A database outage only delays the answer."""
    while True:
        try:
            ended, outcome = _look(attempt_id, host)
        except Exception as exc:  # the database is away: the host keeps its agent meanwhile
            if _Local.closed.is_set():  # herd down: nothing is recorded, recovery looks again
                raise
            log.warning("%s: cannot look at the attempt (%s); trying again", attempt_id, exc)
            _Local.closed.wait(HOST_WAIT_S)
            continue
        if ended:
            return outcome
        time.sleep(POLL_S)


def _look(attempt_id: str, host: str) -> tuple[bool, dict[str, Any] | None]:
    """One look at an attempt: (True, its outcome or None to move on) once it ended."""
    status = DBOS.get_workflow_status(attempt_id)
    if status is not None and status.status == "SUCCESS":
        return True, dict(status.output or {})
    if status is not None and status.status in ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
        return True, {"host": host, "state": "failed", "reason": "engine", "exit": 1}
    if status is not None and status.status == "CANCELLED":
        # Only `herd stop` records a stop: any other cancel was the engine's, for a dead host.
        with leases.connect(_url()) as conn:
            reason = owners.stop_reason(conn, _task_of(attempt_id))
        if reason is None:
            return True, None
        return True, {"host": host, "state": "stopped", "reason": reason, "exit": 3}
    with leases.connect(_url()) as conn:
        alive = any(h.alive for h in leases.hosts(conn) if h.name == host)
    if not alive:
        DBOS.cancel_workflow(attempt_id)
        return True, None
    return False, None


@DBOS.workflow(name="herd.session_task")
def session_task(session: str, host: str, allowed: list[str] | None = None) -> dict[str, Any]:
    """A session's task: holds a fleet-wide slot and runs attempts on hosts' own queues until
    one ends; an attempt whose host died is cancelled (or that was fenced ends) and the next
    is placed on a live host, under a new fencing token."""
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
        token = grant_attempt(session, host, attempt_id)
        with SetWorkflowID(attempt_id):
            queue.enqueue(host_task, session, token)
        outcome = await_attempt(attempt_id, host)
        if outcome is not None and outcome.get("reason") not in MOVE_ON:
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
    _Local.closed.clear()
    DBOS(
        config={
            "name": APP_NAME,
            "system_database_url": url,
            "executor_id": host,
            "application_version": APP_VERSION,
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": QUEUE_POLL_S,
        }
    )
    DBOS.listen_queues([FLEET_QUEUE, host_queue(host)])
    DBOS.launch()
    DBOS.register_queue(
        FLEET_QUEUE,
        global_concurrency=max_sessions,
        polling_interval_sec=QUEUE_POLL_S,
        on_conflict="always_update",
    )
    DBOS.register_queue(
        host_queue(host),
        worker_concurrency=max_sessions_per_host,
        polling_interval_sec=QUEUE_POLL_S,
        on_conflict="always_update",
    )


def shutdown() -> None:
    """Stop DBOS in this process (its pending workflows stay pending for recovery)."""
    DBOS.destroy()
    _Local.closed.set()
    _Local.client = _Local.host = _Local.url = None
    _Local.before_start = None
    _Local.ownership = None


def recover(hosts: list[str]) -> int:
    """Re-enqueue the pending workflows of dead hosts, on the queue each was on.

    Through DBOS's public calls: list, then resume. Unlike DBOS's own (private) recovery the
    two are not one statement, which is safe because only the host that claimed the dead
    hosts in the leases table (`leases.claim_dead`, one transaction) calls this for them.
    """
    pending = DBOS.list_workflows(
        status="PENDING",
        executor_id=hosts,
        app_version=APP_VERSION,
        load_input=False,
        load_output=False,
    )
    for workflow in pending:
        DBOS.resume_workflow(workflow.workflow_id, queue_name=workflow.queue_name)
    return len(pending)


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
            "app_version": APP_VERSION,
        },
        session,
        host,
        allowed,
    )
    return str(handle.get_workflow_id())
