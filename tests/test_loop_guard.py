"""The event-loop guard the dashboard and `herd web` install: the harmless error of a socket
read cancelled a moment before its wake-up (anyio's race, seen at `herd web`'s Ctrl-C) is
dropped; every other error still reaches the handler."""

from __future__ import annotations

import asyncio
from typing import Any

from agentherd.tui.dashboard.feeds import quiet_cancelled_wakeups


def errors_of(cancelled: bool) -> list[dict[str, Any]]:
    """The errors a guarded loop reports for a wake-up of a future cancelled or already done."""
    loop = asyncio.new_event_loop()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    quiet_cancelled_wakeups(loop)
    quiet_cancelled_wakeups(loop)  # twice: still one guard
    try:
        future = loop.create_future()
        if cancelled:
            future.cancel()  # the race: a read abandoned a moment before its wake-up
        else:
            future.set_result(1)  # a real bug: a result set twice
        loop.call_soon(future.set_result, None)
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    return seen


def test_a_cancelled_reads_wakeup_is_dropped_and_any_other_error_is_not() -> None:
    assert errors_of(cancelled=True) == []
    assert [type(c["exception"]) for c in errors_of(cancelled=False)] == [asyncio.InvalidStateError]
