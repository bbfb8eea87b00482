"""The control API's operations: what each request does to the daemon's sessions."""

from __future__ import annotations

import difflib
import functools
import os
import time
from collections.abc import Mapping
from typing import Any

import anyio

from agentherd.sessions import chain, lifecycle, status_builder
from agentherd.sessions.records import Event
from agentherd.sessions.states import (
    TERMINAL_STATES,
    WAIT_EXIT_CODES,
    WAIT_TIMEOUT_EXIT,
    State,
)
from agentherd.sessions.status import (
    DaemonInfo,
    DownReply,
    LogInfoReply,
    RecordedReply,
    ReloadReply,
    ReportReply,
    SessionStatus,
    ShutdownReply,
    Snapshot,
    SpendReply,
    StartReply,
    TaskStatus,
    WaitReply,
)
from agentherd.sessions.times import iso, utc_now
from agentherd.supervisor.api import calllog, diffop, gateops, sendwait, server, statusfeed, trust
from agentherd.supervisor.api.host import Host
from agentherd.supervisor.api.opargs import checked
from agentherd.supervisor.api.protocol import HERD_VERSION, ApiError, RawJSON
from agentherd.supervisor.api.trust import PERSON, Scope
from agentherd.supervisor.checks.reporting import session_report
from agentherd.supervisor.files.paths import OUTPUT_FILE, run_dir
from agentherd.supervisor.process.peer import Peer
from agentherd.supervisor.session import fleetstart
from agentherd.supervisor.session.context import Timings
from agentherd.supervisor.session.errors import SessionError
from agentherd.supervisor.session.supervisor import SessionSupervisor

BEFORE_RECONCILED = frozenset({"info", "shutdown"})
"""Operations answered while the sessions are still being reconciled: they read no session."""
SNAPSHOT_INTERVAL_S = 0.05
"""Subscribers get at most 20 snapshots a second, each replacing the last."""


PRINTED_INDENT = 2
"""`--json` prints JSON indented by this many spaces (tui/cli/common.py's `json.dumps`)."""
LISTED_NAMES = 20
"""An unknown name's error lists the fleet's names up to this many; a larger fleet's, the
closest few (a fleet of 1,000 made a line of 6,000 characters)."""


def known_names(name: object, fleet: Mapping[str, object]) -> str:
    """The names to offer for an unknown session name: all of a small fleet, else the closest."""
    if len(fleet) <= LISTED_NAMES:
        return "sessions: " + (", ".join(sorted(fleet)) or "none")
    close = difflib.get_close_matches(str(name), list(fleet), n=3)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return f"{hint}{len(fleet)} sessions; `herd ls` lists them"


class ControlApi:
    """One method per operation (`op_<name>`); the daemon's server calls `handle`."""

    def __init__(self, daemon: Host) -> None:
        self.daemon = daemon
        self.status_cache = statusfeed.StatusCache()
        """Status JSON per session for `subscribe` with `changes`, shared by subscribers."""

    def _session(self, name: Any, scope: Scope = PERSON) -> SessionSupervisor:
        fleet = self._fleet(scope)
        if not isinstance(name, str) or name not in fleet:
            raise ApiError(
                "unknown-session", f"no session named {name!r} ({known_names(name, fleet)})"
            )
        return fleet[name]

    def _fleet(self, scope: Scope) -> Mapping[str, SessionSupervisor]:
        """The sessions the asker may see: all of them for a person."""
        if scope.person:
            return self.daemon.sessions
        return trust.VisibleFleet(self.daemon.sessions, scope, lambda: self.daemon.config)

    def _scope(self, peer: Peer) -> Scope:
        """Who asks (api/trust.py): a person, or an agent from inside some sessions."""
        daemon = self.daemon
        return trust.scope_of(
            peer.lineage, trust.FleetRuns(daemon.sessions, daemon.store), daemon.state_dir
        )

    async def handle(self, request: dict[str, Any], send: server.Sender, peer: Peer) -> None:
        """Answer one request of `peer`, if it may ask it; streaming ops call `send` repeatedly."""
        request = checked(request)
        scope = self._scope(peer)
        trust.authorize(request, scope, self.daemon.config)
        method = getattr(self, f"op_{str(request['op']).replace('-', '_')}")
        if request["op"] not in BEFORE_RECONCILED:
            # A request that came while the sessions were still being reconciled would act on
            # states read from the store: a start then launched a run the reconcile adopted
            # again as a second follower's.
            await self.daemon.reconciled.wait()
        try:
            await method(request, send, scope)
        except SessionError as exc:
            raise ApiError("bad-state", str(exc)) from None

    def _statuses(self, scope: Scope) -> RawJSON:
        """Every session's status the asker may see, as JSON text: the `fleet` object made
        once for all (each status carries it), each status by pydantic's serializer."""
        return RawJSON(f"[{','.join(self._status_texts(scope, indent=None))}]")

    def _status_texts(self, scope: Scope, indent: int | None, archived: bool = True) -> list[str]:
        """Each status the asker may see as JSON text (`indent`ed, as `--json` prints it)."""
        assert self.daemon.ctx is not None  # served only once the daemon has its context
        fleet = self.daemon.ctx.fleet_spend()
        texts = []
        for supervisor in self._fleet(scope).values():
            if not archived and supervisor.config.archived:
                continue
            status = supervisor.status(with_fleet=False)
            status.fleet = fleet
            texts.append(status.to_json_text(indent))
        return texts

    def _printed(self, request: dict[str, Any], scope: Scope) -> str:
        """The statuses as `herd ls --json` prints them: an indented list, made by pydantic's
        serializer here (the stdlib's indenting encoder is Python: at 1,000 sessions, 2 MB,
        the command's CPU went 92 -> 33 ms); `archived: false` leaves archived sessions out."""
        archived = request.get("archived") is not False
        texts = self._status_texts(scope, indent=PRINTED_INDENT, archived=archived)
        if not texts:
            return "[]"
        nested = ",\n  ".join(text.replace("\n", "\n  ") for text in texts)
        return f"[\n  {nested}\n]"

    async def op_ls(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        if request.get("printed"):
            await send(result=self._printed(request, scope))
            return
        await send(result=self._statuses(scope))

    async def op_status(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        target = request.get("target")
        if not target:
            await send(
                result=self._printed(request, scope)
                if request.get("printed")
                else self._statuses(scope)
            )
            return
        await send(result=self._target_status(str(target), scope).to_json())

    def _target_status(self, target: str, scope: Scope) -> SessionStatus | TaskStatus:
        """A session's status, or a task's when given a handle like api/3."""
        if "/" not in target:
            return self._session(target, scope).status()
        name, _, number = target.partition("/")
        supervisor = self._session(name, scope)
        if supervisor.record.handle == target:
            return supervisor.status()
        assert self.daemon.store is not None
        task = self.daemon.store.task(target)
        if task is None:
            raise ApiError(
                "unknown-handle", f"no task {target!r}; `herd status {name}` shows the current one"
            )
        return status_builder.task_status(name, target, task)

    async def op_start(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        supervisor = _not_archived(self._session(request.get("name"), scope))
        handle = await supervisor.start(now=bool(request.get("now")))
        await send(result=_started(supervisor, handle))

    async def op_up(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        with self.daemon.fleet_starts.one():  # the boot's git reads wait for the starts
            await self._up(request, send)

    async def _up(self, request: dict[str, Any], send: server.Sender) -> None:
        assert self.daemon.ctx is not None  # made before the sessions are reconciled
        fleet_budget = self.daemon.ctx.fleet_budget
        names = request.get("names") or [
            s.config.name
            for s in self.daemon.sessions.values()
            if lifecycle.wanted_by_up(s.config, s.record, fleet_budget)
        ]
        # An unknown or archived name starts none.
        supervisors = [_not_archived(self._session(name)) for name in names]
        async with anyio.create_task_group() as tg:
            for supervisor in supervisors:  # a `down` whose daemon was killed mid-stop ends first
                if lifecycle.up_finishes_stop(supervisor.record.state, supervisor.record.reason):
                    tg.start_soon(functools.partial(supervisor.stop, reason="down"))
        named = dict(zip(names, supervisors, strict=True))
        after_of = {name: supervisor.config.after for name, supervisor in named.items()}
        started: list[dict[str, object]] = []
        refused: list[str] = []
        # A chain's first links start before the links after them, which then queue behind
        # them instead of finding them idle.
        for wave in chain.start_waves(list(named), after_of):
            begun, refusals = await fleetstart.start_all([(n, named[n]) for n in wave])
            started += begun
            refused += refusals
        if refused:
            raise ApiError("bad-state", "; ".join(refused))
        await send(result=started)

    async def op_stop(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        supervisor = self._session(request.get("name"), scope)
        kill = bool(request.get("kill"))
        reason = request.get("reason") or "user"
        if request.get("no_wait"):
            assert self.daemon.task_group is not None
            self.daemon.task_group.start_soon(
                self.daemon.run_logged, functools.partial(supervisor.stop, kill=kill, reason=reason)
            )
        else:
            await supervisor.stop(kill=kill, reason=reason)
        await send(result=supervisor.status().to_json())

    async def op_restart(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        supervisor = self._session(request.get("name"), scope)
        source = request.get("from")
        try:
            handle = await supervisor.restart(source)
        except ValueError as exc:
            raise ApiError("bad-request", str(exc)) from None
        await send(result=_started(supervisor, handle))

    async def op_pause(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        supervisor = self._session(request.get("name"), scope)
        await supervisor.pause()
        await send(result=supervisor.status().to_json())

    async def op_resume(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        supervisor = self._session(request.get("name"), scope)
        await supervisor.resume_run()
        await send(result=supervisor.status().to_json())

    async def op_wait(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        target = str(request.get("target") or "")
        timeout_s = request.get("timeout_s")
        name = target.partition("/")[0]
        supervisor = self._session(name, scope)
        if request.get("until") is not None:
            if "/" in target:
                raise ApiError("bad-request", f"wait --until takes a session NAME, not {target!r}")
            wanted = sendwait.wanted_states(list(request["until"]))
            latest = lambda: self.daemon.changed  # noqa: E731  (a new Event after each set)
            waited = await sendwait.until_state(supervisor, wanted, timeout_s, latest)
            await send(result=waited.to_json())
            return
        handle = target if "/" in target else supervisor.record.handle
        if handle is None:
            raise ApiError("bad-state", f"{name} has never been started; `herd start {name}`")
        assert self.daemon.store is not None
        deadline = None if timeout_s is None else time.monotonic() + float(timeout_s)
        while True:
            task = self.daemon.store.task(handle)
            if task is None:
                raise ApiError("unknown-handle", f"no task {handle!r}")
            if task.state in TERMINAL_STATES:
                exit_code = WAIT_EXIT_CODES[State(task.state)]
                reply = WaitReply(
                    handle=handle, state=task.state, reason=task.reason, exit=exit_code
                )
                await send(result=reply.to_json())
                return
            changed = self.daemon.changed
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                reply = WaitReply(
                    handle=handle, state=task.state, reason=task.reason, exit=WAIT_TIMEOUT_EXIT
                )
                await send(result=reply.to_json())
                return
            with anyio.move_on_after(min(remaining or 1.0, 1.0)):
                await changed.wait()

    async def op_send(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        """`herd send`: a text for the session's next run (queued, or a run begun with it)."""
        supervisor = self._session(request.get("name"), scope)
        assert self.daemon.store is not None
        origin = "person" if scope.person else scope.where()
        latest = lambda: self.daemon.changed  # noqa: E731  (a new Event after each set)
        reply = await sendwait.send(supervisor, self.daemon.store, request, origin, latest)
        await send(result=reply.to_json())

    async def op_events(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        assert self.daemon.store is not None
        since = int(request.get("since") or 0)
        session = request.get("session")
        if session is not None:
            self._session(session, scope)
        follow = bool(request.get("follow"))
        limit = int(request.get("limit") or 1000)
        kinds = request.get("kinds")
        store = self.daemon.store

        def page() -> list[Event]:
            """The next events the asker may see (an agent: of its sessions only)."""
            among = None if scope.person or session is not None else list(self._fleet(scope))
            return store.events(since, session, kinds, limit=limit, among=among)

        if not follow:
            await send(result=[e.to_json() for e in page()])
            return
        while True:
            changed = self.daemon.changed
            events = page()
            for event in events:
                await send(stream=event.to_json())
                since = event.seq or since
            if not events:
                await changed.wait()

    async def op_subscribe(
        self, request: dict[str, Any], send: server.Sender, scope: Scope
    ) -> None:
        """Push coalesced snapshots of every session: at most one per SNAPSHOT_INTERVAL_S.

        With `changes`, one snapshot and then only what changed (supervisor/api/statusfeed.py).
        """
        if request.get("changes"):
            patches = bool(request.get("patches"))
            assert self.daemon.ctx is not None  # served only once the daemon has its context
            fleet, budgets = self._fleet(scope), self.daemon.ctx.budgets
            await statusfeed.stream_changes(fleet, budgets, self.status_cache, send, patches)
            return
        last_version = -1
        fleet = self._fleet(scope)
        while True:
            version = sum(s.version for s in fleet.values())
            if version != last_version:
                last_version = version
                sessions = [s.status() for s in fleet.values()]
                await send(stream=Snapshot(sessions=sessions, at=iso(utc_now())).to_json())
            await anyio.sleep(SNAPSHOT_INTERVAL_S)

    async def op_log_info(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        """Where a run's output (and the progress file) is, so clients read it themselves."""
        supervisor = self._session(request.get("name"), scope)
        number = int(request.get("run") or supervisor.record.run or 0)
        progress = supervisor.config.progress
        live = supervisor.run is not None and not supervisor.run.exited.is_set()
        path = run_dir(self.daemon.state_dir, supervisor.config.name, number) / OUTPUT_FILE
        reply = LogInfoReply(
            run=number or None,
            path=str(path) if number else None,
            current_run=supervisor.record.run,
            live=live and number == supervisor.record.run,
            progress=str(supervisor.config.cwd / progress) if progress else None,
            state=supervisor.record.state,
        )
        await send(result=reply.to_json())

    async def op_approve(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        """Adopt the current plan as the session's baseline (a person accepted the change)."""
        supervisor = self._session(request.get("name"), scope)
        await supervisor.approve(gateops.answered(self.daemon.ctx, request))
        await send(result=supervisor.status().to_json())

    async def op_reject(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        """Write the baseline plan back (keeping items that pass now) after a forbidden change."""
        supervisor = self._session(request.get("name"), scope)
        await supervisor.reject(gateops.answered(self.daemon.ctx, request))
        await send(result=supervisor.status().to_json())

    async def op_link_ok(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        """Whether a notification's approval link is good for the session now (not spent)."""
        supervisor = self._session(request.get("name"), scope)
        reply = gateops.link_reply(self.daemon.ctx, supervisor.config.name, request["token"])
        await send(result=reply)

    async def op_ack(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        """Acknowledge an open warning (or every one): it leaves the badge, stays in history."""
        supervisor = self._session(request.get("name"), scope)
        await supervisor.acknowledge(request.get("kind"))
        await send(result=supervisor.status().to_json())

    async def op_terminal_writer(
        self, request: dict[str, Any], send: server.Sender, scope: Scope
    ) -> None:
        """An attach began typing into an interactive run's terminal: the event log says who."""
        supervisor = self._session(request.get("name"), scope)
        by = "a person" if scope.person else f"an agent {scope.where()}"
        run, pid, tty = request["run"], request.get("pid"), request.get("tty")
        where = ", ".join(part for part in (tty, f"pid {pid}" if pid else None) if part)
        message = f"{by} types into run {run}'s terminal" + (f" ({where})" if where else "")
        desk = supervisor.desk
        event = desk.make_event("terminal-writer", message, run, by=by, pid=pid, tty=tty)
        desk.commit_events(event)
        await send(result=supervisor.status().to_json())

    async def op_spend(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        """A session's spend over time, for a chart: samples the budget keeper recorded."""
        supervisor = self._session(request.get("name"), scope)
        samples = supervisor.spend.samples_json()
        await send(result=SpendReply(session=supervisor.config.name, samples=samples).to_json())

    async def op_report(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        report = await session_report(self._session(request.get("name"), scope).desk)
        await send(result=ReportReply.model_validate(report).to_json())

    async def op_diff(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        """What a checkpoint or the uncommitted work changed (supervisor/api/diffop.py)."""
        supervisor = self._session(request.get("name"), scope)
        name, cwd = supervisor.config.name, supervisor.config.cwd
        store = self.daemon.store
        found = store.checkpoints(name, limit=diffop.CHECKPOINTS_LISTED) if store else []
        reply = await anyio.to_thread.run_sync(diffop.answer, name, cwd, found, request)
        await send(result=reply)

    async def op_down(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        """Stop every session gracefully, then the daemon; name whatever could not be stopped."""
        supervisors = list(self.daemon.sessions.values())
        waited_s = down_wait_s(supervisors, self.daemon.timings)
        with anyio.move_on_after(waited_s):
            async with anyio.create_task_group() as tg:
                for supervisor in supervisors:
                    tg.start_soon(functools.partial(supervisor.stop, reason="down"))
        left = [entry for s in supervisors if (entry := await s.left_running())]
        if self.daemon.ctx is not None:  # each ended task's report on disk before the reply
            await self.daemon.ctx.reports.drain(self.daemon.timings.report_drain_s)
        message = "daemon stopping (herd down)"
        if left:
            message += "; still running: " + "; ".join(
                f"{e.session} (pids {', '.join(map(str, e.pids))})" for e in left
            )
        self.daemon.commit_daemon_event("daemon-stopping", message)
        stopped = [s.status() for s in supervisors]
        await send(result=DownReply(stopped=stopped, left=left, waited_s=waited_s).to_json())
        self.daemon.request_shutdown()

    async def op_shutdown(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        """Exit the daemon and leave the agents running."""
        await send(result=ShutdownReply(pid=os.getpid()).to_json())
        self.daemon.request_shutdown()

    async def op_reload(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        await send(result=ReloadReply.model_validate(await self.daemon.reload()).to_json())

    async def op_mcp_call(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        """Record a tool call of `herd mcp` with its origin; the session's event if the caller
        may see it (a call it may not make is still recorded, as the daemon's)."""
        about = request.get("about")
        shown = about if about in self._fleet(scope) else None
        self.daemon.commit_event(calllog.call_event(request, scope, shown))
        await send(result=RecordedReply(recorded=True).to_json())

    async def op_info(self, request: dict[str, Any], send: server.Sender, scope: Scope) -> None:
        info = DaemonInfo(
            version=HERD_VERSION,
            pid=os.getpid(),
            config=str(self.daemon.config.path),
            state_dir=str(self.daemon.state_dir),
            started_at=self.daemon.started_at,
            reconcile_passes=self.daemon.reconcile_passes,
            sessions=sorted(self._fleet(scope)),
        )
        await send(result=info.to_json())


def down_wait_s(supervisors: list[SessionSupervisor], timings: Timings) -> float:
    """How long `herd down` waits: the longest stop_grace, the two kill waits, then a margin."""
    # stop_tree waits kill_wait_s after SIGKILL, then stop() waits as long again for the exit.
    longest_grace_s = max((s.config.stop_grace for s in supervisors), default=0.0)
    return max(0.0, longest_grace_s + 2 * timings.kill_wait_s + timings.down_margin_s)


def _not_archived(supervisor: SessionSupervisor) -> SessionSupervisor:
    """The session, unless it is archived: an archived session is never started."""
    name = supervisor.config.name
    if supervisor.config.archived:
        raise ApiError("bad-state", f"{name} is archived; `herd archive --undo {name}` first")
    return supervisor


def _started(supervisor: SessionSupervisor, handle: str) -> dict[str, Any]:
    """The reply of `start` and `restart`."""
    record = supervisor.record
    reply = StartReply(
        handle=handle,
        session=supervisor.config.name,
        state=record.state,
        reason=record.reason,
    )
    return reply.to_json()
