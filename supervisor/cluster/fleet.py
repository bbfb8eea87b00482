"""The fleet across hosts, as seen from any machine that reaches PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from agentherd.sessions import status_builder
from agentherd.sessions.clusterconfig import host_names
from agentherd.sessions.config import HerdConfig
from agentherd.sessions.records import Event
from agentherd.sessions.states import (
    ACTIVE_STATES,
    WAIT_EXIT_CODES,
    WAIT_TIMEOUT_EXIT,
    State,
    task_state,
)
from agentherd.sessions.status import (
    ReportReply,
    SendReply,
    SessionStatus,
    StartReply,
    TaskStatus,
    WaitReply,
)
from agentherd.supervisor.api.protocol import ApiError
from agentherd.supervisor.cluster import leases, owners, view
from agentherd.supervisor.cluster.placement import NoHost, place

ACTIVE = ["PENDING", "ENQUEUED"]
ENDED_BADLY = ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
EVENTS_PAGE = 1000
FOLLOW_POLL_S = 0.2
"""How often `herd events -f` across hosts looks for new events."""


def _engine() -> Any:
    """The engine module, imported on first use (DBOS is slow to import; `ls` needs none)."""
    from agentherd.supervisor.cluster import engine

    return engine


def _shown(name: str, row: view.Row | None, waits: tuple[str, str] | None) -> SessionStatus:
    """The status a viewer shows: the row that speaks for the session, or `queued` (reason
    `fleet-limit` or `host-limit`) while its task waits for a slot and no live host runs it."""
    status = view.speaking(row) if row else status_builder.never_seen(name)
    if waits is None or row is not None and row.alive and status.state in ACTIVE_STATES:
        return status
    task, reason = waits
    number = task.rsplit(":", 1)[1]
    return status.model_copy(
        update={
            "state": State.QUEUED,
            "task_state": task_state(State.QUEUED),
            "reason": reason,
            "handle": f"{name}/{number}",
        }
    )


class ClusterFleet:
    """The fleet across hosts: tasks through the engine, the view from what hosts publish."""

    def __init__(self, config: HerdConfig, url: str) -> None:
        self.config = config
        self.url = url
        self._dbos: Any = None

    @property
    def dbos(self) -> Any:
        """The engine's client, made on first use: reading the view needs only PostgreSQL
        (importing DBOS costs about a second)."""
        if self._dbos is None:
            self._dbos = _engine().client_for(self.url)
        return self._dbos

    def close(self) -> None:
        """Drop the engine's connections."""
        if self._dbos is not None:
            self._dbos.destroy()

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

    def may_autostart(self, name: str) -> bool:
        """`herd up` starts a session that never had a task, or whose task is active (its
        handle again); not one that ended."""
        tasks = self._tasks(name)
        return not tasks or any(t.status in ACTIVE for t in tasks)

    def start(self, name: str, now: bool = False) -> StartReply:
        """Place the session's next task on a host and enqueue it (already queued or running:
        that task's handle); `now` changes nothing here: chaining is one machine's."""
        session = self.config.session(name)
        if session is None:
            raise ApiError("unknown-session", f"no session named {name!r} in {self.config.path}")
        live = self.hosts()
        if not any(h.alive and h.ready for h in live):  # nor has any made the engine's tables
            raise NoHost("no host has joined the cluster yet; start `herd daemon --host NAME`")
        tasks = self._tasks(name)
        active = [t for t in tasks if t.status in ACTIVE]
        if active:
            number = int(active[-1].workflow_id.rsplit(":", 1)[1])
            return StartReply(handle=f"{name}/{number}", session=name, state="starting")
        allowed = host_names(session.host)
        host = place(name, allowed, live, self._load())
        number = len(tasks) + 1
        workflow_id = _engine().task_id(name, number)
        with leases.connect(self.url) as conn:  # first: its attempt's start clears it
            owners.wait_for_slot(conn, name, workflow_id, owners.FLEET_LIMIT)
        _engine().enqueue_task(self.dbos, name, number, host, allowed)
        return StartReply(handle=f"{name}/{number}", session=name, state="starting")

    def send(
        self, name: str, text: str, wait: bool = False, timeout_s: float | None = None
    ) -> SendReply:
        """Not across hosts: the waiting message lives with the session on its host."""
        raise ApiError(
            "bad-request",
            "herd send is not offered across hosts yet: run it against the daemon of the host "
            f"that holds {name} (`herd -c` with that host's herd.toml)",
        )

    def wait(
        self, target: str, timeout_s: float | None = None, until: Sequence[str] | None = None
    ) -> WaitReply:
        """Block until the cluster task `NAME/N` ends (or `timeout_s` passes)."""
        if until is not None:
            raise ApiError(
                "bad-request",
                "herd wait --until is not offered across hosts yet: run it against the daemon "
                "of the host that holds the session",
            )
        name, _, number = target.partition("/")
        workflow_id = _engine().task_id(name, int(number or len(self._tasks(name))))
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            found = self.dbos.list_workflows(workflow_ids=[workflow_id])
            status = found[0] if found else None
            if status is not None and status.status == "SUCCESS":
                out = status.output
                return WaitReply(
                    handle=target, state=out["state"], reason=out.get("reason"), exit=out["exit"]
                )
            if status is not None and status.status == "CANCELLED":  # `herd stop`
                return WaitReply(
                    handle=target,
                    state="stopped",
                    reason="user",
                    exit=WAIT_EXIT_CODES[State.STOPPED],
                )
            if status is not None and status.status in ENDED_BADLY:
                return WaitReply(
                    handle=target,
                    state="failed",
                    reason="engine",
                    exit=WAIT_EXIT_CODES[State.FAILED],
                )
            if deadline is not None and time.monotonic() > deadline:
                return WaitReply(handle=target, state=State.STARTING, exit=WAIT_TIMEOUT_EXIT)
            time.sleep(_engine().POLL_S)

    def task_host(self, target: str) -> str | None:
        """The host that ran (or runs) the task `NAME/N`, once it has one."""
        name, _, number = target.partition("/")
        found = self.dbos.list_workflows(
            workflow_id_prefix=_engine().task_id(name, int(number)) + ":",
            name="herd.host_task",
            load_output=False,
            load_input=False,
        )
        attempts = sorted(found, key=lambda wf: wf.created_at or 0)
        return (
            str(attempts[-1].queue_name).removeprefix(_engine().HOST_QUEUE_PREFIX)
            if attempts
            else None
        )

    def _row(self, name: str) -> view.Row | None:
        """The row that speaks for `name` (None: no host has published it)."""
        with view.connect(self.url) as conn:
            return view.merged(view.rows(conn, name)).get(name)

    def _known(self, name: str) -> None:
        if self.config.session(name) is None and self._row(name) is None:
            raise ApiError("unknown-session", f"no session named {name!r} in {self.config.path}")

    def _owner(self, name: str) -> str:
        """The live host that holds the session now (where it runs or last ran)."""
        self._known(name)
        row = self._row(name)
        if row is None or row.status.host is None and row.status.started_at is None:
            raise ApiError("bad-state", f"{name} has not run on any host yet")
        if not row.alive:
            raise ApiError(
                "bad-state", f"{name} last ran on host {row.host!r}, whose lease has expired"
            )
        return row.host

    def stop(self, name: str, kill: bool = False, no_wait: bool = False) -> SessionStatus:
        """End the task: cancel its workflow (so it never moves again) and its attempt not
        yet begun, and have the host running it stop it (acknowledged)."""
        self._known(name)
        active = [t for t in self._tasks(name) if t.status in ACTIVE]
        hosts: list[str] = []
        if active:
            with leases.connect(self.url) as conn:  # its hosts made the table when they joined
                for task in active:  # first: the engine then knows who cancelled
                    owners.record_stop(conn, task.workflow_id, "user")
                owners.slot_taken(conn, name)  # it waits for no slot any more
        for task in active:
            self.dbos.cancel_workflow(task.workflow_id)
            for attempt in self._attempts(task.workflow_id):
                if attempt.status == "ENQUEUED":
                    self.dbos.cancel_workflow(attempt.workflow_id)
                elif attempt.status == "PENDING":
                    hosts.append(str(attempt.queue_name).removeprefix(_engine().HOST_QUEUE_PREFIX))
        row = self._row(name)
        if not hosts and row is not None and row.alive and row.status.state in ACTIVE_STATES:
            hosts.append(row.host)  # started on its host outside the engine
        args = {"kill": kill, "no_wait": no_wait}
        replies = [view.send_command(self.url, h, name, "stop", args) for h in hosts]
        if replies and replies[-1]:
            return status_builder.on_host(replies[-1], hosts[-1])
        status = view.speaking(row) if row else status_builder.never_seen(name)
        if active:
            number = int(active[-1].workflow_id.rsplit(":", 1)[1])
            return status.model_copy(
                update={"state": State.STOPPED, "reason": "user", "handle": f"{name}/{number}"}
            )
        return status

    def _attempts(self, workflow_id: str) -> list[Any]:
        found = self.dbos.list_workflows(
            workflow_id_prefix=workflow_id + ":", name="herd.host_task", load_output=False
        )
        return sorted(found, key=lambda wf: wf.created_at or 0)

    def restart(self, name: str, from_rev: str | None = None) -> StartReply:
        """Stop the task, then begin a new one, placed afresh."""
        if from_rev is not None:
            raise ApiError(
                "bad-request",
                "--from is not offered across hosts: the checkpoint is in the host's own "
                "worktree; stop the session, then run `herd restart NAME --from REV` against "
                "that host's daemon",
            )
        self.stop(name)
        return self.start(name)

    def control(self, verb: str, name: str, **args: Any) -> SessionStatus:
        """pause, resume, approve, reject or ack, done by the host that holds the session."""
        host = self._owner(name)
        reply = view.send_command(self.url, host, name, verb, args)
        return status_builder.on_host(reply, host)

    def status(self, target: str | None = None) -> list[SessionStatus] | SessionStatus | TaskStatus:
        """Every session, one session (the row that speaks for it), or one task NAME/N."""
        if target is None:
            return self.list()
        name, slash, number = target.partition("/")
        self._known(name)
        if not slash:
            row = self._row(name)
            with view.connect(self.url) as conn:
                waits = owners.waiting(conn).get(name)
            return _shown(name, row, waits)
        return self._task_status(name, int(number) if number.isdigit() else 0, target)

    def _task_status(self, name: str, number: int, target: str) -> TaskStatus:
        found = self.dbos.list_workflows(workflow_ids=[_engine().task_id(name, number)])
        if not found:
            raise ApiError("unknown-task", f"{name} has no task {target!r}")
        task = found[0]
        host = self.task_host(target)
        if task.status == "SUCCESS":
            out = task.output or {}
            handle = out.get("handle") or ""
            run = int(handle.rsplit("/", 1)[1]) if "/" in handle else 0
            state = State(out["state"])
            reason = out.get("reason")
        elif task.status == "CANCELLED":
            run, state, reason = 0, State.STOPPED, "user"
        elif task.status in ENDED_BADLY:
            run, state, reason = 0, State.FAILED, "engine"
        else:
            row = self._row(name)
            active = row is not None and row.host == host and row.status.state in ACTIVE_STATES
            run = row.status.run or 0 if active and row else 0
            state = row.status.state if active and row else State.STARTING
            reason = None
            with view.connect(self.url) as conn:
                waits = owners.waiting(conn).get(name)
            if not active and waits is not None and waits[0] == task.workflow_id:
                state, reason = State.QUEUED, waits[1]
        return TaskStatus(
            session=name,
            handle=target,
            run=run,
            state=state,
            task_state=task_state(state),
            reason=reason,
            host=host,
        )

    def list(self) -> list[SessionStatus]:
        """Every session of herd.toml (and any a host has that it does not), with its host."""
        with view.connect(self.url) as conn:
            best = view.merged(view.rows(conn))
            waits = owners.waiting(conn)
        names = [s.name for s in self.config.sessions]
        names += sorted(n for n in best if n not in names)
        return [_shown(n, best.get(n), waits.get(n)) for n in names]

    def events(self, since: int = 0, session: str | None = None) -> Iterator[Event]:
        """Every host's events after the fleet-wide `since`, page by page."""
        with view.connect(self.url) as conn:
            while True:
                page = view.events(conn, since, session, EVENTS_PAGE)
                yield from page
                if len(page) < EVENTS_PAGE:
                    return
                since = page[-1].seq

    def follow(self, since: int = 0, session: str | None = None) -> Iterator[Event]:
        """Every host's events after `since`, then each new one as its host publishes it."""
        with view.connect(self.url) as conn:
            while True:
                page = view.events(conn, since, session, EVENTS_PAGE)
                yield from page
                if page:
                    since = page[-1].seq
                else:
                    time.sleep(FOLLOW_POLL_S)

    def report(self, name: str) -> ReportReply:
        """The session's report, made by the host that holds it and shipped back (bounded)."""
        host = self._owner(name)
        reply = view.send_command(self.url, host, name, "report")
        return ReportReply.model_validate(reply)
