"""A verification the disk had no room for is no verdict: it is tried again once there is room.

A full disk makes the scratch checkout (or the verify log) fail with ENOSPC; recorded as a
failed verification it made the agent's checkpoint a failing one, and a clean end `unverified`.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from agentherd.supervisor.checks.verify import VerifyResult
from agentherd.supervisor.files import diskspace

log = logging.getLogger("herd.verify")

NO_ROOM = (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT), "unable to write")
"""How a write the disk refused reads in an error: "No space left on device" (git in the C
locale, Python's OSError), a quota, or git's own "unable to write file" of a checkout."""

RETRY_S = 1.0
"""The first wait before a verification the disk had no room for is tried again."""

RETRY_MAX_S = 8.0
"""The wait doubles up to this: each try fills what room there is until it fails."""


def no_room(result: VerifyResult) -> bool:
    """True when the verification could not run because the disk was full: not a verdict."""
    error = result.error
    return not result.passed and error is not None and any(mark in error for mark in NO_ROOM)


async def verify_when_room(
    run: Callable[[], Awaitable[VerifyResult]], disk: Path, patience_s: float
) -> VerifyResult:
    """`run()`, again each time the disk holding `disk` had no room for it, for `patience_s`
    at most (then its last result stands, as before)."""
    gives_up_at = time.monotonic() + patience_s
    wait_s = RETRY_S
    while True:
        result = await run()
        if not no_room(result) or time.monotonic() >= gives_up_at:
            return result
        log.info("verification of %s waits for disk space: %s", result.sha[:12], result.error)
        await anyio.sleep(wait_s)
        while diskspace.low_on_space(disk) and time.monotonic() < gives_up_at:
            await anyio.sleep(wait_s)
        wait_s = min(2 * wait_s, RETRY_MAX_S)
