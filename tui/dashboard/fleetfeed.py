"""The dashboard's fleet feed: the daemon's changes kept in a mirror, posted a few times a second.

The feed subscribes with `changes` (supervisor/api/statusfeed.py): one full snapshot, then only the
sessions whose status changed, and with `patches` only their fields that changed. Only those
are validated, and the app is told which rows to touch. A gap in the sequence numbers (a
message lost between the daemon and here) ends the stream; the feed subscribes again and
starts from a full snapshot. A client without changes (an
older daemon, the read-only `.herd/` reader, a replayed fleet) streams whole snapshots, which
the mirror takes as they are.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from pydantic import ValidationError
from textual.message import Message

from agentherd.supervisor.api.protocol import ApiError
from agentherd.tui.dashboard.messages import DaemonLost, Snapshot
from agentherd.tui.dashboard.mirror import FleetMirror, Resync

Post = Callable[[Message], bool]

RECONNECT_S = 1.0
"""How often a lost daemon is tried again; quick enough that `herd up` elsewhere feels instant."""

POST_EVERY_S = 0.25
"""The fleet view takes the newest state four times a second: lively, and a person cannot
read faster; the first state is posted at once so the table fills on opening."""


SUBSCRIPTIONS: tuple[tuple[bool, bool], ...] = ((True, True), (True, False), (False, False))
"""`changes` and `patches` the feed asks for, newest first: a daemon that refuses one (it
predates it) is asked the next."""


def _merge(pending: set[str] | None, changed: set[str] | None) -> set[str] | None:
    """Changed names accumulated between two posts (None: every row)."""
    if pending is None or changed is None:
        return None
    return pending | changed


async def follow_snapshots(client: Any, post: Post) -> None:
    """Post the fleet's newest state, at most every POST_EVERY_S; on a broken or refused
    stream, say why and retry; on a missed change, subscribe again at once."""
    asks = list(SUBSCRIPTIONS)
    while True:
        try:
            await _relay(client, post, *asks[0])
            reason = "the daemon closed the connection"
        except Resync:
            continue
        except ApiError as exc:
            if len(asks) > 1 and exc.code == "bad-request":  # a daemon from before `patches`
                del asks[0]
                continue
            reason = exc.message
        except ValidationError as exc:  # a daemon of another herd version
            reason = f"a snapshot this herd cannot read ({exc.error_count()} problem(s))"
        except (OSError, anyio.BrokenResourceError) as exc:
            reason = str(exc) or type(exc).__name__
        post(DaemonLost(reason))
        await anyio.sleep(RECONNECT_S)


async def _relay(client: Any, post: Post, changes: bool, patches: bool = False) -> None:
    """Apply every streamed message to a mirror; post its state on a steady beat."""
    mirror = FleetMirror()
    pending: set[str] | None = set()
    ready = anyio.Event()
    ask = {"changes": True, "patches": True} if patches else {"changes": True} if changes else {}
    source: AsyncIterator[Any] = client.stream("subscribe", **ask)

    def publish() -> None:
        nonlocal pending, ready
        post(Snapshot(list(mirror.statuses.values()), pending))
        pending = set()
        ready = anyio.Event()

    async def pace() -> None:
        """Post what changed, at most every POST_EVERY_S."""
        while True:
            await ready.wait()
            publish()
            await anyio.sleep(POST_EVERY_S)

    try:
        async with anyio.create_task_group() as group:
            first = True
            async for item in source:
                pending = _merge(pending, mirror.apply(item))
                if first:  # the table fills on opening
                    first = False
                    publish()
                    group.start_soon(pace)
                else:  # the daemon sends only when something changed (the header, at least)
                    ready.set()
            group.cancel_scope.cancel()
    except BaseExceptionGroup as grouped:  # the caller says why the stream broke: one reason
        raise grouped.exceptions[0] from None
    finally:
        close = getattr(source, "aclose", None)
        if close is not None:  # hang up now (a re-sync), not when the collector finds it
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await close()
