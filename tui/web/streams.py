"""The server-sent event streams that keep pages live: the fleet's table as it changes, and one
session's head and its run's output (complete lines, bounded per step, across runs).

Every fragment is rendered here, escaped, so the page's script only swaps it in.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from agentherd.sessions.status import LogInfoReply, SessionStatus, parse_reply
from agentherd.supervisor.api.protocol import ApiError
from agentherd.tui.web.fleetpage import fleet_fragment
from agentherd.tui.web.hub import FleetHub
from agentherd.tui.web.layout import Writer
from agentherd.tui.web.logtail import Follower
from agentherd.tui.web.sessionpage import head_fragment, output_lines


@dataclass(frozen=True)
class Pace:
    """How often streams look for news; injectable so tests wait on conditions, not seconds."""

    push_every_s: float = 0.5
    """A page takes news at most twice a second: live enough, and a phone's battery lasts."""
    log_poll_s: float = 0.25
    """How often a session's stream looks for new output: with logtail.STEP_BYTES a step, a
    page gets at most 256 KiB of output a second."""
    run_check_s: float = 1.0
    """How often it asks the daemon whether a newer run began."""
    keepalive_s: float = 15.0
    """A comment this often keeps proxies and phones from closing an idle stream."""


LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""What ends a line of an event stream: a lone CR in the data must not end the event's line."""


def sse(event: str, data: str, ident: str | None = None) -> bytes:
    """One server-sent event; a line break in the data becomes another `data:` line."""
    lines = [f"event: {event}"]
    if ident is not None:
        lines.append(f"id: {ident}")
    lines += [f"data: {line}" for line in LINE_BREAK.split(data)]
    return ("\n".join(lines) + "\n\n").encode()


KEEPALIVE = b": keepalive\n\n"


async def fleet_stream(hub: FleetHub, esc: Writer, pace: Pace) -> AsyncIterator[bytes]:
    """The fleet's table now, then again whenever it changed (at most every `push_every_s`)."""
    version, sent = 0, ""  # 0: the hub has no snapshot yet; wait for its first
    last_sent = time.monotonic()
    while True:
        version = await hub.newer_than(version, pace.keepalive_s)
        html = fleet_fragment(hub.statuses(), esc, hub.lost)
        if html != sent:
            sent, last_sent = html, time.monotonic()
            yield sse("fleet", html)
        elif time.monotonic() - last_sent >= pace.keepalive_s:
            last_sent = time.monotonic()
            yield KEEPALIVE
        await anyio.sleep(pace.push_every_s)


async def session_stream(
    name: str,
    hub: FleetHub,
    log_info: Callable[[], Any],
    esc: Writer,
    pace: Pace,
    run: int | None,
    offset: int,
    allow_actions: bool,
) -> AsyncIterator[bytes]:
    """The session's head when its status changes, and its output from (`run`, `offset`) on;
    when a newer run begins, a `run` event and that run's output from its start."""
    info: LogInfoReply = parse_reply("log_info", await log_info())
    run = run or info.run
    path = _path(info, run)
    follower = Follower(path, offset) if path else None
    head_sent = ""
    version = -1
    next_run_check = next_keepalive = time.monotonic()
    try:
        while True:
            status: SessionStatus | None = hub.status(name)
            if hub.version != version and status is not None:
                version = hub.version
                head = head_fragment(status, esc, allow_actions)
                if head != head_sent:
                    head_sent = head
                    yield sse("head", head)
            now = time.monotonic()
            live = info.live and info.run == run
            if now >= next_run_check:
                next_run_check = now + pace.run_check_s
                try:
                    info = parse_reply("log_info", await log_info())
                except ApiError:
                    info = info.model_copy(update={"live": False})
                live = info.live and info.run == run
                if info.run is not None and info.run != run:
                    if follower is not None:  # what the old run wrote last, then the new one
                        if last := from_follower(follower, run, esc, ended=True):
                            yield last
                        follower.close()
                    run = info.run
                    path = _path(info, run)
                    follower = Follower(path, 0) if path else None
                    yield sse("run", str(run), f"{run}:0")
            got = from_follower(follower, run, esc, ended=not live) if follower else b""
            if got:  # at most a step per poll: a fast writer is skipped ahead, never queued
                next_keepalive = now + pace.keepalive_s
                yield got
            elif now >= next_keepalive:
                next_keepalive = now + pace.keepalive_s
                yield KEEPALIVE
            await anyio.sleep(pace.log_poll_s)
    finally:
        if follower is not None:
            follower.close()


def from_follower(follower: Follower, run: int | None, esc: Writer, ended: bool) -> bytes:
    """The next lines as a `lines` event (its id resumes the stream there), or b""."""
    got = follower.step(ended)
    if not got.lines and not got.skipped_bytes:
        return b""
    text = output_lines(got.lines, esc)
    if got.skipped_bytes:
        note = f"-- herd: {got.skipped_bytes} bytes not shown here (`herd logs` has them) --"
        text = output_lines([note], esc) + text
    return sse("lines", text, f"{run}:{got.offset}")


def _path(info: LogInfoReply, run: int | None) -> Path | None:
    """The run's output file (log_info names the asked run's; others sit beside it)."""
    if info.path is None or run is None:
        return None
    current = Path(info.path)
    if info.run == run:
        return current
    return current.parent.parent / str(run) / current.name
