"""The ASGI app of `herd web`: its routes, each a client of the daemon's control API, behind the
guard (tui/web/guard.py). Pages are rendered here on the server; the streams keep them live."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from agentherd.sessions.records import Event
from agentherd.sessions.status import LogInfoReply, SessionStatus, parse_reply, parse_status
from agentherd.supervisor.api.protocol import ApiError
from agentherd.tui.dashboard.tabtext import read_progress
from agentherd.tui.web.actions import ACTIONS, Signer, confirm_page
from agentherd.tui.web.bind import Bind
from agentherd.tui.web.diffpage import WORK, diff_page
from agentherd.tui.web.fleetpage import fleet_page, session_href
from agentherd.tui.web.gatepage import gate_page, refused_page
from agentherd.tui.web.guard import Guard
from agentherd.tui.web.hub import FleetHub
from agentherd.tui.web.layout import Writer, page
from agentherd.tui.web.logtail import TAIL_LINES, Lines, tail
from agentherd.tui.web.sessionpage import EVENTS_SHOWN, SessionView, session_page
from agentherd.tui.web.streams import Pace, fleet_stream, session_stream

STATIC_TYPES = {"web.js": "text/javascript", "web.css": "text/css"}
"""The only files served besides pages: the style and the little script."""

FORM_MAX_BYTES = 4096
"""A confirmation form is a few dozen bytes; a bigger body is not one."""

EVENT_PAGE = 1000
"""Events read per request (the daemon's page)."""

STATUS_CODES = {
    "unknown-session": 404,
    "unknown-checkpoint": 404,
    "bad-request": 400,
    "bad-state": 409,
    "forbidden": 403,
    "no-daemon": 503,
    "busy": 503,
}
"""The daemon's error codes as HTTP statuses; any other is the daemon's failure (502)."""


class WebApp:
    """What every route shares: the daemon's client, the fleet hub, the escaper, the bind."""

    def __init__(self, client: Any, bind: Bind, esc: Writer, pace: Pace | None = None) -> None:
        self.client = client
        self.bind = bind
        self.esc = esc
        self.pace = pace or Pace()
        self.hub = FleetHub(client)
        self.signer = Signer(secrets.token_bytes(32))
        folder = resources.files("agentherd.tui.web") / "static"
        self.static = {name: (folder / name).read_bytes() for name in STATIC_TYPES}

    def refused(self, exc: ApiError) -> HTMLResponse:
        """The daemon's refusal as a page with the status code a browser understands."""
        body = page("herd web", f"<main><p>{self.esc(exc.message)}</p></main>", live=False)
        return HTMLResponse(body, STATUS_CODES.get(exc.code, 502))

    async def _status(self, name: str) -> SessionStatus:
        """One session's status (ApiError when the daemon knows no such session)."""
        status = parse_status(await self.client.call("status", target=name))
        if not isinstance(status, SessionStatus):
            raise ApiError("unknown-session", f"no session named {name!r}")
        return status

    async def fleet(self, request: Request) -> Response:
        """`/`: every session, those that need a person first."""
        try:
            statuses: list[SessionStatus] = parse_reply("ls", await self.client.call("ls"))
        except ApiError as exc:
            return self.refused(exc)
        return HTMLResponse(fleet_page(statuses, self.esc))

    async def fleet_events(self, request: Request) -> Response:
        """`/stream`: the fleet's table whenever it changes."""
        return _stream(fleet_stream(self.hub, self.esc, self.pace))

    async def session(self, request: Request) -> Response:
        """`/session/NAME`: everything the page shows of one session."""
        name = request.path_params["name"]
        try:
            view = await self._view(name)
        except ApiError as exc:
            return self.refused(exc)
        return HTMLResponse(session_page(view, self.esc, self.bind.allow_actions))

    async def _view(self, name: str) -> SessionView:
        """What the session's page is made of; a part that cannot be read is named, not fatal."""
        status = await self._status(name)
        info: LogInfoReply = parse_reply("log_info", await self.client.call("log_info", name=name))
        output = Lines()
        if info.path is not None:
            output = await anyio.to_thread.run_sync(
                tail, Path(info.path), TAIL_LINES, not info.live
            )
        view = SessionView(status=status, output=output, run=info.run)
        view.progress = await anyio.to_thread.run_sync(read_progress, info.progress)
        try:
            view.events = await self._events(name)
        except ApiError as exc:
            view.unreadable.append(f"events: {exc.message}")
        try:
            spend = parse_reply("spend", await self.client.call("spend", name=name))
            view.samples = spend.samples
        except ApiError as exc:
            view.unreadable.append(f"spend over time: {exc.message}")
        try:
            reply = parse_reply("report", await self.client.call("report", name=name))
            view.report, view.markdown = reply.report, reply.markdown
        except ApiError as exc:
            view.unreadable.append(f"report: {exc.message}")
        return view

    async def _events(self, name: str) -> list[Event]:
        """The session's newest events, page by page as the daemon gives them."""
        events: list[Event] = []
        since = 0
        while True:
            found: list[Event] = parse_reply(
                "events",
                await self.client.call("events", session=name, since=since, limit=EVENT_PAGE),
            )
            events = (events + found)[-EVENTS_SHOWN:]
            if len(found) < EVENT_PAGE:
                return events
            since = found[-1].seq

    async def diff(self, request: Request) -> Response:
        """`/session/NAME/diff/SHA` (or `/diff/work`): what a checkpoint or the uncommitted
        work changed, against the previous checkpoint or (`?against=verified`) the last
        verified one."""
        name, which = request.path_params["name"], request.path_params["checkpoint"]
        against = "verified" if request.query_params.get("against") == "verified" else "previous"
        where = {"work": True} if which == WORK else {"checkpoint": which}
        try:
            found = await self.client.call("diff", name=name, against=against, texts=True, **where)
        except ApiError as exc:
            return self.refused(exc)
        return HTMLResponse(diff_page(parse_reply("diff", found), self.esc))

    async def session_events(self, request: Request) -> Response:
        """`/session/NAME/stream`: its head and its output, from where the page left off."""
        name = request.path_params["name"]
        run, offset = _resume_at(request)
        try:  # an unknown session is refused before the stream begins
            await self._status(name)
        except ApiError as exc:
            return self.refused(exc)

        async def log_info() -> Any:
            return await self.client.call("log_info", name=name)

        allow = self.bind.allow_actions
        stream = session_stream(name, self.hub, log_info, self.esc, self.pace, run, offset, allow)
        return _stream(stream)

    async def confirm(self, request: Request) -> Response:
        """`GET /session/NAME/VERB`: the question before an action, with its signed form."""
        name, verb = request.path_params["name"], request.path_params["verb"]
        if verb not in ACTIONS:
            return HTMLResponse(page("herd web", "<p>no such page</p>", live=False), 404)
        if not self.bind.allow_actions:
            return _actions_off()
        try:
            status = await self._status(name)
        except ApiError as exc:
            return self.refused(exc)
        token = self.signer.sign(verb, name)
        return HTMLResponse(confirm_page(status, verb, token, self.esc))

    async def act(self, request: Request) -> Response:
        """`POST /session/NAME/VERB`: the action, when its confirmation is good."""
        name, verb = request.path_params["name"], request.path_params["verb"]
        if verb not in ACTIONS:
            return HTMLResponse(page("herd web", "<p>no such action</p>", live=False), 404)
        if not self.bind.allow_actions:
            return _actions_off()
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > FORM_MAX_BYTES:
                return HTMLResponse("form too large", 413)
        form = parse_qs(body.decode("latin-1"))
        token, link = (form.get("confirm") or [""])[0], (form.get("link") or [""])[0]
        why = self.signer.check(token, verb, name)
        if why is not None:
            return HTMLResponse(page("herd web", f"<p>{self.esc(why)}</p>", live=False), 403)
        try:
            if verb == "stop":
                await self.client.call("stop", name=name, no_wait=True)
            elif verb == "restart":
                await self.client.call("restart", name=name)
            else:
                await self.client.call(verb, name=name, **_answered_by(request, link))
        except ApiError as exc:
            return self.refused(exc)
        return RedirectResponse(session_href(name), status_code=303)

    async def gate(self, request: Request) -> Response:
        """`GET /session/NAME/gate?link=...`: a notification's approval link (checked by the
        daemon that signed it), the evidence, then Approve and Reject."""
        name = request.path_params["name"]
        if not self.bind.allow_actions:
            return _actions_off()
        link = request.query_params.get("link", "")
        try:
            status = await self._status(name)
            found = await self.client.call("link_ok", name=name, token=link) if link else None
        except ApiError as exc:
            return self.refused(exc)
        reply = parse_reply("link_ok", found) if found else None
        if reply is None or not reply.ok:
            why = reply.why if reply else "this address carries no approval link"
            return HTMLResponse(refused_page(str(why), self.esc), 403)
        return HTMLResponse(gate_page(status, link, self.signer, self.esc))

    async def static_file(self, request: Request) -> Response:
        """`/static/web.js` and `/static/web.css`, read once at start."""
        name = request.path_params["file"]
        if name not in self.static:
            return Response("not found", 404)
        return Response(self.static[name], media_type=STATIC_TYPES[name])

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        """The hub's subscription lives as long as the server."""
        async with anyio.create_task_group() as group:
            group.start_soon(self.hub.run)
            yield
            group.cancel_scope.cancel()

    def routes(self) -> list[Route]:
        """Every path the server answers."""
        return [
            Route("/", self.fleet),
            Route("/stream", self.fleet_events),
            Route("/static/{file}", self.static_file),
            Route("/session/{name}", self.session),
            Route("/session/{name}/stream", self.session_events),
            Route("/session/{name}/diff/{checkpoint}", self.diff, methods=["GET"]),
            Route("/session/{name}/gate", self.gate, methods=["GET"]),
            Route("/session/{name}/{verb}", self.confirm, methods=["GET"]),
            Route("/session/{name}/{verb}", self.act, methods=["POST"]),
        ]


def _actions_off() -> HTMLResponse:
    """The answer to any action while this server only reads."""
    why = "Actions are off: this herd web only reads. Start it with `herd web --allow-actions`."
    return HTMLResponse(page("herd web", f"<main><p>{why}</p></main>", live=False), 403)


def _answered_by(request: Request, link: str) -> dict[str, str]:
    """Who answers a gate and from where, for the event log (and the link, which it spends)."""
    where = request.client.host if request.client else "an unknown address"
    agent = request.headers.get("user-agent", "")[:120]
    answer = {
        "by": "herd web, through a notification's approval link" if link else "herd web",
        "origin": f"{where} ({agent})" if agent else where,
    }
    return answer | ({"link": link} if link else {})


def _resume_at(request: Request) -> tuple[int | None, int]:
    """(run, offset) to stream from: a reconnect's Last-Event-ID, else the page's query."""
    last = request.headers.get("last-event-id", "")
    run_text, _, offset_text = last.partition(":")
    if not (run_text.isdigit() and offset_text.isdigit()):
        run_text = request.query_params.get("run", "")
        offset_text = request.query_params.get("offset", "")
    run = int(run_text) if run_text.isdigit() else None
    offset = int(offset_text) if offset_text.isdigit() and run is not None else 0
    return run, offset


def _stream(source: AsyncIterator[bytes]) -> StreamingResponse:
    """An event stream no proxy buffers or caches."""
    return StreamingResponse(
        source,
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


def build(client: Any, bind: Bind, esc: Writer, pace: Pace | None = None) -> Guard:
    """The whole app: the routes behind the guard."""
    web = WebApp(client, bind, esc, pace)
    app = Starlette(routes=web.routes(), lifespan=web.lifespan)
    return Guard(app, bind)
