"""The dashboard's event-loop guard for its feeds (the fleet's feed is fleetfeed.py, a run's
output run_feed.py): a harmless asyncio error of cancelled socket reads is dropped."""

from __future__ import annotations

import asyncio
from typing import Any


def _is_cancelled_wakeup(context: dict[str, Any]) -> bool:
    """A socket became readable for a read that was cancelled a moment before (anyio's race).

    anyio's raw UNIX socket streams wait with `loop.add_reader(sock, future.set_result)` and
    remove the reader in a done-callback; data arriving between a cancel and that callback
    calls `set_result` on the cancelled future. Nothing is lost: the read was abandoned.
    """
    callback = getattr(context.get("handle"), "_callback", None)
    future = getattr(callback, "__self__", None)
    return (
        isinstance(context.get("exception"), asyncio.InvalidStateError)
        and getattr(callback, "__name__", "") == "set_result"
        and isinstance(future, asyncio.Future)
        and future.cancelled()
    )


def quiet_cancelled_wakeups(loop: asyncio.AbstractEventLoop) -> None:
    """Drop the harmless error of `_is_cancelled_wakeup`; hand every other one on unchanged."""
    previous = loop.get_exception_handler()
    if getattr(previous, "herd_quiet", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Drop the known harmless race; pass anything else to the handler before us."""
        if _is_cancelled_wakeup(context):
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.herd_quiet = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)
